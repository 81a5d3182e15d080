import { describe, expect, it } from "vitest";
import {
  NONE,
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

  it("counts moves that would take a second chance away (a slot moved again while its previous owner may still hold connections); release forgets them first", () => {
    const added = planSlots(VIP, [...four, be("e")], base).table;
    // f takes from e's surplus: every slot e has depends on a previous owner.
    const next = planSlots(VIP, [...four, be("e"), be("f")], added);
    expect(next.unsafe).toBeGreaterThan(0);
    expect(next.moved).toBe(next.minimum);
    expect(planSlots(VIP, [...four, be("e"), be("f")], added, { release: true }).unsafe).toBe(0);
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
    const table: SlotTable = { size: 4, backends: ["a", "b"], owner: [0, 1, NONE, 0], previous: [NONE, NONE, 1, NONE] };
    // owner 0000 0001 ffff 0000, previous ffff ffff 0001 ffff
    const recorded = { size: 4, backends: ["a", "b"], owner: "AAAAAf//AAA=", previous: "/////wAB//8=" };
    expect(recordSlots(table)).toEqual(recorded);
    expect(readSlots(recorded)).toEqual(table);
    expect(() => readSlots({ ...recorded, size: 5 })).toThrow(/a recorded slot table of 5 slots has 4/);
  });
});
