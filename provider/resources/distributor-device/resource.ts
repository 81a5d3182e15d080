import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { DistributorDeviceInputs } from "../../model/inputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DistributorDeviceArgs = { [K in keyof DistributorDeviceInputs]: DeepInput<DistributorDeviceInputs[K]> };

/**
 * A distributor device (Octavia active/active): an OVS host with its own
 * identity and uplink, serving many load balancers through
 * DistributorAttachments. Read reports reachability, the OVS version and
 * OpenFlow 1.5 support; deleting a device that still has attachments is refused.
 */
export class DistributorDevice extends pulumi.dynamic.Resource {
  declare readonly deviceId: pulumi.Output<string>;
  declare readonly uplinkBridge: pulumi.Output<string>;
  declare readonly reachable: pulumi.Output<boolean>;
  declare readonly ovsVersion: pulumi.Output<string | undefined>;
  declare readonly openflow15: pulumi.Output<boolean>;
  /** The attachment ids found on the device at the last read. */
  declare readonly attachments: pulumi.Output<string[]>;
  /** Per attachment: its patch ports present, and how many of its own flows its bridge carries (0: not programmed). */
  declare readonly attachmentHealth: pulumi.Output<Record<string, { ports: boolean; flows: number }> | undefined>;
  /** The host argument as given (credentials as secrets), for the device's attachments. */
  readonly hostArgs: DistributorDeviceArgs["host"];

  constructor(name: string, args: DistributorDeviceArgs, opts?: pulumi.CustomResourceOptions) {
    const secretArgs = withSecretCredentials(args);
    super(
      dynamicProvider("DistributorDevice"),
      name,
      { ...secretArgs, reachable: undefined, ovsVersion: undefined, openflow15: undefined, attachments: undefined, attachmentHealth: undefined },
      resourceOptions(opts),
      "ovslb",
      "DistributorDevice",
    );
    this.hostArgs = secretArgs.host;
  }
}
