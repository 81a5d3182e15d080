import { isDeepStrictEqual } from "node:util";
import type {DeferredNatBackend, DeferredNatLoadBalancerInputs as Inputs, DeferredNatVip,} from "../../model/inputs.generated";
import { conflictingFlows, diffFlows, flowKey } from "../../model/flow-diff";
import { MAX_BUCKET_ID, MAX_GROUP_ID, derivedId, ownerCookie } from "../../model/ids";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { toFlowEntry, toGroupEntry, type Action, type DumpedFlow, type Flow, type Group, type GroupEntry, type HashField, type Modification, type SelectBucket } from "../../openflow";

/**
 * DeferredNatLoadBalancer as pure data: ids, the groups and flows every
 * gateway must hold, the modifications that take a gateway from what it has
 * to that, and the inputs a gateway's actual state amounts to.
 */

export const KIND = "DeferredNatLoadBalancer";
export const VIP_FLOW_PRIORITY = 100;
/** Every bucket has the same weight: a backend's weight is its number of buckets (shares stay proportional). */
export const BUCKET_WEIGHT = 100;
export const DEFAULT_SELECTION_FIELDS = ["ip_src", "ip_dst", "tp_src", "tp_dst"] as const;
/**
 * Buckets one group may hold. OVS sends a group, and reports it back in
 * dump-groups, as one OpenFlow message of at most 65,535 bytes; each of
 * these buckets takes 64, so past about 1,020 a group can be neither
 * written whole nor read back (checked on OVS 3.1: a larger reply comes
 * back as a hex dump).
 */
export const MAX_BUCKETS_PER_GROUP = 1000;

export const lbId = (inputs: Inputs) => `deferred-nat/${inputs.name}`;
export const cookieOf = (inputs: Inputs) => ownerCookie(KIND, inputs.name);
export const vipKey = (v: Pick<DeferredNatVip, "protocol" | "address" | "port">) => `${v.protocol}:${v.address}:${v.port}`;
export const backendKey = (b: Pick<DeferredNatBackend, "address" | "port">) => `${b.address}:${b.port}`;
/** One bucket per unit of weight: "10.0.0.5:80#0", "10.0.0.5:80#1", ... */
export const replicaKey = (b: DeferredNatBackend, replica: number) => `${backendKey(b)}#${replica}`;

/** Ids given so far, recorded in the outputs and never re-derived (DESIGN §1: ids are sticky). */
export interface RecordedIds {
  /** vipKey -> group id */
  groupIds: Record<string, number>;
  /** vipKey -> replicaKey -> bucket id */
  bucketIds: Record<string, Record<string, number>>;
}

export function withDefaults(inputs: Inputs): Inputs {
  return {
    selectionMethod: "hash",
    selectionFields: [...DEFAULT_SELECTION_FIELDS],
    delivery: "mac",
    ...inputs,
    vips: inputs.vips.map((v) => ({ ...v, backends: v.backends.map((b) => ({ weight: 1, ...b, mac: b.mac.toLowerCase() })) })),
  };
}

export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (inputs.selectionMethod === "dp_hash") {
    fail("selectionMethod", "dp_hash remaps most connections whenever the bucket count changes (and OVS 3.1 corrupts dp_hash groups on bucket insert/remove); use hash");
  }
  if (inputs.selectionFields && inputs.selectionFields.length === 0) {
    fail("selectionFields", "give at least one field: with none, every packet hashes alike and one backend takes all");
  }
  inputs.gateways.forEach((g, i) => failures.push(...checkConnection(g.host.connection, `gateways[${i}].host.connection`)));
  duplicates(inputs.gateways.map((g) => g.name)).forEach((i) => fail(`gateways[${i}].name`, "is used by another gateway"));
  duplicates(inputs.hypervisors.map((h) => h.name)).forEach((i) => fail(`hypervisors[${i}].name`, "is listed twice"));
  const hypervisors = new Set(inputs.hypervisors.map((h) => h.name));
  duplicates(inputs.vips.map(vipKey)).forEach((i) => fail(`vips[${i}]`, "is the same address, port and protocol as another VIP"));
  inputs.vips.forEach((vip, v) => {
    const buckets = vip.backends.reduce((n, b) => n + (b.weight ?? 1), 0);
    if (buckets > MAX_BUCKETS_PER_GROUP) {
      fail(`vips[${v}].backends`, `needs ${buckets} buckets (one per backend and unit of weight); a group holds at most ${MAX_BUCKETS_PER_GROUP}, the most OVS can send or report in one OpenFlow message`);
    }
    duplicates(vip.backends.map(backendKey)).forEach((b) => fail(`vips[${v}].backends[${b}]`, "is listed twice in this VIP"));
    vip.backends.forEach((b, i) => {
      const at = `vips[${v}].backends[${i}]`;
      if (b.address === vip.address) fail(`${at}.address`, "equals the VIP's address: a backend cannot be its own VIP");
      if (!hypervisors.has(b.hypervisor)) fail(`${at}.hypervisor`, `names a hypervisor the load balancer does not know (known: ${[...hypervisors].join(", ")})`);
      if (b.logicalPort && !inputs.ovn?.healthCheckSourceIp) {
        fail(`${at}.logicalPort`, "needs ovn.healthCheckSourceIp: OVN's ip_port_mappings pair a logical port with the health checks' source address");
      }
    });
  });
  if (inputs.ovn) failures.push(...checkConnection(inputs.ovn.northbound.connection, "ovn.northbound.connection"));
  return failures;
}

function duplicates(keys: readonly string[]): number[] {
  const seen = new Set<string>();
  return keys.flatMap((k, i) => (seen.has(k) ? [i] : (seen.add(k), [])));
}

/**
 * Gives every VIP a group id and every backend replica a bucket id: recorded
 * ids are kept; new ones are derived from the VIP (groups) or the backend
 * (buckets) and probed past ids in use. `foreignGroupIds` are ids taken on
 * any gateway by groups this load balancer does not own.
 */
export function assignIds(inputs: Inputs, recorded: RecordedIds, foreignGroupIds: ReadonlySet<number>): RecordedIds {
  const groupIds: Record<string, number> = {};
  const bucketIds: Record<string, Record<string, number>> = {};
  const usedGroups = new Set<number>(foreignGroupIds);
  // Recorded ids first, so a new VIP never takes an id a kept VIP holds.
  for (const vip of inputs.vips) {
    const id = recorded.groupIds[vipKey(vip)];
    if (id !== undefined) {
      if (foreignGroupIds.has(id)) {
        throw new Error(`group ${id} of VIP ${vipKey(vip)} is now held by a group this load balancer does not own; refusing to overwrite it`);
      }
      groupIds[vipKey(vip)] = id;
      usedGroups.add(id);
    }
  }
  for (const vip of inputs.vips) {
    const key = vipKey(vip);
    if (groupIds[key] === undefined) {
      groupIds[key] = derivedId([lbId(inputs), key], MAX_GROUP_ID, (id) => usedGroups.has(id));
      usedGroups.add(groupIds[key]);
    }
    const kept = recorded.bucketIds[key] ?? {};
    const ids: Record<string, number> = {};
    const used = new Set<number>();
    const replicas = vip.backends.flatMap((b) => Array.from({ length: b.weight ?? 1 }, (_, r) => ({ b, r })));
    for (const { b, r } of replicas) {
      const id = kept[replicaKey(b, r)];
      if (id !== undefined) {
        ids[replicaKey(b, r)] = id;
        used.add(id);
      }
    }
    for (const { b, r } of replicas) {
      const rk = replicaKey(b, r);
      if (ids[rk] !== undefined) continue;
      ids[rk] = derivedId([rk], MAX_BUCKET_ID, (id) => used.has(id));
      used.add(ids[rk]);
    }
    bucketIds[key] = ids;
  }
  return { groupIds, bucketIds };
}

/** The OVS hash fields for the selection fields of a VIP's protocol. */
export function hashFields(fields: readonly string[], protocol: DeferredNatVip["protocol"]): HashField[] {
  return fields.map((f) => (f === "tp_src" ? `${protocol}_src` : f === "tp_dst" ? `${protocol}_dst` : f) as HashField);
}

/** What one gateway needs that the others do not: its segment port and MAC. */
export interface GatewayPort {
  segmentOfport: number;
  mac: string;
}

export interface VipDataplane {
  vip: DeferredNatVip;
  group: Group;
  flow: Flow;
}

/**
 * The group and flow of each VIP on one gateway. The flow matches VIP
 * traffic arriving on the segment port, with no conntrack; each bucket
 * rewrites the MACs only (ip.dst stays the VIP) and sends the frame back out
 * the port it came in on.
 */
export function desiredDataplane(inputs: Inputs, ids: RecordedIds, gw: GatewayPort): VipDataplane[] {
  const d = withDefaults(inputs);
  const cookie = cookieOf(d);
  return d.vips.map((vip) => {
    const key = vipKey(vip);
    const groupId = ids.groupIds[key];
    const buckets: SelectBucket[] = vip.backends.flatMap((b) =>
      Array.from({ length: b.weight ?? 1 }, (_, r) => ({
        bucketId: ids.bucketIds[key][replicaKey(b, r)],
        weight: BUCKET_WEIGHT,
        actions: [
          { type: "set_field", field: "eth_src", value: gw.mac.toLowerCase() },
          { type: "set_field", field: "eth_dst", value: b.mac.toLowerCase() },
          { type: "in_port" },
        ] as Action[],
      })),
    );
    return {
      vip,
      group: {
        groupId,
        type: "select",
        selectionMethod: "hash",
        fields: hashFields(d.selectionFields!, vip.protocol),
        buckets,
      },
      flow: {
        table: 0,
        priority: VIP_FLOW_PRIORITY,
        cookie,
        match: { protocol: vip.protocol, in_port: gw.segmentOfport, nw_dst: vip.address, tp_dst: vip.port },
        actions: [{ type: "group", groupId }],
      },
    };
  });
}

/** What a gateway holds, as read before planning. */
export interface GatewayActual {
  /** Flows carrying this load balancer's cookie. */
  ownedFlows: readonly DumpedFlow[];
  /** Every flow in table 0, to find foreign flows on a VIP's match. */
  table0: readonly DumpedFlow[];
  groups: readonly GroupEntry[];
}

const groupReferences = (flow: DumpedFlow) =>
  flow.actions.flatMap((a) => (/^group:(\d+)$/.exec(a) ? [Number(/^group:(\d+)$/.exec(a)![1])] : []));

/**
 * The groups this load balancer owns on a gateway: referenced by one of its
 * flows, or recorded as its own and holding only buckets it gave (groups
 * carry no cookie, so the recorded ids are the second mark).
 */
export function ownedGroupIds(actual: GatewayActual, recorded: RecordedIds): Set<number> {
  const owned = new Set(actual.ownedFlows.flatMap(groupReferences));
  const recordedBuckets = new Map<number, Set<number>>();
  for (const [key, id] of Object.entries(recorded.groupIds)) {
    recordedBuckets.set(id, new Set(Object.values(recorded.bucketIds[key] ?? {})));
  }
  for (const g of actual.groups) {
    const mine = recordedBuckets.get(g.groupId);
    if (mine && g.buckets.every((b) => mine.has(b.bucketId))) owned.add(g.groupId);
  }
  return owned;
}

export function foreignGroupIds(actual: GatewayActual, recorded: RecordedIds): Set<number> {
  const owned = ownedGroupIds(actual, recorded);
  return new Set(actual.groups.map((g) => g.groupId).filter((id) => !owned.has(id)));
}


/**
 * The modifications that take one gateway from `actual` to `desired`, in a
 * safe order for one bundle: group changes, then flow changes, then group
 * deletes (new groups exist before flows use them; flows go before their groups). Existing groups change only by bucket
 * (remove/insert by id), so no other connection moves; only a change of
 * selection fields rebuilds a group (that re-hashes every connection anyway).
 */
export function planGateway(
  gatewayName: string,
  desired: readonly VipDataplane[],
  actual: GatewayActual,
  owned: ReadonlySet<number>,
): Modification[] {
  const groupMods: Modification[] = [];
  const groupsById = new Map(actual.groups.map((g) => [g.groupId, g]));
  const wantedGroups = new Set(desired.map((d) => d.group.groupId));

  for (const { vip, group, flow } of desired) {
    const want = toGroupEntry(group);
    const have = groupsById.get(group.groupId);
    if (have && !owned.has(have.groupId)) {
      throw new Error(`${gatewayName}: group ${have.groupId} (for VIP ${vipKey(vip)}) exists and is not owned by this load balancer; refusing to overwrite it`);
    }
    const [foreign] = conflictingFlows([flow], actual.table0);
    if (foreign) {
      throw new Error(`${gatewayName}: a flow of cookie 0x${foreign.other.cookie.toString(16)} already matches VIP ${vipKey(vip)} at priority ${flow.priority}; refusing to replace it`);
    }
    if (!have) {
      groupMods.push({ op: "add-group", group });
    } else if (have.type !== "select" || have.selectionMethod !== "hash" || !isDeepStrictEqual([...have.fields], [...want.fields])) {
      groupMods.push({ op: "modify-group", group });
    } else {
      const haveBuckets = new Map(have.buckets.map((b) => [b.bucketId, b]));
      const wantIds = new Set(want.buckets.map((b) => b.bucketId));
      for (const b of have.buckets) {
        if (!wantIds.has(b.bucketId)) groupMods.push({ op: "remove-buckets", groupId: group.groupId, commandBucketId: b.bucketId });
      }
      const inserts: SelectBucket[] = [];
      want.buckets.forEach((wb, i) => {
        const hb = haveBuckets.get(wb.bucketId);
        if (hb && isDeepStrictEqual(hb, wb)) return;
        // Same id, new weight or actions: remove and insert it in the same bundle.
        if (hb) groupMods.push({ op: "remove-buckets", groupId: group.groupId, commandBucketId: wb.bucketId });
        inserts.push(group.buckets[i] as SelectBucket);
      });
      if (inserts.length > 0) groupMods.push({ op: "insert-buckets", groupId: group.groupId, commandBucketId: "last", buckets: inserts });
    }
  }

  const flowMods = diffFlows(desired.map((d) => d.flow), actual.ownedFlows);
  const groupDeletes: Modification[] = [...owned]
    .filter((id) => !wantedGroups.has(id) && groupsById.has(id))
    .map((groupId) => ({ op: "delete-group", groupId }));
  return [...groupMods, ...flowMods, ...groupDeletes];
}

/** What read found on one gateway that the inputs cannot say by themselves. */
export interface GatewayObservation {
  gateway: string;
  findings: string[];
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
  perGateway: readonly { name: string; port: GatewayPort; actual: GatewayActual }[],
): { inputs: Inputs; observations: GatewayObservation[] } {
  const d = withDefaults(inputs);
  const observations = perGateway.map((g) => ({ gateway: g.name, findings: [] as string[] }));
  const vips: DeferredNatVip[] = [];
  let selectionFields = d.selectionFields!;
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const replicaOf = new Map(Object.entries(ids.bucketIds[key] ?? {}).map(([rk, id]) => [id, rk]));
    let present = true;
    // Replicas right on every gateway so far; strays: undeclared buckets by id -> MAC.
    let right: Set<string> | undefined;
    const strays = new Map<number, string>();
    perGateway.forEach((g, gi) => {
      const note = (finding: string) => observations[gi].findings.push(`VIP ${key}: ${finding}`);
      const want = desiredDataplane({ ...d, vips: [vip] }, ids, g.port)[0];
      const wantFlow = toFlowEntry(want.flow);
      const wantGroup = toGroupEntry(want.group);
      const flow = g.actual.ownedFlows.find((f) => flowKey(f) === flowKey(wantFlow));
      const group = g.actual.groups.find((x) => x.groupId === want.group.groupId);
      if (!flow || !isDeepStrictEqual([...flow.actions], [...wantFlow.actions])) {
        note("flow missing or changed");
        present = false;
      }
      if (!group) {
        note(`group ${want.group.groupId} missing`);
        present = false;
        return;
      }
      if (group.selectionMethod !== "hash" || !isDeepStrictEqual([...group.fields], [...wantGroup.fields])) {
        note(`selection is ${group.selectionMethod ?? "default"} on ${group.fields.join(",") || "no fields"}`);
        selectionFields = group.fields.map((f) => f.replace(/^(tcp|udp|sctp)_/, "tp_")) as typeof selectionFields;
      }
      const have = new Map(group.buckets.map((b) => [b.bucketId, b]));
      const ok = new Set<string>();
      for (const wb of wantGroup.buckets) {
        const rk = replicaOf.get(wb.bucketId)!;
        const hb = have.get(wb.bucketId);
        if (hb && isDeepStrictEqual(hb, wb)) ok.add(rk);
        else note(`bucket ${wb.bucketId} (${rk}) ${hb ? "changed" : "missing"}`);
      }
      right = right ? new Set([...right].filter((rk) => ok.has(rk))) : ok;
      for (const hb of group.buckets) {
        if (replicaOf.has(hb.bucketId)) continue;
        note(`bucket ${hb.bucketId} is not declared`);
        const mac = hb.actions.map((a) => /^set_field:([0-9a-f:]{17})->eth_dst$/.exec(a)?.[1]).find(Boolean);
        strays.set(hb.bucketId, mac ?? "00:00:00:00:00:00");
      }
    });
    if (!present) continue;
    const backends: DeferredNatBackend[] = [];
    for (const b of vip.backends) {
      const weight = Array.from({ length: b.weight ?? 1 }, (_, r) => replicaKey(b, r)).filter((rk) => right?.has(rk)).length;
      if (weight > 0) backends.push({ ...b, weight });
    }
    // An undeclared bucket reads as a backend nobody declared, so the diff shows it.
    for (const mac of strays.values()) backends.push({ address: "0.0.0.0", port: 1, mac, hypervisor: "undeclared", weight: 1 });
    vips.push({ ...vip, backends });
  }
  return { inputs: { ...d, selectionFields, vips }, observations };
}
