import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type OvsBridgeArgs = { [K in keyof OvsBridgeInputs]: DeepInput<OvsBridgeInputs[K]> };

/**
 * An OVS bridge on one host, ensured through OVSDB and owned through
 * external_ids (ovslb:owner). Refuses a bridge of the same name that it does
 * not own; delete removes only its own bridge.
 */
export class OvsBridge extends pulumi.dynamic.Resource {
  declare readonly name: pulumi.Output<string>;
  declare readonly datapathType: pulumi.Output<string>;
  declare readonly failMode: pulumi.Output<string>;
  /** The Bridge row's uuid. */
  declare readonly uuid: pulumi.Output<string>;
  /** The bridge's OpenFlow management socket on the host (unix:...mgmt). */
  declare readonly managementSocket: pulumi.Output<string>;

  constructor(name: string, args: OvsBridgeArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      dynamicProvider("OvsBridge"),
      name,
      { ...withSecretCredentials(args), uuid: undefined, managementSocket: undefined },
      resourceOptions(opts),
      "ovslb",
      "OvsBridge",
    );
  }
}
