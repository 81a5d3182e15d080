import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { greKeyOf } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { PATH_MTU_TABLE } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { EDGE_ROUTER, FAR_CLIENT, ipv6Twin, type LabBackend, type LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../support/deferred-nat";
import { inNamespace, labSsh, loadInventory, lockLab, spawnInNamespace } from "../support/lab";
import { TcpClients, times } from "../support/tcp-clients";

/**
 * Path MTU discovery through DSR (pathMtu), real TCP: a client behind the
 * edge router, whose link to it has a smaller MTU at the router's end than
 * the client advertises, downloads several MB through a VIP from backends
 * on two hypervisors. The backends' full-size segments leave their
 * hypervisor with source = VIP; the edge router answers each with ICMP
 * "fragmentation needed" to the VIP, which reaches the gateways. With
 * pathMtu the gateways send a copy to every hypervisor of the VIP and the
 * one whose conntrack knows the connection hands it, translated, to the
 * backend, which lowers its segments: the downloads complete. Without it
 * (the gateways' fan-out flow removed) the same downloads stall: a PMTU
 * black hole. In mac and in gre delivery, and with second chance. A
 * dual-stack service: the same over IPv6, where the router's error is ICMPv6
 * "packet too big", from the far client's IPv6 address to the IPv6 VIP.
 */

const VIP = "10.0.0.160";
const VIP6 = "fd00:20::160";
type Family = 4 | 6;
const FAMILIES: readonly Family[] = [4, 6];
const vipOf = (f: Family) => (f === 6 ? VIP6 : VIP);
const NAME = "pmtu-web";
/** The test's own download servers, on the backend VMs (the lab's own answer lines only). */
const BULK_PORT = 8081;
const BYTES = 3_000_000;
const CONNECTIONS = 6;

let inv: LabInventory;
let pool: LabBackend[];
const ssh: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
const servers: ChildProcess[] = [];
const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hv: Record<string, ProviderDriver> = {};

/** Greets with "NAME PEER LOCAL" as the lab's servers do; answers "BULK N" with "NAME " and N bytes on one line. */
const BULK_SERVER = String.raw`
const net = require("node:net");
const [name, port] = process.argv.slice(1);
net.createServer((s) => {
  s.write(name + " " + s.remoteAddress + ":" + s.remotePort + " " + s.localAddress + ":" + s.localPort + "\n");
  let buf = "";
  s.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const m = /^BULK (\d+)$/.exec(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (m) s.write(name + " " + "x".repeat(Number(m[1])) + "\n");
    }
  });
  s.on("error", () => s.destroy());
}).listen(Number(port), "::", () => console.log("listening"));
`;

function startBulkServer(b: LabBackend): Promise<void> {
  const child = spawnInNamespace(b.namespace, [process.execPath, "-e", BULK_SERVER, b.name, String(BULK_PORT)]);
  servers.push(child);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", (l) => (l === "listening" ? resolve() : reject(new Error(`${b.name}: ${l}`))));
    child.once("close", (c) => reject(new Error(`${b.name}: bulk server exited (${c})`)));
  });
}

/** A host's underlay address: gre6 tunnels over the lab's IPv6 underlay (ip6gre), the other modes over IPv4. */
const underlayOf = (mode: Mode) => (host: string) => (mode === "gre6" ? inv.hosts[host].underlay!.address6! : inv.hosts[host].underlay!.address);
/** The dual-stack service: an IPv4 VIP and an IPv6 VIP of the same backends' two addresses. */
const vips = () => [
  { address: VIP, port: 80, protocol: "tcp" as const, backends: pool },
  { address: VIP6, port: 80, protocol: "tcp" as const, backends: pool.map((b) => ({ ...b, address: ipv6Twin(b.address) })) },
];

/** How the gateways reach the hypervisors: by MAC, by GRE (over the IPv4 or the IPv6 underlay), or by GRE with second chance (slot flows, the key per slot). */
type Mode = "mac" | "gre" | "gre6" | "gre, second chance";

function lbInputs(mode: Mode, pathMtu: boolean) {
  const base = labLoadBalancer(
    inv,
    NAME,
    vips().map((v) => ({ ...v, backends: v.backends.map((b) => ({ ...labBackend(inv, b), port: BULK_PORT })) })),
    { delivery: mode === "mac" ? "mac" : "gre", pathMtu, ...(mode === "gre, second chance" ? { secondChance: {} } : {}) },
  );
  const underlay = underlayOf(mode);
  return {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(g.name) })),
    hypervisors: ["hv1", "hv2"].map((name) => ({ name, tunnelAddress: underlay(name) })),
  };
}

function hvInputs(name: string, mode: Mode, pathMtu: boolean) {
  const flows = labHypervisorFlows(inv, NAME, name, vips());
  const underlay = underlayOf(mode);
  const allowedSources = ["gw1", "gw2"].map(underlay);
  const peers = ["hv1", "hv2"].filter((h) => h !== name).map(underlay);
  return {
    ...flows,
    vips: flows.vips.map((v) => ({ ...v, backends: v.backends.map((b) => ({ ...b, port: BULK_PORT })) })),
    pathMtu,
    ...(mode === "gre" || mode === "gre6" ? { mode: "gre" as const, gre: { allowedSources, key: greKeyOf({ name: NAME }) } } : {}),
    ...(mode === "gre, second chance" ? { mode: "gre" as const, gre: { allowedSources, secondChance: { peers } } } : {}),
  };
}

async function apply(mode: Mode, pathMtu: boolean) {
  for (const name of ["hv1", "hv2"]) {
    const d = (hv[name] ??= new ProviderDriver("DsrHypervisorFlows"));
    await (d.id ? d.update(hvInputs(name, mode, pathMtu)) : d.create(hvInputs(name, mode, pathMtu)));
  }
  await (lb.id ? lb.update(lbInputs(mode, pathMtu)) : lb.create(lbInputs(mode, pathMtu)));
}

/** Each backend VM forgets the path MTUs it learnt (they last 10 minutes), so every run starts from a full-size MSS. */
const forgetPathMtus = () =>
  pool.forEach((b) => {
    inNamespace(b.namespace, ["ip", "route", "flush", "cache"]);
    inNamespace(b.namespace, ["ip", "-6", "route", "flush", "cache"]);
  });

/** CONNECTIONS downloads of BYTES each from the far client to a family's VIP: per connection, its backend and whether all of it came. */
async function downloads(family: Family, timeoutMs: number): Promise<{ backend: string; complete: boolean; answer: string }[]> {
  const clients = await TcpClients.open(FAR_CLIENT.namespace, times(vipOf(family), 80, CONNECTIONS), { concurrency: 2, greetingTimeoutMs: 6000 });
  try {
    const replies = await clients.exchange(() => `BULK ${BYTES}`, timeoutMs);
    return clients.connections.map((c, i) => {
      const r = replies[i] ?? "";
      return { backend: c.backend, complete: r === `${c.backend} ${"x".repeat(BYTES)}`, answer: r.length > 40 ? `${r.length} bytes` : r };
    });
  } finally {
    clients.close();
  }
}

/** Both families' downloads at once, after the backends forget their path MTUs. */
async function bothDownloads(timeoutMs: number) {
  forgetPathMtus();
  const [v4, v6] = await Promise.all(FAMILIES.map((f) => downloads(f, timeoutMs)));
  return { 4: v4, 6: v6 };
}

/** On the hypervisors: the errors conntrack related to a connection and delivered (per family), and the copies it related to none and dropped. */
async function hypervisorCopies(): Promise<{ delivered: number; delivered6: number; dropped: number }> {
  const n = { delivered: 0, delivered6: 0, dropped: 0 };
  for (const h of ["hv1", "hv2"]) {
    await runChecked(ssh[h], ["ovs-appctl", "revalidator/wait"]);
    const out = await runChecked(ssh[h], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `table=${PATH_MTU_TABLE}`]);
    for (const line of out.split("\n")) {
      const packets = Number(/n_packets=(\d+)/.exec(line)?.[1] ?? 0);
      if (/actions=drop/.test(line)) n.dropped += packets;
      else if (/\+rel/.test(line)) n[/\bicmp6,/.test(line) ? "delivered6" : "delivered"] += packets;
    }
  }
  return n;
}

/** The gateways' ICMP "fragmentation needed" (ICMPv6 "packet too big") errors for a family's VIP: how many its fan-out flows sent on. */
async function fanoutPackets(family: Family): Promise<number> {
  const match = family === 6 ? `icmp6,ipv6_dst=${VIP6},icmp_type=2,icmp_code=0` : `icmp,nw_dst=${VIP},icmp_type=3,icmp_code=4`;
  let n = 0;
  for (const g of ["gw1", "gw2"]) {
    const out = await runChecked(ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", match]);
    for (const m of out.matchAll(/n_packets=(\d+)/g)) n += Number(m[1]);
  }
  return n;
}

beforeAll(async () => {
  inv = loadInventory();
  if (!inv.farClient?.address6) throw new Error("the lab has no far client, or one without IPv6: `npm run lab -- down && npm run lab -- up`");
  pool = ["hv1", "hv2"].map((h) => inv.backends.find((b) => b.hypervisor === h)!);
  unlock = await lockLab("hv1-gre");
  for (const h of ["gw1", "gw2", "hv1", "hv2"]) ssh[h] = await labSsh(inv, h);
  await Promise.all(pool.map(startBulkServer));
  // The edge router reaches the VIP through both gateways, as the lab's client reaches its range.
  inNamespace(EDGE_ROUTER.namespace, [
    "ip",
    "route",
    "replace",
    `${VIP}/32`,
    ...["gw1", "gw2"].flatMap((g) => ["nexthop", "via", inv.hosts[g].segment!.address]),
  ]);
  inNamespace(EDGE_ROUTER.namespace, [
    "ip",
    "-6",
    "route",
    "replace",
    `${VIP6}/128`,
    ...["gw1", "gw2"].flatMap((g) => ["nexthop", "via", ipv6Twin(inv.hosts[g].segment!.address)]),
  ]);
  await lb.purge(lbInputs("mac", true));
});

afterAll(async () => {
  if (inv?.farClient?.address6) {
    inNamespace(EDGE_ROUTER.namespace, ["ip", "route", "del", `${VIP}/32`]);
    inNamespace(EDGE_ROUTER.namespace, ["ip", "-6", "route", "del", `${VIP6}/128`]);
  }
  for (const s of servers) s.kill();
  await lb.delete().catch(() => undefined);
  for (const d of Object.values(hv)) if (d.id) await d.delete().catch(() => undefined);
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
});

describe.each(["mac", "gre", "gre6", "gre, second chance"] as const)("path MTU discovery through DSR, %s delivery", (delivery) => {
  it(`without pathMtu, downloads of ${BYTES / 1e6} MB through a path of a smaller MTU stall (a PMTU black hole), IPv4 and IPv6`, async () => {
    await apply(delivery, false);
    const results = await bothDownloads(4000);
    for (const family of FAMILIES) {
      expect(
        results[family].filter((r) => r.complete),
        `IPv${family}`,
      ).toEqual([]);
      // The connections themselves opened, each on one of the backends: only the full-size segments are lost. (Which
      // backends: the hash's choice; 6 connections over 2 backends all land on one 1 time in 32, so that is not asserted.)
      expect(results[family].map((r) => r.backend).filter((b) => !pool.some((p) => p.name === b))).toEqual([]);
      expect(results[family]).toHaveLength(CONNECTIONS);
    }
  });

  it(`with pathMtu, every download completes, IPv4 and IPv6; the gateways fanned the errors out to both hypervisors`, async () => {
    const before = { 4: await fanoutPackets(4), 6: await fanoutPackets(6) };
    await apply(delivery, true);
    const results = await bothDownloads(20_000);
    const errors = { 4: 0, 6: 0 };
    for (const family of FAMILIES) {
      expect(
        results[family].filter((r) => !r.complete),
        `IPv${family}`,
      ).toEqual([]);
      expect(results[family]).toHaveLength(CONNECTIONS);
      errors[family] = (await fanoutPackets(family)) - before[family];
      expect(errors[family], `IPv${family}`).toBeGreaterThan(0);
    }
    // Each error went to both hypervisors: the one whose conntrack knew the connection delivered it, the other dropped its copy.
    const copies = await hypervisorCopies();
    expect(copies.delivered).toBeGreaterThan(0);
    expect(copies.delivered6).toBeGreaterThan(0);
    expect(copies.dropped).toBeGreaterThan(0);
    console.log(
      `pathMtu, ${delivery}: ${errors[4]} ICMP and ${errors[6]} ICMPv6 errors fanned out by the gateways; on the hypervisors ${copies.delivered} + ${copies.delivered6} delivered (related), ${copies.dropped} copies dropped`,
    );
    // A read reports the same counts: the gateways' errors and copies (one per hypervisor), the hypervisors' accepted and
    // dropped. An error can still arrive after the downloads end (a segment sent before its path MTU was learnt), and
    // the counters only grow: each figure read is between the counters just before the read and just after it.
    type Counted = { packets: number; bytes: number };
    await Promise.all(["gw1", "gw2"].map((g) => runChecked(ssh[g], ["ovs-appctl", "revalidator/wait"])));
    const sent = { 4: await fanoutPackets(4), 6: await fanoutPackets(6) };
    const read = ((await lb.read()).props.traffic as { pathMtu: Record<string, { errors: Counted; copies: number }> }).pathMtu;
    for (const family of FAMILIES) {
      const gateways = read[vipOf(family)];
      expect(gateways.errors.packets).toBeGreaterThanOrEqual(sent[family]);
      expect(gateways.errors.packets).toBeLessThanOrEqual(await fanoutPackets(family));
      expect(gateways.copies).toBe(2 * gateways.errors.packets);
    }
    const copiesBefore = await hypervisorCopies();
    const hypervisors = await Promise.all(
      ["hv1", "hv2"].map(async (h) => ((await hv[h].read()).props.traffic as { pathMtu: { accepted: Counted; dropped: Counted } }).pathMtu),
    );
    const copiesAfter = await hypervisorCopies();
    const accepted = hypervisors.reduce((n, t) => n + t.accepted.packets, 0);
    const dropped = hypervisors.reduce((n, t) => n + t.dropped.packets, 0);
    expect(accepted).toBeGreaterThanOrEqual(copiesBefore.delivered + copiesBefore.delivered6);
    expect(accepted).toBeLessThanOrEqual(copiesAfter.delivered + copiesAfter.delivered6);
    expect(dropped).toBeGreaterThanOrEqual(copiesBefore.dropped);
    expect(dropped).toBeLessThanOrEqual(copiesAfter.dropped);
  });
});
