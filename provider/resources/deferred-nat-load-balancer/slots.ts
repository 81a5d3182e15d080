import { createHash } from "node:crypto";
import type { RecordedSlotTable } from "../../model/outputs.generated";

/**
 * The second-chance slot table of one VIP, as pure data. Every gateway
 * hashes a packet into one of `size` slots (multipath); each slot names its
 * owner (the backend new connections go to) and, after a move, its previous
 * owner (whose hypervisor still holds the connections the slot had) with
 * the time of the move. That history is live for holdSeconds; while it is,
 * the slot moves only back to its previous owner (the hypervisors hand a
 * packet on once, so one previous owner is all a slot can name). A change
 * moves the slots it must (those of backends that left or started
 * draining, and each active backend's surplus over its weighted quota),
 * taking them from slots with no live history first.
 */

/** A slot's owner and previous owner: indexes into `backends`, or NONE. */
export const NONE = -1;

export interface SlotTable {
  size: number;
  /** Backend keys ("address:port") the slots refer to; only ever appended to, so indexes stay put. */
  backends: string[];
  owner: number[];
  previous: number[];
  /** When each slot's previous owner lost it (Unix seconds); NONE without one, or in state recorded before times. */
  movedAt: number[];
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
  /** Slots that must move to keep the shares within the bound but cannot while their history is live: the change is refused unless released. */
  unsafe: number;
  /** Slots whose live previous owner this change let go (release, or a drained slot whose previous owner drains too). */
  released: number;
  /** Each active backend's slots over (+) or under (-) its quota, where not 0. */
  deviation: Map<string, number>;
  /** Slots with live history, and when the last of it expires (Unix seconds). */
  history: { slots: number; expires?: number };
}

export const MIN_SLOTS = 1024;
export const MAX_SLOTS = 65536;
/** Slots per unit of weight: with more than 100 per backend the shares are within 1% (Maglev's figure). */
export const SLOTS_PER_WEIGHT = 128;
/** How long history stays live by default: ten times the common idle timeouts and deregistration delays (60-350 s). */
export const DEFAULT_HOLD_SECONDS = 3600;
/** While history is live a backend's slots may be off its quota by this fraction of the quota at most (one slot at least). */
export const DEVIATION_DIVISOR = 16;

/** The most a backend's slots may be off `quota` while history is live. */
export const deviationBound = (quota: number) => Math.max(1, Math.floor(quota / DEVIATION_DIVISOR));

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

/** Grows a table by doubling: slot s + k*old keeps slot s's owner and history (hash mod 2S refines hash mod S), so nothing moves. */
function grow(t: SlotTable, size: number): SlotTable {
  if (size < t.size) throw new Error(`secondChance.slots: a slot table never shrinks (it has ${t.size} slots; ${size} would move connections)`);
  const widen = (xs: readonly number[]) => Array.from({ length: size }, (_, s) => xs[s % t.size]);
  return { size, backends: [...t.backends], owner: widen(t.owner), previous: widen(t.previous), movedAt: widen(t.movedAt) };
}

export interface PlanOptions {
  size?: number;
  /** Let go of the live history the change needs to (never more). */
  release?: boolean;
  /** The time of this change (Unix seconds). */
  now?: number;
  holdSeconds?: number;
}

/**
 * The table for `backends`, changed from `recorded`. History older than
 * holdSeconds is dropped first (history without a time counts as moved
 * now). Then, in order: slots of owners no longer active go back to their
 * previous owner when it is active, else to the backends under quota; each
 * active backend over quota sheds slots with live history back to their
 * previous owner when it is under quota, then slots with no live history to
 * those under quota, then slots with live history back to a previous owner
 * that gives one of its slots with no history in exchange. What is left over
 * is the deviation: within the bound it stays until the history expires;
 * beyond it the change is refused (unsafe) unless it drains a backend (a
 * drain is never refused) or release lets go of just those slots' history.
 */
export function planSlots(vip: string, backends: readonly SlotBackend[], recorded: SlotTable | undefined, opts: PlanOptions = {}): SlotPlan {
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  const hold = opts.holdSeconds ?? DEFAULT_HOLD_SECONDS;
  const size = slotCount(backends, opts.size ?? (recorded && recorded.size >= slotCount(backends) ? recorded.size : undefined));
  const empty = () => Array<number>(size).fill(NONE);
  const base = recorded ? grow(recorded, size) : { size, backends: [], owner: empty(), previous: empty(), movedAt: empty() };
  const t: SlotTable = { size, backends: [...base.backends], owner: [...base.owner], previous: [...base.previous], movedAt: [...base.movedAt] };
  const index = (key: string) => {
    let i = t.backends.indexOf(key);
    if (i < 0) i = t.backends.push(key) - 1;
    return i;
  };
  const declared = new Map(backends.map((b) => [index(b.key), b]));
  const active = new Set([...declared].filter(([, b]) => b.state === "active").map(([i]) => i));
  const quota = new Map([...quotas(size, backends)].map(([key, n]) => [index(key), n]));

  for (let s = 0; s < size; s++) {
    // History without a time (state recorded before times) counts as moved now: it is kept a whole holdSeconds.
    if (t.previous[s] !== NONE && t.movedAt[s] === NONE) t.movedAt[s] = now;
    // A previous owner that is gone holds nothing any more; nor one that owns the slot again; nor one whose history expired.
    if (!declared.has(t.previous[s]) || t.previous[s] === t.owner[s] || t.movedAt[s] + hold <= now) {
      t.previous[s] = NONE;
      t.movedAt[s] = NONE;
    }
  }

  const order = slotOrder(vip, size);
  const before = [...t.owner];
  const live = (s: number) => t.previous[s] !== NONE;
  // need: slots an active backend is under its quota (negative: over).
  const need = new Map([...active].map((i) => [i, quota.get(i)!]));
  for (const s of order) if (active.has(t.owner[s])) need.set(t.owner[s], need.get(t.owner[s])! - 1);
  const leaving = order.filter((s) => !active.has(t.owner[s]));
  const minimum = leaving.length + [...need.values()].reduce((n, x) => n + Math.max(0, -x), 0);
  const drains = leaving.some((s) => declared.has(t.owner[s]));
  const takers = [...active].sort((a, b) => a - b);
  const neediest = () => takers.reduce((best, i) => (best === NONE || need.get(i)! > need.get(best)! ? i : best), NONE);
  let released = 0;

  const move = (s: number, to: number) => {
    const from = t.owner[s];
    // The one who had the connections: the owner if still declared; else the previous owner keeps its history (and its time).
    if (declared.has(from)) {
      if (live(s) && t.previous[s] !== to) released++;
      t.previous[s] = from;
      t.movedAt[s] = now;
    }
    if (t.previous[s] === to) {
      t.previous[s] = NONE;
      t.movedAt[s] = NONE;
    }
    if (active.has(from)) need.set(from, need.get(from)! + 1);
    t.owner[s] = to;
    need.set(to, need.get(to)! - 1);
  };

  if (takers.length === 0) {
    // No backend to take them (a VIP with no backends): the slots are empty, so the VIP's packets match no slot flow.
    for (const s of leaving) t.owner[s] = NONE;
    return finish(t, before, minimum, 0, 0, new Map(), hold);
  }
  // Slots of owners not active: back to an active previous owner, else to the neediest (a draining owner's live history is then let go: never refused).
  const rest: number[] = [];
  for (const s of leaving) {
    if (live(s) && active.has(t.previous[s])) move(s, t.previous[s]);
    else rest.push(s);
  }
  for (const s of rest) move(s, neediest());

  const over = (s: number) => active.has(t.owner[s]) && need.get(t.owner[s])! < 0;
  // Over quota: slots with live history back to a previous owner under quota (one move, the history stays one deep).
  for (const s of order) if (over(s) && live(s) && (need.get(t.previous[s]) ?? 0) > 0) move(s, t.previous[s]);
  // Then slots with no live history, to those under quota.
  for (const s of order) if (over(s) && !live(s) && need.get(neediest())! > 0) move(s, neediest());
  // Then slots with live history back to an active previous owner, which gives a slot with no history to one under quota.
  const free = new Map<number, number[]>();
  for (const s of [...order].reverse()) if (active.has(t.owner[s]) && !live(s)) (free.get(t.owner[s]) ?? free.set(t.owner[s], []).get(t.owner[s])!).push(s);
  const freeOf = (i: number) => {
    const list = free.get(i) ?? [];
    while (list.length > 0 && (t.owner[list[list.length - 1]] !== i || live(list[list.length - 1]))) list.pop();
    return list.length > 0 ? list.pop() : undefined;
  };
  for (const s of order) {
    if (!over(s) || !live(s) || !active.has(t.previous[s]) || need.get(neediest())! <= 0) continue;
    const home = t.previous[s];
    const f = freeOf(home);
    if (f === undefined) continue;
    move(s, home);
    move(f, neediest());
  }
  // Left over: slots that cannot move without letting go of live history.
  let unsafe = 0;
  if (takers.some((i) => Math.abs(need.get(i)!) > deviationBound(quota.get(i)!))) {
    // release: just the slots the change needs, to exact shares; the history of the rest is kept.
    if (opts.release) for (const s of order) if (over(s) && need.get(neediest())! > 0) move(s, neediest());
    if (!opts.release && !drains) unsafe = [...need.values()].reduce((n, x) => n + Math.max(0, -x), 0);
  }
  const deviation = new Map(takers.filter((i) => need.get(i) !== 0).map((i) => [i, -need.get(i)!]));
  return finish(t, before, minimum, unsafe, released, deviation, hold);
}

function finish(
  t: SlotTable,
  before: readonly number[],
  minimum: number,
  unsafe: number,
  released: number,
  deviation: ReadonlyMap<number, number>,
  hold: number,
): SlotPlan {
  const moved = t.owner.reduce((n, o, s) => n + (o !== before[s] ? 1 : 0), 0);
  let slots = 0;
  let last = NONE;
  t.movedAt.forEach((x, s) => {
    if (t.previous[s] === NONE) return;
    slots++;
    last = Math.max(last, x);
  });
  const history = slots > 0 ? { slots, expires: last + hold } : { slots };
  return { table: compact(t), moved, minimum, unsafe, released, deviation: new Map([...deviation].map(([i, d]) => [t.backends[i], d])), history };
}

/** Drops backend keys no slot refers to any more, renumbering the rest in order. */
function compact(t: SlotTable): SlotTable {
  const used = new Set([...t.owner, ...t.previous].filter((i) => i !== NONE));
  const keep = t.backends.map((_, i) => i).filter((i) => used.has(i));
  const renumber = new Map(keep.map((old, i) => [old, i]));
  const map = (i: number) => (i === NONE ? NONE : renumber.get(i)!);
  return { size: t.size, backends: keep.map((i) => t.backends[i]), owner: t.owner.map(map), previous: t.previous.map(map), movedAt: [...t.movedAt] };
}

/** Slots per backend key, as owner. */
export function shares(t: SlotTable): Map<string, number> {
  const n = new Map<string, number>();
  for (const o of t.owner) if (o !== NONE) n.set(t.backends[o], (n.get(t.backends[o]) ?? 0) + 1);
  return n;
}

/**
 * The table as recorded in state: owners and previous owners packed as
 * base64 of 16-bit indexes (0xffff for none), each slot's move time as an
 * index into the distinct times; schema/deferred-nat-load-balancer.json,
 * recordedSlotTable. State recorded before times has none: its history
 * reads as untimed (the next plan counts it as moved then).
 */
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

export function recordSlots(t: SlotTable): RecordedSlotTable {
  const moveTimes = [...new Set(t.movedAt.filter((x, s) => x !== NONE && t.previous[s] !== NONE))].sort((a, b) => a - b);
  const at = new Map(moveTimes.map((x, i) => [x, i]));
  const movedAt = t.movedAt.map((x, s) => (t.previous[s] === NONE ? NONE : (at.get(x) ?? NONE)));
  return { size: t.size, backends: t.backends, owner: pack(t.owner), previous: pack(t.previous), moveTimes, movedAt: pack(movedAt) };
}

export function readSlots(r: RecordedSlotTable): SlotTable {
  const owner = unpack(r.owner, r.size);
  const previous = unpack(r.previous, r.size);
  const times = r.moveTimes ?? [];
  const movedAt = r.movedAt === undefined ? Array<number>(r.size).fill(NONE) : unpack(r.movedAt, r.size).map((i) => (i === NONE ? NONE : (times[i] ?? NONE)));
  return { size: r.size, backends: [...r.backends], owner, previous, movedAt };
}
