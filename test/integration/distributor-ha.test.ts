import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as handlers from "../../provider/handlers";
import { attachmentNames, derivedFrontendMac } from "../../provider/resources/distributor-attachment/plan";
import { bucketMac } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import type { SshSession } from "../../provider/transport/ssh";
import { rootLinkOf, type LabBackend, type LabInventory } from "../lab/topology";
import { inNamespace, labSsh, loadInventory, lockLab, restartVswitchd, sshTo, amphoraVip } from "../support/lab";
import { connectAndClose, openLiveConnections, times, type LiveConnections } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";
import {
  applied,
  checkedInputs,
  deviceAttachment,
  frontendTuples,
  tracedAmphorae,
  vipPacketsForwarded,
  type AmphoraRole,
  type SharedLoadBalancer,
} from "../support/distributor";

/**
 * One active/active load balancer on two distributor devices (dist1, dist2)
 * with no single point of failure. Both hold the same group (ids from the
 * load balancer), so a 5-tuple picks the same amphora on each. The lab's
 * edge router routes the VIP by ECMP via each device's next hop (an address
 * its attachment answers ARP for) and, with fib_multipath_use_neigh, stops
 * using a next hop whose neighbour entry fails: a dead device drops out with
 * no controller involved. Amphorae are hv3's VMs (the VIP on their loopback).
 */

type Props = Record<string, any>;
const VIP = "10.0.0.213";
const LB = "lb-ha";
const DEVICES = ["dist1", "dist2"] as const;
const NEXT_HOP: Record<string, string> = { dist1: "10.0.0.41", dist2: "10.0.0.42" };
let inv: LabInventory;
let amp: LabBackend[];
const ssh: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
const device: Record<string, { id: string; outs: Props }> = {};
const attachment: Record<string, { id: string; outs: Props }> = {};
let live: LiveConnections | undefined;

const hostOf = (d: string) => ({ connection: sshTo(inv, d), ovsRundir: inv.hosts[d].ovsRundir });
const ofctl = (d: string, bridge: string) => new OpenFlowBridge(ssh[d], `unix:${inv.hosts[d].ovsRundir}/${bridge}.mgmt`);
const lb: SharedLoadBalancer = { id: LB, vip: VIP, nextHop: NEXT_HOP };

function attachmentInputs(d: string, roles: AmphoraRole[] = ["active", "active", "standby"], extra: Props = {}): Props {
  return { ...deviceAttachment(inv, d, lb, amp.slice(0, 3), roles), ...extra };
}

const apply = async (d: string, news: Props) => void (attachment[d] = await applied("DistributorAttachment", attachment[d], news));

const packets = (count: number, frontendMac: string) => frontendTuples(count, frontendMac, VIP, 8080);

/** The amphora MAC each tuple goes to on a device. */
const picks = (d: string, count = 2000) => tracedAmphorae(ssh[d], inv, d, LB, attachment[d].outs.groupId, packets(count, attachment[d].outs.frontendMac));

const forwarded = (d: string) => vipPacketsForwarded(ssh[d], inv, d, LB, VIP);

const edge = () => inv.edgeRouter!.namespace;

/** The device's segment link, cut or restored at the lab's segment bridge (its cable, in the root namespace). */
const setLink = async (d: string, up: boolean) => void execFileSync("ip", ["link", "set", rootLinkOf("s", d), up ? "up" : "down"]);

beforeAll(async () => {
  inv = loadInventory();
  amp = inv.backends.filter((b) => b.hypervisor === "hv3");
  unlock = await lockLab("distributor");
  for (const d of DEVICES) ssh[d] = await labSsh(inv, d);
  for (const b of amp.slice(0, 3)) amphoraVip(b, VIP, true);
  // The client sends the VIP to the edge router, which spreads it by ECMP over the devices' next hops.
  inNamespace(edge(), ["ip", "route", "replace", `${VIP}/32`, ...DEVICES.flatMap((d) => ["nexthop", "via", NEXT_HOP[d], "dev", "eth0"])]);
  inNamespace(inv.client.namespace, ["ip", "route", "replace", `${VIP}/32`, "via", inv.edgeRouter!.address, "dev", "eth0"]);
  for (const d of DEVICES)
    device[d] = await handlers.create("DistributorDevice", await checkedInputs("DistributorDevice", { host: hostOf(d), deviceId: d, uplinkBridge: "br-seg" }));
});

afterAll(async () => {
  live?.close();
  for (const d of DEVICES) await setLink(d, true).catch(() => undefined);
  for (const d of DEVICES) if (attachment[d]) await handlers.remove("DistributorAttachment", attachment[d].id, attachment[d].outs).catch(() => undefined);
  for (const d of DEVICES) if (device[d]) await handlers.remove("DistributorDevice", device[d].id, device[d].outs).catch(() => undefined);
  if (inv) {
    inNamespace(inv.client.namespace, ["ip", "route", "del", `${VIP}/32`]);
    inNamespace(edge(), ["ip", "route", "del", `${VIP}/32`]);
    for (const b of amp.slice(0, 3)) amphoraVip(b, VIP, false);
  }
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
});

describe("one load balancer on two distributor devices", () => {
  it("both devices hold the same group: every one of 2,000 traced tuples picks the same amphora on each, and the standby none", async () => {
    for (const d of DEVICES) await apply(d, attachmentInputs(d));
    const [one, two] = await Promise.all(DEVICES.map((d) => picks(d)));
    expect(one).toEqual(two);
    expect(new Set(one)).toEqual(new Set([amp[0].mac, amp[1].mac]));
    for (const d of DEVICES) {
      const health = ((await handlers.read("DistributorDevice", device[d].id, device[d].outs)).props as Props).attachmentHealth[LB];
      expect(health.ports).toBe(true);
      expect(health.flows).toBeGreaterThan(0);
    }
  });

  it("ECMP spreads connections over both devices; each connection answers from the amphora both devices pick", async () => {
    const before = await Promise.all(DEVICES.map(forwarded));
    live = await openLiveConnections(inv.client.namespace, VIP, 8080, 40);
    expect(live.initial.filter((c) => c.broken)).toEqual([]);
    expect((await live.round()).filter((c) => c.broken)).toEqual([]);
    // Both devices carried some of the 40.
    const after = await Promise.all(DEVICES.map(forwarded));
    for (const [i, d] of DEVICES.entries()) expect(after[i] - before[i], d).toBeGreaterThan(0n);
    expect(new Set(live.initial.map((c) => c.backend))).toEqual(new Set([amp[0].name, amp[1].name]));
  });

  for (const fault of ["ovs-vswitchd stopped", "link cut", "ovs-vswitchd killed and restarted"] as const) {
    it(`${fault} on dist1: new connections succeed through dist2, live ones through dist2 never break, dist1's resume through dist2 on the same amphora; back up, it carries its share again with no connection moving`, async () => {
      const before = await live!.round();
      expect(before.filter((c) => c.broken)).toEqual([]);
      const pid = Number((await runChecked(ssh.dist1, ["cat", `${inv.hosts.dist1.ovsRundir}/ovs-vswitchd.pid`])).trim());
      const started = Date.now();
      if (fault === "ovs-vswitchd stopped") inNamespace(inv.hosts.dist1.namespace, ["kill", "-STOP", String(pid)]);
      else if (fault === "link cut") await setLink("dist1", false);
      else await restartVswitchd(inv.hosts.dist1);
      try {
        // New connections succeed once the client has dropped dist1's next hop.
        await waitUntil(() => connectAndClose(inv.client.namespace, times(VIP, 8080, 10), { concurrency: 10, greetingTimeoutMs: 400 }).every((r) => !r.error), {
          what: "new connections through dist2",
          timeoutMs: 10_000,
          intervalMs: 20,
        });
        console.log(`${fault}: new connections succeed again ${Date.now() - started} ms after the fault`);
        const dist2Before = await forwarded("dist2");
        const during = await live!.round();
        // Every connection answers, from the amphora it had: dist2, now carrying all 40, picks what dist1 did.
        expect(during.filter((c) => c.broken)).toEqual([]);
        expect((await forwarded("dist2")) - dist2Before).toBeGreaterThanOrEqual(40n);
      } finally {
        if (fault === "ovs-vswitchd stopped") inNamespace(inv.hosts.dist1.namespace, ["kill", "-CONT", String(pid)]);
        else if (fault === "link cut") await setLink("dist1", true);
      }
      const restarted = fault === "ovs-vswitchd killed and restarted";
      // The device's read says what is missing: after a restart its attachment has no flows until the next update.
      const health = ((await handlers.read("DistributorDevice", device.dist1.id, device.dist1.outs)).props as Props).attachmentHealth[LB];
      expect(health.flows === 0).toBe(restarted);
      // Back: update puts back what is missing (nothing, unless restarted) and announces the next hop, which the
      // router takes again; dist1's connections return to it, still to the same amphorae.
      await apply("dist1", attachmentInputs("dist1"));
      expect(attachment.dist1.outs.lastApply.messages > 0).toBe(restarted);
      const dist1Before = await forwarded("dist1");
      await waitUntil(
        async () => {
          expect((await live!.round()).filter((c) => c.broken)).toEqual([]);
          return (await forwarded("dist1")) > dist1Before;
        },
        { what: "dist1 carrying connections again", timeoutMs: 10_000, intervalMs: 100 },
      );
    });
  }

  it("promotion on both devices: only the failed slot's tuples move, all to the standby, and the devices still agree", async () => {
    const before = await picks("dist1");
    for (const d of DEVICES) await apply(d, attachmentInputs(d, ["active", "failed", "standby"]));
    const [one, two] = await Promise.all(DEVICES.map((d) => picks(d)));
    expect(one).toEqual(two);
    one.forEach((mac, i) => {
      if (before[i] === amp[1].mac) expect(mac).toBe(amp[2].mac);
      else expect(mac).toBe(before[i]);
    });
  });

  it("a slot's watchPort going down shows its bucket not live in ofproto/trace, next to a dump of the group, and in read's slotLiveness; it comes back with the port", async () => {
    const bridge = attachmentNames({ attachmentId: LB }).bridge;
    await runChecked(ssh.dist1, [
      "ovs-vsctl",
      "--may-exist",
      "add-port",
      bridge,
      "wp-ha",
      "--",
      "set",
      "interface",
      "wp-ha",
      "type=internal",
      "ofport_request=77",
    ]);
    try {
      inNamespace(inv.hosts.dist1.namespace, ["ip", "link", "set", "wp-ha", "up"]);
      const roles = ["active", "failed", "standby"] as const;
      const watched = attachmentInputs("dist1", [...roles]);
      watched.amphorae[0].watchPort = 77;
      await apply("dist1", watched);
      const group = await runChecked(ssh.dist1, ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", bridge]);
      expect(group).toContain("watch_port:77");
      expect((await picks("dist1", 200)).filter((m) => m === amp[0].mac).length).toBeGreaterThan(0);
      inNamespace(inv.hosts.dist1.namespace, ["ip", "link", "set", "wp-ha", "down"]);
      const down = await waitUntil(
        async () => {
          const p = packets(1, attachment.dist1.outs.frontendMac)[0];
          const trace = await runChecked(ssh.dist1, [
            "ovs-appctl",
            "ofproto/trace",
            bridge,
            `tcp,in_port=1,dl_dst=${p.dl_dst},nw_src=${p.nw_src},nw_dst=${VIP},tcp_src=${p.tp_src},tcp_dst=8080`,
          ]);
          return /not live/.test(trace) ? trace : undefined;
        },
        { what: "the watched bucket not live", timeoutMs: 10_000, intervalMs: 100 },
      );
      console.log(
        `group:\n${group.trim()}\ntrace with watch_port 77 down:\n${down
          .split("\n")
          .filter((l) => /bucket|live|group/.test(l))
          .join("\n")}`,
      );
      expect(down).toMatch(/not live/);
      expect((await picks("dist1", 200)).filter((m) => m === amp[0].mac)).toEqual([]);
      expect(((await handlers.read("DistributorAttachment", attachment.dist1.id, attachment.dist1.outs)).props as Props).slotLiveness).toEqual({
        "1": false,
        "2": true,
      });
      inNamespace(inv.hosts.dist1.namespace, ["ip", "link", "set", "wp-ha", "up"]);
      await waitUntil(async () => (await picks("dist1", 200)).some((m) => m === amp[0].mac), {
        what: "the bucket live again",
        timeoutMs: 10_000,
        intervalMs: 100,
      });
      expect(((await handlers.read("DistributorAttachment", attachment.dist1.id, attachment.dist1.outs)).props as Props).slotLiveness).toEqual({
        "1": true,
        "2": true,
      });
    } finally {
      await apply("dist1", attachmentInputs("dist1", ["active", "failed", "standby"]));
      await runChecked(ssh.dist1, ["ovs-vsctl", "--if-exists", "del-port", bridge, "wp-ha"]);
    }
  });
  it("isolation on both devices: a second tenant with the same VIP, in its own VLAN, on both devices at once; each tenant reaches only its own amphorae, on either device", async () => {
    const tenant = inv.tenantClient!;
    const B = "lb-ha-b";
    const hv3 = await labSsh(inv, "hv3");
    const b: Record<string, { id: string; outs: Props }> = {};
    // Tenant B's amphora lives in tenant B's VLAN, with the same VIP on its loopback.
    await runChecked(hv3, ["ovs-vsctl", "set", "port", amp[3].port, `tag=${tenant.vlan}`]);
    amphoraVip(amp[3], VIP, true);
    try {
      for (const d of DEVICES) {
        const inputs = await checkedInputs("DistributorAttachment", {
          host: hostOf(d),
          deviceId: d,
          uplinkBridge: "br-seg",
          attachmentId: B,
          loadBalancerId: B,
          vip: VIP,
          vlan: tenant.vlan,
          frontendMac: derivedFrontendMac(`${B}/${d}`),
          amphorae: [{ name: "amp-b1", mac: amp[3].mac, role: "active", slot: 1 }],
        });
        b[d] = await handlers.create("DistributorAttachment", inputs);
      }
      // On each device, each tenant's tuples go only to its own amphorae.
      for (const d of DEVICES) {
        const tenantA = new Set(await picks(d, 300));
        expect([...tenantA].every((m) => m === amp[0].mac || m === amp[2].mac)).toBe(true);
        const bridgeB = attachmentNames({ attachmentId: B }).bridge;
        const macsB = new Map((await ofctl(d, bridgeB).dumpGroup(b[d].outs.groupId))!.buckets.map((x) => [x.bucketId, bucketMac(x.actions)]));
        const pickedB = await traceBuckets(ssh[d], bridgeB, packets(300, b[d].outs.frontendMac), { ovsRundir: inv.hosts[d].ovsRundir });
        expect(new Set(pickedB.map((x) => macsB.get(x!)))).toEqual(new Set([amp[3].mac]));
      }
      // Live, at once: tenant A through the edge router and both devices, tenant B from its VLAN.
      const [ra, rb] = [
        connectAndClose(inv.client.namespace, times(VIP, 8080, 20), { concurrency: 5 }),
        connectAndClose(tenant.namespace, times(VIP, 8080, 20), { concurrency: 5 }),
      ];
      expect(ra.every((r) => !r.error && (r.backend === amp[0].name || r.backend === amp[2].name))).toBe(true);
      expect(rb.every((r) => !r.error && r.backend === amp[3].name)).toBe(true);
    } finally {
      for (const d of DEVICES) if (b[d]) await handlers.remove("DistributorAttachment", b[d].id, b[d].outs).catch(() => undefined);
      amphoraVip(amp[3], VIP, false);
      await runChecked(hv3, ["ovs-vsctl", "remove", "port", amp[3].port, "tag", String(tenant.vlan)]);
      hv3.close();
    }
  });
});
