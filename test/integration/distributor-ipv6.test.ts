import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as handlers from "../../provider/handlers";
import { attachmentNames } from "../../provider/resources/distributor-attachment/plan";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { rootLinkOf, type LabBackend, type LabInventory } from "../lab/topology";
import { amphoraVip, inNamespace, labSsh, loadInventory, lockLab, sshTo } from "../support/lab";
import { trackNextHops6, type TrackedRoute } from "../support/edge-router";
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
 * An IPv6 VIP on the distributor: one load balancer on dist1 and dist2, as
 * distributor-ha.test.ts does for IPv4. Each attachment answers neighbour
 * solicitations for the VIP and its next hop in OpenFlow (a real kernel's
 * solicitation, a real kernel taking the advertisement); the edge router
 * spreads the VIP by ECMP over the two next hops and drops a next hop whose
 * neighbour entry fails (test/support/edge-router.ts: Linux does not for
 * IPv6 while forwarding). Amphorae are hv3's VMs, the VIP on their loopback.
 */

type Props = Record<string, any>;
const VIP = "fd00:21::213";
const LB = "lb-ha6";
const DEVICES = ["dist1", "dist2"] as const;
// Written unabbreviated on purpose: check records the RFC 5952 form.
const NEXT_HOP: Record<string, string> = { dist1: "fd00:10:0:0::41", dist2: "fd00:10::42" };
const canonicalNextHop: Record<string, string> = { dist1: "fd00:10::41", dist2: "fd00:10::42" };
let inv: LabInventory;
let amp: LabBackend[];
const ssh: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
const device: Record<string, { id: string; outs: Props }> = {};
const attachment: Record<string, { id: string; outs: Props }> = {};
let live: LiveConnections | undefined;
let route: TrackedRoute | undefined;

const hostOf = (d: string) => ({ connection: sshTo(inv, d), ovsRundir: inv.hosts[d].ovsRundir });
const edge = () => inv.edgeRouter!.namespace;
const lb: SharedLoadBalancer = { id: LB, vip: VIP, nextHop: NEXT_HOP };

function attachmentInputs(d: string, roles: AmphoraRole[] = ["active", "active", "standby"]): Props {
  return deviceAttachment(inv, d, lb, amp, roles);
}

const apply = async (d: string, news: Props) => void (attachment[d] = await applied("DistributorAttachment", attachment[d], news));

/** The amphora MAC each of `count` IPv6 tuples goes to on a device. */
const picks = (d: string, count = 2000) =>
  tracedAmphorae(ssh[d], inv, d, LB, attachment[d].outs.groupId, frontendTuples(count, attachment[d].outs.frontendMac, VIP, 8080));

const forwarded = (d: string) => vipPacketsForwarded(ssh[d], inv, d, LB, VIP);

/** The MAC a namespace's neighbour table holds for an IPv6 address, once it holds one. */
const neighbourMac = (ns: string, address: string) => /lladdr ([0-9a-f:]{17})/.exec(inNamespace(ns, ["ip", "-6", "neigh", "show", address]))?.[1];

/** A neighbour solicitation from a namespace's kernel: a ping (the next hop answers ND, not echo). */
function solicit(ns: string, address: string) {
  try {
    inNamespace(ns, ["ping", "-6", "-c", "1", "-w", "1", address]);
  } catch {
    /* no echo reply: only the resolution counts */
  }
}

const setLink = (d: string, up: boolean) => void execFileSync("ip", ["link", "set", rootLinkOf("s", d), up ? "up" : "down"]);

beforeAll(async () => {
  inv = loadInventory();
  amp = inv.backends.filter((b) => b.hypervisor === "hv3").slice(0, 4);
  unlock = await lockLab("distributor");
  for (const d of DEVICES) ssh[d] = await labSsh(inv, d);
  for (const b of amp) amphoraVip(b, VIP, true);
  for (const d of DEVICES)
    device[d] = await handlers.create("DistributorDevice", await checkedInputs("DistributorDevice", { host: hostOf(d), deviceId: d, uplinkBridge: "br-seg" }));
});

afterAll(async () => {
  live?.close();
  route?.close();
  for (const d of DEVICES) setLink(d, true);
  for (const d of DEVICES) if (attachment[d]) await handlers.remove("DistributorAttachment", attachment[d].id, attachment[d].outs).catch(() => undefined);
  for (const d of DEVICES) if (device[d]) await handlers.remove("DistributorDevice", device[d].id, device[d].outs).catch(() => undefined);
  if (inv) {
    inNamespace(inv.client.namespace, ["ip", "-6", "route", "del", `${VIP}/128`]);
    for (const b of amp) amphoraVip(b, VIP, false);
  }
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
});

describe("an IPv6 VIP on two distributor devices", () => {
  it("the VIP's neighbour solicitations are answered in OpenFlow: the client resolves the VIP to dist1's frontend MAC and its connections reach the amphorae", async () => {
    await apply("dist1", attachmentInputs("dist1"));
    expect([attachment.dist1.outs.vip, attachment.dist1.outs.nextHop]).toEqual([VIP, canonicalNextHop.dist1]);
    // On-link for this case: the client's own kernel solicits the VIP on the segment.
    inNamespace(inv.client.namespace, ["ip", "-6", "route", "replace", `${VIP}/128`, "dev", "eth0"]);
    inNamespace(inv.client.namespace, ["ip", "-6", "neigh", "flush", "to", VIP]);
    const results = connectAndClose(inv.client.namespace, times(VIP, 8080, 30), { concurrency: 5 });
    expect(results.filter((r) => r.error)).toEqual([]);
    expect(new Set(results.map((r) => r.backend))).toEqual(new Set([amp[0].name, amp[1].name, amp[3].name]));
    expect(neighbourMac(inv.client.namespace, VIP)).toBe(attachment.dist1.outs.frontendMac);
  });

  it("both devices hold the same group: 2,000 traced IPv6 tuples pick the same amphora on each, never the standby; the edge router resolves each next hop to its device", async () => {
    await apply("dist2", attachmentInputs("dist2"));
    const [one, two] = await Promise.all(DEVICES.map((d) => picks(d)));
    expect(one).toEqual(two);
    expect(new Set(one)).toEqual(new Set([amp[0].mac, amp[1].mac, amp[3].mac]));
    // The edge router sends the VIP over both next hops; its kernel resolves each by a neighbour solicitation the attachment answers.
    inNamespace(inv.client.namespace, ["ip", "-6", "route", "replace", `${VIP}/128`, "via", inv.edgeRouter!.address6!, "dev", "eth0"]);
    route = trackNextHops6(
      edge(),
      "eth0",
      `${VIP}/128`,
      DEVICES.map((d) => canonicalNextHop[d]),
    );
    for (const d of DEVICES) {
      await waitUntil(
        () => {
          solicit(edge(), canonicalNextHop[d]);
          return neighbourMac(edge(), canonicalNextHop[d]) === attachment[d].outs.frontendMac;
        },
        { what: `the edge router's neighbour entry for ${d}'s next hop`, timeoutMs: 5_000, intervalMs: 100 },
      );
    }
  });

  it("an update announces the next hop by an unsolicited neighbour advertisement, which the router's kernel takes over the MAC it held", async () => {
    const hop = canonicalNextHop.dist1;
    inNamespace(edge(), ["ip", "-6", "neigh", "replace", hop, "lladdr", "02:00:00:00:99:99", "nud", "stale", "dev", "eth0"]);
    await apply("dist1", attachmentInputs("dist1"));
    await waitUntil(() => neighbourMac(edge(), hop) === attachment.dist1.outs.frontendMac, {
      what: "the edge router's entry updated by the advertisement",
      timeoutMs: 2_000,
      intervalMs: 20,
    });
  });

  it("ECMP spreads live IPv6 connections over both devices; each answers from the amphora both devices pick", async () => {
    const before = await Promise.all(DEVICES.map(forwarded));
    live = await openLiveConnections(inv.client.namespace, VIP, 8080, 40);
    expect(live.initial.filter((c) => c.broken)).toEqual([]);
    expect((await live.round()).filter((c) => c.broken)).toEqual([]);
    const after = await Promise.all(DEVICES.map(forwarded));
    for (const [i, d] of DEVICES.entries()) expect(after[i] - before[i], d).toBeGreaterThan(0n);
  });

  it("dist1's link cut: the router drops its next hop, new connections succeed through dist2 and no live one breaks; back and updated, dist1 carries its share again", async () => {
    const started = Date.now();
    setLink("dist1", false);
    try {
      await waitUntil(() => connectAndClose(inv.client.namespace, times(VIP, 8080, 10), { concurrency: 10, greetingTimeoutMs: 400 }).every((r) => !r.error), {
        what: "new IPv6 connections through dist2",
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      const dropped = await route!.dropped(canonicalNextHop.dist1, started);
      console.log(
        `IPv6 link cut: next hop dropped ${dropped ? dropped.at - started : "never"} ms, new connections succeed ${Date.now() - started} ms after the fault`,
      );
      expect(dropped).toBeDefined();
      const dist2Before = await forwarded("dist2");
      expect((await live!.round()).filter((c) => c.broken)).toEqual([]);
      expect((await forwarded("dist2")) - dist2Before).toBeGreaterThanOrEqual(40n);
    } finally {
      setLink("dist1", true);
    }
    await apply("dist1", attachmentInputs("dist1"));
    const dist1Before = await forwarded("dist1");
    await waitUntil(
      async () => {
        expect((await live!.round()).filter((c) => c.broken)).toEqual([]);
        return (await forwarded("dist1")) > dist1Before;
      },
      { what: "dist1 carrying IPv6 connections again", timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(route!.changes.at(-1)!.live).toEqual(DEVICES.map((d) => canonicalNextHop[d]));
  });

  it("promotion and a new slot on both devices: moved/minimum = 1.000 for 2,000 traced tuples, the devices agree, and no live connection on another amphora breaks", async () => {
    const before = await picks("dist1");
    for (const d of DEVICES) await apply(d, attachmentInputs(d, ["active", "failed", "standby", "active"]));
    const promoted = await Promise.all(DEVICES.map((d) => picks(d)));
    expect(promoted[0]).toEqual(promoted[1]);
    const moved = promoted[0].filter((m, i) => m !== before[i]).length;
    const minimum = before.filter((m) => m === amp[1].mac).length;
    expect(moved / minimum).toBe(1);
    promoted[0].forEach((mac, i) => expect(mac).toBe(before[i] === amp[1].mac ? amp[2].mac : before[i]));
    const broken = (await live!.round()).filter((c) => c.broken);
    expect(broken.every((c) => c.backend === amp[1].name)).toBe(true);
    // A fifth amphora as a new slot: only the tuples it now takes move.
    const fifth = inv.backends.find((b) => b.hypervisor === "hv2")!;
    for (const d of DEVICES) {
      const inputs = attachmentInputs(d, ["active", "failed", "standby", "active"]);
      inputs.amphorae.push({ name: "amp-5", mac: fifth.mac, role: "active", slot: 5 });
      await apply(d, inputs);
    }
    const added = await Promise.all(DEVICES.map((d) => picks(d)));
    expect(added[0]).toEqual(added[1]);
    const movedOnAdd = added[0].filter((m, i) => m !== promoted[0][i]).length;
    const toNew = added[0].filter((m) => m === fifth.mac).length;
    expect(toNew).toBeGreaterThan(0);
    expect(movedOnAdd / toNew).toBe(1);
    console.log(`IPv6 distributor: promotion moved ${moved} of 2000 (minimum ${minimum}); a new slot moved ${movedOnAdd} (minimum ${toNew})`);
  });

  it("refuses an IPv6 VIP where the uplink is on the kernel datapath, before touching the device, naming the reason", async () => {
    // --no-wait: ovs-vswitchd cannot open a kernel datapath here, but the Bridge row is what the check reads.
    await runChecked(ssh.dist1, ["ovs-vsctl", "--no-wait", "--may-exist", "add-br", "br-sys6", "--", "set", "bridge", "br-sys6", "datapath_type=system"]);
    try {
      const { loadBalancerId: _, ...own } = attachmentInputs("dist1");
      const inputs = await checkedInputs("DistributorAttachment", { ...own, attachmentId: "lb-sys6", uplinkBridge: "br-sys6" });
      await expect(handlers.create("DistributorAttachment", inputs)).rejects.toThrow(
        /uplink bridge br-sys6 on device dist1 is on the system datapath.*nd_reserved and nd_options_type/,
      );
      const bridges = await runChecked(ssh.dist1, ["ovs-vsctl", "list-br"]);
      expect(bridges).not.toContain(attachmentNames({ attachmentId: "lb-sys6" }).bridge);
    } finally {
      await runChecked(ssh.dist1, ["ovs-vsctl", "--no-wait", "--if-exists", "del-br", "br-sys6"]);
    }
  });
});
