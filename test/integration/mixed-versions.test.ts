import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { loadInventory } from "../support/lab";
import { ProviderDriver } from "../support/deferred-nat";
import { caseInputs, gatewayPair, measureCase, SELECTION_CASES, traceChoices, tuplesFor, sameChoice, type GatewayPair } from "../support/mixed-versions";

/**
 * A fleet mid-upgrade: a gateway on Debian 12's Open vSwitch 3.1.0 and one on
 * Debian 13's 3.5.0 (hosts of their own, the newer chrooted into the root
 * tools/trixie-root.sh builds), given the same DeferredNatLoadBalancer. For
 * each way ovslb selects, every one of 2,000 tuples per VIP chooses the same
 * backend (and bucket, or slot and second-chance key) on both: the invariant
 * that lets ovslb accept the mix (bench/mixed-versions.ts records it).
 */

let inv: LabInventory;
let pair: GatewayPair;

beforeAll(async () => {
  inv = loadInventory();
  pair = await gatewayPair(inv, "mv", 245);
}, 60_000);

afterAll(() => {
  closeIdleSshConnections();
  pair?.older.down();
  pair?.newer.down();
});

describe("a 3.1 and a 3.5 gateway given the same load balancer", () => {
  it("run the versions they are said to", () => {
    expect(pair.older.ovsVersion()).toMatch(/^3\.1\./);
    expect(pair.newer.ovsVersion()).toMatch(/^3\.5\./);
  });

  it.each(SELECTION_CASES.map((c) => [c.key, c] as const))(
    "%s: every tuple chooses the same backend on both",
    async (_key, c) => {
      const { versions, vips } = await measureCase(pair, c, 2000);
      // As the provider read them when it applied.
      expect(versions.older).toMatch(/^3\.1\./);
      expect(versions.newer).toMatch(/^3\.5\./);
      expect(vips).toHaveLength(c.vips.length);
      for (const v of vips) {
        // Every tuple reached a backend on both, over more than one backend: the comparison is of real choices.
        expect(v.unchosen, v.vip).toBe(0);
        expect(v.backendsUsed, v.vip).toBeGreaterThan(1);
        expect({ vip: v.vip, same: v.same, firstDifferences: v.firstDifferences }).toEqual({ vip: v.vip, same: 2000, firstDifferences: [] });
      }
    },
    120_000,
  );
});

describe("the engine on a 3.5 gateway beside a 3.1 one", () => {
  // One select-group case and one secondChance case: every apply, read and repair goes through both gateways.
  const cases = SELECTION_CASES.filter((c) => c.key === "group-l3l4" || c.key === "multipath-l3l4");

  it.each(cases.map((c) => [c.key, c] as const))(
    "%s: create, read, a backend added, a repeat, a bucket or flow deleted by hand, delete: both gateways alike",
    async (_key, c) => {
      const lb = new ProviderDriver("DeferredNatLoadBalancer");
      const inputs = caseInputs(pair, c);
      const plusOne = {
        ...inputs,
        vips: inputs.vips.map((v, i) =>
          i === 0 ? { ...v, backends: [...v.backends, { ...v.backends[0], address: "10.30.0.99", mac: "02:00:1e:00:00:99", hypervisor: "hv2" }] } : v,
        ),
      };
      const ops = () => ["gw-older", "gw-newer"].map((g) => lb.outputs.lastApply[g].operations as Record<string, number>);
      try {
        await lb.create(inputs);
        const [olderOps, newerOps] = ops();
        expect(Object.keys(olderOps).length).toBeGreaterThan(0);
        expect(newerOps).toEqual(olderOps);
        // 3.5's dumps read back as 3.1's do: nothing drifted, each host's version as it is.
        const read = await lb.read();
        expect(read.props.drift).toEqual([]);
        expect(
          Object.values(read.props.ovsVersions as Record<string, { version: string }>)
            .map((v) => v.version)
            .sort(),
        ).toEqual(["3.1.0", "3.5.0"]);

        await lb.update(plusOne);
        const [olderAdd, newerAdd] = ops();
        expect(newerAdd).toEqual(olderAdd);
        if (!c.extra.secondChance) expect(olderAdd).toEqual({ "insert-buckets": 1 });
        // After the incremental change the two still choose alike, and the new backend takes tuples on both.
        const ts = tuplesFor(plusOne.vips[0], 2000);
        const [o, n] = await Promise.all([traceChoices(pair.older, ts), traceChoices(pair.newer, ts)]);
        expect(ts.filter((_, i) => !sameChoice(o[i], n[i]))).toEqual([]);
        expect(o.some((x) => x.mac === "02:00:1e:00:00:99")).toBe(true);

        await lb.update(plusOne);
        expect(ops()).toEqual([{}, {}]);

        // Drift made by hand on the 3.5 gateway is found there, and repaired there alone.
        if (c.extra.secondChance) {
          pair.newer.ofctl("del-flows", pair.newer.bridge, `cookie=${lb.outputs.cookie}/-1,table=70`);
        } else {
          const key = Object.keys(lb.outputs.groupIds)[0];
          const victim = lb.outputs.bucketIds[key]["10.30.0.99:8080#0"];
          pair.newer.ofctl("remove-buckets", pair.newer.bridge, `group_id=${lb.outputs.groupIds[key]},command_bucket_id=${victim}`);
        }
        const drifted = await lb.read();
        expect(drifted.props.drift.length).toBeGreaterThan(0);
        expect((drifted.props.drift as string[]).every((d) => d.startsWith("gw-newer: "))).toBe(true);
        lb.outputs = drifted.props;
        await lb.update(plusOne);
        const [olderFix, newerFix] = ops();
        expect(olderFix).toEqual({});
        expect(Object.keys(newerFix).length).toBeGreaterThan(0);
        expect((await lb.read()).props.drift).toEqual([]);
      } finally {
        if (lb.id) await lb.delete();
      }
      // Nothing of it is left on either.
      for (const h of [pair.older, pair.newer]) expect(h.ofctl("dump-groups", h.bridge)).not.toMatch(/group_id/);
    },
    120_000,
  );
});
