import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { DeferredNatBackend } from "../../provider/model/inputs.generated";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";

/**
 * What an apply sends and how drift is found and repaired, on the lab's two
 * gateways. The backends here are addresses only (no traffic is sent).
 */

const VIP = "10.0.0.196";
const KEY = `tcp:${VIP}:80`;
let inv: LabInventory;
const ssh: Record<string, SshSession> = {};

const backend = (i: number): DeferredNatBackend => ({
  address: `10.0.1.${i}`,
  port: 8080,
  mac: `02:00:00:01:00:${i.toString(16).padStart(2, "0")}`,
  hypervisor: ["hv1", "hv2", "hv3"][i % 3],
});
const many = Array.from({ length: 64 }, (_, i) => backend(i + 1));
const inputsWith = (backends: DeferredNatBackend[], vips: { address: string; port: number }[] = [{ address: VIP, port: 80 }]) =>
  labLoadBalancer(
    inv,
    "apply",
    vips.map((v) => ({ ...v, protocol: "tcp" as const, backends })),
  );

async function ofctl(gw: string, ...args: string[]): Promise<string> {
  const r = await ssh[gw].run(["ovs-ofctl", "-O", "OpenFlow15", ...args]);
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return r.stdout;
}

/** The buckets of one group, from a full dump (dump-groups' own filter is not relied on). */
async function bucketCount(gw: string, groupId: number): Promise<number> {
  const line = (await ofctl(gw, "dump-groups", "br-seg")).split("\n").find((l) => l.startsWith(` group_id=${groupId},`));
  return line?.match(/bucket_id:/g)?.length ?? 0;
}

async function groupDuration(gw: string, groupId: number): Promise<number> {
  const stats = (await ofctl(gw, "dump-group-stats", "br-seg")).split("\n").find((l) => l.startsWith(` group_id=${groupId},`))!;
  return Number(/duration=([\d.]+)s/.exec(stats)![1]);
}

/**
 * A group's age (its stats' duration, in s), with when this side sent the
 * dump's request and had its answer (ms, this side's clock).
 */
async function groupAge(gw: string, groupId: number): Promise<{ duration: number; asked: number; answered: number }> {
  const asked = Date.now();
  const duration = await groupDuration(gw, groupId);
  return { duration, asked, answered: Date.now() };
}

beforeAll(async () => {
  inv = loadInventory();
  for (const gw of ["gw1", "gw2"]) ssh[gw] = await labSsh(inv, gw);
});

afterAll(() => {
  for (const s of Object.values(ssh)) s.close();
});

describe("deferred-NAT apply", () => {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");

  afterAll(async () => {
    if (lb.id) await lb.delete();
  });

  it("adding one backend to a VIP of 64 sends one bundle per gateway holding only that bucket", async () => {
    await lb.purge(inputsWith(many));
    await lb.create(inputsWith(many));
    const groupId = lb.outputs.groupIds[KEY];
    for (const gw of ["gw1", "gw2"]) {
      expect(lb.outputs.lastApply[gw].operations).toEqual({ "add-group": 1, "add-flow": 1 });
    }
    // Between two dumps of the group's stats, a group the update kept ages by at least the time from
    // the first dump's answer to the second one's request; a group it rebuilt (duration reset) is younger
    // than the time from the first dump's request to the second one's answer. The two tell apart once the
    // group is older than the two dumps' round trips: wait until it is, with room to spare.
    const before = await waitUntil(
      async () => {
        const age = await groupAge("gw1", groupId);
        return age.duration * 1000 > Math.max(250, 10 * (age.answered - age.asked)) ? age : undefined;
      },
      { what: `group ${groupId} on gw1 to be older than its stats dump's round trip`, intervalMs: 25 },
    );

    await lb.update(inputsWith([...many, backend(65)]));
    for (const gw of ["gw1", "gw2"]) {
      const sent = lb.outputs.lastApply[gw];
      expect(sent.operations).toEqual({ "insert-buckets": 1 });
      expect(sent.messages).toBe(1);
      expect(sent.bytes).toBeLessThan(250);
    }
    expect(lb.outputs.groupIds[KEY]).toBe(groupId);
    // The group was not rebuilt: it has aged since the first dump (durations are printed in ms), and holds all 65 buckets.
    const after = await groupAge("gw1", groupId);
    expect(before.answered - before.asked + (after.answered - after.asked)).toBeLessThan(before.duration * 1000);
    expect(after.duration).toBeGreaterThanOrEqual(before.duration + (after.asked - before.answered) / 1000 - 0.003);
    expect(await bucketCount("gw1", groupId)).toBe(65);

    // Applying the same inputs again sends nothing.
    await lb.update(inputsWith([...many, backend(65)]));
    expect(lb.outputs.lastApply.gw1).toEqual({ messages: 0, bytes: 0, operations: {} });
  });

  it("reports a bucket deleted by hand and restores exactly that bucket", async () => {
    const desired = inputsWith([...many, backend(65)]);
    const groupId = lb.outputs.groupIds[KEY];
    const victim = lb.outputs.bucketIds[KEY]["10.0.1.7:8080#0"];
    await ofctl("gw1", "remove-buckets", "br-seg", `group_id=${groupId},command_bucket_id=${victim}`);

    const read = await lb.read();
    expect(read.props.drift).toEqual([`gw1: VIP ${KEY}: bucket ${victim} (10.0.1.7:8080#0) missing`]);
    expect(read.inputs.vips[0].backends.map((b: DeferredNatBackend) => b.address)).not.toContain("10.0.1.7");
    expect((await lb.diff(desired, read.props)).changes).toBe(true);

    lb.outputs = read.props;
    await lb.update(desired);
    expect(lb.outputs.lastApply.gw1.operations).toEqual({ "insert-buckets": 1 });
    expect(lb.outputs.lastApply.gw2.messages).toBe(0);
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("reports a VIP flow deleted by hand and restores only that flow", async () => {
    const desired = inputsWith([...many, backend(65)]);
    await ofctl("gw2", "del-flows", "br-seg", `cookie=${lb.outputs.cookie}/-1,tcp,nw_dst=${VIP}`);
    const read = await lb.read();
    expect(read.props.drift).toEqual([`gw2: VIP ${KEY}: flow missing or changed`]);
    expect(read.inputs.vips).toEqual([]);
    lb.outputs = read.props;
    await lb.update(desired);
    expect(lb.outputs.lastApply.gw2.operations).toEqual({ "add-flow": 1 });
    expect(lb.outputs.lastApply.gw1.messages).toBe(0);
  });

  it("creates and reads back a VIP of 1,000 buckets, the most one group message holds", async () => {
    const big = new ProviderDriver("DeferredNatLoadBalancer");
    const backends = Array.from({ length: 1000 }, (_, i): DeferredNatBackend => ({
      address: `10.0.${2 + (i >> 8)}.${i & 255}`,
      port: 8080,
      mac: `02:00:00:02:${(i >> 8).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
      hypervisor: "hv1",
    }));
    const inputs = labLoadBalancer(inv, "apply-big", [{ address: "10.0.0.192", port: 80, protocol: "tcp", backends }]);
    await big.purge(inputs);
    try {
      await big.create(inputs);
      expect(big.outputs.lastApply.gw1.operations).toEqual({ "add-group": 1, "add-flow": 1 });
      const groupId = big.outputs.groupIds["tcp:10.0.0.192:80"];
      expect(await bucketCount("gw2", groupId)).toBe(1000);
      expect((await big.read()).props.drift).toEqual([]);
    } finally {
      await big.delete();
    }
  });

  it("refuses a VIP whose match another owner's flow holds, and changes no gateway", async () => {
    const other = "10.0.0.197";
    const seg = (await ssh.gw2.run(["ovs-vsctl", "get", "interface", "seg0", "ofport"])).stdout.trim();
    await ofctl("gw2", "add-flow", "br-seg", `cookie=0x1234,priority=100,tcp,in_port=${seg},nw_dst=${other},tp_dst=80,actions=drop`);
    try {
      const before = await Promise.all(
        ["gw1", "gw2"].map((g) => ofctl(g, "--no-stats", "dump-flows", "br-seg").then(async (f) => f + (await ofctl(g, "dump-groups", "br-seg")))),
      );
      await expect(
        lb.update(
          inputsWith(many.slice(0, 4), [
            { address: VIP, port: 80 },
            { address: other, port: 80 },
          ]),
        ),
      ).rejects.toThrow(/gw2\): a flow of cookie 0x1234 already matches VIP tcp:10.0.0.197:80 at priority 100; refusing to replace it/);
      const after = await Promise.all(
        ["gw1", "gw2"].map((g) => ofctl(g, "--no-stats", "dump-flows", "br-seg").then(async (f) => f + (await ofctl(g, "dump-groups", "br-seg")))),
      );
      expect(after).toEqual(before);
    } finally {
      await ofctl("gw2", "del-flows", "br-seg", "cookie=0x1234/-1");
    }
  });

  it("refuses a recorded group id that someone else's group now holds, and changes no gateway", async () => {
    const groupId = lb.outputs.groupIds[KEY];
    // Deleting a group also deletes the flows that use it: ours is gone with it.
    await ofctl("gw2", "del-groups", "br-seg", `group_id=${groupId}`);
    await ofctl("gw2", "add-group", "br-seg", `group_id=${groupId},type=select,selection_method=hash,fields(ip_src),bucket=bucket_id:1,weight:1,actions=drop`);
    try {
      const dump = () =>
        Promise.all(["gw1", "gw2"].map(async (g) => (await ofctl(g, "--no-stats", "dump-flows", "br-seg")) + (await ofctl(g, "dump-groups", "br-seg"))));
      const before = await dump();
      await expect(lb.update(inputsWith([...many, backend(65)]))).rejects.toThrow(
        new RegExp(`group ${groupId} of VIP ${KEY} is now held by a group this load balancer does not own`),
      );
      expect(await dump()).toEqual(before);
    } finally {
      await ofctl("gw2", "del-groups", "br-seg", `group_id=${groupId}`);
    }
    // With the foreign group gone, the next apply restores gw2 under the same id.
    await lb.update(inputsWith([...many, backend(65)]));
    expect(lb.outputs.groupIds[KEY]).toBe(groupId);
    expect(lb.outputs.lastApply.gw2.operations).toEqual({ "add-group": 1, "add-flow": 1 });
    expect(lb.outputs.lastApply.gw1.messages).toBe(0);
  });

  it("delete removes its flows and groups only, and is idempotent", async () => {
    const groupId = lb.outputs.groupIds[KEY];
    await lb.delete();
    for (const gw of ["gw1", "gw2"]) {
      expect(await ofctl(gw, "dump-flows", "br-seg", `cookie=${lb.outputs.cookie}/-1`)).not.toMatch(/cookie=/);
      expect(await ofctl(gw, "dump-groups", "br-seg")).not.toContain(`group_id=${groupId},`);
      expect(await ofctl(gw, "dump-flows", "br-seg")).toMatch(/priority=0 actions=NORMAL/);
    }
    await lb.delete();
    expect((await lb.read()).id).toBe("");
    lb.id = "";
  });
});
