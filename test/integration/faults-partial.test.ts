import { spawn } from "node:child_process";
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { DeferredNatLoadBalancer } from "../../index";
import { FaultHost } from "../support/fault-host";
import { faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";
import { registeredInputs, startProviderPlugin, unwrapSecrets, type PluginCall, type PluginError } from "../support/provider-plugin";

/**
 * Several gateways, one failing, at the engine boundary: the program's
 * serialized provider driven through the real dynamic-provider plugin over
 * gRPC, on two fault hosts of this test's own. The error lists which
 * gateways were changed and which were not; when some were, it carries the
 * resource's id and outputs that claim only what was applied (Pulumi's
 * partial state, ErrorResourceInitFailed), and the next run converges.
 */

const TYPE = "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer";
type Props = Record<string, any>;
let hosts: FaultHost[];
let plugin: PluginCall;
let inputs: Props;

const groupsOn = (h: FaultHost) =>
  h
    .ofctl("dump-groups", h.bridge)
    .split("\n")
    .filter((l) => l.includes("group_id=")).length;
const vipFlowsOn = (h: FaultHost) =>
  h
    .ofctl("--no-stats", "dump-flows", h.bridge)
    .split("\n")
    .filter((l) => l.includes("nw_dst=")).length;

async function failure(p: Promise<unknown>): Promise<PluginError> {
  try {
    await p;
  } catch (e) {
    return e as PluginError;
  }
  throw new Error("the call succeeded");
}

beforeAll(async () => {
  const inv = loadInventory();
  hosts = [await new FaultHost(inv, "p1", 203).up(), await new FaultHost(inv, "p2", 204).up()];
  plugin = await startProviderPlugin();
  const args = faultLoadBalancer("flt-part", hosts, [10, 73], 2, 4);
  const program = unwrapSecrets(await registeredInputs(TYPE, () => new DeferredNatLoadBalancer("lb", args)));
  const checked = await plugin.check({}, program);
  expect(checked.failures).toEqual([]);
  inputs = checked.inputs;
});

afterAll(() => {
  plugin?.stop();
  for (const h of hosts ?? []) h.down();
});

describe("two gateways, one failing", () => {
  it("one unreachable (its sshd gone), then both: nothing is changed anywhere, and the error says so naming each", async () => {
    const before = hosts[0].dataplane();
    await hosts[1].kill("sshd");
    try {
      const err = await failure(plugin.create(inputs));
      expect(err.message).toMatch(/deferred-nat\/flt-part: no host was changed: root@172\.31\.204\.2:22: connect failed/);
      // Nothing to record: the engine keeps no resource.
      expect(err.initFailed).toBeUndefined();
      expect(hosts[0].dataplane()).toEqual(before);
      // Both gone: both named.
      await hosts[0].kill("sshd");
      const both = await failure(plugin.create(inputs));
      expect(both.message).toMatch(
        /no host was changed: 2 of 2 hosts unreachable: root@172\.31\.203\.2:22: connect failed: .*; root@172\.31\.204\.2:22: connect failed/,
      );
    } finally {
      for (const h of hosts) if (h.processes("sshd").length === 0) h.startSshd();
    }
  });

  it("one lost while its bundle is staged: the other's staged bundle is withdrawn, nothing is changed anywhere, and the next create converges", async () => {
    // Bundles of about 50 KB, g2's streamed at 1 Mbit/s: its staging lasts about half a second.
    const VIPS = 20;
    const program = unwrapSecrets(
      await registeredInputs(TYPE, () => new DeferredNatLoadBalancer("lb", faultLoadBalancer("flt-staged", hosts, [10, 74], VIPS, 20))),
    );
    const large = (await plugin.check({}, program)).inputs;
    const before = hosts.map((h) => h.dataplane());
    // A watcher in g2's namespace freezes its staging `head` (so g2 surely never says "staged") and cuts its SSH sessions.
    const script = [
      'net="--ns $1 --nslist net"',
      'until head=$(pgrep $net -x head | head -n 1) && [ -n "$head" ]; do :; done',
      'kill -STOP "$head"',
      'pkill $net -KILL -f "^sshd: root"',
      'kill -CONT "$head"',
    ].join("\n");
    hosts[1].shapeManagement(1);
    const watcher = spawn("sh", ["-c", script, "sh", String(hosts[1].pid("ovs-vswitchd"))], { stdio: "ignore" });
    let err: PluginError;
    try {
      err = await failure(plugin.create(large));
    } finally {
      watcher.kill();
      hosts[1].shapeManagement(undefined);
    }
    expect(err.message).toMatch(/deferred-nat\/flt-staged: changed no host; /);
    expect(err.message).toMatch(
      /root@172\.31\.203\.2:22 \(g1\): not changed: withdrawn before its commit, because root@172\.31\.204\.2:22 \(g2\) failed first: /,
    );
    expect(err.message).toMatch(
      /root@172\.31\.204\.2:22 \(g2\): not changed: .*bundle not applied \(failed while staged\): connection lost before the bundle was staged whole$/,
    );
    // Nothing was applied anywhere, so there is nothing to record.
    expect(err.initFailed).toBeUndefined();
    expect(hosts.map((h) => h.dataplane())).toEqual(before);
    const made = await plugin.create(large);
    expect(hosts.map((h) => [groupsOn(h), vipFlowsOn(h)])).toEqual([
      [VIPS, VIPS],
      [VIPS, VIPS],
    ]);
    await plugin.delete(made.id, made.properties);
    expect(hosts.map((h) => groupsOn(h) + vipFlowsOn(h))).toEqual([0, 0]);
  });

  it("one refusing its bundle: g1 changed, g2 not; the partial outputs claim only g1, refresh reads them, and update converges", async () => {
    // g2's table 0 full (its NORMAL flow is the one it may hold): OVS refuses the bundle whole at commit.
    hosts[1].vsctl(
      "--",
      "--id=@ft",
      "create",
      "Flow_Table",
      "flow_limit=1",
      "overflow_policy=refuse",
      "--",
      "set",
      "Bridge",
      hosts[1].bridge,
      "flow_tables:0=@ft",
    );
    let recorded: Props;
    try {
      const err = await failure(plugin.create(inputs));
      expect(err.message).toMatch(
        /deferred-nat\/flt-part: changed root@172\.31\.203\.2:22 \(g1\); root@172\.31\.204\.2:22 \(g2\): not changed: .*OFPFMFC_TABLE_FULL/,
      );
      expect(err.initFailed).toBeDefined();
      const { id, properties, reasons } = err.initFailed!;
      expect(id).toBe("deferred-nat/flt-part");
      expect(reasons).toEqual([expect.stringContaining("(g2): not changed")]);
      expect(Object.keys(properties.lastApply)).toEqual(["g1"]);
      expect(properties.lastApply.g1.operations).toEqual({ "add-group": 2, "add-flow": 2 });
      expect(properties.drift).toEqual([expect.stringMatching(/^root@172\.31\.204\.2:22 \(g2\): not changed: /)]);
      expect(properties.driftFindings).toEqual([expect.objectContaining({ host: "root@172.31.204.2:22 (g2)", kind: "not-applied" })]);
      expect(Object.keys(properties.groupIds)).toHaveLength(2);
      expect(typeof properties.__provider).toBe("string");
      expect(JSON.stringify(properties)).not.toContain("PRIVATE KEY");
      expect([groupsOn(hosts[0]), vipFlowsOn(hosts[0])]).toEqual([2, 2]);
      expect([groupsOn(hosts[1]), vipFlowsOn(hosts[1])]).toEqual([0, 0]);
      recorded = properties;

      // A refresh of that state runs (its __provider is there) and says what g2 lacks.
      const read = await plugin.read(id, recorded);
      expect(read.id).toBe(id);
      expect(read.properties.drift).toEqual(expect.arrayContaining([expect.stringMatching(/^g2: VIP tcp:10\.73\.0\.1:80: /)]));
    } finally {
      hosts[1].vsctl("clear", "Bridge", hosts[1].bridge, "flow_tables");
    }
    // The engine updates a resource with init errors on the next run, whatever the diff: it converges.
    const updated = await plugin.update("deferred-nat/flt-part", recorded, inputs);
    expect(updated.properties.lastApply.g1.messages).toBe(0);
    expect(updated.properties.lastApply.g2.operations).toEqual({ "add-group": 2, "add-flow": 2 });
    expect(updated.properties.drift).toEqual([]);
    expect([groupsOn(hosts[1]), vipFlowsOn(hosts[1])]).toEqual([2, 2]);
    expect(updated.properties.groupIds).toEqual(recorded.groupIds);
    await plugin.delete("deferred-nat/flt-part", updated.properties);
    expect(hosts.map((h) => groupsOn(h) + vipFlowsOn(h))).toEqual([0, 0]);
  });
});
