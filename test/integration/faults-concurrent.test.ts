import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { handle } from "../../provider/handlers";
import type { Modification } from "../../provider/openflow";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { OvsdbClient } from "../../provider/transport/ovsdb-client";
import type { Transaction } from "../../provider/ovsdb";
import { ProviderDriver } from "../support/deferred-nat";
import { FaultHost } from "../support/fault-host";
import { faultBackend, faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";

/**
 * Concurrent writers, on a fault host of this test's own. The interleaving
 * is made certain, not hoped for: the real provider runs, and a gate holds
 * its writes (the bundle, or the OVSDB transaction with its wait
 * preconditions) until the other writer has acted. A second change of the
 * same resource is refused at the resource's lock before it reads anything;
 * against an outside writer the bundle or the transaction fails whole. Either
 * way the message says why, and no write of the other writer is lost.
 */

type Props = Record<string, any>;
let host: FaultHost;
const lbInputs = (backends: number[], vips = 1) => {
  const lb = faultLoadBalancer("flt-cc", [host], [10, 75], vips, 0);
  for (const v of lb.vips) v.backends = backends.map(faultBackend);
  return lb;
};
const groupCount = () =>
  host
    .ofctl("dump-groups", host.bridge)
    .split("\n")
    .filter((l) => l.includes("group_id=")).length;

beforeAll(async () => {
  host = await new FaultHost(loadInventory(), "cc", 208).up();
});
afterAll(() => host?.down());

/** Holds every non-empty bundle until `count` are waiting, runs `between`, then lets them all go at once. */
function gateBundles(count: number, between: () => void | Promise<void> = () => undefined): () => void {
  const original = OpenFlowBridge.prototype.applyBundle;
  const waiting: (() => void)[] = [];
  OpenFlowBridge.prototype.applyBundle = async function (this: OpenFlowBridge, mods: readonly Modification[]) {
    if (mods.length > 0) {
      await new Promise<void>((go) => {
        waiting.push(go);
        if (waiting.length === count) {
          void Promise.resolve(between()).finally(() => waiting.splice(0).forEach((g) => g()));
        }
      });
    }
    return original.call(this, mods);
  };
  return () => (OpenFlowBridge.prototype.applyBundle = original);
}

describe("concurrent writers", () => {
  it("two updates of the same resource at once: the second is refused before it reads or writes, naming the host and why; the first commits; nothing is lost", async () => {
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.purge(lbInputs([1, 2], 2));
    await lb.create(lbInputs([1, 2]));
    const base = { id: lb.id, outputs: lb.outputs };
    // From the same recorded state: a adds a VIP; b adds a backend to the first VIP (a bucket insert, which no
    // bundle precondition would catch). b runs while a is between its read and its bundle.
    const a = Object.assign(new ProviderDriver("DeferredNatLoadBalancer"), base);
    const b = Object.assign(new ProviderDriver("DeferredNatLoadBalancer"), base);
    const bInputs = lbInputs([1, 2, 3]);
    let bOutcome: unknown;
    let bundlesOfB = 0;
    const ungate = gateBundles(1, async () => {
      const before = host.dataplane();
      bOutcome = await b.update(bInputs).catch((e: Error) => e);
      bundlesOfB = before === host.dataplane() ? 0 : 1;
    });
    try {
      await a.update(lbInputs([1, 2], 2));
    } finally {
      ungate();
    }
    expect(bOutcome).toBeInstanceOf(Error);
    expect((bOutcome as Error).message).toMatch(
      /root@172\.31\.208\.2:22: another operation on deferred-nat\/flt-cc is in progress \(it holds ovsdb lock ovslb_[0-9a-f]{24} there\): nothing was changed; run again once it has ended/,
    );
    expect(bundlesOfB).toBe(0);
    // Nothing of a is lost: the host is what a recorded.
    expect(groupCount()).toBe(2);
    expect((await a.read()).props.drift).toEqual([]);
    // The lock went with a's connection: b's next run, from the state the engine kept (a's, in one stack), converges.
    b.outputs = a.outputs;
    await b.update({ ...lbInputs([1, 2], 2), vips: [bInputs.vips[0], lbInputs([1, 2], 2).vips[1]] });
    expect((await b.read()).props.drift).toEqual([]);
    await b.delete();
    expect(groupCount()).toBe(0);
  });

  it("a load balancer whose two gateways are two bridges of one host takes that host's lock once, not against itself", async () => {
    host.vsctl(
      "--may-exist",
      "add-br",
      "br-flt2",
      "--",
      "set",
      "bridge",
      "br-flt2",
      "datapath_type=netdev",
      "--",
      "--may-exist",
      "add-port",
      "br-flt2",
      "fseg2",
      "--",
      "set",
      "interface",
      "fseg2",
      "type=internal",
    );
    const one = lbInputs([1, 2]);
    const two = { ...one, gateways: [...one.gateways, { ...one.gateways[0], name: "g2", bridge: "br-flt2", segmentPort: "fseg2", mac: "02:00:0f:00:00:02" }] };
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.purge(two);
    await lb.create(two);
    expect(Object.keys(lb.outputs.lastApply).sort()).toEqual(["g1", "g2"]);
    await lb.delete();
    host.vsctl("--if-exists", "del-br", "br-flt2");
  });

  it("an outside writer deletes an owned group between read and write: the bundle is refused whole (unknown group), and update restores it", async () => {
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.purge(lbInputs([1, 2], 2));
    await lb.create(lbInputs([1, 2], 2));
    const groupId = lb.outputs.groupIds["tcp:10.75.0.1:80"];
    let between = "";
    const ungate = gateBundles(1, () => {
      host.ofctl("del-groups", host.bridge, `group_id=${groupId}`);
      between = host.dataplane();
    });
    try {
      await expect(lb.update(lbInputs([1, 2, 3], 2))).rejects.toThrow(/changed no host; root@172\.31\.208\.2:22 \(g1\): not changed: .*OFPGMFC_UNKNOWN_GROUP/);
    } finally {
      ungate();
    }
    // The outside writer's change stands, and nothing of the refused bundle went in.
    expect(host.dataplane()).toEqual(between);
    const read = await lb.read();
    expect(read.props.drift).toEqual(expect.arrayContaining([expect.stringContaining("VIP tcp:10.75.0.1:80")]));
    await lb.update(lbInputs([1, 2, 3], 2));
    expect(lb.outputs.groupIds["tcp:10.75.0.1:80"]).toBe(groupId);
    expect((await lb.read()).props.drift).toEqual([]);
    await lb.delete();
  });

  it("an outside writer takes an owned OVSDB row between read and write: the wait precondition fails the transaction whole, naming the host and why", async () => {
    const inputs = (await handle("OvsBridge", "check", [{}, { host: host.ovsHost, name: "br-cc", externalIds: { team: "a" } }])) as { inputs: Props };
    const created = (await handle("OvsBridge", "create", [inputs.inputs])) as { id: string; outs: Props };
    const original = OvsdbClient.prototype.run;
    OvsdbClient.prototype.run = function (this: OvsdbClient, txn: Transaction<any>) {
      // The outside writer acts just before the transaction that carries the waits is sent.
      if (txn.operations.some((op) => op.op === "wait")) host.vsctl("remove", "bridge", "br-cc", "external_ids", '"ovslb:owner"');
      return original.call(this, txn);
    } as typeof original;
    try {
      await expect(handle("OvsBridge", "update", [created.id, created.outs, { ...inputs.inputs, externalIds: { team: "b" } }])).rejects.toThrow(
        /root@172\.31\.208\.2:22: Open_vSwitch: op \d+ \(wait on Bridge .*\): precondition failed/,
      );
    } finally {
      OvsdbClient.prototype.run = original;
    }
    // Neither write is lost to the other: the outside writer's removal stands, ours did not go in.
    const ids = host.vsctl("get", "bridge", "br-cc", "external_ids");
    expect(ids).not.toContain("ovslb:owner");
    expect(ids).toMatch(/team=a/);
    // The next update sees the row is no longer ours and refuses to take it over.
    await expect(handle("OvsBridge", "update", [created.id, created.outs, { ...inputs.inputs, externalIds: { team: "b" } }])).rejects.toThrow(
      /refusing to take it over/,
    );
    host.vsctl("del-br", "br-cc");
  });
});
