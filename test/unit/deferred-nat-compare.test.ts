import { describe, expect, it } from "vitest";
import type { DeferredNatBackend } from "../../provider/model/inputs.generated";
import type { DeferredNatDefaulted as Inputs } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { driftOutputs } from "../../provider/model/drift";
import { assignIds, mergeIds, vipKey, withDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import {
  COMPARED_BACKEND_FIELDS,
  COMPARED_VIP_FIELDS,
  idsOf,
  recordPorts,
  sameVip,
  scopedIds,
  updateScope,
  type RecordedForScope,
} from "../../provider/resources/deferred-nat-load-balancer/scope";

/**
 * What an update compares of the recorded and desired VIPs, written out so
 * that 100,000 backends compare without copies: every field the schema has,
 * backends in any order, VIPs paired by position while they agree and by key
 * after; and the ids a scoped update records, the untouched VIPs' as they were.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const backend = (v: number, i: number): DeferredNatBackend => ({
  address: `10.64.${v}.${i + 1}`,
  port: 8080,
  mac: `02:01:00:${v.toString(16).padStart(2, "0")}:00:${(i + 1).toString(16).padStart(2, "0")}`,
  hypervisor: "hv1",
});
const vip = (v: number, n = 3) => ({
  address: `10.0.0.${v}`,
  port: 80,
  protocol: "tcp" as const,
  backends: Array.from({ length: n }, (_, i) => backend(v, i)),
});

function lb(vips: ReturnType<typeof vip>[]): Inputs {
  return withDefaults({
    name: "cmp",
    gateways: [
      {
        name: "gw1",
        host: { connection: { host: "172.30.0.11", user: "root", hostKey: KEY, privateKeyPath: "/k" } },
        bridge: "br-seg",
        segmentPort: "seg0",
        mac: "02:00:0a:00:00:0b",
      },
    ],
    hypervisors: [{ name: "hv1" }],
    vips,
  });
}

const port = { segmentOfport: 1, mac: "02:00:0a:00:00:0b" };
const old = lb([1, 2, 3, 4, 5].map((v) => vip(v)));
const recorded = assignIds(old, { groupIds: {}, bucketIds: {} }, new Set());
const state: RecordedForScope = { ...recorded, drift: [], gatewayPorts: { gw1: recordPorts(port) } };
const keyOf = (v: number) => vipKey(vip(v));
/** The same inputs as fresh objects, as the engine hands them over. */
const copy = (i: Inputs): Inputs => JSON.parse(JSON.stringify(i));

describe("sameVip", () => {
  it("compares every VIP property the schema has", async () => {
    const schema = (await import("../../schema/deferred-nat-load-balancer.json")).default;
    expect(Object.keys(schema.properties.vips.items.properties).sort()).toEqual([...COMPARED_VIP_FIELDS, "backends"].sort());
    expect(Object.keys(schema.properties.vips.items.properties.backends.items.properties).sort()).toEqual([...COMPARED_BACKEND_FIELDS].sort());
  });

  it("equal VIPs, as fresh copies and with the backends in another order", () => {
    const a = old.vips[0];
    expect(sameVip(a, copy(old).vips[0])).toBe(true);
    expect(sameVip(a, { ...a, backends: [...a.backends].reverse() })).toBe(true);
  });

  it("any field of the VIP or of one backend differing, or a backend more or fewer, is a change", () => {
    const a = old.vips[0];
    for (const change of [{ address: "10.0.0.99" }, { port: 81 }, { protocol: "udp" as const }]) expect(sameVip(a, { ...a, ...change })).toBe(false);
    const changes: Partial<DeferredNatBackend>[] = [
      { address: "10.64.9.9" },
      { port: 8081 },
      { mac: "02:ff:00:00:00:01" },
      { hypervisor: "hv2" },
      { weight: 2 },
      { logicalPort: "lp1" },
      { state: "draining" },
    ];
    for (const change of changes) {
      // At the end of the list (the in-order pass) and at the start of a reordered one (the pass by key).
      expect(sameVip(a, { ...a, backends: [...a.backends.slice(0, 2), { ...a.backends[2], ...change }] })).toBe(false);
      expect(sameVip(a, { ...a, backends: [{ ...a.backends[2], ...change }, a.backends[1], a.backends[0]] })).toBe(false);
    }
    expect(sameVip(a, { ...a, backends: a.backends.slice(1) })).toBe(false);
    expect(sameVip(a, { ...a, backends: [a.backends[0], a.backends[0], a.backends[2]] })).toBe(false);
  });
});

describe("updateScope pairs the VIPs by position while they agree, by key after", () => {
  const scope = (vips: ReturnType<typeof vip>[], s = state) => updateScope(old, lb(vips), s);

  it("the same VIPs in another order are no change (a request to converge: everything is read)", () => {
    expect(scope([5, 4, 3, 2, 1].map((v) => vip(v))).kind).toBe("all");
    expect(updateScope(old, copy(old), state).kind).toBe("all");
  });

  it("one VIP changed, in place or moved", () => {
    const changed = { ...vip(3), backends: [...vip(3).backends, backend(3, 9)] };
    expect(scope([vip(1), vip(2), changed, vip(4), vip(5)])).toMatchObject({ kind: "vips", touched: [keyOf(3)], removed: [] });
    expect(scope([vip(2), vip(1), vip(4), vip(5), changed])).toMatchObject({ kind: "vips", touched: [keyOf(3)], removed: [] });
  });

  it("a VIP added in the middle, one removed, one replaced at its position", () => {
    expect(scope([vip(1), vip(9), vip(2), vip(3), vip(4), vip(5)])).toMatchObject({ kind: "vips", touched: [keyOf(9)], removed: [] });
    expect(scope([vip(1), vip(2), vip(4), vip(5)])).toMatchObject({ kind: "vips", touched: [], removed: [keyOf(3)] });
    expect(scope([vip(1), vip(2), vip(9), vip(4), vip(5)])).toMatchObject({ kind: "vips", touched: [keyOf(9)], removed: [keyOf(3)] });
    expect(scope([vip(1), vip(2), vip(3), vip(4)])).toMatchObject({ kind: "vips", touched: [], removed: [keyOf(5)] });
  });

  it("hands over the touched VIPs themselves and every desired VIP's key, paired or not", () => {
    const changed = { ...vip(3), backends: [...vip(3).backends, backend(3, 9)] };
    for (const vips of [
      [vip(1), vip(2), changed, vip(4), vip(5)],
      [vip(2), vip(1), vip(9), vip(5), changed],
    ]) {
      const news = lb(vips);
      const s = updateScope(old, news, state);
      if (s.kind !== "vips") throw new Error(s.reason);
      expect(s.touchedVips).toHaveLength(s.touched.length);
      s.touched.forEach((key, i) => expect(s.touchedVips[i]).toBe(news.vips.find((v) => vipKey(v) === key)));
      expect(s.desiredKeys).toEqual(news.vips.map(vipKey));
    }
  });

  it("a VIP paired by position is touched when it drifted or has no recorded ids", () => {
    const drifted = { ...state, ...driftOutputs([{ host: "gw1", kind: "bucket-missing", object: "bucket 7", vip: keyOf(2) }]) };
    expect(
      scope(
        [1, 2, 3, 4, 5].map((v) => vip(v)),
        drifted,
      ),
    ).toMatchObject({ kind: "vips", touched: [keyOf(2)], removed: [] });
    const { [keyOf(4)]: _, ...bucketIds } = recorded.bucketIds;
    expect(
      scope(
        [1, 2, 3, 4, 5].map((v) => vip(v)),
        { ...state, bucketIds },
      ),
    ).toMatchObject({ kind: "vips", touched: [keyOf(4)], removed: [] });
  });
});

describe("scopedIds", () => {
  it("the desired VIPs' ids: the untouched ones' as recorded (the very objects), the touched ones' as given, the removed ones' gone", () => {
    const news = lb([vip(1), vip(2), { ...vip(3), backends: [...vip(3).backends, backend(3, 9)] }, vip(4), vip(9)]);
    const s = updateScope(old, news, state);
    if (s.kind !== "vips") throw new Error(s.reason);
    expect(s).toMatchObject({ kind: "vips", touched: [keyOf(3), keyOf(9)], removed: [keyOf(5)] });
    const touched = new Set(s.touched);
    const given = assignIds({ ...news, vips: news.vips.filter((v) => touched.has(vipKey(v))) }, idsOf(recorded, [...s.touched, ...s.removed]), new Set());
    const ids = scopedIds(recorded, news, s, given);
    // What it replaces: the untouched VIPs' recorded ids merged with the given ones.
    const untouched = news.vips.map(vipKey).filter((k) => !touched.has(k));
    expect(ids).toEqual(mergeIds(idsOf(recorded, untouched), given));
    expect(Object.keys(ids.groupIds).sort()).toEqual(news.vips.map(vipKey).sort());
    expect(ids.bucketIds[keyOf(1)]).toBe(recorded.bucketIds[keyOf(1)]);
    expect(ids.bucketIds[keyOf(3)]).toBe(given.bucketIds[keyOf(3)]);
    expect(Object.keys(ids.bucketIds[keyOf(3)])).toHaveLength(4);
    expect(ids.groupIds[keyOf(5)]).toBeUndefined();
  });
});
