import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import { DSR_HYPERVISOR_FLOWS_OUTPUTS, outputPlaceholders, type DsrHypervisorFlowsOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DsrHypervisorFlowsArgs = { [K in keyof DsrHypervisorFlowsInputs]: DeepInput<DsrHypervisorFlowsInputs[K]> };

// Its outputs (cookie, ctZone, ofports, lastApply, bfd, connections, ovsVersions), declared in schema/dsr-hypervisor-flows.json ("x-outputs") and merged into the class.
export interface DsrHypervisorFlows extends DsrHypervisorFlowsOutputProperties {}

/**
 * The hypervisor side of a load balancer on one bridge: requests for a VIP
 * that reach a local backend (mode mac: by its MAC, ip.dst still the VIP;
 * mode gre: GRE-encapsulated from an allowed source, through a GRE port the
 * resource owns) are DNATed to the backend with conntrack in a zone, and its
 * replies are un-DNATed back to source = VIP. Flows are owned by cookie;
 * delete removes only those (and its GRE port).
 */
export class DsrHypervisorFlows extends OvslbDynamicResource {
  declare readonly name: pulumi.Output<string>;
  declare readonly bridge: pulumi.Output<string>;

  constructor(name: string, args: DsrHypervisorFlowsArgs, opts?: pulumi.CustomResourceOptions) {
    super("DsrHypervisorFlows", name, { ...withSecretCredentials(args), ...outputPlaceholders(DSR_HYPERVISOR_FLOWS_OUTPUTS) }, resourceOptions(opts));
  }
}
