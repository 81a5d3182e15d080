import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { loadInventory } from "../support/lab";
import { gatewayPair, measureCase, SELECTION_CASES, type GatewayPair } from "../support/mixed-versions";

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
