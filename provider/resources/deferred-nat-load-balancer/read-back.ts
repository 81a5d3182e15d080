import { isDeepStrictEqual } from "node:util";
import { flowPresent } from "../../engine/flows";
import type { ObservedBridge } from "../../engine/plan";
import type { DeferredNatBackend } from "../../model/inputs.generated";
import type { DriftFinding } from "../../model/drift";
import { bucketMac, dstAddressOf, sameBucket, toGroupEntry } from "../../openflow";
import { type DefaultedBackend, type DefaultedVip, type DeferredNatDefaulted } from "./check";
import { backendKey, cookieOf, type RecordedIds, replicaKey, vipKey } from "./ids";
import { bfdDropFlows, deliveryOf, desiredDataplane, pathMtuFlows, slotGroups, type GatewayPort } from "./dataplane";
import { slotFlows, toOwnerDirectly, toOwnerGroup } from "./second-chance";
import type { SlotTable } from "./slots";

/** DeferredNatLoadBalancer read back: the inputs a gateway's groups and flows amount to, and what differs (pure). */

type Inputs = DeferredNatDefaulted;

/** OVS hash field -> the selection field of the inputs it comes from. */
export const SELECTION_FIELD_OF: Readonly<Record<string, string>> = {
  ipv6_src: "ip_src",
  ipv6_dst: "ip_dst",
  tcp_src: "tp_src",
  udp_src: "tp_src",
  sctp_src: "tp_src",
  tcp_dst: "tp_dst",
  udp_dst: "tp_dst",
  sctp_dst: "tp_dst",
};

/** What read found on one gateway that the inputs cannot say by themselves. */
export interface GatewayObservation {
  gateway: string;
  findings: DriftFinding[];
}

/**
 * pathMtu: the VIP addresses whose fan-out flow is missing or changed on the
 * gateway (planned as if a missing tunnel port were there under a number no
 * port has, so a cut tunnel shows too).
 */
function wrongFanouts(d: Inputs, g: { port: GatewayPort; observed: ObservedBridge }): Set<string> {
  if (!d.pathMtu) return new Set();
  const tunnelOfports = new Map(d.hypervisors.map((h) => [h.name, g.port.tunnelOfports?.get(h.name) ?? 0xfeff]));
  const present = flowPresent(g.observed.flows);
  return new Set(pathMtuFlows(d, { ...g.port, tunnelOfports }).flatMap((f) => (present(f) ? [] : [dstAddressOf(f.match)!])));
}

/**
 * The inputs the gateways' actual state amounts to. A VIP counts only if
 * its flow and group are right on every gateway; a backend's weight is the
 * number of its buckets present and right on every gateway; a bucket nobody
 * declared reads as a backend at 0.0.0.0 with the bucket's MAC, so it shows
 * in a diff.
 */
export function actualInputs(
  inputs: Inputs,
  ids: RecordedIds,
  perGateway: readonly { name: string; port: GatewayPort; observed: ObservedBridge }[],
  slots?: Readonly<Record<string, SlotTable>>,
): { inputs: Inputs; observations: GatewayObservation[] } {
  const d = inputs;
  if (d.secondChance) return actualSlotInputs(d, ids, perGateway, slots ?? {});
  const observations = perGateway.map((g) => ({ gateway: g.name, findings: [] as DriftFinding[] }));
  const vips: DefaultedVip[] = [];
  let selectionFields = d.selectionFields;
  const fanouts = perGateway.map((g) => wrongFanouts(d, g));
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const replicaOf = new Map(Object.entries(ids.bucketIds[key] ?? {}).map(([rk, id]) => [id, rk]));
    let present = true;
    // Replicas right on every gateway so far; strays: undeclared buckets by id -> MAC.
    let right: Set<string> | undefined;
    const strays = new Map<number, string>();
    perGateway.forEach((g, gi) => {
      const note = (kind: DriftFinding["kind"], object: string, detail?: string) =>
        observations[gi].findings.push({ host: g.name, kind, object, vip: key, ...(detail === undefined ? {} : { detail }) });
      // Backends behind a tunnel port that is gone or changed cannot be reached from this gateway.
      const noTunnel = (b: DeferredNatBackend) => deliveryOf(d, b.hypervisor) === "gre" && !g.port.tunnelOfports?.has(b.hypervisor);
      const bfdDropping = (hv: string) =>
        bfdDropFlows(d, { ...g.port, bfdOfports: new Map([[hv, g.port.bfdOfports!.get(hv)!]]) }).every(flowPresent(g.observed.flows));
      const noBfd = (b: DeferredNatBackend) => !!d.healthCheck?.bfd && !(g.port.bfdOfports?.has(b.hypervisor) && bfdDropping(b.hypervisor));
      const cut = new Set(vip.backends.filter((b) => noTunnel(b) || noBfd(b)));
      for (const hv of new Set(vip.backends.filter(noTunnel).map((b) => b.hypervisor))) note("tunnel-port", `tunnel port to hypervisor ${hv}`);
      for (const hv of new Set(vip.backends.filter(noBfd).map((b) => b.hypervisor))) note("bfd-port", `BFD port to hypervisor ${hv}`);
      if (fanouts[gi].has(vip.address)) {
        note("flow-changed", "ICMP fan-out flow");
        present = false;
      }
      const want = desiredDataplane({ ...d, vips: [{ ...vip, backends: vip.backends.filter((b) => !cut.has(b)) }] }, ids, g.port)[0];
      const wantGroup = toGroupEntry(want.group);
      const group = g.observed.groups.find((x) => x.groupId === want.group.groupId);
      if (!want.flows.every(flowPresent(g.observed.flows))) {
        note("flow-changed", "flow");
        present = false;
      }
      if (!group) {
        note("group-missing", `group ${want.group.groupId}`);
        present = false;
        return;
      }
      if (group.selectionMethod !== "hash" || !isDeepStrictEqual([...group.fields], [...wantGroup.fields])) {
        note("selection-changed", "selection", `${group.selectionMethod ?? "default"} on ${group.fields.join(",") || "no fields"}`);
        selectionFields = group.fields.map((f) => SELECTION_FIELD_OF[f] ?? f) as typeof selectionFields;
      }
      const have = new Map(group.buckets.map((b) => [b.bucketId, b]));
      const ok = new Set<string>();
      for (const wb of wantGroup.buckets) {
        const rk = replicaOf.get(wb.bucketId)!;
        const hb = have.get(wb.bucketId);
        if (hb && sameBucket(hb, wb)) ok.add(rk);
        else note(hb ? "bucket-changed" : "bucket-missing", `bucket ${wb.bucketId} (${rk})`);
      }
      right = right ? new Set([...right].filter((rk) => ok.has(rk))) : ok;
      for (const hb of group.buckets) {
        if (replicaOf.has(hb.bucketId)) continue;
        note("bucket-stray", `bucket ${hb.bucketId}`);
        strays.set(hb.bucketId, bucketMac(hb.actions) ?? "00:00:00:00:00:00");
      }
    });
    if (!present) continue;
    const backends: DefaultedBackend[] = [];
    for (const b of vip.backends) {
      const weight = Array.from({ length: b.weight }, (_, r) => replicaKey(b, r)).filter((rk) => right?.has(rk)).length;
      if (weight > 0) backends.push({ ...b, weight });
    }
    // An undeclared bucket reads as a backend nobody declared, so the diff shows it.
    for (const mac of strays.values()) backends.push({ address: "0.0.0.0", port: 1, mac, hypervisor: "undeclared", weight: 1 });
    vips.push({ ...vip, backends });
  }
  return { inputs: { ...d, selectionFields, vips }, observations };
}

/**
 * secondChance: the inputs the gateways' slot flows and groups amount to. A
 * VIP counts when its entry flow (and with healthCheck.bfd its select group)
 * is right on every gateway; an active backend when its owner group and
 * every slot it owns are right on every gateway (a draining one owns none
 * and stays while its VIP does).
 */
export function actualSlotInputs(
  d: Inputs,
  ids: RecordedIds,
  perGateway: readonly { name: string; port: GatewayPort; observed: ObservedBridge }[],
  slots: Readonly<Record<string, SlotTable>>,
): { inputs: Inputs; observations: GatewayObservation[] } {
  const observations = perGateway.map((g) => ({ gateway: g.name, findings: [] as DriftFinding[] }));
  const vips: DefaultedVip[] = [];
  const bfd = !!d.healthCheck?.bfd;
  const fanouts = perGateway.map((g) => wrongFanouts(d, g));
  perGateway.forEach((g, gi) => {
    const note = (kind: DriftFinding["kind"], object: string) => observations[gi].findings.push({ host: g.name, kind, object });
    for (const h of d.hypervisors) {
      if (!g.port.tunnelOfports?.has(h.name)) note("tunnel-port", `tunnel port to hypervisor ${h.name}`);
      if (bfd && !g.port.bfdOfports?.has(h.name)) note("bfd-port", `BFD port to hypervisor ${h.name}`);
    }
  });
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const table = slots[key];
    if (!table) continue;
    let present = true;
    const wrong = new Set<string>();
    perGateway.forEach((g, gi) => {
      const note = (kind: DriftFinding["kind"], object: string, detail?: string) =>
        observations[gi].findings.push({ host: g.name, kind, object, vip: key, ...(detail === undefined ? {} : { detail }) });
      // Plan as if a missing tunnel or BFD port were there under a number no port has: the groups behind it then differ.
      const assumed = (have: ReadonlyMap<string, number> | undefined, absent: number) =>
        new Map(d.hypervisors.map((h) => [h.name, have?.get(h.name) ?? absent]));
      const port = { ...g.port, tunnelOfports: assumed(g.port.tunnelOfports, 0xfeff), bfdOfports: assumed(g.port.bfdOfports, 0xfefe) };
      const present_ = flowPresent(g.observed.flows);
      const observedGroup = new Map(g.observed.groups.map((x) => [x.groupId, x]));
      const ownerGroups = ids.ownerGroupIds?.[key];
      const ownerOf = new Map(Object.entries(ownerGroups ?? {}).map(([backend, id]) => [id, backend]));
      // State recorded before owner groups: the slot flows carry the owner themselves.
      for (const want of ownerGroups ? slotGroups(d, vip, ids, port) : []) {
        const have = observedGroup.get(want.groupId);
        const entry = toGroupEntry(want);
        const same =
          have && have.type === entry.type && have.buckets.length === entry.buckets.length && have.buckets.every((b, i) => sameBucket(b, entry.buckets[i]));
        if (same) continue;
        const owner = ownerOf.get(want.groupId);
        note(have ? "bucket-changed" : "group-missing", `group ${want.groupId}${owner ? ` (${owner})` : " (select)"}`);
        if (owner) wrong.add(owner);
        else present = false;
      }
      const target = ownerGroups ? toOwnerGroup(vip, ownerGroups) : toOwnerDirectly(vip, port);
      if (fanouts[gi].has(vip.address)) {
        note("flow-changed", "ICMP fan-out flow");
        present = false;
      }
      const [entry, ...slotFlowsWanted] = slotFlows(d, vip, table, target, g.port.segmentOfport, cookieOf(d));
      if (!present_(entry)) {
        note("flow-changed", "entry flow");
        present = false;
      }
      let missing = 0;
      slotFlowsWanted.forEach((f) => {
        if (present_(f)) return;
        missing++;
        wrong.add(table.backends[table.owner[f.match.reg12!]]);
      });
      if (missing > 0) note("slot-flows-changed", `${missing} slot flows`);
    });
    if (!present) continue;
    vips.push({ ...vip, backends: vip.backends.filter((b) => !wrong.has(backendKey(b))) });
  }
  return { inputs: { ...d, vips }, observations };
}
