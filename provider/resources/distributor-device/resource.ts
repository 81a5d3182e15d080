import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { DistributorDeviceInputs } from "../../model/inputs.generated";
import { DISTRIBUTOR_DEVICE_OUTPUTS, outputPlaceholders, type DistributorDeviceOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DistributorDeviceArgs = { [K in keyof DistributorDeviceInputs]: DeepInput<DistributorDeviceInputs[K]> };

// Its outputs (reachable, ovsVersion, ovsVersions, openflow15, attachments, attachmentHealth), declared in schema/distributor-device.json ("x-outputs") and merged into the class.
export interface DistributorDevice extends DistributorDeviceOutputProperties {}

/**
 * A distributor device (Octavia active/active): an OVS host with its own
 * identity and uplink, serving many load balancers through
 * DistributorAttachments. Read reports reachability, the OVS version and
 * OpenFlow 1.5 support; deleting a device that still has attachments is refused.
 */
export class DistributorDevice extends OvslbDynamicResource {
  declare readonly deviceId: pulumi.Output<string>;
  declare readonly uplinkBridge: pulumi.Output<string>;
  /** The host argument as given (credentials as secrets), for the device's attachments. */
  readonly hostArgs: DistributorDeviceArgs["host"];

  constructor(name: string, args: DistributorDeviceArgs, opts?: pulumi.CustomResourceOptions) {
    const secretArgs = withSecretCredentials(args);
    super("DistributorDevice", name, { ...secretArgs, ...outputPlaceholders(DISTRIBUTOR_DEVICE_OUTPUTS) }, resourceOptions(opts));
    this.hostArgs = secretArgs.host;
  }
}
