import type { DeferredNatDefaulted as Inputs, DefaultedVip } from "./plan";
import { isDeepStrictEqual } from "node:util";
import type { PartialScope } from "../../engine/bridge";
import { flowKey, pathMtuErrorMatch, type Flow, type Modification } from "../../openflow";
import { planBridge, type ObservedBridge } from "../../engine/plan";
import type { DeferredNatBackend, DeferredNatVip } from "../../model/inputs.generated";
import type { RecordedPorts } from "../../model/outputs.generated";
import { confinedVip, recordedFindings, renderFinding, type DriftFinding } from "../../model/drift";
import {
  VIP_FLOW_PRIORITY,
  backendKey,
  cookieOf,
  gatewayIntent,
  fragmentsMatch,
  pathMtuFlows,
  vipFlowMatch,
  vipKey,
  type GatewayPort,
  type RecordedIds,
} from "./plan";

/**
 * A proportional update: what a change touches, computed from the recorded
 * inputs (what the last apply put on the hosts, or what the last refresh
 * found there) against the desired ones, so that an update reads and plans
 * only the groups and flows of the VIPs that differ. Drift a refresh
 * recorded shows in the recorded inputs, so those VIPs are touched and
 * repaired too; a VIP equal on both sides is neither read nor planned.
 * Anything that is not one VIP's (gateways, hypervisors, selection,
 * delivery, health checks, the gateways' port numbers) touches every VIP:
 * then the update reads and plans everything, as before.
 */

/** One gateway's OpenFlow port numbers as the last apply planned with them (every bucket and flow depends on them); schema/deferred-nat-load-balancer.json, recordedPorts. */
export type { RecordedPorts };

export const recordPorts = (port: GatewayPort): RecordedPorts => ({
  segmentOfport: port.segmentOfport,
  tunnelOfports: Object.fromEntries(port.tunnelOfports ?? []),
  bfdOfports: Object.fromEntries(port.bfdOfports ?? []),
});

export const samePorts = (recorded: RecordedPorts | undefined, port: GatewayPort) => !!recorded && isDeepStrictEqual(recorded, recordPorts(port));

export type UpdateScope =
  | { kind: "all"; reason: string }
  | {
      kind: "vips";
      /** Desired VIPs that are new or differ from their recorded inputs (vipKey). */
      touched: string[];
      /** Recorded VIPs no longer desired (vipKey): their group and flow go. */
      removed: string[];
      /** The touched VIPs themselves, in `touched`'s order: the plan takes them without looking through every VIP again. */
      touchedVips: DefaultedVip[];
      /** Every desired VIP's key, in the inputs' order: made once here, the ids' records are looked up with the same strings (V8 keeps a string's hash). */
      desiredKeys: string[];
    };

/** Past this many VIPs, one dump of everything costs less than a dump per group and per flow. */
export const MAX_SCOPED_VIPS = 64;

/** What of the recorded state a scoped update needs. */
export interface RecordedForScope extends RecordedIds {
  drift?: readonly string[];
  driftFindings?: readonly DriftFinding[];
  gatewayPorts?: Record<string, RecordedPorts>;
}

/**
 * What an update from `old` (recorded inputs, with defaults) to `news`
 * (with defaults) touches. Both are compared field by field; backends in
 * any order (the list is unordered).
 */
export function updateScope(old: Inputs, news: Inputs, recorded: RecordedForScope): UpdateScope {
  if (news.secondChance || old.secondChance) return { kind: "all", reason: "secondChance plans slot tables across the VIP set" };
  if (!recorded.gatewayPorts) return { kind: "all", reason: "no recorded port numbers (state from an earlier ovslb)" };
  const { vips: oldVips, ...oldRest } = old;
  const { vips: newVips, ...newRest } = news;
  if (!isDeepStrictEqual(oldRest, newRest)) return { kind: "all", reason: "a setting of the whole load balancer changed" };
  // Drift a refresh recorded: each finding confined to one VIP touches that VIP; any other (a gateway's
  // tunnel or BFD port, the northbound, a host a change missed) is not one VIP's.
  const findings = recordedFindings(recorded);
  if (!findings) return { kind: "all", reason: "the last read found drift recorded without findings (state from an earlier ovslb)" };
  const drifted = new Set<string>();
  for (const finding of findings) {
    const vip = confinedVip(finding);
    if (vip === undefined) return { kind: "all", reason: `the last read found drift that is not one VIP's (${renderFinding(finding)})` };
    drifted.add(vip);
  }
  const touched: string[] = [];
  const touchedVips: DefaultedVip[] = [];
  const desiredKeys: string[] = new Array<string>(newVips.length);
  const { groupIds, bucketIds } = recorded;
  // The recorded VIPs are usually in the order the program gives them: paired by position while they agree, no map
  // needed. One loop, no closures: it runs for every VIP of every update.
  const paired = Math.min(oldVips.length, newVips.length);
  let i = 0;
  for (; i < paired; i++) {
    const was = oldVips[i];
    const vip = newVips[i];
    if (!sameVipKey(was, vip)) break;
    const key = vipKey(vip);
    desiredKeys[i] = key;
    if (groupIds[key] === undefined || bucketIds[key] === undefined || (drifted.size > 0 && drifted.has(key)) || !sameVip(was, vip)) {
      touched.push(key);
      touchedVips.push(vip);
    }
  }
  // The rest by key (a VIP moved, added or removed).
  const before = new Map<string, DeferredNatVip>();
  for (let j = i; j < oldVips.length; j++) before.set(vipKey(oldVips[j]), oldVips[j]);
  for (let j = i; j < newVips.length; j++) {
    const vip = newVips[j];
    const key = vipKey(vip);
    desiredKeys[j] = key;
    const was = before.get(key);
    before.delete(key);
    if (!was || !hasIds(recorded, key) || drifted.has(key) || !sameVip(was, vip)) {
      touched.push(key);
      touchedVips.push(vip);
    }
  }
  const removed = [...before.keys()];
  // The engine calls update only for a change: one that changes no VIP and no setting is a request to converge, so it reads everything.
  if (touched.length + removed.length === 0) return { kind: "all", reason: "no VIP differs from the recorded inputs: everything is read and repaired" };
  if (touched.length + removed.length > MAX_SCOPED_VIPS) {
    return { kind: "all", reason: `${touched.length + removed.length} VIPs change: one full read costs less` };
  }
  return { kind: "vips", touched, removed, touchedVips, desiredKeys };
}

/** The VIP (vipKey) has recorded ids (its bucket ids were given with the inputs recorded beside them). */
const hasIds = (recorded: RecordedIds, key: string) => recorded.groupIds[key] !== undefined && recorded.bucketIds[key] !== undefined;

/** A backend's properties (the schema allows no others; the unit test holds this list to the schema's). */
export const COMPARED_BACKEND_FIELDS = ["address", "port", "mac", "hypervisor", "weight", "logicalPort", "state"] as const;

/** Field by field, written out: 100,000 backends compare in a few milliseconds. */
const sameBackend = (a: DeferredNatBackend, b: DeferredNatBackend) =>
  a.address === b.address &&
  a.port === b.port &&
  a.mac === b.mac &&
  a.hypervisor === b.hypervisor &&
  a.weight === b.weight &&
  a.logicalPort === b.logicalPort &&
  a.state === b.state;

/** A VIP's properties besides its backends (the unit test holds this list, with "backends", to the schema's). */
export const COMPARED_VIP_FIELDS = ["address", "port", "protocol", "fragments"] as const;

/** What vipKey is made of, compared without making the key. */
const sameVipKey = (a: DeferredNatVip, b: DeferredNatVip) => a.address === b.address && a.port === b.port && a.protocol === b.protocol;

/**
 * Written out, no copies: an update compares 100,000 backends, and a rest
 * copy or a deep walk per VIP was most of its CPU. Backends in order first
 * (as recorded inputs usually are), else as a set by address and port.
 */
export function sameVip(a: DeferredNatVip, b: DeferredNatVip): boolean {
  const ab = a.backends;
  const bb = b.backends;
  const n = ab.length;
  if (n !== bb.length || !sameVipKey(a, b) || !a.fragments !== !b.fragments) return false;
  let i = 0;
  while (i < n && sameBackend(ab[i], bb[i])) i++;
  if (i === n) return true;
  const byKey = new Map<string, DeferredNatBackend>();
  for (const x of ab) byKey.set(backendKey(x), x);
  // Each recorded backend matches once: a backend listed twice is no match for one missing.
  for (const y of bb) {
    const key = backendKey(y);
    const x = byKey.get(key);
    if (!x || !sameBackend(x, y)) return false;
    byKey.delete(key);
  }
  return true;
}

/** "tcp:10.0.0.1:80" or "tcp:2001:db8::1:80": the protocol before the first colon, the port after the last. */
const parseVipKey = (key: string) => {
  const first = key.indexOf(":");
  const last = key.lastIndexOf(":");
  return { protocol: key.slice(0, first) as DeferredNatVip["protocol"], address: key.slice(first + 1, last), port: Number(key.slice(last + 1)) };
};

/**
 * What a scoped update reads on one gateway: the groups of the touched and
 * removed VIPs (recorded ids, or the ids just given to new VIPs), and each
 * such VIP's flow with anything else at its match (everyone's flows whose
 * match has those fields: a foreign one at the same priority is a conflict).
 */
export function scopedRead(scope: Extract<UpdateScope, { kind: "vips" }>, ids: RecordedIds, gw: GatewayPort, pathMtu = false): PartialScope {
  const keys = [...scope.touched, ...scope.removed];
  return {
    groupIds: [...new Set(keys.flatMap((k) => (ids.groupIds[k] === undefined ? [] : [ids.groupIds[k]])))],
    flows: [
      ...keys.flatMap((k) => vipMatches(parseVipKey(k), gw).map((match) => ({ cookie: 0n, mask: 0n, table: 0, match }))),
      ...(pathMtu ? touchedAddresses(scope).map((address) => ({ cookie: 0n, mask: 0n, table: 0, match: pathMtuMatch(address, gw) })) : []),
    ],
  };
}

/** A VIP's flows' matches: its own, and udp's fragments (whether it has `fragments` or not: a change may add or drop them). */
const vipMatches = (vip: ReturnType<typeof parseVipKey>, gw: GatewayPort): Flow["match"][] => [
  vipFlowMatch(vip, gw),
  ...(vip.protocol === "udp" ? [fragmentsMatch(vip, gw)] : []),
];

/** pathMtu: the VIP addresses a scoped update touches, whose fan-out flows it plans (their hypervisors may change). */
const touchedAddresses = (scope: Extract<UpdateScope, { kind: "vips" }>) => [
  ...new Set([...scope.touched, ...scope.removed].map((k) => parseVipKey(k).address)),
];

const pathMtuMatch = (address: string, gw: GatewayPort): Flow["match"] => ({ ...pathMtuErrorMatch(address), in_port: gw.segmentOfport });

/** The ids of these VIPs only. */
export function idsOf(ids: RecordedIds, keys: Iterable<string>): RecordedIds {
  const out: RecordedIds = { groupIds: {}, bucketIds: {} };
  for (const k of keys) {
    if (ids.groupIds[k] !== undefined) out.groupIds[k] = ids.groupIds[k];
    if (ids.bucketIds[k] !== undefined) out.bucketIds[k] = ids.bucketIds[k];
  }
  return out;
}

/**
 * The ids a scoped update records: each desired VIP's recorded ones, but the
 * touched VIPs' as just given (`given`), in one copy of the 1,024-entry records.
 */
export function scopedIds(recorded: RecordedIds, inputs: Inputs, scope: Extract<UpdateScope, { kind: "vips" }>, given: RecordedIds): RecordedIds {
  const touched = new Set(scope.touched);
  const out: RecordedIds = { groupIds: {}, bucketIds: {} };
  const keys = scope.desiredKeys.length === inputs.vips.length ? scope.desiredKeys : inputs.vips.map(vipKey);
  for (const key of keys) {
    const from = touched.has(key) ? given : recorded;
    const group = from.groupIds[key];
    const buckets = from.bucketIds[key];
    if (group !== undefined) out.groupIds[key] = group;
    if (buckets !== undefined) out.bucketIds[key] = buckets;
  }
  return out;
}

/**
 * The bundle for one gateway of a scoped update: the touched VIPs' groups
 * and flows as desired, the removed VIPs' gone, planned by the bridge engine
 * against what was read of exactly those (same ownership checks and
 * refusals as a full plan). `ids` holds the touched and removed VIPs' ids.
 */
export function planGatewayScoped(
  where: string,
  inputs: Inputs,
  scope: Extract<UpdateScope, { kind: "vips" }>,
  ids: RecordedIds,
  gw: GatewayPort,
  observed: ObservedBridge,
): Modification[] {
  const intent = gatewayIntent({ ...inputs, vips: scope.touchedVips }, idsOf(ids, [...scope.touched, ...scope.removed]), gw);
  const flowKeyOf = (match: Flow["match"]) => flowKey({ table: 0, priority: VIP_FLOW_PRIORITY, cookie: cookieOf(inputs), match, actions: [] });
  const keys = new Set([...scope.touched, ...scope.removed].flatMap((k) => vipMatches(parseVipKey(k), gw).map(flowKeyOf)));
  // pathMtu: a touched address's fan-out flow, made from every VIP of that address (not only the touched ones).
  const fanout = inputs.pathMtu ? new Set(touchedAddresses(scope).map((a) => flowKeyOf(pathMtuMatch(a, gw)))) : new Set<string>();
  for (const k of fanout) keys.add(k);
  const flows = [
    ...intent.flows.filter((f) => keys.has(flowKey(f)) && !fanout.has(flowKey(f))),
    ...pathMtuFlows(inputs, gw).filter((f) => fanout.has(flowKey(f))),
  ];
  return planBridge(
    where,
    // The BFD drop flows are the gateway's, not a VIP's: a scoped update leaves them as they are.
    { ...intent, flows },
    // A dump by match also returns flows more specific than the VIP's: only the VIPs' own keys are planned.
    { ...observed, flows: observed.flows.filter((f) => keys.has(flowKey(f))) },
  );
}
