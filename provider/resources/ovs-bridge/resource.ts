import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { OVS_BRIDGE_OUTPUTS, outputPlaceholders, type OvsBridgeOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type OvsBridgeArgs = { [K in keyof OvsBridgeInputs]: DeepInput<OvsBridgeInputs[K]> };

// Its outputs (uuid, managementSocket, ovsVersions), declared in schema/ovs-bridge.json ("x-outputs") and merged into the class.
export interface OvsBridge extends OvsBridgeOutputProperties {}

/**
 * An OVS bridge on one host, ensured through OVSDB and owned through
 * external_ids (ovslb:owner). Refuses a bridge of the same name that it does
 * not own; delete removes only its own bridge.
 */
export class OvsBridge extends OvslbDynamicResource {
  declare readonly name: pulumi.Output<string>;
  declare readonly datapathType: pulumi.Output<string>;
  declare readonly failMode: pulumi.Output<string>;

  constructor(name: string, args: OvsBridgeArgs, opts?: pulumi.CustomResourceOptions) {
    super("OvsBridge", name, { ...withSecretCredentials(args), ...outputPlaceholders(OVS_BRIDGE_OUTPUTS) }, resourceOptions(opts));
  }
}
