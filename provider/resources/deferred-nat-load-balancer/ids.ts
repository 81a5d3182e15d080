import { derivedId, MAX_BUCKET_ID, MAX_GROUP_ID, ownerCookie } from "../../model/ids";
import type { DeferredNatBackend, DeferredNatVip } from "../../model/inputs.generated";
import type { DeferredNatDefaulted } from "./check";

/** DeferredNatLoadBalancer: its kind, priorities and limits, and the ids it gives (group per VIP, bucket per backend replica, sticky once recorded) (pure). */

type Inputs = DeferredNatDefaulted;

export const KIND = "DeferredNatLoadBalancer";

export const VIP_FLOW_PRIORITY = 100;

/** Above the bridge's NORMAL, below anything an operator pins. */
export const BFD_DROP_PRIORITY = 900;

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

export const lbId = (inputs: Pick<Inputs, "name">) => `deferred-nat/${inputs.name}`;

export const cookieOf = (inputs: Pick<Inputs, "name">) => ownerCookie(KIND, inputs.name);

export const vipKey = (v: Pick<DeferredNatVip, "protocol" | "address" | "port">) => `${v.protocol}:${v.address}:${v.port}`;

export const backendKey = (b: Pick<DeferredNatBackend, "address" | "port">) => `${b.address}:${b.port}`;

/** One bucket per unit of weight: "10.0.0.5:80#0", "10.0.0.5:80#1", ... */
export const replicaKey = (b: DeferredNatBackend, replica: number) => `${backendKey(b)}#${replica}`;

/** Ids given so far, recorded in the outputs and never re-derived (ids are sticky: a re-derived id would renumber a bucket and move its flows). */
export interface RecordedIds {
  /** vipKey -> group id */
  groupIds: Record<string, number>;
  /** vipKey -> replicaKey -> bucket id */
  bucketIds: Record<string, Record<string, number>>;
  /** secondChance: vipKey -> backendKey -> the group its slots point to. */
  ownerGroupIds?: Record<string, Record<string, number>>;
}

/** secondChance: an owner group's buckets, by id: the backend, and with healthCheck.bfd the VIP's select group when the backend's hypervisor is down. */
export const OWNER_BUCKET = 0;
export const FALLBACK_BUCKET = 1;

/** Whether the VIPs get a select group: always, but with secondChance only as its owner groups' fallback (healthCheck.bfd). */
const hasSelectGroups = (inputs: Inputs) => !inputs.secondChance || !!inputs.healthCheck?.bfd;

/**
 * Gives every VIP a group id and every backend replica a bucket id (with
 * secondChance: every active backend of a VIP an owner group id, and the VIP
 * a select group only as their fallback under healthCheck.bfd): recorded ids
 * are kept; new ones are derived from the VIP (groups) or the backend
 * (buckets, owner groups) and probed past ids in use. `foreignGroupIds` are
 * ids taken on any gateway by groups this load balancer does not own.
 */
export function assignIds(inputs: Inputs, recorded: RecordedIds, foreignGroupIds: ReadonlySet<number>): RecordedIds {
  const groupIds: Record<string, number> = {};
  const bucketIds: Record<string, Record<string, number>> = {};
  const ownerGroupIds: Record<string, Record<string, number>> = {};
  const usedGroups = new Set<number>(foreignGroupIds);
  const selects = hasSelectGroups(inputs);
  const owners = (vip: DeferredNatVip) => (inputs.secondChance ? vip.backends.filter((b) => b.state !== "draining").map(backendKey) : []);
  const keep = (id: number | undefined, what: string) => {
    if (id === undefined) return undefined;
    if (foreignGroupIds.has(id)) throw new Error(`group ${id} of ${what} is now held by a group this load balancer does not own; refusing to overwrite it`);
    usedGroups.add(id);
    return id;
  };
  // Recorded ids first, so a new VIP or backend never takes an id a kept one holds.
  for (const vip of inputs.vips) {
    const key = vipKey(vip);
    const id = selects ? keep(recorded.groupIds[key], `VIP ${key}`) : undefined;
    if (id !== undefined) groupIds[key] = id;
    if (inputs.secondChance) ownerGroupIds[key] = {};
    for (const b of owners(vip)) {
      const owned = keep(recorded.ownerGroupIds?.[key]?.[b], `VIP ${key} backend ${b}`);
      if (owned !== undefined) ownerGroupIds[key][b] = owned;
    }
  }
  const fresh = (parts: string[]) => {
    const id = derivedId(parts, MAX_GROUP_ID, (x) => usedGroups.has(x));
    usedGroups.add(id);
    return id;
  };
  for (const vip of inputs.vips) {
    const key = vipKey(vip);
    for (const b of owners(vip)) ownerGroupIds[key][b] ??= fresh([lbId(inputs), key, b, "owner"]);
    if (!selects) continue;
    groupIds[key] ??= fresh([lbId(inputs), key]);
    const kept = recorded.bucketIds[key] ?? {};
    const ids: Record<string, number> = {};
    const used = new Set<number>();
    const newReplicas: string[] = [];
    for (const b of vip.backends) {
      for (let r = 0; r < b.weight; r++) {
        const rk = replicaKey(b, r);
        const id = kept[rk];
        if (id === undefined) newReplicas.push(rk);
        else {
          ids[rk] = id;
          used.add(id);
        }
      }
    }
    // New replicas after every kept one, in order, so a new id never takes a kept one's.
    for (const rk of newReplicas) {
      if (ids[rk] !== undefined) continue;
      ids[rk] = derivedId([rk], MAX_BUCKET_ID, (id) => used.has(id));
      used.add(ids[rk]);
    }
    bucketIds[key] = ids;
  }
  return { groupIds, bucketIds, ...(inputs.secondChance ? { ownerGroupIds } : {}) };
}

/** The GRE key of the load balancer's tunnels: derived from its name, so each load balancer's tunnels to one hypervisor are distinct ports. */
export const greKeyOf = (inputs: Pick<Inputs, "name">) => derivedId([KIND, inputs.name, "gre-key"], 0xfffffffe);

/**
 * The GRE key of the load balancer's BFD liveness ports: distinct from its
 * data key, so on the hypervisor BFD lands on a fixed port of its own while
 * data keeps arriving on the flow-based GRE port. In 240.0.0.0/4 read as an
 * address, so it never equals a data key that carries a hypervisor's address.
 */
export function bfdKeyOf(inputs: Pick<Inputs, "name">): number {
  const key = 0xf0000000 + derivedId([KIND, inputs.name, "bfd-key"], 0x0ffffffe);
  return key === greKeyOf(inputs) ? key + 1 : key;
}

/** The recorded ids as the engine's ownership marks: group id -> the bucket ids given in it. */
export function recordedGroups(ids: RecordedIds): Map<number, Set<number>> {
  const groups = new Map(Object.entries(ids.groupIds).map(([key, id]) => [id, new Set(Object.values(ids.bucketIds[key] ?? {}))]));
  for (const byBackend of Object.values(ids.ownerGroupIds ?? {}))
    for (const id of Object.values(byBackend)) groups.set(id, new Set([OWNER_BUCKET, FALLBACK_BUCKET]));
  return groups;
}

/** Both id records in one: the ones kept and the ones just given. */
export const mergeIds = (a: RecordedIds, b: RecordedIds): RecordedIds => ({
  groupIds: { ...a.groupIds, ...b.groupIds },
  bucketIds: { ...a.bucketIds, ...b.bucketIds },
  ...(a.ownerGroupIds || b.ownerGroupIds ? { ownerGroupIds: { ...a.ownerGroupIds, ...b.ownerGroupIds } } : {}),
});
