import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import { type Match } from "../../provider/openflow";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory } from "../support/lab";

/**
 * Stable selection on the gateways, traced with ofproto/trace: which bucket
 * each of thousands of 5-tuples takes, before and after backend changes, on
 * both gateways.
 */

const VIP = "10.0.0.195";
const TUPLES = 2000;
let inv: LabInventory;
const gateways: Record<string, { ssh: SshSession; segOfport: number }> = {};

/** Distinct, reproducible client 5-tuples toward the VIP. */
function tuples(n: number, inPort: number, dst = VIP): Match[] {
  return Array.from({ length: n }, (_, i) => ({
    protocol: "tcp",
    in_port: inPort,
    nw_src: `10.9.${(i >> 8) & 255}.${i & 255 || 1}`,
    nw_dst: dst,
    tp_src: 1024 + ((i * 7919) % 60000),
    tp_dst: 80,
  }));
}

async function trace(gw: string, n = TUPLES, dst = VIP): Promise<number[]> {
  const g = gateways[gw];
  const chosen = await traceBuckets(g.ssh, "br-seg", tuples(n, g.segOfport, dst));
  return chosen.map((b) => {
    if (b === undefined) throw new Error(`${gw}: a packet met no live bucket`);
    return b;
  });
}

beforeAll(async () => {
  inv = loadInventory();
  for (const name of ["gw1", "gw2"]) {
    const ssh = await labSsh(inv, name);
    const ofport = (await ssh.run(["ovs-vsctl", "get", "interface", "seg0", "ofport"])).stdout.trim();
    gateways[name] = { ssh, segOfport: Number(ofport) };
  }
});

afterAll(() => {
  for (const g of Object.values(gateways)) g.ssh.close();
});

describe("deferred-NAT selection, traced over 2,000 5-tuples", () => {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  const backends = () => inv.backends.filter((b) => b.hypervisor !== "hv3");

  afterAll(async () => {
    await lb.delete();
  });

  it("adding a backend moves flows only to it; removing one moves only its flows; ids and gateways agree", async () => {
    const [b1, b2, b3, b4, b5] = backends();
    const four = [b1, b2, b3, b4].map((b) => labBackend(inv, b));
    const vip = (list: typeof four) => [{ address: VIP, port: 80, protocol: "tcp" as const, backends: list }];
    await lb.purge(labLoadBalancer(inv, "trace", vip(four)));
    await lb.create(labLoadBalancer(inv, "trace", vip(four)));
    const groupId = lb.outputs.groupIds[`tcp:${VIP}:80`];
    const bucketOf = (b: typeof b1) => lb.outputs.bucketIds[`tcp:${VIP}:80`][`${b.address}:${inv.backendPort}#0`];

    const before = await trace("gw1");
    expect(await trace("gw2")).toEqual(before);
    expect(new Set(before)).toEqual(new Set([b1, b2, b3, b4].map(bucketOf)));

    // Add a fifth backend.
    await lb.update(labLoadBalancer(inv, "trace", vip([...four, labBackend(inv, b5)])));
    expect(lb.outputs.groupIds[`tcp:${VIP}:80`]).toBe(groupId);
    const added = await trace("gw1");
    expect(await trace("gw2")).toEqual(added);
    const moved = added.map((b, i) => [before[i], b]).filter(([x, y]) => x !== y);
    expect(moved.length).toBeGreaterThan(TUPLES / 5 / 2);
    expect(moved.every(([, to]) => to === bucketOf(b5))).toBe(true);
    console.log(`add: ${moved.length} of ${TUPLES} flows moved, all to the new backend`);

    // Remove the second backend.
    const b2Bucket = bucketOf(b2);
    await lb.update(labLoadBalancer(inv, "trace", vip([four[0], four[2], four[3], labBackend(inv, b5)])));
    expect(lb.outputs.groupIds[`tcp:${VIP}:80`]).toBe(groupId);
    const removed = await trace("gw1");
    expect(await trace("gw2")).toEqual(removed);
    const changed = removed.map((b, i) => [added[i], b]).filter(([x, y]) => x !== y);
    expect(changed.length).toBe(added.filter((b) => b === b2Bucket).length);
    expect(changed.every(([from]) => from === b2Bucket)).toBe(true);
    console.log(`remove: ${changed.length} of ${TUPLES} flows moved, all from the removed backend`);

    for (const gw of ["gw1", "gw2"]) {
      const groups = (await gateways[gw].ssh.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"])).stdout;
      expect(groups).toContain(`group_id=${groupId},type=select,selection_method=hash`);
    }
  });

  it("shares of weighted backends are within 10% of their weights", async () => {
    const [b1, b2, b3] = backends();
    const weights = [1, 2, 3];
    const list = [b1, b2, b3].map((b, i) => labBackend(inv, b, weights[i]));
    await lb.update(labLoadBalancer(inv, "trace", [{ address: VIP, port: 80, protocol: "tcp", backends: list }]));
    const owner = new Map<number, number>();
    for (const [rk, id] of Object.entries(lb.outputs.bucketIds[`tcp:${VIP}:80`] as Record<string, number>)) {
      owner.set(
        id,
        [b1, b2, b3].findIndex((b) => rk.startsWith(`${b.address}:`)),
      );
    }
    const n = 3000;
    const chosen = await trace("gw1", n);
    const counts = [0, 0, 0];
    for (const b of chosen) counts[owner.get(b)!]++;
    const shares = counts.map((c) => c / n);
    console.log(`weights 1:2:3 -> shares ${shares.map((s) => s.toFixed(3)).join(" ")}`);
    weights.forEach((w, i) => {
      const expected = w / 6;
      expect(Math.abs(shares[i] - expected) / expected).toBeLessThan(0.1);
    });
  });
});
