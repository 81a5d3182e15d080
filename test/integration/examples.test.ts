import { mkdtempSync, rmSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseGroups } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import { Harness, type Result } from "../harness/engine";
import { encapsulateVip, removeVip } from "../lab/l3dsr";
import { repoRoot, writeLabStackConfigs } from "../lab/stack-config";
import { LAB_STACK, type LabInventory } from "../lab/topology";
import { amphoraVip, inNamespace, labSsh, loadInventory, lockLab } from "../support/lab";
import { connectAndClose, times } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * Every example, run as `pulumi up -s lab` runs it (the real program through
 * the SDK's program runner and the real dynamic-provider plugin, test/harness),
 * with the stack config `npm run lab -- up` writes (Pulumi.lab.yaml: hosts in
 * ovslb:hosts, the login in ovslb:ssh), and the traffic it promises checked
 * from the lab's client. Then a second preview shows no changes, and destroy
 * leaves nothing. What the network provides around ovslb (the router's ECMP
 * route, the amphorae's VIP, the external L3DSR balancer) the test sets up.
 */

const root = repoRoot();
let inv: LabInventory;
let scratch: string;

const open = (dir: string) => Harness.open({ cwd: join(root, dir), stack: LAB_STACK, statePath: join(scratch, `${dir.replace(/\W/g, "_")}.json`) });
const nameOf = (address: string) => inv.backends.find((b) => b.address === address)!.name;
/** Backend name -> connections it answered, from `count` connections to vip:port. */
function answered(vip: string, port: number, count: number): Record<string, number> {
  const seen: Record<string, number> = {};
  for (const c of connectAndClose(inv.client.namespace, times(vip, port, count), { concurrency: 8 })) {
    const who = c.error ? `error:${c.error}` : c.backend;
    seen[who] = (seen[who] ?? 0) + 1;
  }
  return seen;
}
/** A resource's outputs as the stack's state holds them (what `pulumi stack output` reads for the outputs that pass them through). */
const outputsOf = (stack: Harness, type: string) => stack.resources().find((r) => r.type.endsWith(`:${type}`))!.outputs;
const opsOf = (r: Result) =>
  r.steps
    .filter((s) => s.custom)
    .map((s) => `${s.op} ${s.type.split(":").at(-1)}`)
    .sort();

beforeAll(() => {
  inv = loadInventory();
  writeLabStackConfigs(inv, root);
  scratch = mkdtempSync(join(tmpdir(), "ovslb-examples-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the quick start (root Pulumi.yaml): a deferred-NAT service", () => {
  let stack: Harness;
  afterAll(async () => void (await stack?.destroy().catch(() => undefined)));

  it("up creates the gateways' groups and the hypervisors' flows, and the VIP answers from all three backends", async () => {
    stack = await open(".");
    const up = await stack.up();
    expect(opsOf(up)).toEqual(["create DeferredNatLoadBalancer", "create DsrHypervisorFlows", "create DsrHypervisorFlows"]);
    const seen = answered("10.0.0.200", 80, 30);
    expect(Object.keys(seen).sort()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1"]);
    expect(Object.values(seen).reduce((a, b) => a + b, 0)).toBe(30);
    // Read again as `pulumi preview --refresh --expect-no-changes` does in a pipeline: nothing drifted, nothing to do.
    await stack.preview({ refresh: true, expectNoChanges: true });
  });

  it("refresh reports traffic per VIP and backend: the gateways' buckets counted what each hypervisor's flows took; counters that move are no change", async () => {
    type Counted = { packets: number; bytes: number };
    const lbTraffic = () =>
      outputsOf(stack, "DeferredNatLoadBalancer").traffic as {
        vips: Record<string, Counted & { gateways: Record<string, Counted>; backends: Record<string, Counted> }>;
      };
    const hvTraffic = () =>
      stack
        .resources()
        .filter((r) => r.type.endsWith(":DsrHypervisorFlows"))
        .map((r) => r.outputs.traffic as { vips: Record<string, Counted & { backends: Record<string, Counted> }> });
    const key = "tcp:10.0.0.200:80";
    // Both ends see the same frames (mac delivery rewrites only MACs); the datapath hands its counts to the flows within a revalidation round.
    // Every refresh whose counters moved, with its steps.
    const moved: Result[] = [];
    const agree = async () => {
      const prior = JSON.stringify([lbTraffic(), hvTraffic()]);
      const r = await stack.refresh();
      if (JSON.stringify([lbTraffic(), hvTraffic()]) !== prior) moved.push(r);
      const gateways = lbTraffic().vips[key];
      const hypervisors = Object.assign({}, ...hvTraffic().map((t) => t.vips[key].backends)) as Record<string, Counted>;
      return (
        Object.keys(gateways.backends).length === 3 &&
        Object.entries(gateways.backends).every(([b, c]) => c.packets > 0 && isDeepStrictEqual(c, hypervisors[b]))
      );
    };
    await waitUntil(agree, { timeoutMs: 20_000, intervalMs: 1000, what: "the gateways' per-backend counts equal the hypervisors'" });
    const before = lbTraffic().vips[key];
    expect(before.packets).toBe(Object.values(before.backends).reduce((n, c) => n + c.packets, 0));
    expect(Object.values(before.gateways).reduce((n, c) => n + c.packets, 0)).toBe(before.packets);

    // More connections, then a refresh: the counters move, the refresh changes nothing else.
    const seen = answered("10.0.0.200", 80, 30);
    expect(Object.values(seen).reduce((a, b) => a + b, 0)).toBe(30);
    await waitUntil(async () => (await agree()) && lbTraffic().vips[key].packets > before.packets, {
      timeoutMs: 20_000,
      intervalMs: 1000,
      what: "the new connections counted on both ends",
    });
    expect(moved.length).toBeGreaterThan(0);
    for (const r of moved) expect(r.steps.filter((s) => s.custom).map((s) => s.op)).toEqual(["same", "same", "same"]);
    // Each backend that answered a connection counted packets: 30 connections, at least 5 packets each (SYN, ACK, request, FIN, ACK).
    for (const [name, n] of Object.entries(seen)) {
      const address = inv.backends.find((b) => b.name === name)!.address;
      expect(lbTraffic().vips[key].backends[`${address}:8080`].packets - before.backends[`${address}:8080`].packets).toBeGreaterThanOrEqual(5 * n);
    }
    await stack.preview({ refresh: true, expectNoChanges: true });
  });

  it("a preview names what a change does: the backend added, the one removed, the weight changed; reordered backends are no change", async () => {
    const lab = (b: (typeof inv.backends)[number], extra: Record<string, unknown> = {}) => ({
      address: b.address,
      port: 8080,
      mac: b.mac,
      hypervisor: b.hypervisor,
      bridgePort: b.port,
      ...extra,
    });
    const [vm1, vm2, vm3] = ["hv1-vm1", "hv1-vm2", "hv2-vm1"].map((n) => inv.backends.find((b) => b.name === n)!);
    const added = inv.backends.find((b) => b.name === "hv2-vm2")!;
    /** The preview's steps of the quick start with these backends (the state is the up's), as text per resource. */
    const previewWith = async (backends: unknown[]) => {
      const h = await Harness.open({ cwd: root, stack: LAB_STACK, statePath: stack.statePath, config: { backends } });
      const r = await h.preview();
      return Object.fromEntries(r.steps.filter((s) => s.custom && s.op !== "same").map((s) => [`${s.op} ${s.urn.split("::").at(-1)}`, s.diff ?? ""]));
    };
    // The signed lines, trimmed, the CLI's key padding closed up ("~ vips           : {" -> "~ vips: {").
    const signed = (text: string) =>
      text
        .split("\n")
        .filter((l) => /^\s*[-+~] /.test(l))
        .map((l) => l.trim().replace(/ +:/, ":"));
    const vip = "10.0.0.200:80/tcp";

    // One backend added in the middle, one removed, one weight changed: each reads as what it is.
    const change = await previewWith([lab(vm1, { weight: 3 }), lab(added), lab(vm3)]);
    expect(Object.keys(change).sort()).toEqual(["update demo", "update demo-hv1", "update demo-hv2"]);
    expect(signed(change["update demo"]).filter((l) => l.endsWith("{") || l.startsWith("~ "))).toEqual([
      "~ vips: {",
      `~ ${vip}: {`,
      "~ backends: {",
      `~ ${vm1.address}:8080: {`,
      "~ weight: 1 => 3",
      `- ${vm2.address}:8080: {`,
      `+ ${added.address}:8080: {`,
    ]);
    expect(signed(change["update demo-hv1"]).filter((l) => l.endsWith("{"))).toEqual(["~ vips: {", `~ ${vip}: {`, "~ backends: {", `- ${vm2.address}:8080: {`]);
    expect(signed(change["update demo-hv2"]).filter((l) => l.endsWith("{"))).toEqual([
      "~ vips: {",
      `~ ${vip}: {`,
      "~ backends: {",
      `+ ${added.address}:8080: {`,
    ]);
    expect(await previewWith([lab(vm3), lab(vm2), lab(vm1)])).toEqual({});
  });

  it("destroy removes the groups from every gateway", async () => {
    const groupIds = Object.values(outputsOf(stack, "DeferredNatLoadBalancer").groupIds as Record<string, number>);
    expect(groupIds.length).toBe(1);
    const destroyed = await stack.destroy();
    expect(opsOf(destroyed)).toEqual(["delete DeferredNatLoadBalancer", "delete DsrHypervisorFlows", "delete DsrHypervisorFlows"]);
    for (const gw of ["gw1", "gw2"]) {
      const ssh = await labSsh(inv, gw);
      const groups = parseGroups(await runChecked(ssh, ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"]));
      ssh.close();
      expect(groups.map((g) => g.groupId).filter((id) => groupIds.includes(id))).toEqual([]);
    }
  });
});

describe("examples/deferred-nat-health: GRE delivery with BFD liveness", () => {
  let stack: Harness;
  let unlock: (() => void) | undefined;
  beforeAll(async () => void (unlock = await lockLab("hv1-gre")));
  afterAll(async () => {
    await stack?.destroy().catch(() => undefined);
    unlock?.();
  });

  it("up: every gateway's BFD session to each hypervisor comes up (read back by refresh), none is stale, and the VIP answers from all four backends", async () => {
    stack = await open("examples/deferred-nat-health");
    const up = await stack.up();
    expect(opsOf(up)).toEqual(["create DeferredNatLoadBalancer", "create DsrHypervisorFlows", "create DsrHypervisorFlows"]);
    let health: { backend: string; bfd: Record<string, string> }[] = [];
    await waitUntil(
      async () => {
        await stack.refresh();
        health = outputsOf(stack, "DeferredNatLoadBalancer").health as typeof health;
        return health.length === 4 && health.every((h) => h.bfd.gw1 === "up" && h.bfd.gw2 === "up");
      },
      { timeoutMs: 20_000, intervalMs: 500, what: "BFD up on both gateways toward both hypervisors" },
    );
    expect(outputsOf(stack, "DeferredNatLoadBalancer").stale).toEqual([]);
    const seen = answered("10.0.0.202", 80, 40);
    expect(Object.keys(seen).sort()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]);
    expect(health.map((h) => nameOf(h.backend.split(":")[0])).sort()).toEqual(["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]);
  });

  it("a second preview shows no changes; destroy deletes all", async () => {
    await stack.preview({ expectNoChanges: true });
    const destroyed = await stack.destroy();
    expect(opsOf(destroyed).every((s) => s.startsWith("delete"))).toBe(true);
    expect(stack.resources().filter((r) => r.custom)).toEqual([]);
  });
});

describe("examples/active-active: one load balancer on two distributor devices", () => {
  const VIP = "10.0.0.215";
  const NEXT_HOPS = ["10.0.0.45", "10.0.0.46"];
  let stack: Harness;
  let unlock: (() => void) | undefined;
  const amphorae = () => inv.backends.filter((b) => b.hypervisor === "hv3").slice(0, 3);
  beforeAll(async () => {
    unlock = await lockLab("distributor");
    // The network's part: amphorae serve the VIP on their loopback; the edge router spreads it over both devices.
    for (const b of amphorae()) amphoraVip(b, VIP, true);
    inNamespace(inv.edgeRouter!.namespace, ["ip", "route", "replace", `${VIP}/32`, ...NEXT_HOPS.flatMap((h) => ["nexthop", "via", h, "dev", "eth0"])]);
    inNamespace(inv.client.namespace, ["ip", "route", "replace", `${VIP}/32`, "via", inv.edgeRouter!.address, "dev", "eth0"]);
  });
  afterAll(async () => {
    await stack?.destroy().catch(() => undefined);
    inNamespace(inv.client.namespace, ["ip", "route", "del", `${VIP}/32`]);
    inNamespace(inv.edgeRouter!.namespace, ["ip", "route", "del", `${VIP}/32`]);
    for (const b of amphorae()) amphoraVip(b, VIP, false);
    unlock?.();
  });

  it("up: two devices, one attachment on each holding the same group; connections reach the two active amphorae, never the standby", async () => {
    stack = await open("examples/active-active");
    const up = await stack.up();
    expect(opsOf(up)).toEqual(["create DistributorAttachment", "create DistributorAttachment", "create DistributorDevice", "create DistributorDevice"]);
    const attachments = up.resources.filter((r) => r.type.endsWith(":DistributorAttachment"));
    expect(new Set(attachments.map((a) => a.outputs.groupId)).size).toBe(1);
    expect(attachments.map((a) => a.parent)).toEqual(attachments.map(() => up.resources.find((r) => r.type === "ovslb:index:ActiveActiveLoadBalancer")!.urn));
    const seen = answered(VIP, 8080, 40);
    const [a1, a2] = amphorae();
    expect(Object.keys(seen).sort()).toEqual([a1.name, a2.name].sort());
  });

  it("a second preview shows no changes; destroy deletes all", async () => {
    await stack.preview({ expectNoChanges: true });
    await stack.destroy();
    expect(stack.resources().filter((r) => r.custom)).toEqual([]);
  });
});

describe("examples/transparent-dsr: behind an external L3DSR load balancer", () => {
  const VIP = "10.0.0.185";
  let stack: Harness;
  let unlock: (() => void) | undefined;
  beforeAll(async () => void (unlock = await lockLab("hv1-gre")));
  afterAll(async () => {
    await stack?.destroy().catch(() => undefined);
    removeVip(inv, VIP);
    unlock?.();
  });

  it("up: the balancer's GRE reaches the server its inner frame names, which answers the client directly", async () => {
    stack = await open("examples/transparent-dsr");
    const up = await stack.up();
    expect(opsOf(up)).toEqual(["create DsrHypervisorFlows"]);
    const server = inv.backends.find((b) => b.name === "hv1-vm2")!;
    const tunnel = encapsulateVip(inv, { vip: VIP, hypervisor: "hv1", key: 48, innerMac: server.mac });
    try {
      expect(answered(VIP, 80, 10)).toEqual({ "hv1-vm2": 10 });
    } finally {
      tunnel.close();
    }
  });

  it("a second preview shows no changes; destroy deletes all", async () => {
    await stack.preview({ expectNoChanges: true });
    await stack.destroy();
    expect(stack.resources().filter((r) => r.custom)).toEqual([]);
  });
});
