import { describe, expect, it } from "vitest";
import {
  DEFAULT_HOLD_SECONDS,
  NONE,
  deviationBound,
  planSlots,
  quotas,
  readSlots,
  recordSlots,
  shares,
  slotCount,
  type SlotBackend,
  type SlotTable,
} from "../../provider/resources/deferred-nat-load-balancer/slots";

/** The second-chance slot table: minimal moves, previous owners, proportional shares. */

const VIP = "tcp:10.0.0.205:80";
const be = (key: string, extra: Partial<SlotBackend> = {}): SlotBackend => ({ key, weight: 1, state: "active", ...extra });
const four = ["a", "b", "c", "d"].map((k) => be(k));
const ownerKey = (t: SlotTable, s: number) => (t.owner[s] === NONE ? undefined : t.backends[t.owner[s]]);
const previousKey = (t: SlotTable, s: number) => (t.previous[s] === NONE ? undefined : t.backends[t.previous[s]]);

describe("planSlots", () => {
  const base = planSlots(VIP, four, undefined).table;

  it("starts with equal shares, no previous owners, and 128 slots per unit of weight at least (1024 minimum)", () => {
    expect(base.size).toBe(1024);
    expect([...shares(base).values()]).toEqual([256, 256, 256, 256]);
    expect(base.previous.every((p) => p === NONE)).toBe(true);
    expect(slotCount([be("a", { weight: 64 }), ...Array.from({ length: 20 }, (_, i) => be(`x${i}`))])).toBe(16384);
  });

  it("adding a backend moves exactly its quota, each moved slot naming the owner it had as previous owner; no other slot changes", () => {
    const plan = planSlots(VIP, [...four, be("e")], base);
    const t = plan.table;
    expect(plan.moved).toBe(plan.minimum);
    expect(shares(t).get("e")).toBe(204);
    for (let s = 0; s < t.size; s++) {
      if (ownerKey(t, s) === "e") expect(previousKey(t, s)).toBe(ownerKey(base, s));
      else {
        expect(ownerKey(t, s)).toBe(ownerKey(base, s));
        expect(previousKey(t, s)).toBeUndefined();
      }
    }
    expect(plan.unsafe).toBe(0);
  });

  it("draining a backend gives all its slots to the others with it as previous owner; removing it afterwards moves nothing and forgets it", () => {
    const drained = planSlots(VIP, [...four.slice(0, 3), be("d", { state: "draining" })], base);
    const t = drained.table;
    expect(shares(t).get("d")).toBeUndefined();
    expect(drained.moved).toBe(256);
    for (let s = 0; s < t.size; s++) {
      if (ownerKey(base, s) === "d") expect(previousKey(t, s)).toBe("d");
      else expect([ownerKey(t, s), previousKey(t, s)]).toEqual([ownerKey(base, s), undefined]);
    }
    const removed = planSlots(VIP, four.slice(0, 3), t);
    expect(removed.moved).toBe(0);
    expect(removed.table.owner.map((_, s) => ownerKey(removed.table, s))).toEqual(t.owner.map((_, s) => ownerKey(t, s)));
    expect(removed.table.previous.every((p) => p === NONE)).toBe(true);
    expect(removed.table.backends).toEqual(["a", "b", "c"]);
  });

  it("removing a backend without draining moves only its slots, with no previous owner (its connections are gone with it)", () => {
    const plan = planSlots(VIP, four.slice(0, 3), base);
    expect(plan.moved).toBe(256);
    for (let s = 0; s < base.size; s++) {
      if (ownerKey(base, s) !== "d") expect(ownerKey(plan.table, s)).toBe(ownerKey(base, s));
      expect(previousKey(plan.table, s)).toBeUndefined();
    }
  });

  it("a backend added and removed again gives every slot back to its previous owner: the original table returns", () => {
    const added = planSlots(VIP, [...four, be("e")], base).table;
    const back = planSlots(VIP, four, added);
    expect(back.table.owner.map((_, s) => ownerKey(back.table, s))).toEqual(base.owner.map((_, s) => ownerKey(base, s)));
    expect(back.table.previous.every((p) => p === NONE)).toBe(true);
    expect(back.unsafe).toBe(0);
  });

  it("keeps shares proportional to weight within 1% of each share", () => {
    const t = planSlots(VIP, [be("a", { weight: 1 }), be("b", { weight: 2 }), be("c", { weight: 3 })], undefined).table;
    const s = shares(t);
    for (const [key, w] of [
      ["a", 1],
      ["b", 2],
      ["c", 3],
    ] as const)
      expect(Math.abs(s.get(key)! / t.size - w / 6) / (w / 6)).toBeLessThan(0.01);
    expect([...quotas(1024, [be("a"), be("b"), be("c")]).values()].reduce((x, y) => x + y)).toBe(1024);
  });

  it("grows by doubling with nothing moving (slot s + size keeps slot s), never shrinks, and round-trips through its recorded form", () => {
    const many = Array.from({ length: 9 }, (_, i) => be(`k${i}`));
    const small = planSlots(VIP, four, undefined, { size: 1024 }).table;
    const grown = planSlots(VIP, four, small, { size: 2048 });
    expect(grown.moved).toBe(0);
    for (let s = 0; s < 2048; s++) expect(ownerKey(grown.table, s)).toBe(ownerKey(small, s % 1024));
    expect(() => planSlots(VIP, four, grown.table, { size: 1024 })).toThrow(/never shrinks/);
    expect(planSlots(VIP, many, small).table.size).toBe(2048);
    expect(readSlots(recordSlots(grown.table))).toEqual(grown.table);
  });

  it("records owners and previous owners as base64 of big-endian 16-bit backend indexes, 0xffff for none", () => {
    const table: SlotTable = {
      size: 4,
      backends: ["a", "b"],
      owner: [0, 1, NONE, 0],
      previous: [NONE, NONE, 1, NONE],
      movedAt: [NONE, NONE, 1_700_000_000, NONE],
    };
    // owner 0000 0001 ffff 0000, previous ffff ffff 0001 ffff, movedAt ffff ffff 0000 ffff (index 0 of moveTimes)
    const recorded = { size: 4, backends: ["a", "b"], owner: "AAAAAf//AAA=", previous: "/////wAB//8=", moveTimes: [1_700_000_000], movedAt: "/////wAA//8=" };
    expect(recordSlots(table)).toEqual(recorded);
    expect(readSlots(recorded)).toEqual(table);
    expect(() => readSlots({ ...recorded, size: 5 })).toThrow(/a recorded slot table of 5 slots has 4/);
  });
});

/** History that expires by itself: scale out one change after another with history live. */

const T0 = 1_800_000_000;
const HOLD = DEFAULT_HOLD_SECONDS;
const keys = (...ks: string[]) => ks.map((k) => be(k));

/** Every backend still declared that may hold connections of a slot before the change still does after it: none loses its second chance. */
function expectNoneLost(before: SlotTable, after: SlotTable, declared: readonly SlotBackend[]) {
  const still = new Set(declared.map((b) => b.key));
  for (let s = 0; s < after.size; s++) {
    const was = before.size === after.size ? s : s % before.size;
    const holders = [ownerKey(before, was), previousKey(before, was)].filter((k) => k !== undefined && still.has(k));
    const now = [ownerKey(after, s), previousKey(after, s)];
    for (const h of holders) expect(now, `slot ${s}`).toContain(h);
  }
}

/** Every active backend's slots are within the bound of its quota, and the plan's deviation says exactly how far. */
function expectWithinBound(plan: ReturnType<typeof planSlots>, backends: readonly SlotBackend[]) {
  const q = quotas(plan.table.size, backends);
  const have = shares(plan.table);
  const off = new Map<string, number>();
  for (const [key, n] of q) {
    const d = (have.get(key) ?? 0) - n;
    expect(Math.abs(d), key).toBeLessThanOrEqual(deviationBound(n));
    if (d !== 0) off.set(key, d);
  }
  expect(plan.deviation).toEqual(off);
}

describe("planSlots with history that expires", () => {
  const start = planSlots(VIP, keys("a", "b", "c", "d"), undefined, { now: T0 }).table;
  const steps: [string, SlotBackend[]][] = [
    ["add e", keys("a", "b", "c", "d", "e")],
    ["add f", keys("a", "b", "c", "d", "e", "f")],
    ["add g", keys("a", "b", "c", "d", "e", "f", "g")],
    ["weight 3 on a", [be("a", { weight: 3 }), ...keys("b", "c", "d", "e", "f", "g")]],
    ["drain a", [be("a", { weight: 3, state: "draining" }), ...keys("b", "c", "d", "e", "f", "g")]],
    ["remove a", keys("b", "c", "d", "e", "f", "g")],
  ];

  it("add, add, add, weight change, drain, remove the drained, 10 s apart: none refused, no slot moved to a third owner while its previous owner is live, shares within the bound at every step", () => {
    let t = start;
    steps.forEach(([what, backends], i) => {
      const plan = planSlots(VIP, backends, t, { now: T0 + 10 * (i + 1) });
      expect([what, plan.unsafe, plan.released]).toEqual([what, 0, 0]);
      expectNoneLost(t, plan.table, backends);
      expectWithinBound(plan, backends);
      // A new backend's slots all come from slots with no live history: each names one previous owner, moved now.
      if (what.startsWith("add")) {
        const added = what.slice(4);
        for (let s = 0; s < plan.table.size; s++) {
          if (ownerKey(plan.table, s) !== added) continue;
          expect(previousKey(t, s)).toBeUndefined();
          expect(plan.table.movedAt[s]).toBe(T0 + 10 * (i + 1));
        }
      }
      expect(plan.history.slots).toBeGreaterThan(0);
      t = plan.table;
    });
    // holdSeconds after the last move the history is gone by itself, and nothing needs to move.
    const last = steps[steps.length - 1][1];
    const later = planSlots(VIP, last, t, { now: T0 + 50 + HOLD });
    expect([later.moved, later.history, later.deviation.size]).toEqual([0, { slots: 0 }, 0]);
    expect(later.table.previous.every((p) => p === NONE)).toBe(true);
  });

  // After add e and drain a, e holds slots whose previous owner a drains: they cannot move until that history expires.
  const added = planSlots(VIP, keys("a", "b", "c", "d", "e"), start, { now: T0 + 10 }).table;
  const drained = planSlots(VIP, [be("a", { state: "draining" }), ...keys("b", "c", "d", "e")], added, { now: T0 + 20 }).table;
  const heavier = (w: number) => [be("a", { state: "draining" }), ...["b", "c", "d"].map((k) => be(k, { weight: w })), be("e")];
  const stuck = (t: SlotTable) => t.owner.filter((o, s) => t.backends[o] === "e" && previousKey(t, s) === "a").length;

  it("a slot that cannot move while its history is live leaves the shares off by at most the bound, reported; holdSeconds later the next update converges them exactly", () => {
    expect(stuck(drained)).toBeGreaterThan(0);
    const plan = planSlots(VIP, heavier(3), drained, { now: T0 + 30 });
    expect(plan.unsafe).toBe(0);
    expect(plan.deviation.size).toBeGreaterThan(0);
    expectWithinBound(plan, heavier(3));
    expectNoneLost(drained, plan.table, heavier(3));
    // The history of the slots e holds from a (moved at T0 + 10 and T0 + 20) expires first; the plan's own moves at T0 + 30.
    expect(plan.history.expires).toBe(T0 + 30 + HOLD);
    const before = planSlots(VIP, heavier(3), plan.table, { now: T0 + 10 + HOLD - 1 });
    expect(before.deviation).toEqual(plan.deviation);
    const converged = planSlots(VIP, heavier(3), plan.table, { now: T0 + 20 + HOLD });
    expect(converged.deviation).toEqual(new Map());
    expect([converged.unsafe, converged.released]).toEqual([0, 0]);
  });

  it("a change that needs live history released beyond the bound is refused (unsafe); release lets go of just those slots' history and keeps the rest", () => {
    const refused = planSlots(VIP, heavier(4), drained, { now: T0 + 30 });
    expect(refused.unsafe).toBeGreaterThan(0);
    const plan = planSlots(VIP, heavier(4), drained, { now: T0 + 30, release: true });
    expect([plan.unsafe, plan.deviation]).toEqual([0, new Map()]);
    expect(plan.released).toBe(refused.unsafe);
    // Lost: exactly `released` slots, each one e held with a as previous owner; every other holder kept.
    let lost = 0;
    for (let s = 0; s < plan.table.size; s++) {
      const was = s % drained.size;
      const holders = [ownerKey(drained, was), previousKey(drained, was)].filter((k) => k !== undefined);
      const now = [ownerKey(plan.table, s), previousKey(plan.table, s)];
      if (holders.every((h) => now.includes(h))) continue;
      lost++;
      expect([ownerKey(drained, was), previousKey(drained, was)]).toEqual(["e", "a"]);
    }
    expect(lost).toBe(plan.released);
    expect(plan.history.slots).toBeGreaterThan(0);
  });

  it("a drain is never refused: a slot whose owner and previous owner both drain keeps the owner's connections and counts the previous owner's as released", () => {
    const plan = planSlots(VIP, [be("a", { state: "draining" }), ...keys("b", "c", "d"), be("e", { state: "draining" })], added, { now: T0 + 20 });
    expect(plan.unsafe).toBe(0);
    const both = added.owner.filter((o, s) => added.backends[o] === "e" && previousKey(added, s) === "a").length;
    expect(plan.released).toBe(both);
    expectWithinBound(plan, [be("a", { state: "draining" }), ...keys("b", "c", "d"), be("e", { state: "draining" })]);
  });

  it("old state without times loads: its history counts as moved at the first update that sees it, and expires holdSeconds after that", () => {
    const { moveTimes: _t, movedAt: _m, ...old } = recordSlots(added);
    const read = readSlots(old);
    expect(read.movedAt.every((x) => x === NONE)).toBe(true);
    expect(read.previous.filter((p) => p !== NONE)).toHaveLength(204);
    const T1 = T0 + 100_000;
    const next = planSlots(VIP, keys("a", "b", "c", "d", "e", "f"), read, { now: T1 });
    expect([next.unsafe, next.released]).toEqual([0, 0]);
    expectNoneLost(read, next.table, keys("a", "b", "c", "d", "e", "f"));
    expect(next.history.expires).toBe(T1 + HOLD);
    expect(planSlots(VIP, keys("a", "b", "c", "d", "e", "f"), next.table, { now: T1 + HOLD - 1 }).history.slots).toBe(next.history.slots);
    expect(planSlots(VIP, keys("a", "b", "c", "d", "e", "f"), next.table, { now: T1 + HOLD }).history).toEqual({ slots: 0 });
  });

  it("holdSeconds 0: history never outlives its change", () => {
    const plan = planSlots(VIP, keys("a", "b", "c", "d", "e", "f"), added, { now: T0 + 10, holdSeconds: 0 });
    expect(plan.moved).toBe(plan.minimum);
    expect(planSlots(VIP, keys("a", "b", "c", "d", "e", "f"), plan.table, { now: T0 + 10, holdSeconds: 0 }).history).toEqual({ slots: 0 });
  });
});
