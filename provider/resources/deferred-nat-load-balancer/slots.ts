import { createHash } from "node:crypto";
import type { RecordedSlotTable } from "../../model/outputs.generated";

/**
 * The second-chance slot table of one VIP, as pure data. Every gateway
 * hashes a packet into one of `size` slots (multipath); each slot names its
 * owner (the backend new connections go to) and, after a move, its previous
 * owner (whose hypervisor still holds the connections the slot had). A
 * change moves exactly the slots it must: those of backends that left or
 * started draining, and each active backend's surplus over its weighted
 * quota; nothing else.
 */

/** A slot's owner and previous owner: indexes into `backends`, or NONE. */
export const NONE = -1;

export interface SlotTable {
  size: number;
  /** Backend keys ("address:port") the slots refer to; only ever appended to, so indexes stay put. */
  backends: string[];
  owner: number[];
  previous: number[];
}

export interface SlotBackend {
  key: string;
  weight: number;
  state: "active" | "draining";
}

export interface SlotPlan {
  table: SlotTable;
  /** Slots whose owner changed. */
  moved: number;
  /** The fewest moves any table meeting the quotas needs. */
  minimum: number;
  /** Moved slots whose previous owner, still declared, lost its second chance. */
  unsafe: number;
}

export const MIN_SLOTS = 1024;
export const MAX_SLOTS = 65536;
/** Slots per unit of weight: with more than 100 per backend the shares are within 1% (Maglev's figure). */
export const SLOTS_PER_WEIGHT = 128;

/** The table size for these backends: the fixed one, else the smallest power of two with SLOTS_PER_WEIGHT per unit of weight. */
export function slotCount(backends: readonly SlotBackend[], fixed?: number): number {
  if (fixed !== undefined) return fixed;
  const weight = backends.reduce((n, b) => n + b.weight, 0);
  let size = MIN_SLOTS;
  while (size < weight * SLOTS_PER_WEIGHT && size < MAX_SLOTS) size *= 2;
  return size;
}

/** Each active backend's number of slots: proportional to weight, the remainders to the largest fractions (ties by key). */
export function quotas(size: number, backends: readonly SlotBackend[]): Map<string, number> {
  const active = backends.filter((b) => b.state === "active");
  const total = active.reduce((n, b) => n + b.weight, 0);
  const q = new Map<string, number>();
  if (total === 0) return q;
  const exact = active.map((b) => ({ key: b.key, share: (size * b.weight) / total }));
  let left = size;
  for (const e of exact) {
    q.set(e.key, Math.floor(e.share));
    left -= Math.floor(e.share);
  }
  const byFraction = [...exact].sort((a, b) => b.share - Math.floor(b.share) - (a.share - Math.floor(a.share)) || (a.key < b.key ? -1 : 1));
  for (let i = 0; i < left; i++) q.set(byFraction[i].key, q.get(byFraction[i].key)! + 1);
  return q;
}

/** A fixed pseudo-random order of the slots for one VIP, so the slots a change moves are spread over the table. */
function slotOrder(vip: string, size: number): number[] {
  const rank = (s: number) => createHash("sha256").update(`${vip}/${s}`).digest().readUInt32BE(0);
  return Array.from({ length: size }, (_, s) => s)
    .map((s) => [rank(s), s])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([, s]) => s);
}

/** Grows a table by doubling: slot s + k*old keeps slot s's owner and previous owner (hash mod 2S refines hash mod S), so nothing moves. */
function grow(t: SlotTable, size: number): SlotTable {
  if (size < t.size) throw new Error(`secondChance.slots: a slot table never shrinks (it has ${t.size} slots; ${size} would move connections)`);
  const owner = Array.from({ length: size }, (_, s) => t.owner[s % t.size]);
  const previous = Array.from({ length: size }, (_, s) => t.previous[s % t.size]);
  return { size, backends: [...t.backends], owner, previous };
}

/**
 * The table for `backends`, changed from `recorded` by the fewest moves. A
 * moved slot's previous owner becomes the owner it had, when that backend is
 * still declared; when it is gone, the slot keeps the previous owner it had
 * (its connections are still served there). `release` forgets every
 * previous owner first.
 */
export function planSlots(
  vip: string,
  backends: readonly SlotBackend[],
  recorded: SlotTable | undefined,
  opts: { size?: number; release?: boolean } = {},
): SlotPlan {
  const size = slotCount(backends, opts.size ?? (recorded && recorded.size >= slotCount(backends) ? recorded.size : undefined));
  const base = recorded ? grow(recorded, size) : { size, backends: [], owner: Array<number>(size).fill(NONE), previous: Array<number>(size).fill(NONE) };
  const t: SlotTable = { size, backends: [...base.backends], owner: [...base.owner], previous: [...base.previous] };
  const index = (key: string) => {
    let i = t.backends.indexOf(key);
    if (i < 0) i = t.backends.push(key) - 1;
    return i;
  };
  const declared = new Map(backends.map((b) => [index(b.key), b]));
  const active = new Set([...declared].filter(([, b]) => b.state === "active").map(([i]) => i));
  const quota = new Map([...quotas(size, backends)].map(([key, n]) => [index(key), n]));

  for (let s = 0; s < size; s++) {
    // A previous owner that is gone holds nothing any more; nor one that now owns the slot again.
    if (opts.release || !declared.has(t.previous[s]) || t.previous[s] === t.owner[s]) t.previous[s] = NONE;
  }

  const order = slotOrder(vip, size);
  const count = new Map<number, number>();
  for (const s of order) if (active.has(t.owner[s])) count.set(t.owner[s], (count.get(t.owner[s]) ?? 0) + 1);
  // Slots that must move: those of owners not active, then each active owner's surplus, preferring slots no second chance depends on.
  const moving: number[] = order.filter((s) => !active.has(t.owner[s]));
  for (const owner of active) {
    const surplus = (count.get(owner) ?? 0) - quota.get(owner)!;
    if (surplus <= 0) continue;
    const mine = order.filter((s) => t.owner[s] === owner);
    const free = mine.filter((s) => t.previous[s] === NONE);
    const rest = mine.filter((s) => t.previous[s] !== NONE);
    moving.push(...[...free, ...rest].slice(0, surplus));
  }
  const minimum = moving.length;

  const need = new Map([...active].map((i) => [i, Math.max(0, quota.get(i)! - (count.get(i) ?? 0))]));
  const assign = (s: number, to: number) => {
    const from = t.owner[s];
    // The one who had the connections: the owner if still declared, else whoever it had inherited them from.
    t.previous[s] = declared.has(from) ? from : t.previous[s];
    if (t.previous[s] === to) t.previous[s] = NONE;
    t.owner[s] = to;
    need.set(to, need.get(to)! - 1);
  };
  let unsafe = 0;
  const pending: number[] = [];
  // A slot whose previous owner needs slots goes back to it: its connections are served directly again.
  for (const s of moving) {
    const home = t.previous[s];
    if (home !== NONE && (need.get(home) ?? 0) > 0) assign(s, home);
    else pending.push(s);
  }
  const takers = [...active].sort((a, b) => a - b);
  if (takers.length === 0) {
    // No backend to take them (a VIP with no backends): the slots are empty, so the VIP's packets match no slot flow.
    for (const s of pending) t.owner[s] = NONE;
    return { table: compact(t), moved: minimum, minimum, unsafe };
  }
  let next = 0;
  for (const s of pending) {
    while (need.get(takers[next % takers.length])! <= 0) next++;
    const to = takers[next % takers.length];
    const from = t.owner[s];
    // Losing a second chance: the slot had connections elsewhere than its owner, and the owner is still declared (it becomes the previous one).
    if (declared.has(from) && t.previous[s] !== NONE && t.previous[s] !== to) unsafe++;
    assign(s, to);
    next++;
  }
  return { table: compact(t), moved: minimum, minimum, unsafe };
}

/** Drops backend keys no slot refers to any more, renumbering the rest in order. */
function compact(t: SlotTable): SlotTable {
  const used = new Set([...t.owner, ...t.previous].filter((i) => i !== NONE));
  const keep = t.backends.map((_, i) => i).filter((i) => used.has(i));
  const renumber = new Map(keep.map((old, i) => [old, i]));
  const map = (i: number) => (i === NONE ? NONE : renumber.get(i)!);
  return { size: t.size, backends: keep.map((i) => t.backends[i]), owner: t.owner.map(map), previous: t.previous.map(map) };
}

/** Slots per backend key, as owner. */
export function shares(t: SlotTable): Map<string, number> {
  const n = new Map<string, number>();
  for (const o of t.owner) if (o !== NONE) n.set(t.backends[o], (n.get(t.backends[o]) ?? 0) + 1);
  return n;
}

/** The table as recorded in state: owners and previous owners packed as base64 of 16-bit indexes (0xffff for none); schema/deferred-nat-load-balancer.json, recordedSlotTable. */
export type { RecordedSlotTable };

const pack = (xs: readonly number[]) => {
  const b = Buffer.alloc(xs.length * 2);
  xs.forEach((x, i) => b.writeUInt16BE(x === NONE ? 0xffff : x, i * 2));
  return b.toString("base64");
};
const unpack = (s: string, size: number) => {
  const b = Buffer.from(s, "base64");
  if (b.length !== size * 2) throw new Error(`a recorded slot table of ${size} slots has ${b.length / 2}`);
  return Array.from({ length: size }, (_, i) => {
    const x = b.readUInt16BE(i * 2);
    return x === 0xffff ? NONE : x;
  });
};

export const recordSlots = (t: SlotTable): RecordedSlotTable => ({ size: t.size, backends: t.backends, owner: pack(t.owner), previous: pack(t.previous) });
export const readSlots = (r: RecordedSlotTable): SlotTable => ({
  size: r.size,
  backends: [...r.backends],
  owner: unpack(r.owner, r.size),
  previous: unpack(r.previous, r.size),
});
