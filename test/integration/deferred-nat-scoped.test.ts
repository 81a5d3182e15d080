import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { DeferredNatBackend } from "../../provider/model/inputs.generated";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory, restartVswitchd } from "../support/lab";

/**
 * A proportional update on the lab's two gateways: a change reads and plans
 * only the VIPs it touches (lastRead says so, and the bundle holds only
 * their mods); drift on another VIP is left alone by such an update, until
 * a refresh records it: then the next update touches that VIP and repairs
 * it, again without reading the rest. A gateway that no longer holds what
 * the last apply left (ovs-vswitchd restarted, flows or groups deleted by
 * hand) makes the update read and repair everything, on every gateway.
 * Addresses only, no traffic.
 */

const VIPS = ["10.0.0.186", "10.0.0.187", "10.0.0.188"];
const key = (vip: string) => `tcp:${vip}:80`;
let inv: LabInventory;
const ssh: Record<string, SshSession> = {};

const backend = (v: number, i: number): DeferredNatBackend => ({
  address: `10.0.3.${v * 50 + i}`,
  port: 8080,
  mac: `02:00:00:03:${v.toString(16).padStart(2, "0")}:${i.toString(16).padStart(2, "0")}`,
  hypervisor: ["hv1", "hv2", "hv3"][i % 3],
});
const inputsWith = (extra: number) =>
  labLoadBalancer(
    inv,
    "scoped",
    VIPS.map((address, v) => ({
      address,
      port: 80,
      protocol: "tcp" as const,
      backends: Array.from({ length: 8 + (v === 0 ? extra : 0) }, (_, i) => backend(v, i + 1)),
    })),
  );

async function ofctl(gw: string, ...args: string[]): Promise<string> {
  const r = await ssh[gw].run(["ovs-ofctl", "-O", "OpenFlow15", ...args]);
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return r.stdout;
}

const bucketsOf = async (gw: string, groupId: number) =>
  (
    (await ofctl(gw, "dump-groups", "br-seg"))
      .split("\n")
      .find((l) => l.startsWith(` group_id=${groupId},`))
      ?.match(/bucket_id:/g) ?? []
  ).length;

beforeAll(async () => {
  inv = loadInventory();
  for (const gw of ["gw1", "gw2"]) ssh[gw] = await labSsh(inv, gw);
});

afterAll(() => {
  for (const s of Object.values(ssh)) s.close();
});

describe("deferred-NAT update reads and plans only what it changes", () => {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");

  afterAll(async () => {
    if (lb.id) await lb.delete();
  });

  it("one added backend reads one VIP and sends only its bucket, on every gateway", async () => {
    await lb.purge(inputsWith(0));
    await lb.create(inputsWith(0));
    expect(lb.outputs.lastRead).toEqual({ scope: "all", reason: "create" });
    expect(Object.keys(lb.outputs.gatewayPorts).sort()).toEqual(["gw1", "gw2"]);

    await lb.update(inputsWith(1));
    expect(lb.outputs.lastRead).toEqual({ scope: "vips", vips: 1 });
    for (const gw of ["gw1", "gw2"]) expect(lb.outputs.lastApply[gw].operations).toEqual({ "insert-buckets": 1 });
    // The ids of the VIPs not read are the recorded ones, kept as they were.
    expect(Object.keys(lb.outputs.groupIds).sort()).toEqual(VIPS.map(key).sort());
    expect(await bucketsOf("gw1", lb.outputs.groupIds[key(VIPS[0])])).toBe(9);
  });

  it("drift on another VIP is not read by such an update; after a refresh records it, the next update repairs it, reading that VIP only", async () => {
    const other = key(VIPS[1]);
    const groupId = lb.outputs.groupIds[other];
    const victim = lb.outputs.bucketIds[other][`${backend(1, 3).address}:8080#0`];
    await ofctl("gw2", "remove-buckets", "br-seg", `group_id=${groupId},command_bucket_id=${victim}`);

    // An update that touches VIP 0 only: VIP 1 is neither read nor planned.
    await lb.update(inputsWith(2));
    expect(lb.outputs.lastRead).toEqual({ scope: "vips", vips: 1 });
    expect(lb.outputs.lastApply.gw2.operations).toEqual({ "insert-buckets": 1 });
    expect(await bucketsOf("gw2", groupId)).toBe(7);

    // A refresh reads everything and records the drift; the update from it touches VIP 1 and puts the bucket back.
    const read = await lb.read();
    expect(read.props.drift).toEqual([`gw2: VIP ${other}: bucket ${victim} (${backend(1, 3).address}:8080#0) missing`]);
    // The same, as data: the update scopes on its kind and VIP.
    expect(read.props.driftFindings).toEqual([
      { host: "gw2", kind: "bucket-missing", object: `bucket ${victim} (${backend(1, 3).address}:8080#0)`, vip: other },
    ]);
    expect((await lb.diff(inputsWith(2), read.props)).changes).toBe(true);
    lb.outputs = read.props;
    await lb.update(inputsWith(2));
    expect(lb.outputs.lastRead).toEqual({ scope: "vips", vips: 1 });
    expect(lb.outputs.lastApply.gw2.operations).toEqual({ "insert-buckets": 1 });
    expect(lb.outputs.lastApply.gw1.messages).toBe(0);
    expect(await bucketsOf("gw2", groupId)).toBe(8);
    expect((await lb.read()).props.drift).toEqual([]);
  });

  /** Every flow and group of this load balancer on a gateway, as text: MACs and the segment port aside, gateways hold the same. */
  async function holding(gw: string): Promise<{ flows: string[]; groups: string[] }> {
    const ids = new Set(Object.values(lb.outputs.groupIds as Record<string, number>));
    const flows = (await ofctl(gw, "--no-names", "--no-stats", "dump-flows", "br-seg", `cookie=${lb.outputs.cookie}/-1`))
      .split("\n")
      .filter((l) => l.includes("actions="))
      .map((l) => l.trim().replace(/in_port=\d+/, "in_port=SEG"));
    const groups = (await ofctl(gw, "--no-names", "dump-groups", "br-seg"))
      .split("\n")
      .filter((l) => ids.has(Number(/group_id=(\d+),/.exec(l)?.[1])))
      .map((l) => l.trim().replace(/eth_src=[0-9a-f:]+|set_field:[0-9a-f:]{17}->eth_src/g, "SRC"));
    return { flows: flows.sort(), groups: groups.sort() };
  }

  /** A backend added to VIP 0 after `lose` took something from gw1: the update reads everything and gw1 again holds every VIP, as gw2 does. */
  async function addAfter(extra: number, lose: () => Promise<void>, reason: RegExp): Promise<void> {
    await lose();
    await lb.update(inputsWith(extra));
    expect(lb.outputs.lastRead.scope).toBe("all");
    expect(lb.outputs.lastRead.reason).toMatch(reason);
    const [gw1, gw2] = [await holding("gw1"), await holding("gw2")];
    expect(gw1.flows).toHaveLength(VIPS.length);
    expect(gw1.groups).toHaveLength(VIPS.length);
    expect(gw1).toEqual(gw2);
    expect(await bucketsOf("gw1", lb.outputs.groupIds[key(VIPS[0])])).toBe(8 + extra);
    // The next change is scoped again: the counts recorded by the repair hold.
    await lb.update(inputsWith(extra + 1));
    expect(lb.outputs.lastRead).toEqual({ scope: "vips", vips: 1 });
    for (const gw of ["gw1", "gw2"]) expect(lb.outputs.lastApply[gw].operations).toEqual({ "insert-buckets": 1 });
  }

  it("a gateway whose ovs-vswitchd restarted (every flow and group gone) is read and repaired in full by an update that touches one VIP", async () => {
    const before = lb.outputs.gatewayFlows as Record<string, number>;
    expect(before).toEqual({ gw1: VIPS.length, gw2: VIPS.length });
    await addAfter(
      3,
      async () => {
        await restartVswitchd(inv.hosts.gw1);
        ssh.gw1.close();
        ssh.gw1 = await labSsh(inv, "gw1");
        expect((await holding("gw1")).flows).toEqual([]);
      },
      /^\S+ \(gw1\) holds 0 flows of this load balancer where the last apply left 3 \(ovs-vswitchd restarted/,
    );
  });

  it("a VIP's flow deleted by hand on one gateway, or its group, is put back by an update that touches another VIP", async () => {
    const flowOf = (v: number) => `tcp,in_port=${lb.outputs.gatewayPorts.gw1.segmentOfport},nw_dst=${VIPS[v]},tp_dst=80`;
    await addAfter(
      5,
      async () => {
        await ofctl("gw1", "del-flows", "br-seg", `${flowOf(2)},cookie=${lb.outputs.cookie}/-1`);
      },
      /^\S+ \(gw1\) holds 2 flows of this load balancer where the last apply left 3/,
    );
    // Deleting a group deletes the flows that send to it (OpenFlow): the count shows that too.
    await addAfter(
      7,
      async () => {
        await ofctl("gw1", "del-groups", "br-seg", `group_id=${lb.outputs.groupIds[key(VIPS[1])]}`);
      },
      /^\S+ \(gw1\) holds 2 flows of this load balancer where the last apply left 3/,
    );
  });

  it("a change of the whole load balancer reads everything", async () => {
    await lb.update({ ...inputsWith(8), selectionFields: ["ip_src", "ip_dst"] });
    expect(lb.outputs.lastRead).toEqual({ scope: "all", reason: "a setting of the whole load balancer changed" });
    for (const gw of ["gw1", "gw2"]) expect(lb.outputs.lastApply[gw].operations).toEqual({ "modify-group": 3 });
  });
});
