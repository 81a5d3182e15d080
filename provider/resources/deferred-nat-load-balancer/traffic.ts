import type { ObservedBridge } from "../../engine/plan";
import type { DeferredNatLoadBalancerOutputs } from "../../model/outputs.generated";
import { addInto, FlowCounters, zeroCounter, type Counter } from "../../model/traffic";
import { dstAddressOf, type GroupEntry, type GroupStats } from "../../openflow";
import type { DeferredNatDefaulted as Inputs } from "./check";
import { fragmentsMatch, pathMtuFlows, vipFlowMatch, type GatewayPort } from "./dataplane";
import { FALLBACK_BUCKET, VIP_FLOW_PRIORITY, vipKey, type RecordedIds } from "./ids";
import { slotFlows, toOwnerDirectly, toOwnerGroup } from "./second-chance";
import type { SlotTable } from "./slots";

/** DeferredNatLoadBalancer's traffic in a read: what the gateways' owned flows and buckets counted (pure). */

export type GatewayTraffic = NonNullable<DeferredNatLoadBalancerOutputs["traffic"]>;

export interface CountedGateway {
  name: string;
  port: GatewayPort;
  observed: ObservedBridge;
  groupStats: readonly GroupStats[];
}

/** One gateway's groups and their counters by group id: dump-group-stats gives each bucket's by position, dump-groups the ids in the same order. */
function groupsWithStats(groups: readonly GroupEntry[], stats: readonly GroupStats[]): Map<number, { group: GroupEntry; stats: GroupStats }> {
  const statsOf = new Map(stats.map((s) => [s.groupId, s]));
  const out = new Map<number, { group: GroupEntry; stats: GroupStats }>();
  for (const group of groups) {
    const s = statsOf.get(group.groupId);
    // A group changed between the two dumps is counted at the next read.
    if (s && s.buckets.length === group.buckets.length) out.set(group.groupId, { group, stats: s });
  }
  return out;
}

/** A tunnel or BFD port a gateway lacks, planned under a number no port has: the flows' identity does not depend on it. */
function assumedPorts(d: Inputs, port: GatewayPort) {
  const assumed = (have: ReadonlyMap<string, number> | undefined, absent: number) => new Map(d.hypervisors.map((h) => [h.name, have?.get(h.name) ?? absent]));
  return { ...port, tunnelOfports: assumed(port.tunnelOfports, 0xfeff), bfdOfports: assumed(port.bfdOfports, 0xfefe) };
}

/**
 * Per VIP: the packets its flows took on all gateways and on each; per
 * backend, its buckets' counts (every replica), or with secondChance its
 * slots' (and, with healthCheck.bfd, what its owner group sent to the live
 * backends instead: `failedOver`). With pathMtu, per VIP address, the ICMP
 * errors fanned out and the copies sent. A backend that takes nothing reads
 * 0, so it stands out.
 */
export function gatewayTraffic(d: Inputs, ids: RecordedIds, gateways: readonly CountedGateway[], slots: Readonly<Record<string, SlotTable>>): GatewayTraffic {
  const vips: GatewayTraffic["vips"] = {};
  const pathMtu: NonNullable<GatewayTraffic["pathMtu"]> = {};
  // Indexed once per gateway: a read of 1,024 VIPs looks each VIP's flows and groups up, never scans.
  const counted = gateways.map((g) => ({
    g,
    port: assumedPorts(d, g.port),
    flows: new FlowCounters(g.observed.flows),
    groups: groupsWithStats(g.observed.groups, g.groupStats),
  }));
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const entry = { ...zeroCounter(), gateways: {} as Record<string, Counter>, backends: {} as Record<string, Counter> };
    for (const b of vip.backends) entry.backends[`${b.address}:${b.port}`] = zeroCounter();
    const failedOver: Record<string, Counter> = {};
    const table = slots[key];
    const ownerGroups = ids.ownerGroupIds?.[key];
    // A bucket's backend, from the replica key its id was given for ("10.0.0.5:80#1").
    const backendOf = new Map(Object.entries(ids.bucketIds[key] ?? {}).map(([replica, id]) => [id, replica.slice(0, replica.lastIndexOf("#"))]));
    for (const { g, port, flows, groups } of counted) {
      const atGateway = (entry.gateways[g.name] = zeroCounter());
      if (d.secondChance && table) {
        const [vipFlow, ...slotFlowsOf] = slotFlows(
          d,
          vip,
          table,
          ownerGroups ? toOwnerGroup(vip, ownerGroups) : toOwnerDirectly(vip, port),
          port.segmentOfport,
          0n,
        );
        flows.sum([vipFlow], atGateway);
        for (const f of slotFlowsOf) flows.sum([f], (entry.backends[table.backends[table.owner[f.match.reg12!]]] ??= zeroCounter()));
        for (const [backend, groupId] of d.healthCheck?.bfd ? Object.entries(ownerGroups ?? {}) : []) {
          const owner = groups.get(groupId);
          const at = owner?.group.buckets.findIndex((b) => b.bucketId === FALLBACK_BUCKET) ?? -1;
          if (at >= 0) addInto((failedOver[backend] ??= zeroCounter()), owner!.stats.buckets[at]);
        }
      } else if (!d.secondChance) {
        const vipFlows = [vipFlowMatch(vip, port), ...(vip.fragments ? [fragmentsMatch(vip, port)] : [])];
        flows.sum(
          vipFlows.map((match) => ({ table: 0, priority: VIP_FLOW_PRIORITY, cookie: 0n, match, actions: [] })),
          atGateway,
        );
        const select = groups.get(ids.groupIds[key]);
        select?.group.buckets.forEach((b, i) => {
          const backend = backendOf.get(b.bucketId);
          if (backend !== undefined && entry.backends[backend]) addInto(entry.backends[backend], select.stats.buckets[i]);
        });
      }
      addInto(entry, atGateway);
    }
    vips[key] = { ...entry, ...(Object.keys(failedOver).length > 0 ? { failedOver } : {}) };
  }
  for (const { port, flows } of counted) {
    for (const f of pathMtuFlows(d, port)) {
      const errors = flows.sum([f]);
      const copies = f.actions.filter((a) => a.type === "output" || a.type === "in_port").length;
      const at = (pathMtu[dstAddressOf(f.match)!] ??= { errors: zeroCounter(), copies: 0 });
      addInto(at.errors, errors);
      at.copies += errors.packets * copies;
    }
  }
  return { vips, ...(d.pathMtu ? { pathMtu } : {}) };
}
