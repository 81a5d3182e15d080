import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseGroups } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { Harness, HarnessError, type Result } from "../harness/engine";
import { repoRoot, writeLabStackConfigs } from "../lab/stack-config";
import { LAB_STACK, type LabInventory } from "../lab/topology";
import { labSsh, loadInventory, lockLab, restartVswitchd } from "../support/lab";
import { connectAndClose, times } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * The drift workflow of docs/drift.md, played against the lab through the
 * harness (the real program runner and dynamic-provider plugin): apply,
 * break hosts by hand, `pulumi refresh` shows what differs,
 * `pulumi preview --refresh --expect-no-changes` fails the pipeline,
 * `pulumi up` converges, and a second preview shows no changes. On the
 * deferred-NAT example with GRE delivery and BFD, so a break can hit a
 * bucket (gateway group), a flow (hypervisor), an OVSDB row (a gateway's
 * tunnel port) and a whole restarted ovs-vswitchd.
 */

const VIP = "10.0.0.202";
let inv: LabInventory;
let scratch: string;
let stack: Harness;
let unlock: (() => void) | undefined;
const ssh: Record<string, SshSession> = {};
let portsBefore: string[] = [];

const run = (host: string, argv: string[]) => runChecked(ssh[host], argv);
async function ports(host: string): Promise<string[]> {
  const bridges = (await run(host, ["ovs-vsctl", "list-br"])).split("\n").filter(Boolean);
  return (await Promise.all(bridges.map(async (b) => (await run(host, ["ovs-vsctl", "list-ports", b])).split("\n").filter(Boolean)))).flat().sort();
}
function servedBy(): string[] {
  const names = connectAndClose(inv.client.namespace, times(VIP, 80, 40), { concurrency: 8 }).map((c) => (c.error ? `error:${c.error}` : c.backend));
  return [...new Set(names)].sort();
}
const lb = (r: Result) => r.steps.find((s) => s.type.endsWith(":DeferredNatLoadBalancer"))!;
const hvFlows = (r: Result, hv: string) => r.steps.find((s) => s.type.endsWith(":DsrHypervisorFlows") && s.urn.endsWith(`-${hv}`))!;
const outputsOf = (type: string, name?: string) =>
  stack.resources().find((r) => r.type.endsWith(`:${type}`) && (name === undefined || r.name === name))!.outputs;

/**
 * Health is an observation: an apply records the BFD sessions as they were
 * (a new or re-created port still negotiating), a refresh as they are. Waits
 * until a refresh records every session up, as each end sees it: the
 * gateways' view (the load balancer's health) and the hypervisors' (each
 * DsrHypervisorFlows' bfd), which can lag the other by a detection time.
 */
async function settled(): Promise<void> {
  await waitUntil(
    async () => {
      await stack.refresh();
      const gateways = (outputsOf("DeferredNatLoadBalancer").health as { bfd: Record<string, string> }[]).every(
        (h) => h.bfd.gw1 === "up" && h.bfd.gw2 === "up",
      );
      const hypervisors = stack
        .resources()
        .filter((r) => r.type.endsWith(":DsrHypervisorFlows"))
        .map((r) => Object.values((r.outputs.bfd ?? {}) as Record<string, string>));
      return gateways && hypervisors.length > 0 && hypervisors.every((states) => states.length > 0 && states.every((s) => s === "up"));
    },
    { timeoutMs: 30_000, intervalMs: 1000, what: "every BFD session up, seen from both ends" },
  );
}

/** A pipeline's drift check: refresh in memory, fail on any change. Returns the error when it failed. */
async function pipelineCheck(): Promise<HarnessError | undefined> {
  try {
    await stack.preview({ refresh: true, expectNoChanges: true });
    return undefined;
  } catch (e) {
    if (e instanceof HarnessError) return e;
    throw e;
  }
}

beforeAll(async () => {
  inv = loadInventory();
  writeLabStackConfigs(inv, repoRoot());
  scratch = mkdtempSync(join(tmpdir(), "ovslb-drift-"));
  unlock = await lockLab("hv1-gre");
  for (const h of ["gw1", "gw2", "hv1"]) ssh[h] = await labSsh(inv, h);
  portsBefore = await ports("gw1");
  stack = await Harness.open({ cwd: join(repoRoot(), "examples/deferred-nat-health"), stack: LAB_STACK, statePath: join(scratch, "state.json") });
});

afterAll(async () => {
  await stack?.destroy().catch(() => undefined);
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
  rmSync(scratch, { recursive: true, force: true });
});

describe("drift: apply, break by hand, refresh, see it, update, converge", () => {
  it("after up, once the BFD sessions are up (the first refresh records them), the pipeline's check passes: nothing drifted", async () => {
    await stack.up();
    // A hypervisor's buckets are chosen only once its BFD sessions are up (fail-closed).
    await settled();
    expect(servedBy()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]);
    expect((await pipelineCheck())?.message).toBeUndefined();
  }, 180_000);

  it("a removed bucket, a deleted flow and a deleted OVSDB row: refresh names each, the check fails, up repairs all three, the next check passes", async () => {
    // hv2-vm1's bucket, and a port toward hv1: a gateway cannot use a bucket behind a missing port, so read would not name it.
    const group = Object.values(outputsOf("DeferredNatLoadBalancer").groupIds as Record<string, number>)[0];
    const hv2vm1 = inv.backends.find((b) => b.name === "hv2-vm1")!;
    const bucketId = Object.values(outputsOf("DeferredNatLoadBalancer").bucketIds as Record<string, Record<string, number>>)[0][
      `${hv2vm1.address}:${inv.backendPort}#0`
    ];
    await run("gw1", ["ovs-ofctl", "-O", "OpenFlow15", "remove-buckets", "br-seg", `group_id=${group},command_bucket_id=${bucketId}`]);
    const cookie = outputsOf("DsrHypervisorFlows", "web-health-hv1").cookie as string;
    await run("hv1", ["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=${cookie}/-1,ip,nw_dst=${VIP}`]);
    const ours = (await ports("gw1")).filter((p) => !portsBefore.includes(p));
    const remotes = await Promise.all(
      ours.map(async (p) => (await run("gw1", ["ovs-vsctl", "get", "Interface", p, "options:remote_ip"])).trim().replace(/"/g, "")),
    );
    const port = ours.find((_, i) => remotes[i] === inv.hosts.hv1.underlay!.address)!;
    expect(port).toBeDefined();
    await run("gw1", ["ovs-vsctl", "del-port", port]);

    const refreshed = await stack.refresh();
    expect(refreshed.changes).toBe(true);
    const drift = outputsOf("DeferredNatLoadBalancer").drift as string[];
    expect(drift).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`^gw1: .*bucket ${bucketId} .*missing`)),
        expect.stringMatching(/^gw1: .* port to hypervisor hv1 missing/),
      ]),
    );
    expect(lb(refreshed).changedPaths!.length).toBeGreaterThan(0);
    expect(hvFlows(refreshed, "hv1").changedPaths!.length).toBeGreaterThan(0);

    const failed = await pipelineCheck();
    expect(failed?.message).toMatch(/changes where none were expected/);
    const wouldUpdate = failed!.result.steps
      .filter((s) => s.op === "update")
      .map((s) => s.urn.split("::").at(-1))
      .sort();
    expect(wouldUpdate).toEqual(["web-health", "web-health-hv1"]);

    const up = await stack.up();
    expect(lb(up).op).toBe("update");
    expect(hvFlows(up, "hv1").op).toBe("update");
    expect(hvFlows(up, "hv2").op).toBe("same");
    await settled();
    expect((await pipelineCheck())?.message).toBeUndefined();
    expect(await ports("gw1")).toContain(port);
    expect(servedBy()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]);
  }, 240_000);

  it("a restarted ovs-vswitchd (its flows and groups gone, its OVSDB rows kept): refresh shows it, up restores it, the next check passes", async () => {
    await restartVswitchd(inv.hosts.gw2);
    ssh.gw2.close();
    ssh.gw2 = await labSsh(inv, "gw2");
    const group = Object.values(outputsOf("DeferredNatLoadBalancer").groupIds as Record<string, number>)[0];
    expect(parseGroups(await run("gw2", ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"])).map((g) => g.groupId)).not.toContain(group);

    const refreshed = await stack.refresh();
    expect(lb(refreshed).changedPaths!.length).toBeGreaterThan(0);
    expect((outputsOf("DeferredNatLoadBalancer").drift as string[]).some((d) => d.startsWith("gw2:"))).toBe(true);
    expect(await pipelineCheck()).toBeDefined();

    const up = await stack.up();
    expect(lb(up).op).toBe("update");
    expect(parseGroups(await run("gw2", ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"])).map((g) => g.groupId)).toContain(group);
    await settled();
    expect((await pipelineCheck())?.message).toBeUndefined();
    expect(servedBy()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]);
  }, 240_000);
});
