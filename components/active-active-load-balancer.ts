import * as pulumi from "@pulumi/pulumi";
import { canonicalAddress } from "../provider/model/addresses";
import type { DistributorAmphora } from "../provider/model/inputs.generated";
import type { CheckFailure } from "../provider/model/validate";
import { DistributorAttachment, type DistributorAttachmentArgs } from "../provider/resources/distributor-attachment/resource";
import type { DistributorDevice } from "../provider/resources/distributor-device/resource";
import { derivedFrontendMac } from "../provider/resources/distributor-attachment/plan";
import schemaFile from "../schema/components/active-active-load-balancer.json";
import { checkArgs, childInput, componentSchema, derive, gated, mustBePlain } from "./args";

const schema = componentSchema(schemaFile);

/** An amphora (load-balancer VM) of the cluster and its role. */
export interface ActiveActiveAmphora {
  /** The amphora's name: its slot and bucket are recorded by it. */
  name: pulumi.Input<string>;
  /** Its MAC: the device's bucket for its slot sends frames to it. */
  mac: pulumi.Input<string>;
  /** active: serves its slot; standby: takes over a failed active amphora's slot, in place; failed: its slot goes to the standby. */
  role: pulumi.Input<"active" | "standby" | "failed">;
  /** The slot (1-64) an active amphora serves or a failed one served; active ones without a slot get the lowest free slots, in order. */
  slot?: pulumi.Input<number>;
  /** Where the amphora runs: no two serving amphorae may share a hypervisor (checked, not sent to the device). */
  hypervisor?: pulumi.Input<string>;
  /** An OpenFlow port on the attachment's bridge whose liveness the slot's bucket follows. */
  watchPort?: pulumi.Input<number>;
}

/** One of the devices a load balancer runs on, and the next hop the upstream router reaches the VIP by through it. */
export interface ActiveActiveDevice {
  device: DistributorDevice;
  /**
   * An address on the uplink segment, distinct per device: the router's ECMP
   * next hop for the VIP (it answers ARP with this device's frontend MAC).
   * Plain (not an Output): it names the device's DistributorAttachment.
   */
  nextHop: string;
}

/**
 * The arguments of an ActiveActiveLoadBalancer (validated against
 * schema/components/active-active-load-balancer.json: an unknown property
 * is refused). Every scalar may be an Output of another resource, except
 * the devices' nextHop, which names their attachments; which of `device`
 * and `devices` is given and the lists are plain.
 */
export interface ActiveActiveLoadBalancerArgs {
  /** The distributor device the load balancer is attached to (one device serves many). Give this or `devices`. */
  device?: DistributorDevice;
  /**
   * Two or more devices holding the same group (ids from the load balancer):
   * a router with an ECMP route for the VIP via each nextHop, dropping a
   * next hop that stops answering, takes no device as a single point of failure.
   */
  devices?: readonly ActiveActiveDevice[];
  /** The load balancer's id: the attachment's identity on the device, and the source of its group and bucket ids. */
  loadBalancerId: pulumi.Input<string>;
  /** The VIP clients reach the amphorae by: the device answers ARP for it. */
  vip: pulumi.Input<string>;
  /** The tenant network's VLAN on the uplink (1-4094); absent: the untagged network. */
  vlan?: pulumi.Input<number>;
  /** What picks the amphora: the 5-tuple (default) or the source IP only. */
  affinity?: pulumi.Input<"5-tuple" | "source-ip">;
  /** direct (default): replies bypass the distributor; hairpin: replies come back through it and leave for gatewayMac. */
  returnPath?: pulumi.Input<"direct" | "hairpin">;
  /** hairpin: the MAC replies leave for (the tenant network's gateway). */
  gatewayMac?: pulumi.Input<string>;
  /** N active + standby (failed ones stay listed so a standby takes their slot). */
  amphorae: readonly ActiveActiveAmphora[];
}

type ResolvedAmphora = pulumi.Unwrap<ActiveActiveAmphora>;

/**
 * The N+1 rule: at least one active amphora, at least one standby (a
 * standby that took over a failed slot stays listed as one and keeps the
 * slot, so a new standby joins it), and no two serving amphorae on one
 * hypervisor when placement is given. Returns the reasons it is broken.
 */
export function nPlusOneViolations(amphorae: readonly ResolvedAmphora[]): CheckFailure[] {
  const problems: CheckFailure[] = [];
  const count = (role: string) => amphorae.filter((a) => a.role === role).length;
  for (const role of ["active", "standby"]) {
    if (count(role) < 1) problems.push({ property: "amphorae", reason: `at least 1 ${role} amphora is required, got 0` });
  }
  const placed = new Map<string, number>();
  amphorae.forEach((a, i) => {
    if (a.role === "failed" || !a.hypervisor) return;
    const other = placed.get(a.hypervisor);
    if (other === undefined) placed.set(a.hypervisor, i);
    else
      problems.push({
        property: `amphorae[${i}].hypervisor`,
        reason: `${a.name} and amphorae[${other}] (${amphorae[other].name}) are both on hypervisor ${a.hypervisor}: serving amphorae must be on distinct hypervisors`,
      });
  });
  return problems;
}

/** Active amphorae without a slot get the lowest free ones, in list order; placement is the component's check, not an input. */
export function withSlots(amphorae: readonly ResolvedAmphora[]): DistributorAmphora[] {
  const used = new Set(amphorae.filter((a) => a.role !== "standby" && a.slot !== undefined).map((a) => a.slot!));
  let next = 1;
  return amphorae.map(({ hypervisor: _placement, ...a }) => {
    if (a.role !== "active" || a.slot !== undefined) return a;
    while (used.has(next)) next++;
    used.add(next);
    return { ...a, slot: next };
  });
}

/** device or devices; several devices each distinct (no two next hops, no two hosts alike), so no device is a single point of failure. */
export function deviceViolations(args: Pick<ActiveActiveLoadBalancerArgs, "device" | "devices">): CheckFailure[] {
  if (!args.device === !args.devices) return [{ property: "device", reason: "give device or devices, not both and not neither" }];
  if (!args.devices) return [];
  const plain = mustBePlain(args.devices, "devices", "each device gets its own DistributorAttachment");
  if (plain.length > 0) return plain;
  const problems: CheckFailure[] = [];
  if (args.devices.length < 2) problems.push({ property: "devices", reason: `give at least 2 (got ${args.devices.length}), or a single device` });
  const hops = new Map<string, number>();
  const hosts = new Map<string, number>();
  args.devices.forEach((d, i) => {
    const hop = mustBePlain(d.nextHop, `devices[${i}].nextHop`, "it names the device's DistributorAttachment");
    if (hop.length > 0) problems.push(...hop);
    else if (hops.has(canonicalAddress(d.nextHop)))
      problems.push({ property: `devices[${i}].nextHop`, reason: `is also devices[${hops.get(canonicalAddress(d.nextHop))}]'s` });
    else hops.set(canonicalAddress(d.nextHop), i);
    // A host known now is compared; one from an Output is the devices' own to check.
    const host = (d.device.hostArgs as { connection?: { host?: unknown } }).connection?.host;
    if (typeof host === "string") {
      if (hosts.has(host))
        problems.push({
          property: `devices[${i}].device`,
          reason: `is on the same host (${host}) as devices[${hosts.get(host)}]: devices must be on distinct hosts`,
        });
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
 *
 * Refusals name the property (`ActiveActiveLoadBalancer "lb": args.amphorae: ...`),
 * at construction for plain values, once they resolve for Outputs.
 */
export class ActiveActiveLoadBalancer extends pulumi.ComponentResource {
  /** The attachment (with `devices`: the first device's). */
  readonly attachment: DistributorAttachment;
  /** One attachment per device, in the order given. */
  readonly attachments: DistributorAttachment[];
  readonly frontendMac: pulumi.Output<string>;
  readonly groupId: pulumi.Output<number>;

  constructor(name: string, args: ActiveActiveLoadBalancerArgs, opts?: pulumi.ComponentResourceOptions) {
    const gate = checkArgs<ActiveActiveLoadBalancerArgs>(`ActiveActiveLoadBalancer "${name}"`, schema, args, {
      structural: deviceViolations,
      resolved: (a) => nPlusOneViolations(a.amphorae),
    });
    super("ovslb:index:ActiveActiveLoadBalancer", name, {}, opts);
    const common = {
      attachmentId: args.loadBalancerId,
      vip: args.vip,
      ...(args.vlan !== undefined ? { vlan: args.vlan } : {}),
      ...(args.affinity !== undefined ? { affinity: args.affinity } : {}),
      ...(args.returnPath !== undefined ? { returnPath: args.returnPath } : {}),
      ...(args.gatewayMac !== undefined ? { gatewayMac: args.gatewayMac } : {}),
      amphorae: gated(gate, derive(args.amphorae, withSlots)),
    };
    const attach = (resourceName: string, device: DistributorDevice, extra: Partial<DistributorAttachmentArgs> = {}) =>
      new DistributorAttachment(
        resourceName,
        childInput<DistributorAttachmentArgs>({ host: device.hostArgs, deviceId: device.deviceId, uplinkBridge: device.uplinkBridge, ...common, ...extra }),
        { parent: this, dependsOn: [device] },
      );
    this.attachments = args.device
      ? [attach(`${name}-attachment`, args.device)]
      : args.devices!.map((d) => {
          // An IPv6 next hop in RFC 5952 form, so two spellings are one device's; in the resource name with "-" for ":" (no "::" in a URN).
          const hop = canonicalAddress(d.nextHop);
          return attach(`${name}-attachment-${hop.replace(/:/g, "-")}`, d.device, {
            loadBalancerId: args.loadBalancerId,
            nextHop: hop,
            // One frontend MAC per device: the segment must see each next hop at its own MAC.
            frontendMac: derive(args.loadBalancerId, (id) => derivedFrontendMac(`${id}/${hop}`)),
          });
        });
    this.attachment = this.attachments[0];
    this.frontendMac = this.attachment.frontendMac;
    this.groupId = this.attachment.groupId;
    this.registerOutputs({ frontendMac: this.frontendMac, groupId: this.groupId });
  }
}
