import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { DistributorAttachmentInputs } from "../../model/inputs.generated";
import type { DistributorSlot as GeneratedDistributorSlot } from "../../model/outputs.generated";
import { DISTRIBUTOR_ATTACHMENT_OUTPUTS, outputPlaceholders, type DistributorAttachmentOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DistributorAttachmentArgs = { [K in keyof DistributorAttachmentInputs]: DeepInput<DistributorAttachmentInputs[K]> };

/** One slot as served on the device (schema/distributor-attachment.json). */
export type DistributorSlot = GeneratedDistributorSlot;

// Its outputs (bridge, cookie, groupId, slots, lastApply, ovsVersions, ...), declared in schema/distributor-attachment.json ("x-outputs") and merged into the class.
export interface DistributorAttachment extends DistributorAttachmentOutputProperties {}

/**
 * One load balancer on a distributor device: its own bridge and frontend
 * port, an ARP responder for the VIP, and a select group (id from the
 * attachment id) with one bucket per active slot. A failed amphora's slot is
 * taken over by the standby in place: same bucket id, new MAC, one bundle.
 */
export class DistributorAttachment extends OvslbDynamicResource {
  declare readonly attachmentId: pulumi.Output<string>;
  declare readonly vip: pulumi.Output<string>;
  declare readonly frontendMac: pulumi.Output<string>;

  constructor(name: string, args: DistributorAttachmentArgs, opts?: pulumi.CustomResourceOptions) {
    super("DistributorAttachment", name, { ...withSecretCredentials(args), ...outputPlaceholders(DISTRIBUTOR_ATTACHMENT_OUTPUTS) }, resourceOptions(opts));
  }
}
