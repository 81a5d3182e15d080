import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DsrHypervisorFlowsArgs = { [K in keyof DsrHypervisorFlowsInputs]: DeepInput<DsrHypervisorFlowsInputs[K]> };

/**
 * The hypervisor side of a load balancer on one bridge: requests for a VIP
 * that reach a local backend (mode mac: by its MAC, ip.dst still the VIP;
 * mode gre: GRE-encapsulated from an allowed source, through a GRE port the
 * resource owns) are DNATed to the backend with conntrack in a zone, and its
 * replies are un-DNATed back to source = VIP. Flows are owned by cookie;
 * delete removes only those (and its GRE port).
 */
export class DsrHypervisorFlows extends pulumi.dynamic.Resource {
  declare readonly name: pulumi.Output<string>;
  declare readonly bridge: pulumi.Output<string>;
  /** The owner cookie on every flow ("0x0b5e..."). */
  declare readonly cookie: pulumi.Output<string>;
  /** The conntrack zone in use (derived once and kept, or the `zone` input). */
  declare readonly ctZone: pulumi.Output<number>;
  /** Each backend's bridge port and its ofport on the host. */
  declare readonly ofports: pulumi.Output<Record<string, number>>;
  /** What the last create/update sent to the bridge: messages, bytes, modifications by kind. */
  declare readonly lastApply: pulumi.Output<{ messages: number; bytes: number; operations: Record<string, number> }>;
  /** gre.bfd: each peer's ("address/key") BFD session state at the last apply or refresh. */
  declare readonly bfd: pulumi.Output<Record<string, string> | undefined>;
  /** gre.secondChance: live conntrack entries per backend ("address:port"): a drain is over when its backend reads 0. */
  declare readonly connections: pulumi.Output<Record<string, number> | undefined>;

  constructor(name: string, args: DsrHypervisorFlowsArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      dynamicProvider("DsrHypervisorFlows"),
      name,
      { ...withSecretCredentials(args), cookie: undefined, ctZone: undefined, ofports: undefined, lastApply: undefined, bfd: undefined, connections: undefined },
      resourceOptions(opts),
      "ovslb",
      "DsrHypervisorFlows",
    );
  }
}
