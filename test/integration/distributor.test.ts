import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as handlers from "../../provider/handlers";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import { bucketMac, type Match } from "../../provider/openflow";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { type SshSession } from "../../provider/transport/ssh";
import { runChecked } from "../../provider/transport/exec";
import type { LabBackend, LabInventory } from "../lab/topology";
import { labSsh, inNamespace, loadInventory, lockLab, sshTo, amphoraVip } from "../support/lab";
import { attachmentNames } from "../../provider/resources/distributor-attachment/plan";
import { connectAndClose, greetings, holdConnections, type HeldConnections } from "../support/tcp-clients";

/**
 * The active/active distributor against the lab: dist1 is the device; hv3's
 * VMs are the amphorae (the VIP on their loopback, ARP for it suppressed);
 * real TCP from the lab's clients. Handlers are called as the engine would
 * (check, then create/read/update/delete with outputs).
 */

type Props = Record<string, any>;
const VIP = "10.0.0.210";
const DEVICE = "dist1-device";
const TENANT_A = "lb-tenant-a";
const TENANT_B = "lb-tenant-b";
/** Trace-only attachment of the second-failure case: its amphorae need no VMs. */
const CLUSTER_C = "lb-second-failure";

let inv: LabInventory;
let dist1: SshSession;
let hv3: SshSession;
let vm: Record<string, LabBackend>;
let host: Props;
let device: { id: string; outs: Props };
let a: { id: string; outs: Props; inputs: Props };
const held: HeldConnections[] = [];
let unlock: (() => void) | undefined;

/** Whatever an interrupted earlier run left on dist1 under this file's ids (ovs-vsctl, not the code under test). */
async function removeLeftovers() {
  for (const id of [TENANT_A, TENANT_B, CLUSTER_C]) {
    const n = attachmentNames({ attachmentId: id });
    await runChecked(dist1, ["ovs-vsctl", "--if-exists", "del-br", n.bridge, "--", "--if-exists", "del-port", "br-seg", n.uplinkPort]);
  }
  await runChecked(dist1, ["ovs-vsctl", "remove", "open_vswitch", ".", "external_ids", '"ovslb:distributor-device"']);
}

async function checked(kind: string, news: Props): Promise<Props> {
  const { inputs, failures } = await handlers.check(kind, {}, news);
  expect(failures).toEqual([]);
  return inputs;
}

async function create(kind: string, news: Props) {
  const inputs = await checked(kind, news);
  const { id, outs } = await handlers.create(kind, inputs);
  return { id, outs, inputs };
}

async function update(kind: string, id: string, outs: Props, news: Props) {
  const inputs = await checked(kind, news);
  const { outs: after } = await handlers.update(kind, id, outs, inputs);
  return { id, outs: after, inputs };
}

const ofctl = (bridge: string) => new OpenFlowBridge(dist1, `unix:${inv.hosts.dist1.ovsRundir}/${bridge}.mgmt`);

function attachmentInputs(over: Props = {}): Props {
  return {
    host,
    deviceId: DEVICE,
    uplinkBridge: "br-seg",
    attachmentId: TENANT_A,
    vip: VIP,
    amphorae: [
      { name: "amp-1", mac: vm.vm1.mac, role: "active", slot: 1 },
      { name: "amp-2", mac: vm.vm2.mac, role: "active", slot: 2 },
      { name: "amp-3", mac: vm.vm3.mac, role: "standby" },
    ],
    ...over,
  };
}

const byName = (names: string[]) => names.reduce<Record<string, number>>((m, n) => ((m[n] = (m[n] ?? 0) + 1), m), {});

/** 5-tuples from the lab client's side of the segment into the attachment's frontend port. */
function packets(count: number, frontendMac: string): Match[] {
  return Array.from({ length: count }, (_, i) => ({
    protocol: "tcp" as const,
    in_port: 1,
    dl_dst: frontendMac,
    nw_src: `10.0.${1 + Math.floor(i / 250)}.${(i % 250) + 1}`,
    nw_dst: VIP,
    tp_src: 10000 + ((i * 7919) % 50000),
    tp_dst: 8080,
  }));
}

async function bucketMacs(bridge: string, groupId: number): Promise<Map<number, string>> {
  const group = await ofctl(bridge).dumpGroup(groupId);
  return new Map(group!.buckets.map((b) => [b.bucketId, bucketMac(b.actions)!]));
}

beforeAll(async () => {
  inv = loadInventory();
  vm = Object.fromEntries(inv.backends.filter((b) => b.hypervisor === "hv3").map((b) => [b.port, b]));
  host = { connection: sshTo(inv, "dist1"), ovsRundir: inv.hosts.dist1.ovsRundir };
  unlock = await lockLab("distributor");
  dist1 = await labSsh(inv, "dist1");
  hv3 = await labSsh(inv, "hv3");
  await removeLeftovers();
  for (const b of Object.values(vm)) amphoraVip(b, VIP, true);
  // Tenant B's amphora lives in tenant B's VLAN.
  await runChecked(hv3, ["ovs-vsctl", "set", "port", "vm4", `tag=${inv.tenantClient!.vlan}`]);
  inNamespace(inv.client.namespace, ["ip", "neigh", "flush", "all"]);
});

afterAll(async () => {
  for (const h of held) h.close();
  for (const [id, kind, outs] of [[a?.id, "DistributorAttachment", a?.outs]] as const) {
    if (id) await handlers.remove(kind, id, outs).catch(() => undefined);
  }
  if (device) await handlers.remove("DistributorDevice", device.id, device.outs).catch(() => undefined);
  await hv3?.run(["ovs-vsctl", "remove", "port", "vm4", "tag", String(inv.tenantClient!.vlan)]);
  for (const b of Object.values(vm ?? {})) {
    amphoraVip(b, VIP, false);
    inNamespace(b.namespace, ["ip", "neigh", "flush", "all"]);
  }
  if (dist1) await removeLeftovers();
  dist1?.close();
  hv3?.close();
  unlock?.();
});

describe("DistributorDevice and DistributorAttachment on dist1", () => {
  it("the device reports reachability, the OVS version and OpenFlow 1.5 support", async () => {
    device = await create("DistributorDevice", { host, deviceId: DEVICE, uplinkBridge: "br-seg" });
    expect(device.id).toBe(`distributor-device/${DEVICE}`);
    // The version the host's own ovs-vswitchd binary reports (3.1.0 on Debian 12's lab, 3.5.0 on the newer versions' lab).
    const ovsVersion = /\(Open vSwitch\) (\S+)/.exec((await dist1.run(["ovs-vswitchd", "--version"])).stdout)![1];
    expect(device.outs).toMatchObject({ reachable: true, openflow15: true, ovsVersion, attachments: [] });
    const read = await handlers.read("DistributorDevice", device.id, device.outs);
    expect(read.props).toMatchObject({ reachable: true, openflow15: true });
  });

  it("real traffic: a TCP client reaches the VIP, both active amphorae serve, the standby gets none; ARP answers with the frontend MAC", async () => {
    a = await create("DistributorAttachment", attachmentInputs());
    const fe = a.outs.frontendMac as string;
    expect(a.outs.bridge).toMatch(/^dlb-[0-9a-f]{8}$/);
    expect(a.outs.slots.map((s: Props) => [s.slot, s.amphora])).toEqual([
      [1, "amp-1"],
      [2, "amp-2"],
    ]);

    const names = greetings(inv.client.namespace, VIP, inv.backendPort, 60);
    const counts = byName(names);
    expect(counts["hv3-vm1"]).toBeGreaterThan(5);
    expect(counts["hv3-vm2"]).toBeGreaterThan(5);
    expect(counts["hv3-vm1"] + counts["hv3-vm2"]).toBe(60);
    expect(counts["hv3-vm3"]).toBeUndefined();

    // The client resolved the VIP by ARP: the answer carried the frontend MAC, not an amphora's.
    const neigh = inNamespace(inv.client.namespace, ["ip", "neigh", "show", VIP]);
    expect(neigh).toContain(`lladdr ${fe}`);
    // ip.dst stays the VIP: the amphora's server saw the VIP as its local address.
    const [raw] = connectAndClose(inv.client.namespace, [{ host: VIP, port: inv.backendPort }]);
    expect(raw.greeting).toMatch(new RegExp(`^hv3-vm[12] ${inv.client.address}:\\d+ ${VIP}:${inv.backendPort}`));
  });

  it("an update with the same inputs reads the bridge and sends nothing", async () => {
    a = await update("DistributorAttachment", a.id, a.outs, attachmentInputs());
    expect(a.outs.lastApply).toEqual({ messages: 0, bytes: 0, operations: {} });
  });

  it("source-ip affinity sends every connection of one client address to one amphora", async () => {
    a = await update("DistributorAttachment", a.id, a.outs, attachmentInputs({ affinity: "source-ip" }));
    const names = greetings(inv.client.namespace, VIP, inv.backendPort, 40);
    expect(Object.keys(byName(names))).toHaveLength(1);
    // And for many addresses: every port of one source address takes one bucket; addresses spread over both.
    const probes = Array.from({ length: 400 }, (_, i) => ({ ...packets(1, a.outs.frontendMac)[0], nw_src: `10.0.9.${1 + (i % 40)}`, tp_src: 20000 + i }));
    const buckets = await traceBuckets(dist1, a.outs.bridge, probes);
    const perSource = new Map<string, Set<number | undefined>>();
    probes.forEach((p, i) => perSource.set(p.nw_src, (perSource.get(p.nw_src) ?? new Set()).add(buckets[i])));
    expect([...perSource.values()].every((s) => s.size === 1)).toBe(true);
    expect(new Set(buckets).size).toBe(2);
    a = await update("DistributorAttachment", a.id, a.outs, attachmentInputs());
  });

  it("promotion: the standby takes the failed slot in place; only that slot's flows move, all to the standby; 50 live connections to the other amphora survive", async () => {
    const { bridge, groupId, frontendMac } = a.outs;
    const slot1 = a.outs.slots.find((s: Props) => s.slot === 1).bucketId;
    const slot2 = a.outs.slots.find((s: Props) => s.slot === 2).bucketId;
    const probes = packets(2000, frontendMac);
    const before = await traceBuckets(dist1, bridge, probes);
    const macsBefore = await bucketMacs(bridge, groupId);
    const orderBefore = (await ofctl(bridge).dumpGroup(groupId))!.buckets.map((b) => b.bucketId);

    const live = await holdConnections(inv.client.namespace, VIP, inv.backendPort, 140);
    held.push(live);
    const onVm2 = live.names.map((n, i) => (n === "hv3-vm2" ? i : -1)).filter((i) => i >= 0);
    expect(onVm2.length).toBeGreaterThanOrEqual(50);

    a = await update(
      "DistributorAttachment",
      a.id,
      a.outs,
      attachmentInputs({
        amphorae: [
          { name: "amp-1", mac: vm.vm1.mac, role: "failed", slot: 1 },
          { name: "amp-2", mac: vm.vm2.mac, role: "active", slot: 2 },
          { name: "amp-3", mac: vm.vm3.mac, role: "standby" },
        ],
      }),
    );
    // One bundle: remove bucket 1, insert it again (same id, same position) with the standby's MAC.
    expect(a.outs.lastApply.messages).toBe(2);
    expect(a.outs.slots).toEqual([
      { slot: 1, bucketId: slot1, amphora: "amp-3", mac: vm.vm3.mac, takenOver: "amp-1" },
      { slot: 2, bucketId: slot2, amphora: "amp-2", mac: vm.vm2.mac },
    ]);
    expect((await ofctl(bridge).dumpGroup(groupId))!.buckets.map((b) => b.bucketId)).toEqual(orderBefore);

    const after = await traceBuckets(dist1, bridge, probes);
    const macsAfter = await bucketMacs(bridge, groupId);
    let moved = 0;
    probes.forEach((_, i) => {
      expect(after[i]).toBe(before[i]);
      const from = macsBefore.get(before[i]!);
      const to = macsAfter.get(after[i]!);
      if (from !== to) {
        moved++;
        expect(from).toBe(vm.vm1.mac);
        expect(to).toBe(vm.vm3.mac);
      } else {
        expect(before[i]).toBe(slot2);
      }
    });
    const onSlot1 = before.filter((b) => b === slot1).length;
    expect(moved).toBe(onSlot1);
    console.log(`promotion: ${moved} of ${probes.length} traced flows moved (all from slot 1 to the standby); ${probes.length - moved} on slot 2 unchanged`);

    const replies = await live.probe("after-promotion");
    const survived = onVm2.filter((i) => replies[i] === `hv3-vm2 after-promotion-${i}`).length;
    expect(survived).toBe(onVm2.length);
    const onVm1 = live.names.filter((n) => n === "hv3-vm1").length;
    console.log(`promotion: ${survived} of ${onVm2.length} live connections on the surviving amphora answered; ${onVm1} were on the failed one`);
    live.close();

    const fresh = byName(greetings(inv.client.namespace, VIP, inv.backendPort, 40));
    expect(fresh["hv3-vm1"]).toBeUndefined();
    expect(fresh["hv3-vm3"]).toBeGreaterThan(0);
    expect(fresh["hv3-vm2"]).toBeGreaterThan(0);
  });

  it("a second failure after a takeover: the standby keeps the slot it took, the new failure's slot goes vacant, and 0 of 2,000 traced tuples on live amphorae move; a new standby then fills the vacant slot", async () => {
    const mac = (n: number) => `02:00:00:00:0c:0${n}`;
    const amp = (n: number, role: string, slot?: number) => ({ name: `c${n}`, mac: mac(n), role, ...(slot ? { slot } : {}) });
    const inputs = (amphorae: Props[]) => attachmentInputs({ attachmentId: CLUSTER_C, vip: "10.0.0.212", frontendMac: "02:00:00:00:0c:fe", amphorae });
    let c: { id: string; outs: Props; inputs: Props } = await create(
      "DistributorAttachment",
      inputs([amp(1, "active", 1), amp(2, "active", 2), amp(3, "active", 3), amp(4, "standby")]),
    );
    try {
      const { bridge, groupId, frontendMac } = c.outs;
      const probes = packets(2000, frontendMac).map((p) => ({ ...p, nw_dst: "10.0.0.212" }));
      /** The amphora MAC each traced tuple reaches now. */
      const reached = async () => {
        const [buckets, macs] = await Promise.all([traceBuckets(dist1, bridge, probes), bucketMacs(bridge, groupId)]);
        const reach = buckets.map((b) => macs.get(b!)!);
        expect(reach.every((m) => /^02:00:00:00:0c:0[1-5]$/.test(m))).toBe(true);
        return reach;
      };
      const start = await reached();

      // amp c2 fails: c4 takes slot 2 in place.
      c = await update("DistributorAttachment", c.id, c.outs, inputs([amp(1, "active", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby")]));
      expect(c.outs.slots.map((x: Props) => [x.slot, x.amphora, x.takenOver])).toEqual([
        [1, "c1", undefined],
        [2, "c4", "c2"],
        [3, "c3", undefined],
      ]);
      const first = await reached();
      start.forEach((m, i) => expect(first[i]).toBe(m === mac(2) ? mac(4) : m));

      // c1 fails too, no standby left: c4 keeps slot 2; slot 1 is vacant; only slot 1's tuples move.
      c = await update("DistributorAttachment", c.id, c.outs, inputs([amp(1, "failed", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby")]));
      expect(c.outs.slots.map((x: Props) => [x.slot, x.amphora, x.takenOver])).toEqual([
        [2, "c4", "c2"],
        [3, "c3", undefined],
      ]);
      expect(c.outs.vacantSlots).toEqual([1]);
      expect(c.outs.lastApply.operations).toEqual({ "remove-buckets": 1 });
      const second = await reached();
      let movedOffLive = 0;
      let movedOffDead = 0;
      first.forEach((m, i) => {
        if (m === mac(1)) movedOffDead++;
        else if (second[i] !== m) movedOffLive++;
      });
      expect(movedOffLive).toBe(0);
      expect(movedOffDead).toBeGreaterThan(0);
      expect(second.includes(mac(1))).toBe(false);
      console.log(
        `second failure: ${movedOffLive} of ${probes.length - movedOffDead} traced tuples on live amphorae moved; ${movedOffDead} on the failed one moved to live ones`,
      );

      // A new standby joins with c4 still listed as a standby: it fills the vacant slot; c4 keeps slot 2.
      c = await update(
        "DistributorAttachment",
        c.id,
        c.outs,
        inputs([amp(1, "failed", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby"), amp(5, "standby")]),
      );
      expect(c.outs.slots.map((x: Props) => [x.slot, x.amphora, x.takenOver])).toEqual([
        [1, "c5", "c1"],
        [2, "c4", "c2"],
        [3, "c3", undefined],
      ]);
      expect(c.outs.vacantSlots).toEqual([]);
      const third = await reached();
      // Slot 1 comes back under its old bucket id: exactly its own tuples return to it, now served by c5.
      start.forEach((m, i) => expect(third[i]).toBe(m === mac(1) ? mac(5) : m === mac(2) ? mac(4) : m));
    } finally {
      await handlers.remove("DistributorAttachment", c.id, c.outs);
    }
  });

  it("drift: read reports a bucket changed by hand, and update restores it", async () => {
    const { bridge, groupId, frontendMac } = a.outs;
    const slot2 = a.outs.slots.find((s: Props) => s.slot === 2).bucketId;
    const rogue = "02:00:0a:00:00:99";
    await runChecked(dist1, ["ovs-ofctl", "-O", "OpenFlow15", "bundle", bridge, "-"], {
      stdin:
        [
          `group remove_bucket group_id=${groupId},command_bucket_id=${slot2}`,
          `group insert_bucket group_id=${groupId},command_bucket_id=last,bucket=bucket_id:${slot2},weight:100,actions=set_field:${frontendMac}->eth_src,set_field:${rogue}->eth_dst,IN_PORT`,
        ].join("\n") + "\n",
    });
    const read = await handlers.read("DistributorAttachment", a.id, a.outs);
    expect(read.id).toBe(a.id);
    expect((handlers.asLists("DistributorAttachment", read.inputs) as Props).amphorae.find((x: Props) => x.name === "amp-2").mac).toBe(rogue);
    expect((read.props as Props).slots.find((s: Props) => s.slot === 2).mac).toBe(rogue);
    expect((await handlers.diff("DistributorAttachment", a.id, read.props, a.inputs)).changes).toBe(true);

    a = await update("DistributorAttachment", a.id, read.props, a.inputs);
    expect(a.outs.lastApply.messages).toBe(2);
    expect((await bucketMacs(bridge, groupId)).get(slot2)).toBe(vm.vm2.mac);
    const again = await handlers.read("DistributorAttachment", a.id, a.outs);
    expect((await handlers.diff("DistributorAttachment", a.id, again.props, a.inputs)).changes).toBe(false);
  });

  it("hairpin: replies from the amphorae come back through the distributor and leave for the gateway MAC", async () => {
    const gatewayMac = inv.client.mac;
    a = await update("DistributorAttachment", a.id, a.outs, { ...a.inputs, returnPath: "hairpin", gatewayMac });
    const fe = a.outs.frontendMac;
    // The amphorae's next hop toward the client is the distributor.
    for (const b of [vm.vm2, vm.vm3]) inNamespace(b.namespace, ["ip", "neigh", "replace", inv.client.address, "lladdr", fe, "dev", "eth0", "nud", "permanent"]);
    try {
      // Datapath flows report their packets to OpenFlow counters once a revalidator pass has run: wait for one first.
      const hairpinPackets = async () =>
        (await runChecked(dist1, ["ovs-appctl", "revalidator/wait"]),
        await ofctl(a.outs.bridge).dumpFlows({ cookie: BigInt(a.outs.cookie), mask: (1n << 64n) - 1n }))
          .filter((f) => f.priority === 150)
          .reduce((n, f) => n + f.nPackets, 0n);
      const before = await hairpinPackets();
      const names = greetings(inv.client.namespace, VIP, inv.backendPort, 20);
      expect(names.every((n) => n === "hv3-vm2" || n === "hv3-vm3")).toBe(true);
      const through = (await hairpinPackets()) - before;
      // Every connection's SYN-ACK and greeting at least came back through the hairpin flows.
      expect(through).toBeGreaterThanOrEqual(40n);
      console.log(`hairpin: ${through} reply packets of 20 connections passed back through the distributor`);
      // The client learned nothing but the frontend MAC for the VIP: replies left the distributor from it.
      expect(inNamespace(inv.client.namespace, ["ip", "neigh", "show", VIP])).toContain(`lladdr ${fe}`);
    } finally {
      for (const b of [vm.vm2, vm.vm3]) inNamespace(b.namespace, ["ip", "neigh", "del", inv.client.address, "dev", "eth0"]);
    }
    a = await update("DistributorAttachment", a.id, a.outs, { ...a.inputs, returnPath: "direct", gatewayMac: undefined });
    expect(a.outs.gatewayMac).toBeUndefined();
  });

  it("isolation: two tenants with the same VIP on one device carry traffic at once; deleting one leaves the other untouched, flow by flow", async () => {
    const tenant = inv.tenantClient!;
    const b = await create("DistributorAttachment", {
      host,
      deviceId: DEVICE,
      uplinkBridge: "br-seg",
      attachmentId: TENANT_B,
      vip: VIP,
      vlan: tenant.vlan,
      amphorae: [{ name: "amp-b1", mac: vm.vm4.mac, role: "active", slot: 1 }],
    });
    expect(b.outs.bridge).not.toBe(a.outs.bridge);
    expect(b.outs.frontendMac).not.toBe(a.outs.frontendMac);
    expect(b.outs.groupId).not.toBe(a.outs.groupId);

    const [ca, cb] = await Promise.all([
      holdConnections(inv.client.namespace, VIP, inv.backendPort, 30),
      holdConnections(tenant.namespace, VIP, inv.backendPort, 30),
    ]);
    held.push(ca, cb);
    expect(ca.names.every((n) => n === "hv3-vm2" || n === "hv3-vm3")).toBe(true);
    expect(cb.names.every((n) => n === "hv3-vm4")).toBe(true);
    const [ra, rb] = await Promise.all([ca.probe("a"), cb.probe("b")]);
    expect(ra.every((r, i) => r === `${ca.names[i]} a-${i}`)).toBe(true);
    expect(rb.every((r, i) => r === `hv3-vm4 b-${i}`)).toBe(true);
    expect(inNamespace(tenant.namespace, ["ip", "neigh", "show", VIP])).toContain(`lladdr ${String(b.outs.frontendMac)}`);
    ca.close();
    cb.close();

    const device1 = await handlers.read("DistributorDevice", device.id, device.outs);
    expect(device1.props.attachments).toEqual([TENANT_A, TENANT_B]);

    const snapshot = async () => {
      const of = ofctl(a.outs.bridge);
      const flows = (await of.dumpFlows()).map(({ nPackets: _p, nBytes: _b, ...f }) => JSON.stringify(f, (_, v) => (typeof v === "bigint" ? `${v}` : v)));
      const ports = await runChecked(dist1, ["ovs-vsctl", "--columns=name,tag,external_ids", "list", "port", a.outs.uplinkPort]);
      return { flows: flows.sort(), groups: JSON.stringify(await of.dumpGroups()), ports };
    };
    const beforeDelete = await snapshot();
    expect(beforeDelete.flows.length).toBe(3); // ARP responder, VIP -> group, default drop
    await handlers.remove("DistributorAttachment", b.id, b.outs);
    const afterDelete = await snapshot();
    expect(afterDelete.flows).toEqual(beforeDelete.flows);
    expect(afterDelete.groups).toBe(beforeDelete.groups);
    expect(afterDelete.ports).toBe(beforeDelete.ports);
    const bridges = await runChecked(dist1, ["ovs-vsctl", "list-br"]);
    expect(bridges).not.toContain(b.outs.bridge);
    expect(await runChecked(dist1, ["ovs-vsctl", "list-ports", "br-seg"])).not.toContain(b.outs.uplinkPort);
    expect(byName(greetings(inv.client.namespace, VIP, inv.backendPort, 10))["hv3-vm1"]).toBeUndefined();
    expect(greetings(tenant.namespace, VIP, inv.backendPort, 2).every((n) => !n.startsWith("hv3"))).toBe(true);
  });

  it("refuses an attachment whose id collides, and deleting a device that still has attachments", async () => {
    const other = attachmentInputs({ vip: "10.0.0.211", frontendMac: "02:00:00:00:0b:01" });
    await expect(handlers.create("DistributorAttachment", await checked("DistributorAttachment", other))).rejects.toThrow(
      /attachment id lb-tenant-a collides on device dist1-device: bridge dlb-[0-9a-f]{8} .* already exist/,
    );
    await expect(handlers.remove("DistributorDevice", device.id, device.outs)).rejects.toThrow(/still has 1 attachment\(s\) \(lb-tenant-a\)/);
    expect((await handlers.read("DistributorAttachment", a.id, a.outs)).id).toBe(a.id);

    await handlers.remove("DistributorAttachment", a.id, a.outs);
    expect((await handlers.read("DistributorAttachment", a.id, a.outs)).id).toBe("");
    await handlers.remove("DistributorAttachment", a.id, a.outs); // idempotent
    a = undefined as never;
    await handlers.remove("DistributorDevice", device.id, device.outs);
    expect((await handlers.read("DistributorDevice", device.id, device.outs)).id).toBe("");
    device = undefined as never;
    expect(await runChecked(dist1, ["ovs-vsctl", "list-ports", "br-seg"])).toBe("client2\nseg0\n");
  });
});
