import * as pulumi from "@pulumi/pulumi";
import type { DistributorAmphora } from "../provider/model/inputs.generated";
import { DistributorAttachment, type DistributorAttachmentArgs } from "../provider/resources/distributor-attachment/resource";
import type { DistributorDevice } from "../provider/resources/distributor-device/resource";

/** An amphora of the cluster; `hypervisor` is its placement, checked for spread. */
export interface ActiveActiveAmphora {
  name: string;
  mac: string;
  role: "active" | "standby" | "failed";
  /** Given for active and failed amphorae; active ones without a slot get the lowest free slots, in order. */
  slot?: number;
  hypervisor?: string;
  watchPort?: number;
}

export interface ActiveActiveLoadBalancerArgs {
  /** The distributor device the load balancer is attached to (one device serves many). */
  device: DistributorDevice;
  /** The load balancer's id: the attachment's identity on the device. */
  loadBalancerId: string;
  vip: DistributorAttachmentArgs["vip"];
  vlan?: DistributorAttachmentArgs["vlan"];
  affinity?: DistributorAttachmentArgs["affinity"];
  returnPath?: DistributorAttachmentArgs["returnPath"];
  gatewayMac?: DistributorAttachmentArgs["gatewayMac"];
  /** N active + standby (failed ones stay listed so a standby takes their slot). Plain values: the N+1 rule is checked here. */
  amphorae: readonly ActiveActiveAmphora[];
}

/**
 * The N+1 rule, checked before any resource is registered: at least one
 * active amphora, at least one standby (a standby that took over a failed
 * slot stays listed as one and keeps the slot, so a new standby joins it),
 * and no two serving amphorae on one
 * hypervisor when placement is given. Returns the reasons it is broken.
 */
export function nPlusOneViolations(amphorae: readonly ActiveActiveAmphora[]): string[] {
  const problems: string[] = [];
  const active = amphorae.filter((a) => a.role === "active");
  const standby = amphorae.filter((a) => a.role === "standby");
  if (active.length < 1) problems.push(`amphorae: at least 1 active amphora is required, got ${active.length}`);
  if (standby.length < 1) problems.push(`amphorae: at least 1 standby amphora is required, got ${standby.length}`);
  const placed = new Map<string, string>();
  for (const a of [...active, ...standby]) {
    if (!a.hypervisor) continue;
    const other = placed.get(a.hypervisor);
    if (other) problems.push(`amphorae: ${other} and ${a.name} are both on hypervisor ${a.hypervisor}; amphorae must be on distinct hypervisors`);
    else placed.set(a.hypervisor, a.name);
  }
  return problems;
}

/** Active amphorae without a slot get the lowest free ones, in list order. */
export function withSlots(amphorae: readonly ActiveActiveAmphora[]): DistributorAmphora[] {
  const used = new Set(amphorae.filter((a) => a.role !== "standby" && a.slot !== undefined).map((a) => a.slot!));
  let next = 1;
  return amphorae.map(({ hypervisor: _placement, ...a }) => {
    if (a.role !== "active" || a.slot !== undefined) return a;
    while (used.has(next)) next++;
    used.add(next);
    return { ...a, slot: next };
  });
}

/**
 * An Octavia-style active/active load balancer: N active amphorae plus one
 * standby behind one VIP, attached to a distributor device.
 */
export class ActiveActiveLoadBalancer extends pulumi.ComponentResource {
  readonly attachment: DistributorAttachment;
  readonly frontendMac: pulumi.Output<string>;
  readonly groupId: pulumi.Output<number>;

  constructor(name: string, args: ActiveActiveLoadBalancerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("ovslb:index:ActiveActiveLoadBalancer", name, {}, opts);
    const problems = nPlusOneViolations(args.amphorae);
    if (problems.length > 0) throw new Error(`ActiveActiveLoadBalancer ${name}: ${problems.join("; ")}`);
    this.attachment = new DistributorAttachment(
      `${name}-attachment`,
      {
        host: args.device.hostArgs,
        deviceId: args.device.deviceId,
        uplinkBridge: args.device.uplinkBridge,
        attachmentId: args.loadBalancerId,
        vip: args.vip,
        ...(args.vlan !== undefined ? { vlan: args.vlan } : {}),
        ...(args.affinity !== undefined ? { affinity: args.affinity } : {}),
        ...(args.returnPath !== undefined ? { returnPath: args.returnPath } : {}),
        ...(args.gatewayMac !== undefined ? { gatewayMac: args.gatewayMac } : {}),
        amphorae: withSlots(args.amphorae),
      },
      { parent: this, dependsOn: [args.device] },
    );
    this.frontendMac = this.attachment.frontendMac;
    this.groupId = this.attachment.groupId;
    this.registerOutputs({ frontendMac: this.frontendMac, groupId: this.groupId });
  }
}
