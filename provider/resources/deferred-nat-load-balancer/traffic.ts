import type { ObservedBridge } from "../../engine/plan";
import type { DeferredNatLoadBalancerOutputs } from "../../model/outputs.generated";
import { addInto, FlowCounters, zeroCounter, type Counter } from "../../model/traffic";
import type { GroupEntry, GroupStats } from "../../openflow";
import type { DeferredNatDefaulted as Inputs } from "./check";
import { desiredDataplane, pathMtuFlows, type GatewayPort } from "./dataplane";
import { FALLBACK_BUCKET, vipKey, type RecordedIds } from "./ids";
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

/** Each bucket's counters by bucket id: dump-group-stats gives them by position, dump-groups the ids in the same order. */
function bucketCounters(groups: readonly GroupEntry[], stats: readonly GroupStats[]): Map<number, Map<number, Counter>> {
  const statsOf = new Map(stats.map((s) => [s.groupId, s]));
  const out = new Map<number, Map<number, Counter>>();
  for (const g of groups) {
    const s = statsOf.get(g.groupId);
    if (!s || s.buckets.length !== g.buckets.length) continue; // changed between the two dumps: counted at the next read
    out.set(g.groupId, new Map(g.buckets.map((b, i) => [b.bucketId, addInto(zeroCounter(), s.buckets[i])])));
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
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const entry = { ...zeroCounter(), gateways: {} as Record<string, Counter>, backends: {} as Record<string, Counter> };
    for (const b of vip.backends) entry.backends[`${b.address}:${b.port}`] = zeroCounter();
    const failedOver: Record<string, Counter> = {};
    for (const g of gateways) {
      const port = assumedPorts(d, g.port);
      const flows = new FlowCounters(g.observed.flows);
      const buckets = bucketCounters(g.observed.groups, g.groupStats);
      const table = slots[key];
      if (d.secondChance && table) {
        const ownerGroups = ids.ownerGroupIds?.[key];
        const [vipFlow, ...slotFlowsOf] = slotFlows(
          d,
          vip,
          table,
          ownerGroups ? toOwnerGroup(vip, ownerGroups) : toOwnerDirectly(vip, port),
          port.segmentOfport,
          0n,
        );
        addInto(entry, flows.sum([vipFlow], (entry.gateways[g.name] = zeroCounter())));
        for (const f of slotFlowsOf) flows.sum([f], (entry.backends[table.backends[table.owner[f.match.reg12!]]] ??= zeroCounter()));
        for (const [backend, groupId] of Object.entries(ownerGroups ?? {})) {
          const fallback = buckets.get(groupId)?.get(FALLBACK_BUCKET);
          if (d.healthCheck?.bfd && fallback) addInto((failedOver[backend] ??= zeroCounter()), fallback);
        }
      } else if (!d.secondChance) {
        const want = desiredDataplane({ ...d, vips: [vip] }, ids, port)[0];
        addInto(entry, flows.sum(want.flows, (entry.gateways[g.name] = zeroCounter())));
        const backendOf = new Map(Object.entries(ids.bucketIds[key] ?? {}).map(([replica, id]) => [id, replica.slice(0, replica.lastIndexOf("#"))]));
        for (const [bucketId, counted] of buckets.get(want.group.groupId) ?? []) {
          const backend = backendOf.get(bucketId);
          if (backend !== undefined && entry.backends[backend]) addInto(entry.backends[backend], counted);
        }
      }
    }
    vips[key] = { ...entry, ...(Object.keys(failedOver).length > 0 ? { failedOver } : {}) };
  }
  for (const g of gateways) {
    const flows = new FlowCounters(g.observed.flows);
    for (const f of pathMtuFlows(d, assumedPorts(d, g.port))) {
      const errors = flows.sum([f]);
      const copies = f.actions.filter((a) => a.type === "output" || a.type === "in_port").length;
      const at = (pathMtu[f.match.nw_dst!] ??= { errors: zeroCounter(), copies: 0 });
      addInto(at.errors, errors);
      at.copies += errors.packets * copies;
    }
  }
  return { vips, ...(d.pathMtu ? { pathMtu } : {}) };
}
