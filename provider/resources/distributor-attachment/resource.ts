import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { DistributorAttachmentInputs } from "../../model/inputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DistributorAttachmentArgs = { [K in keyof DistributorAttachmentInputs]: DeepInput<DistributorAttachmentInputs[K]> };

/** One slot as served on the device. */
export interface DistributorSlot {
  slot: number;
  bucketId: number;
  amphora: string;
  mac: string;
  /** The failed amphora whose slot the standby took over. */
  takenOver?: string;
}

/**
 * One load balancer on a distributor device: its own bridge and frontend
 * port, an ARP responder for the VIP, and a select group (id from the
 * attachment id) with one bucket per active slot. A failed amphora's slot is
 * taken over by the standby in place: same bucket id, new MAC, one bundle.
 */
export class DistributorAttachment extends pulumi.dynamic.Resource {
  declare readonly attachmentId: pulumi.Output<string>;
  declare readonly vip: pulumi.Output<string>;
  declare readonly frontendMac: pulumi.Output<string>;
  declare readonly bridge: pulumi.Output<string>;
  declare readonly frontendPort: pulumi.Output<string>;
  declare readonly uplinkPort: pulumi.Output<string>;
  declare readonly groupId: pulumi.Output<number>;
  declare readonly cookie: pulumi.Output<string>;
  declare readonly slots: pulumi.Output<DistributorSlot[]>;
  declare readonly vacantSlots: pulumi.Output<number[]>;
  /** slot -> its bucket's liveness (false while its watchPort is not LIVE), at the last apply or refresh. */
  declare readonly slotLiveness: pulumi.Output<Record<string, boolean> | undefined>;
  /** What the last create/update sent to the attachment's bridge: messages, bytes, modifications by kind. */
  declare readonly lastApply: pulumi.Output<{ messages: number; bytes: number; operations: Record<string, number> }>;

  constructor(name: string, args: DistributorAttachmentArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      dynamicProvider("DistributorAttachment"),
      name,
      {
        ...withSecretCredentials(args),
        bridge: undefined, bridgeUuid: undefined, frontendPort: undefined, uplinkPort: undefined, frontendOfport: undefined,
        cookie: undefined, groupId: undefined, slots: undefined, vacantSlots: undefined, lastApply: undefined, slotLiveness: undefined,
      },
      resourceOptions(opts),
      "ovslb",
      "DistributorAttachment",
    );
  }
}
