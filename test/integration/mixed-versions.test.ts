import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { loadInventory } from "../support/lab";
import { ProviderDriver } from "../support/deferred-nat";
import { caseInputs, differingTuples, measureCase, mixedFleet, SELECTION_CASES, traceFleet, tuplesFor, type MixedFleet } from "../support/mixed-versions";

/**
 * A fleet mid-upgrade: gateways on Debian 12's Open vSwitch 3.1.0, Ubuntu
 * 24.04's 3.3 (the OVS LTS) and Debian 13's 3.5.0 (hosts of their own, the
 * others chrooted into the roots tools/distro-root.sh builds), given the same
 * DeferredNatLoadBalancer. For each way ovslb selects, every one of 2,000
 * tuples per VIP chooses the same backend (and bucket, or slot and
 * second-chance key) on all three: the invariant that lets ovslb accept the
 * mix (bench/mixed-versions.ts records it).
 */

let inv: LabInventory;
let fleet: MixedFleet;

beforeAll(async () => {
  inv = loadInventory();
  fleet = await mixedFleet(inv, "mv", 236);
}, 60_000);

afterAll(() => {
  closeIdleSshConnections();
  for (const g of fleet ?? []) g.host.down();
});

const branch = (version: string | undefined) => version?.split(".").slice(0, 2).join(".");

describe("a 3.1, a 3.3 and a 3.5 gateway given the same load balancer", () => {
  it("run the versions they are said to", () => {
    expect(fleet.map((g) => branch(g.host.ovsVersion()))).toEqual(["3.1", "3.3", "3.5"]);
  });

  it.each(SELECTION_CASES.map((c) => [c.key, c] as const))(
    "%s: every tuple chooses the same backend on all three",
    async (_key, c) => {
      const { versions, vips } = await measureCase(fleet, c, 2000);
      // As the provider read them when it applied.
      expect(fleet.map((g) => branch(versions[g.name]))).toEqual(fleet.map((g) => g.branch));
      expect(vips).toHaveLength(c.vips.length);
      for (const v of vips) {
        // Every tuple reached a backend on each, over more than one backend: the comparison is of real choices.
        expect(v.unchosen, v.vip).toBe(0);
        expect(v.backendsUsed, v.vip).toBeGreaterThan(1);
        expect({ vip: v.vip, same: v.same, firstDifferences: v.firstDifferences }).toEqual({ vip: v.vip, same: 2000, firstDifferences: [] });
      }
    },
    120_000,
  );
});

describe("the engine on a 3.3 and a 3.5 gateway beside a 3.1 one", () => {
  // One select-group case and one secondChance case: every apply, read and repair goes through every gateway.
  const cases = SELECTION_CASES.filter((c) => c.key === "group-l3l4" || c.key === "multipath-l3l4");

  it.each(cases.map((c) => [c.key, c] as const))(
    "%s: create, read, a backend added, a repeat, a bucket or flow deleted by hand, delete: every gateway alike",
    async (_key, c) => {
      const lb = new ProviderDriver("DeferredNatLoadBalancer");
      const inputs = caseInputs(fleet, c);
      const newest = fleet[fleet.length - 1];
      const plusOne = {
        ...inputs,
        vips: inputs.vips.map((v, i) =>
          i === 0 ? { ...v, backends: [...v.backends, { ...v.backends[0], address: "10.30.0.99", mac: "02:00:1e:00:00:99", hypervisor: "hv2" }] } : v,
        ),
      };
      const ops = () => fleet.map((g) => lb.outputs.lastApply[g.name].operations as Record<string, number>);
      try {
        await lb.create(inputs);
        const created = ops();
        expect(Object.keys(created[0]).length).toBeGreaterThan(0);
        for (const o of created) expect(o).toEqual(created[0]);
        // 3.3's and 3.5's dumps read back as 3.1's do: nothing drifted, each host's version as it is.
        const read = await lb.read();
        expect(read.props.drift).toEqual([]);
        const seen = read.props.ovsVersions as Record<string, { version: string }>;
        expect(fleet.map((g) => branch(seen[g.host.address]?.version))).toEqual(fleet.map((g) => g.branch));

        await lb.update(plusOne);
        const added = ops();
        for (const o of added) expect(o).toEqual(added[0]);
        if (!c.extra.secondChance) expect(added[0]).toEqual({ "insert-buckets": 1 });
        // After the incremental change all still choose alike, and the new backend takes tuples on each.
        const ts = tuplesFor(plusOne.vips[0], 2000);
        const choices = await traceFleet(fleet, ts);
        expect(differingTuples(choices)).toEqual([]);
        expect(choices[0].some((x) => x.mac === "02:00:1e:00:00:99")).toBe(true);

        await lb.update(plusOne);
        expect(ops()).toEqual(fleet.map(() => ({})));

        // Drift made by hand on the newest gateway is found there, and repaired there alone.
        if (c.extra.secondChance) {
          newest.host.ofctl("del-flows", newest.host.bridge, `cookie=${lb.outputs.cookie}/-1,table=70`);
        } else {
          const key = Object.keys(lb.outputs.groupIds)[0];
          const victim = lb.outputs.bucketIds[key]["10.30.0.99:8080#0"];
          newest.host.ofctl("remove-buckets", newest.host.bridge, `group_id=${lb.outputs.groupIds[key]},command_bucket_id=${victim}`);
        }
        const drifted = await lb.read();
        expect(drifted.props.drift.length).toBeGreaterThan(0);
        expect((drifted.props.drift as string[]).every((d) => d.startsWith(`${newest.name}: `))).toBe(true);
        lb.outputs = drifted.props;
        await lb.update(plusOne);
        const repaired = ops();
        expect(repaired.slice(0, -1)).toEqual(fleet.slice(0, -1).map(() => ({})));
        expect(Object.keys(repaired[repaired.length - 1]).length).toBeGreaterThan(0);
        expect((await lb.read()).props.drift).toEqual([]);
      } finally {
        if (lb.id) await lb.delete();
      }
      // Nothing of it is left on any.
      for (const { host } of fleet) expect(host.ofctl("dump-groups", host.bridge)).not.toMatch(/group_id/);
    },
    120_000,
  );
});
