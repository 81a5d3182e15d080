import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handle } from "../../provider/handlers";
import { deferredNatLoadBalancerHandler } from "../../provider/resources/deferred-nat-load-balancer/handler";
import { withDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { KNOWN_ISSUES } from "../../provider/model/ovs-versions";
import type { DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { FaultHost } from "../support/fault-host";
import { loadInventory } from "../support/lab";
import { distroRoot } from "../lab/root";

/**
 * The version table (provider/model/ovs-versions.ts) against a real newer
 * Open vSwitch: Debian 13's, 3.5.0, in a host of its own chrooted into the
 * root tools/distro-root.sh builds. 3.5.0 predates both fixes the table
 * lists for the 3.5 branch (dp_hash buckets: 3.5.1; the group-modify race:
 * 3.5.2), so Debian 13's Open vSwitch is affected as 3.1.0 is: read reports
 * both issues there, dp_hash is refused there by name, and the dp_hash bug
 * itself shows on it (the refusal is right, not only the table).
 */

let inv: LabInventory;
let host: FaultHost;
let version: string;
/** Ubuntu 24.04 LTS's Open vSwitch with its updates: 3.3.9, after both 3.3-branch fixes. */
let lts: FaultHost;

beforeAll(async () => {
  inv = loadInventory();
  host = await new FaultHost(inv, "v35", 247, { root: distroRoot("trixie") }).up();
  version = host.ovsVersion();
  lts = await new FaultHost(inv, "v33", 244, { root: distroRoot("noble") }).up();
}, 60_000);

afterAll(() => {
  closeIdleSshConnections();
  host?.down();
  lts?.down();
});

/** ovs-vswitchd's own account of how it builds a dp_hash group's table (ofproto/ofproto-dpif.c, group_setup_dp_hash_table), after inserting a third bucket into a group of two. */
function dpHashTableAfterInsert(h: FaultHost, group: number): string[] {
  h.appctl("vlog/set", "ofproto_dpif:file:dbg");
  const log = join(h.rundir, "ovs-vswitchd.log");
  const bucket = (id: number) => `bucket=bucket_id:${id},weight:10,actions=output:${h.segmentPort}`;
  h.ofctl("add-group", h.bridge, `group_id=${group},type=select,selection_method=dp_hash,${bucket(1)},${bucket(2)}`);
  const mark = readFileSync(log, "utf8").length;
  h.ofctl("insert-buckets", h.bridge, `group_id=${group},command_bucket_id=last,${bucket(3)}`);
  // The group holds all three buckets.
  expect(h.ofctl("dump-groups", h.bridge)).toMatch(/bucket_id:1,.*bucket_id:2,.*bucket_id:3,/);
  return readFileSync(log, "utf8")
    .slice(mark)
    .split("\n")
    .filter((l) => /ofproto_dpif\|DBG\|/.test(l))
    .map((l) => l.replace(/^.*ofproto_dpif\|DBG\|/, ""));
}

const dpHashLb = (): DeferredNatLoadBalancerInputs => ({
  name: "ovsver35",
  gateways: [{ name: "gw35", host: host.ovsHost, bridge: host.bridge, segmentPort: host.segmentPort, mac: "02:00:1e:ff:00:35" }],
  hypervisors: [{ name: "hv1" }],
  selectionMethod: "dp_hash",
  vips: [{ address: "10.31.0.7", port: 80, protocol: "tcp", backends: [{ address: "10.31.1.1", port: 8080, mac: "02:00:1e:00:01:01", hypervisor: "hv1" }] }],
});

describe("the version table on Debian 13's Open vSwitch", () => {
  it("is 3.5.0, which the table holds affected by both known issues", () => {
    expect(version).toBe("3.5.0");
    expect(KNOWN_ISSUES.map((i) => [i.id, i.fixedIn.find((f) => f.startsWith("3.5."))])).toEqual([
      ["dp-hash-buckets", "3.5.1"],
      ["group-modify-race", "3.5.2"],
    ]);
  });

  it("read reports the version ovs-vswitchd 3.5.0 says and both known issues", async () => {
    const inputs = { host: host.ovsHost, name: "br-ver35" };
    const checked = (await handle("OvsBridge", "check", [{}, inputs])) as { inputs: Record<string, unknown>; failures: unknown[] };
    expect(checked.failures).toEqual([]);
    const created = (await handle("OvsBridge", "create", [checked.inputs])) as { id: string; outs: Record<string, unknown> };
    try {
      const read = (await handle("OvsBridge", "read", [created.id, created.outs])) as { props: Record<string, any> };
      expect(read.props.ovsVersions).toEqual({ [host.address]: { version: "3.5.0", knownIssues: ["dp-hash-buckets", "group-modify-race"] } });
    } finally {
      await handle("OvsBridge", "delete", [created.id, created.outs]);
    }
  });

  it("a dp_hash load balancer is refused there, naming 3.5.0 and the fixed releases, and the gateway is untouched", async () => {
    const before = host.dataplane();
    await expect(deferredNatLoadBalancerHandler.create(withDefaults(dpHashLb()))).rejects.toThrow(
      `deferred-nat/ovsver35: selectionMethod dp_hash refused: root@${host.address}:22 (gw35): Open vSwitch 3.5.0: inserting or removing buckets of a dp_hash select group corrupts the group's hash table (fixed in 3.2.6, 3.3.5, 3.4.3, 3.5.1, 3.6.0)`,
    );
    expect(host.dataplane()).toBe(before);
  });

  it("the dp_hash bug is there: a bucket inserted into a dp_hash group leaves the group hashing to that bucket alone", () => {
    const group = 4242;
    const lines = dpHashTableAfterInsert(host, group);
    // The group holds all three buckets, but its hash table was built for the inserted bucket alone (total weight 10: every hash value to bucket 3), and never
    // rebuilt: the fix (OVS 445594155, "ofproto-dpif: Fix dp_hash mapping after select group modification", 3.5.1) logs
    // "Modifying select group" and maps all the buckets again.
    expect(lines).toContain(`Constructing select group ${group}`);
    expect(lines).toContain("  Minimum weight: 10, total weight: 10");
    expect(lines.filter((l) => /^\s+Bucket \d+:/.test(l))).toEqual(["  Bucket 3: weight=10, target=16.00 hits=16"]);
    expect(lines.filter((l) => l.startsWith("Modifying select group"))).toEqual([]);
  });
});

describe("the version table on Ubuntu 24.04's Open vSwitch, which has both fixes", () => {
  it("is 3.3.9, past both 3.3-branch fixes the table lists (3.3.5, 3.3.6)", () => {
    expect(lts.ovsVersion()).toBe("3.3.9");
    expect(KNOWN_ISSUES.map((i) => [i.id, i.fixedIn.find((f) => f.startsWith("3.3."))])).toEqual([
      ["dp-hash-buckets", "3.3.5"],
      ["group-modify-race", "3.3.6"],
    ]);
  });

  it("read reports 3.3.9 with no known issue", async () => {
    const inputs = { host: lts.ovsHost, name: "br-ver33" };
    const checked = (await handle("OvsBridge", "check", [{}, inputs])) as { inputs: Record<string, unknown>; failures: unknown[] };
    expect(checked.failures).toEqual([]);
    const created = (await handle("OvsBridge", "create", [checked.inputs])) as { id: string; outs: Record<string, unknown> };
    try {
      const read = (await handle("OvsBridge", "read", [created.id, created.outs])) as { props: Record<string, any> };
      expect(read.props.ovsVersions).toEqual({ [lts.address]: { version: "3.3.9", knownIssues: [] } });
    } finally {
      await handle("OvsBridge", "delete", [created.id, created.outs]);
    }
  });

  it("the version gate that refuses dp_hash on 3.5.0 lets the same load balancer through on 3.3.9", async () => {
    const inputs = withDefaults({
      ...dpHashLb(),
      name: "ovsver33",
      gateways: [{ name: "gw33", host: lts.ovsHost, bridge: lts.bridge, segmentPort: lts.segmentPort, mac: "02:00:1e:ff:00:33" }],
    });
    // No refusal: the gate is by version. (check refuses dp_hash on every version for its remapping, and the planner renders hash groups only.)
    const created = await deferredNatLoadBalancerHandler.create(inputs);
    try {
      expect(lts.ofctl("dump-groups", lts.bridge)).toMatch(/group_id=\d+,type=select/);
    } finally {
      await deferredNatLoadBalancerHandler.delete(created.id, inputs, created.state);
    }
    expect(lts.ofctl("dump-groups", lts.bridge)).not.toMatch(/group_id/);
  });

  it("the fix is there: a bucket inserted into a dp_hash group rebuilds the group's table over all three buckets", () => {
    const group = 4243;
    const lines = dpHashTableAfterInsert(lts, group);
    // As on 3.5.0, a table is first built for the inserted bucket alone; the fix (OVS 445594155) then logs the
    // modification and maps every bucket again: total weight 30, all three buckets.
    const modified = lines.indexOf(`Modifying select group ${group}`);
    expect(modified).toBeGreaterThanOrEqual(0);
    const rebuilt = lines.slice(modified);
    expect(rebuilt).toContain("  Minimum weight: 10, total weight: 30");
    expect(rebuilt.filter((l) => /^\s+Bucket \d+:/.test(l)).map((l) => l.replace(/target=.*$/, "").trim())).toEqual([
      "Bucket 1: weight=10,",
      "Bucket 2: weight=10,",
      "Bucket 3: weight=10,",
    ]);
  });
});
