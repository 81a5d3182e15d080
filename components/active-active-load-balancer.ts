import * as pulumi from "@pulumi/pulumi";
import type { DistributorAmphora } from "../provider/model/inputs.generated";
import { DistributorAttachment, type DistributorAttachmentArgs } from "../provider/resources/distributor-attachment/resource";
import type { DistributorDevice } from "../provider/resources/distributor-device/resource";
import { derivedFrontendMac } from "../provider/resources/distributor-attachment/plan";

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

/** One of the devices a load balancer runs on, and the next hop the upstream router reaches the VIP by through it. */
export interface ActiveActiveDevice {
  device: DistributorDevice;
  /** An address on the uplink segment, distinct per device: the router's ECMP next hop for the VIP (it answers ARP with this device's frontend MAC). */
  nextHop: string;
}

export interface ActiveActiveLoadBalancerArgs {
  /** The distributor device the load balancer is attached to (one device serves many). Give this or `devices`. */
  device?: DistributorDevice;
  /**
   * Two or more devices holding the same group (ids from the load balancer):
   * a router with an ECMP route for the VIP via each nextHop, dropping a
   * next hop that stops answering, takes no device as a single point of failure.
   */
  devices?: readonly ActiveActiveDevice[];
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

/** Several devices: each distinct (no two next hops, no two hosts alike), so no device is a single point of failure. */
export function deviceViolations(devices: readonly ActiveActiveDevice[]): string[] {
  const problems: string[] = [];
  if (devices.length < 2) problems.push(`devices: give at least 2 (got ${devices.length}), or a single device`);
  const hops = new Map<string, number>();
  const hosts = new Map<string, number>();
  devices.forEach((d, i) => {
    if (hops.has(d.nextHop)) problems.push(`devices[${i}].nextHop is also devices[${hops.get(d.nextHop)}]'s`);
    hops.set(d.nextHop, i);
    const host = (d.device.hostArgs as { connection?: { host?: unknown } }).connection?.host;
    if (typeof host === "string") {
      if (hosts.has(host)) problems.push(`devices[${i}] is on the same host (${host}) as devices[${hosts.get(host)}]: devices must be on distinct hosts`);
      hosts.set(host, i);
    }
  });
  return problems;
}

/**
 * An Octavia-style active/active load balancer: N active amphorae plus one
 * standby behind one VIP, attached to a distributor device, or to several
 * that hold the same group (every device picks the same amphora for a
 * 5-tuple, so a device's connections resume through another unchanged).
 */
export class ActiveActiveLoadBalancer extends pulumi.ComponentResource {
  /** The attachment (with `devices`: the first device's). */
  readonly attachment: DistributorAttachment;
  /** One attachment per device, in the order given. */
  readonly attachments: DistributorAttachment[];
  readonly frontendMac: pulumi.Output<string>;
  readonly groupId: pulumi.Output<number>;

  constructor(name: string, args: ActiveActiveLoadBalancerArgs, opts?: pulumi.ComponentResourceOptions) {
    const problems = nPlusOneViolations(args.amphorae);
    if (!args.device === !args.devices) problems.push("give device or devices, not both and not neither");
    if (args.devices) problems.push(...deviceViolations(args.devices));
    if (problems.length > 0) throw new Error(`ActiveActiveLoadBalancer ${name}: ${problems.join("; ")}`);
    super("ovslb:index:ActiveActiveLoadBalancer", name, {}, opts);
    const common = {
      attachmentId: args.loadBalancerId,
      vip: args.vip,
      ...(args.vlan !== undefined ? { vlan: args.vlan } : {}),
      ...(args.affinity !== undefined ? { affinity: args.affinity } : {}),
      ...(args.returnPath !== undefined ? { returnPath: args.returnPath } : {}),
      ...(args.gatewayMac !== undefined ? { gatewayMac: args.gatewayMac } : {}),
      amphorae: withSlots(args.amphorae),
    };
    const attach = (resourceName: string, device: DistributorDevice, extra: Partial<DistributorAttachmentArgs> = {}) =>
      new DistributorAttachment(
        resourceName,
        { host: device.hostArgs, deviceId: device.deviceId, uplinkBridge: device.uplinkBridge, ...common, ...extra },
        { parent: this, dependsOn: [device] },
      );
    this.attachments = args.device
      ? [attach(`${name}-attachment`, args.device)]
      : args.devices!.map((d) =>
          attach(`${name}-attachment-${d.nextHop}`, d.device, {
            loadBalancerId: args.loadBalancerId,
            nextHop: d.nextHop,
            // One frontend MAC per device: the segment must see each next hop at its own MAC.
            frontendMac: derivedFrontendMac(`${args.loadBalancerId}/${d.nextHop}`),
          }),
        );
    this.attachment = this.attachments[0];
    this.frontendMac = this.attachment.frontendMac;
    this.groupId = this.attachment.groupId;
    this.registerOutputs({ frontendMac: this.frontendMac, groupId: this.groupId });
  }
}
