import * as os from "node:os";
import { createInterface } from "node:readline";
import type { ChildProcess } from "node:child_process";
import type { DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../provider/model/inputs.generated";
import { ownerCookie } from "../provider/model/ids";
import { parseFlows, type DumpedFlow } from "../provider/openflow";
import { greKeyOf } from "../provider/resources/deferred-nat-load-balancer/plan";
import { runChecked } from "../provider/transport/exec";
import type { SshSession } from "../provider/transport/ssh";
import { encapsulateVip, l3dsrCounters, l3dsrDevice, removeVip, type L3dsrTunnel } from "../test/lab/l3dsr";
import { ipv6Twin, type LabBackend, type LabInventory } from "../test/lab/topology";
import { ProviderDriver, labLoadBalancer } from "../test/support/deferred-nat";
import { inNamespace, labSsh, loadInventory, spawnInNamespace, sshTo } from "../test/support/lab";
import type { LoadConfig } from "./programs/load-driver";
import {
  benchProgram,
  fmtInt,
  fmtMs,
  machineNote,
  type BenchContext,
  type BenchReport,
  type Benchmark,
  type Invariant,
  labRun,
  teardownSteps,
  type LabRunOptions,
} from "./common";

/**
 * Issue 8's benchmark: HTTP requests per second and p50/p99 latency through
 * each way a request can reach a server on the lab, side by side in one run,
 * with autocannon (the npm package, run by node inside the lab's client
 * namespace) against small node HTTP servers started for the run in the
 * backend VMs' namespaces (port 8081, a few bytes of body):
 *
 * 1. direct: the client to one server's own address (the baseline);
 * 2. mac delivery: a VIP on DeferredNatLoadBalancer (gw1, gw2; ECMP from the
 *    client), DsrHypervisorFlows in mac mode on hv1 and hv2, 4 servers;
 * 3. gre delivery: the same, the gateways tunnelling to the hypervisors,
 *    DsrHypervisorFlows in gre mode, 4 servers; and the same resources'
 *    IPv6 VIP of the servers' IPv6 addresses (over the IPv4 underlay);
 * 4. external L3DSR: the lab's l3dsr namespace (no OVS) tunnels a VIP in GRE
 *    to hv1, DsrHypervisorFlows in gre mode, 1 server.
 *
 * Every resource goes through the provider's own handlers (check, create,
 * delete), as the engine calls them; all of them exist at once, and the
 * paths are measured in rounds (full: 2 rounds of 5 s, the second in reverse
 * order, so a change of the machine's load weighs on every path alike;
 * smoke: 1 round of 2 s). Before each measurement a 1 s warm-up on fresh
 * connections is not counted.
 *
 * Each run checks that every answer was a 200, that errors and timeouts stay
 * under a small bound, that the servers saw the client's own address on
 * their own address (no SNAT, DNAT on the hypervisor), and that each path
 * went the way it claims: the flow counters of the resources on that path
 * rose by at least one packet per request, those of the other paths did not,
 * and nothing sent from a VIP reached a gateway (a counting flow of the
 * run's own on each). It removes everything at the end, also on failure or
 * Ctrl-C, and checks that nothing of it is left.
 */

export interface Sizes {
  /** Measured rounds; each measures every path once. */
  rounds: number;
  /** Seconds measured per path and round. */
  seconds: number;
  /** Seconds of warm-up before each measurement (not counted). */
  warmupSeconds: number;
  /** Concurrent connections (kept alive: autocannon's model). */
  connections: number;
}
export const FULL: Sizes = { rounds: 2, seconds: 5, warmupSeconds: 1, connections: 16 };
export const SMOKE: Sizes = { rounds: 1, seconds: 2, warmupSeconds: 1, connections: 8 };
/** A request that waits this long counts as a timeout (autocannon resets its connection). */
const TIMEOUT_S = 5;
/** At most this share of requests may end in an error or a timeout; no answer may be other than a 200. */
export const MAX_ERROR_SHARE = 0.001;

/**
 * The servers' ports, one per path (the lab's own backend servers hold
 * 8080): a DsrHypervisorFlows un-NATs its servers' replies by source address
 * and port, so the mac and gre resources on one hypervisor must not share a
 * server port, and the direct path uses one no ovslb flow matches.
 */
export const PORTS = { gre: 8081, mac: 8082, direct: 8083 } as const;
/** VIPs of this benchmark's own (no lab test uses them): three in the gateways' ranges (IPv4 and IPv6), one in the l3dsr's. */
export const VIPS = { mac: "10.0.0.201", gre: "10.0.0.207", gre6: "fd00:20::207", l3dsr: "10.0.0.183" } as const;
const NAMES = { mac: "bench-dsr-mac", gre: "bench-dsr-gre" } as const;
const SPY_COOKIE = ownerCookie("ovslb-bench", "dsr-gre/spy");
const HOSTS = ["gw1", "gw2", "hv1", "hv2"] as const;
type Host = (typeof HOSTS)[number];

type PathKey = "direct" | "mac" | "gre" | "gre6" | "l3dsr";
const PATHS: readonly PathKey[] = ["direct", "mac", "gre", "gre6", "l3dsr"];
const LABEL: Record<PathKey, string> = {
  direct: "direct: client to one server's own address (baseline)",
  mac: "mac delivery: gw1/gw2, DsrHypervisorFlows mac mode on hv1, hv2",
  gre: "gre delivery: gw1/gw2 tunnel to hv1, hv2, DsrHypervisorFlows gre mode",
  gre6: "gre delivery, IPv6 VIP and servers (IPv4 underlay): gw1/gw2 tunnel to hv1, hv2, gre mode",
  l3dsr: "external L3DSR: the l3dsr namespace tunnels GRE to hv1, gre mode",
};
const SHORT: Record<PathKey, string> = {
  direct: "direct",
  mac: "mac delivery",
  gre: "gre delivery",
  gre6: "gre delivery, IPv6",
  l3dsr: "external L3DSR (GRE)",
};

// ---------------------------------------------------------------- servers and client

/** A tiny HTTP server (bench/programs/http-server.ts): answers 200 with its name; counts what it saw; "report" prints and resets the counts. */

export interface ServerCounts {
  requests: number;
  badPeer: number;
  badLocal: number;
  samples: string[];
}

export class Server {
  private readonly lines: string[] = [];
  private waiter?: (line: string | undefined) => void;
  private closed = false;

  private constructor(
    readonly backend: Pick<LabBackend, "name" | "namespace" | "address">,
    private readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout! }).on("line", (l) => {
      const w = this.waiter;
      this.waiter = undefined;
      if (w) w(l);
      else this.lines.push(l);
    });
    child.on("close", () => {
      this.closed = true;
      const w = this.waiter;
      this.waiter = undefined;
      w?.(undefined);
    });
  }

  /**
   * A lab backend's server on this benchmark's ports; with `other`, a server
   * of another namespace (another benchmark's VM) on other ports, IPv4 only,
   * that counts peers other than `other.client`.
   */
  static async start(inv: LabInventory, b: Pick<LabBackend, "name" | "namespace" | "address">, other?: { ports: number[]; client: string }): Promise<Server> {
    const ports = other?.ports ?? (b.name === soleOf(inv).name ? [PORTS.gre, PORTS.mac, PORTS.direct] : [PORTS.gre, PORTS.mac]);
    const addresses = other ? [b.address, other.client] : [b.address, inv.client.address, ipv6Twin(b.address), ipv6Twin(inv.client.address)];
    const child = spawnInNamespace(b.namespace, [process.execPath, benchProgram("http-server.ts"), b.name, ports.join(","), ...addresses]);
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += String(d)));
    const s = new Server(b, child);
    const first = await s.next(5000);
    if (!first || !JSON.parse(first).listening) {
      void s.stop();
      throw new Error(`server in ${b.namespace} did not start: ${first ?? "exited"} ${stderr.trim()}`);
    }
    return s;
  }

  private next(timeoutMs: number): Promise<string | undefined> {
    if (this.lines.length > 0) return Promise.resolve(this.lines.shift());
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.waiter = undefined;
        resolve(undefined);
      }, timeoutMs);
      this.waiter = (l) => {
        clearTimeout(t);
        resolve(l);
      };
    });
  }

  /** What it served since the last report. */
  async report(): Promise<ServerCounts> {
    this.child.stdin!.write("report\n");
    const line = await this.next(5000);
    if (!line) throw new Error(`server ${this.backend.name} did not report`);
    return JSON.parse(line) as ServerCounts;
  }

  /** Ends it (its stdin closes) and waits until it has gone. */
  async stop(): Promise<void> {
    if (this.closed) return;
    const gone = new Promise<void>((resolve) => this.child.once("close", () => resolve()));
    this.child.stdin!.end();
    const t = setTimeout(() => this.child.kill("SIGKILL"), 3000);
    await gone;
    clearTimeout(t);
  }
}

/** The load: autocannon in the client namespace (bench/programs/load-driver.ts), a warm-up, then the measured run. */

export interface RunTotals {
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  resets: number;
  mismatches: number;
  duration: number;
  statusCodeStats: Record<string, { count: number }>;
}
export interface Load {
  warmup: RunTotals;
  run: RunTotals & { autocannonLatency: { p50: number; p99: number; max: number }; requestsAverage: number };
  latencies: number[];
}

/** autocannon against `url` from the lab's client, or from `namespace`. */
export function loadOf(inv: LabInventory, url: string, sizes: Sizes, namespace = inv.client.namespace): Load {
  const cfg: LoadConfig = { url, connections: sizes.connections, seconds: sizes.seconds, warmup: sizes.warmupSeconds, timeout: TIMEOUT_S };
  const out = inNamespace(namespace, [process.execPath, benchProgram("load-driver.ts"), JSON.stringify(cfg)]);
  const parsed = JSON.parse(out.trim().split("\n").pop()!) as Load & { error?: string };
  if (parsed.error) throw new Error(`autocannon: ${parsed.error}`);
  return parsed;
}

/** The p-th percentile of sorted values (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

// ---------------------------------------------------------------- counters

interface Snapshot {
  /** Packets per host counted by each flow of interest, keyed by what they show. */
  packets: Record<string, number>;
  tapSent: number;
  l3dsrSegmentTx: number;
  l3dsrForwarded: number;
}

interface Lab {
  inv: LabInventory;
  ssh: Record<Host, SshSession>;
  lbMac: ProviderDriver;
  lbGre: ProviderDriver;
  hvMac: Record<"hv1" | "hv2", ProviderDriver>;
  hvGre: Record<"hv1" | "hv2", ProviderDriver>;
  tunnel?: L3dsrTunnel;
  servers: Server[];
  /** Set once teardown has run: it runs once, whatever happens. */
  tornDown?: Promise<string[]>;
  /** A create under way: teardown waits for it, then deletes what it made. */
  creating?: Promise<unknown>;
}

const sum = (flows: readonly DumpedFlow[], which: (f: DumpedFlow) => boolean) => flows.filter(which).reduce((n, f) => n + Number(f.nPackets), 0);

async function dump(lab: Lab, host: Host, cookie: string | bigint): Promise<DumpedFlow[]> {
  const c = typeof cookie === "bigint" ? `0x${cookie.toString(16)}` : cookie;
  return parseFlows(await runChecked(lab.ssh[host], ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-flows", "br-seg", `cookie=${c}/-1`]));
}

async function snapshot(lab: Lab): Promise<Snapshot> {
  const { inv } = lab;
  const gws = [inv.hosts.gw1.underlay!.address, inv.hosts.gw2.underlay!.address];
  const l3 = inv.l3dsr!.underlay.address;
  const packets: Record<string, number> = {};
  await Promise.all(
    HOSTS.map(async (h) => {
      // A revalidator pass first, so the datapath's hits are in the flows' counters.
      await runChecked(lab.ssh[h], ["ovs-appctl", "revalidator/wait"]);
      if (h === "gw1" || h === "gw2") {
        packets[`${h}.spy`] = sum(await dump(lab, h, SPY_COOKIE), () => true);
        packets[`${h}.lbMac`] = sum(await dump(lab, h, lab.lbMac.outputs.cookie), (f) => f.match.nw_dst === VIPS.mac);
        const lbGre = await dump(lab, h, lab.lbGre.outputs.cookie);
        packets[`${h}.lbGre`] = sum(lbGre, (f) => f.match.nw_dst === VIPS.gre);
        packets[`${h}.lbGre6`] = sum(lbGre, (f) => f.match.ipv6_dst === VIPS.gre6);
      } else {
        const mac = await dump(lab, h, lab.hvMac[h].outputs.cookie);
        packets[`${h}.mac`] = sum(mac, (f) => f.match.nw_dst === VIPS.mac);
        const gre = await dump(lab, h, lab.hvGre[h].outputs.cookie);
        packets[`${h}.greFromGateways`] = sum(gre, (f) => f.match.nw_dst === VIPS.gre && gws.includes(f.match.tun_src ?? ""));
        packets[`${h}.gre6FromGateways`] = sum(gre, (f) => f.match.ipv6_dst === VIPS.gre6 && gws.includes(f.match.tun_src ?? ""));
        packets[`${h}.greFromL3dsr`] = sum(gre, (f) => f.match.nw_dst === VIPS.l3dsr && f.match.tun_src === l3);
        packets[`${h}.l3dsrVipFromGateways`] = sum(gre, (f) => f.match.nw_dst === VIPS.l3dsr && gws.includes(f.match.tun_src ?? ""));
        packets[`${h}.greDropped`] = sum(
          gre,
          (f) => f.match.nw_dst === undefined && f.match.ipv6_dst === undefined && f.actions.some((a) => a.type === "drop"),
        );
      }
    }),
  );
  const l3c = l3dsrCounters(inv);
  return { packets, tapSent: lab.tunnel?.sent().packets ?? 0, l3dsrSegmentTx: l3c.segment.tx.packets, l3dsrForwarded: l3c.forwarded };
}

function delta(a: Snapshot, b: Snapshot) {
  const d = (k: string) => (b.packets[k] ?? 0) - (a.packets[k] ?? 0);
  return {
    spy: d("gw1.spy") + d("gw2.spy"),
    gatewaysMac: d("gw1.lbMac") + d("gw2.lbMac"),
    gatewaysGre: d("gw1.lbGre") + d("gw2.lbGre"),
    gatewaysGre6: d("gw1.lbGre6") + d("gw2.lbGre6"),
    perGateway: { gw1: d("gw1.lbMac") + d("gw1.lbGre") + d("gw1.lbGre6"), gw2: d("gw2.lbMac") + d("gw2.lbGre") + d("gw2.lbGre6") },
    hypervisorsMac: d("hv1.mac") + d("hv2.mac"),
    hypervisorsGre: d("hv1.greFromGateways") + d("hv2.greFromGateways"),
    perHypervisorGre: { hv1: d("hv1.greFromGateways"), hv2: d("hv2.greFromGateways") },
    hypervisorsGre6: d("hv1.gre6FromGateways") + d("hv2.gre6FromGateways"),
    perHypervisorGre6: { hv1: d("hv1.gre6FromGateways"), hv2: d("hv2.gre6FromGateways") },
    hv1FromL3dsr: d("hv1.greFromL3dsr"),
    l3dsrVipFromGateways: d("hv1.l3dsrVipFromGateways"),
    greDropped: d("hv1.greDropped") + d("hv2.greDropped"),
    tapSent: b.tapSent - a.tapSent,
    l3dsrSegmentTx: b.l3dsrSegmentTx - a.l3dsrSegmentTx,
    l3dsrForwarded: b.l3dsrForwarded - a.l3dsrForwarded,
  };
}
type Delta = ReturnType<typeof delta>;

// ---------------------------------------------------------------- resources

const backendOf = (port: number) => (b: LabBackend) => ({ address: b.address, port, mac: b.mac, hypervisor: b.hypervisor });

/** The 4 servers behind the gateways' VIPs: 2 on hv1, 2 on hv2. */
export const poolOf = (inv: LabInventory) => ["hv1", "hv2"].flatMap((h) => inv.backends.filter((b) => b.hypervisor === h).slice(0, 2));
/** The one server of the direct and external-L3DSR paths. */
export const soleOf = (inv: LabInventory) => inv.backends.find((b) => b.hypervisor === "hv1")!;

export function lbInputs(inv: LabInventory, delivery: "mac" | "gre"): DeferredNatLoadBalancerInputs {
  const vip = delivery === "mac" ? VIPS.mac : VIPS.gre;
  const base = labLoadBalancer(inv, NAMES[delivery], [
    { address: vip, port: 80, protocol: "tcp", backends: poolOf(inv).map(backendOf(PORTS[delivery])) },
    // gre: the IPv6 VIP of the same servers' IPv6 addresses, over the same IPv4 underlay.
    ...(delivery === "gre"
      ? [
          {
            address: VIPS.gre6,
            port: 80,
            protocol: "tcp" as const,
            backends: poolOf(inv).map((b) => ({ ...backendOf(PORTS.gre)(b), address: ipv6Twin(b.address) })),
          },
        ]
      : []),
  ]);
  if (delivery === "mac") return { ...base, hypervisors: ["hv1", "hv2"].map((name) => ({ name })) };
  return {
    ...base,
    delivery: "gre",
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: inv.hosts[g.name].underlay!.address })),
    hypervisors: ["hv1", "hv2"].map((name) => ({ name, tunnelAddress: inv.hosts[name].underlay!.address })),
  };
}

export function hvInputs(inv: LabInventory, hv: "hv1" | "hv2", mode: "mac" | "gre"): DsrHypervisorFlowsInputs {
  const h = inv.hosts[hv];
  const server = (b: LabBackend) => ({ address: b.address, port: PORTS[mode], mac: b.mac, bridgePort: b.port });
  const here = poolOf(inv)
    .filter((b) => b.hypervisor === hv)
    .map(server);
  const common = { host: { connection: sshTo(inv, h), ovsRundir: h.ovsRundir }, bridge: "br-seg" };
  if (mode === "mac") {
    return { ...common, name: `${NAMES.mac}-${hv}`, mode: "mac", vips: [{ address: VIPS.mac, port: 80, protocol: "tcp", backends: here }] };
  }
  // One flow-based GRE port per host: hv1's resource serves the gateways' VIP and the external L3DSR's.
  const sources = [inv.hosts.gw1.underlay!.address, inv.hosts.gw2.underlay!.address, ...(hv === "hv1" ? [inv.l3dsr!.underlay.address] : [])];
  return {
    ...common,
    name: `${NAMES.gre}-${hv}`,
    mode: "gre",
    gre: { allowedSources: sources, key: greKeyOf({ name: NAMES.gre }) },
    vips: [
      { address: VIPS.gre, port: 80, protocol: "tcp", backends: here },
      { address: VIPS.gre6, port: 80, protocol: "tcp", backends: here.map((s) => ({ ...s, address: ipv6Twin(s.address) })) },
      ...(hv === "hv1" ? [{ address: VIPS.l3dsr, port: 80, protocol: "tcp" as const, backends: [server(soleOf(inv))] }] : []),
    ],
  };
}

/** Every resource of the run: the hypervisors first (before a gateway sends them anything), then the load balancers. */
function resources(lab: Lab): Array<{ driver: ProviderDriver; inputs: object }> {
  const { inv } = lab;
  return [
    ...(["hv1", "hv2"] as const).flatMap((h) => [
      { driver: lab.hvMac[h], inputs: hvInputs(inv, h, "mac") },
      { driver: lab.hvGre[h], inputs: hvInputs(inv, h, "gre") },
    ]),
    { driver: lab.lbMac, inputs: lbInputs(inv, "mac") },
    { driver: lab.lbGre, inputs: lbInputs(inv, "gre") },
  ];
}

/** Removes whatever an interrupted run left: its resources (by their inputs), its counting flows, its tunnel. */
async function purge(lab: Lab): Promise<void> {
  for (const r of resources(lab).reverse()) await r.driver.purge(r.inputs);
  for (const g of ["gw1", "gw2"] as const) await runChecked(lab.ssh[g], ["ovs-ofctl", "del-flows", "br-seg", `cookie=0x${SPY_COOKIE.toString(16)}/-1`]);
  removeVip(lab.inv, VIPS.l3dsr);
}

/** Deletes what this run made, load balancers first; every step is tried, once. Returns what failed. */
function teardown(lab: Lab): Promise<string[]> {
  lab.tornDown ??= teardownOnce(lab);
  return lab.tornDown;
}

async function teardownOnce(lab: Lab): Promise<string[]> {
  await lab.creating?.catch(() => undefined);
  const { failed, attempt } = teardownSteps();
  await attempt("l3dsr tunnel", () => (lab.tunnel ? lab.tunnel.close() : removeVip(lab.inv, VIPS.l3dsr)));
  for (const r of resources(lab).reverse()) {
    // A resource whose create never returned is purged by its inputs (what an interrupted create left).
    await attempt(`delete ${(r.inputs as { name: string }).name}`, async () => (r.driver.id ? r.driver.delete() : r.driver.purge(r.inputs)));
  }
  for (const g of ["gw1", "gw2"] as const) {
    await attempt(
      `${g} counting flows`,
      () => lab.ssh[g] && runChecked(lab.ssh[g], ["ovs-ofctl", "del-flows", "br-seg", `cookie=0x${SPY_COOKIE.toString(16)}/-1`]),
    );
  }
  for (const s of lab.servers) await attempt(`server ${s.backend.name}`, () => s.stop());
  return failed;
}

/** What is left of the run: flows with its cookies, ports it owned, its tunnel device, its servers. */
async function leftBehind(lab: Lab, cookies: readonly string[]): Promise<string[]> {
  const left: string[] = [];
  for (const h of HOSTS) {
    for (const c of cookies) {
      const n = (await dump(lab, h, c)).length;
      if (n > 0) left.push(`${h}: ${n} flows with cookie ${c}`);
    }
    const ports = await runChecked(lab.ssh[h], ["ovs-vsctl", "--columns=name,external_ids", "list", "Port"]);
    if (ports.includes("bench-dsr-")) left.push(`${h}: a port owned by this run`);
  }
  const links = inNamespace(lab.inv.l3dsr!.namespace, ["ip", "-o", "link", "show"]);
  if (links.includes(l3dsrDevice(VIPS.l3dsr))) left.push("l3dsr: the tunnel device");
  for (const b of [...poolOf(lab.inv)]) {
    for (const port of Object.values(PORTS)) {
      if (inNamespace(b.namespace, ["ss", "-Htln", `sport = :${port}`]).trim() !== "") left.push(`${b.name}: something listens on ${port}`);
    }
  }
  return left;
}

// ---------------------------------------------------------------- measuring

interface Measurement {
  path: PathKey;
  round: number;
  url: string;
  load: Omit<Load, "latencies">;
  reqPerSec: number;
  p50: number;
  p99: number;
  served: Record<string, ServerCounts>;
  counters: Delta;
  loadAverage: string;
}

interface PathResult {
  path: PathKey;
  servers: string[];
  requests: number;
  seconds: number;
  reqPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  perRound: number[];
  errors: number;
  timeouts: number;
  non2xx: number;
}

const urlOf = (inv: LabInventory, path: PathKey) =>
  path === "direct"
    ? `http://${soleOf(inv).address}:${PORTS.direct}/`
    : path === "gre6"
      ? `http://[${VIPS.gre6}]:80/`
      : `http://${path === "mac" ? VIPS.mac : path === "gre" ? VIPS.gre : VIPS.l3dsr}:80/`;

async function measure(lab: Lab, path: PathKey, round: number, sizes: Sizes, ctx: BenchContext): Promise<Measurement & { latencies: number[] }> {
  const url = urlOf(lab.inv, path);
  if (path === "l3dsr") {
    // The l3dsr never sends on its segment leg, so the segment's Linux bridge forgets its MAC (300 s) and floods the
    // client's frames for it to every host, the gateways included, whose tunnel ports copy them to hv1: one frame
    // from it, before counting, keeps the measured path the one it claims.
    inNamespace(lab.inv.l3dsr!.namespace, ["ping", "-c", "1", "-W", "1", "-q", lab.inv.client.address]);
  }
  for (const s of lab.servers) await s.report(); // reset
  const before = await snapshot(lab);
  const loadAverage = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
  const { latencies, ...load } = loadOf(lab.inv, url, sizes);
  const after = await snapshot(lab);
  const served: Record<string, ServerCounts> = {};
  for (const s of lab.servers) served[s.backend.name] = await s.report();
  latencies.sort((a, b) => a - b);
  const m = {
    path,
    round,
    url,
    load,
    reqPerSec: load.run.ok / load.run.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    served,
    counters: delta(before, after),
    loadAverage,
    latencies,
  };
  ctx.log(
    `  round ${round + 1}, ${SHORT[path]}: ${fmtInt(Math.round(m.reqPerSec))} req/s, p50 ${fmtMs(m.p50)}, p99 ${fmtMs(m.p99)} (${fmtInt(load.run.ok)} answers in ${load.run.duration.toFixed(1)} s; load ${loadAverage})`,
  );
  return m;
}

/** What one measurement shows, as invariants: answers, servers, and the path it took. */
function pathInvariants(lab: Lab, m: Measurement, sizes: Sizes): Invariant[] {
  const tag = `${SHORT[m.path]}, round ${m.round + 1}`;
  const { warmup, run } = m.load;
  const answered = warmup.ok + run.ok;
  const out: Invariant[] = [];
  const failures = run.errors + run.timeouts;
  out.push({
    name: `${tag}: every answer was a 200, errors and timeouts at most ${MAX_ERROR_SHARE * 100}% of requests`,
    ok: run.ok > 0 && run.non2xx === 0 && warmup.non2xx === 0 && run.mismatches === 0 && failures <= Math.floor(MAX_ERROR_SHARE * run.ok),
    detail: `${fmtInt(run.ok)} 200s, ${run.non2xx} other, ${run.errors} errors, ${run.timeouts} timeouts`,
  });
  const servedBy = Object.entries(m.served).filter(([, c]) => c.requests > 0);
  const total = servedBy.reduce((n, [, c]) => n + c.requests, 0);
  const bad = servedBy.flatMap(([n, c]) => (c.badPeer + c.badLocal > 0 ? [`${n}: ${c.samples.join(", ")}`] : []));
  out.push({
    name: `${tag}: the servers answered every request counted (and no more than were sent), each from the client's own address to the server's own address`,
    // At most one request per connection is in flight when the warm-up or the run stops, and a reset one may have been served.
    ok: total >= answered && total <= answered + 2 * sizes.connections + run.errors + warmup.errors && bad.length === 0,
    detail: `servers saw ${fmtInt(total)}, client got ${fmtInt(answered)} answers${bad.length ? `; ${bad.join("; ")}` : ""}`,
  });
  const names = servedBy.map(([n]) => n).sort();
  const sole = soleOf(lab.inv).name;
  const pool = poolOf(lab.inv).map((b) => b.name);
  const c = m.counters;
  const atLeast = (n: number) => n >= answered;
  if (m.path === "direct" || m.path === "l3dsr") {
    out.push({ name: `${tag}: only ${sole} answered`, ok: names.length === 1 && names[0] === sole, detail: names.join(", ") });
  } else {
    out.push({
      name: `${tag}: answered by servers of the VIP on both hypervisors`,
      ok: names.every((n) => pool.includes(n)) && names.some((n) => n.startsWith("hv1-")) && names.some((n) => n.startsWith("hv2-")),
      detail: names.map((n) => `${n} ${fmtInt(m.served[n].requests)}`).join(", "),
    });
  }
  out.push({ name: `${tag}: nothing sent from a VIP reached a gateway`, ok: c.spy === 0, detail: `${c.spy} packets` });
  const keys = ["gatewaysMac", "gatewaysGre", "gatewaysGre6", "hypervisorsMac", "hypervisorsGre", "hypervisorsGre6", "hv1FromL3dsr"] as const;
  const ownOnly = (want: Partial<Record<(typeof keys)[number], boolean>>) => {
    const wrong = keys.filter((k) => (want[k] ? !atLeast(c[k]) : c[k] !== 0));
    return { ok: wrong.length === 0, detail: keys.map((k) => `${k} ${fmtInt(c[k])}`).join(", ") };
  };
  switch (m.path) {
    case "direct":
      out.push({ name: `${tag}: no flow of the load balancers or the hypervisors' DSR saw it`, ...ownOnly({}) });
      break;
    case "mac":
      out.push({
        name: `${tag}: the gateways' mac VIP flows and the hypervisors' mac request flows counted at least a packet per answer; no GRE flow counted any`,
        ...ownOnly({ gatewaysMac: true, hypervisorsMac: true }),
      });
      break;
    case "gre":
      out.push({
        name: `${tag}: the gateways' gre VIP flows and the hypervisors' GRE request flows (from the gateways' tunnel addresses) counted at least a packet per answer; no mac flow counted any`,
        ...ownOnly({ gatewaysGre: true, hypervisorsGre: true }),
      });
      out.push({
        name: `${tag}: GRE arrived on both hypervisors`,
        ok: c.perHypervisorGre.hv1 > 0 && c.perHypervisorGre.hv2 > 0,
        detail: `hv1 ${fmtInt(c.perHypervisorGre.hv1)}, hv2 ${fmtInt(c.perHypervisorGre.hv2)}`,
      });
      break;
    case "gre6":
      out.push({
        name: `${tag}: the gateways' IPv6 VIP flows and the hypervisors' IPv6 GRE request flows (from the gateways' tunnel addresses) counted at least a packet per answer; no IPv4 VIP flow counted any`,
        ...ownOnly({ gatewaysGre6: true, hypervisorsGre6: true }),
      });
      out.push({
        name: `${tag}: GRE arrived on both hypervisors`,
        ok: c.perHypervisorGre6.hv1 > 0 && c.perHypervisorGre6.hv2 > 0,
        detail: `hv1 ${fmtInt(c.perHypervisorGre6.hv1)}, hv2 ${fmtInt(c.perHypervisorGre6.hv2)}`,
      });
      break;
    case "l3dsr":
      out.push({
        name: `${tag}: hv1's GRE request flow from the l3dsr's address counted at least a packet per answer; no gateway flow counted any`,
        ...ownOnly({ hv1FromL3dsr: true }),
      });
      out.push({
        name: `${tag}: no copy of its requests reached hv1 through the gateways' tunnels (the segment did not flood them)`,
        ok: c.l3dsrVipFromGateways === 0,
        detail: `${fmtInt(c.l3dsrVipFromGateways)} packets`,
      });
      out.push({
        name: `${tag}: the l3dsr tunnelled the requests and sent nothing back toward the client (replies bypassed it)`,
        ok: c.tapSent >= answered && c.l3dsrForwarded >= answered && c.l3dsrSegmentTx <= 5,
        detail: `tunnelled ${fmtInt(c.tapSent)}, forwarded ${fmtInt(c.l3dsrForwarded)}, sent on its segment leg ${c.l3dsrSegmentTx}`,
      });
      break;
  }
  // The gateways' tunnel ports sit on br-seg, so NORMAL floods (ARP, unknown unicast) reach the hypervisors' GRE port, where the drop rule takes them.
  out.push({
    name: `${tag}: GRE dropped on the hypervisors (floods from the gateways' tunnel ports) stayed under 1% of the answers`,
    ok: c.greDropped <= 50 + answered / 100,
    detail: `${fmtInt(c.greDropped)} packets`,
  });
  return out;
}

function combine(path: PathKey, ms: ReadonlyArray<Measurement & { latencies: number[] }>): PathResult {
  const mine = ms.filter((m) => m.path === path);
  const latencies = mine.flatMap((m) => m.latencies).sort((a, b) => a - b);
  const requests = mine.reduce((n, m) => n + m.load.run.ok, 0);
  const seconds = mine.reduce((n, m) => n + m.load.run.duration, 0);
  const servers = [
    ...new Set(
      mine.flatMap((m) =>
        Object.entries(m.served)
          .filter(([, c]) => c.requests > 0)
          .map(([n]) => n),
      ),
    ),
  ].sort();
  return {
    path,
    servers,
    requests,
    seconds,
    reqPerSec: requests / seconds,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1] ?? NaN,
    perRound: mine.map((m) => m.reqPerSec),
    errors: mine.reduce((n, m) => n + m.load.run.errors, 0),
    timeouts: mine.reduce((n, m) => n + m.load.run.timeouts, 0),
    non2xx: mine.reduce((n, m) => n + m.load.run.non2xx, 0),
  };
}

// ---------------------------------------------------------------- the report

const ratio = (x: number, base: number) => `${(x / base).toFixed(2)}×`;
const fmtLat = (ms: number) => (ms >= 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(2)} ms`);

function table(results: readonly PathResult[], sizes: Sizes): string {
  const direct = results.find((r) => r.path === "direct")!;
  const rows = results.map((r) => {
    const servers = r.servers.length === 1 ? r.servers[0] : `${r.servers.length} (${r.servers.join(", ")})`;
    const rounds = r.perRound.length > 1 ? ` (rounds: ${r.perRound.map((x) => fmtInt(Math.round(x))).join(", ")})` : "";
    return `| ${LABEL[r.path]} | ${servers} | ${fmtInt(Math.round(r.reqPerSec))}${rounds} | ${ratio(r.reqPerSec, direct.reqPerSec)} | ${fmtLat(r.p50)} | ${ratio(r.p50, direct.p50)} | ${fmtLat(r.p99)} | ${ratio(r.p99, direct.p99)} | ${fmtInt(r.requests)}, ${r.errors + r.timeouts} errors/timeouts |`;
  });
  return [
    `| Path | Servers | Requests/s${sizes.rounds > 1 ? " (per round)" : ""} | vs direct | p50 | vs direct | p99 | vs direct | Answers (all 200) |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

export const dsrGreBenchmark: Benchmark = {
  name: "dsr-gre",
  description: "issue 8: HTTP req/s and p50/p99 (autocannon) direct vs mac delivery vs gre delivery vs an external L3DSR over GRE",
  async run(ctx) {
    const sizes = ctx.smoke ? SMOKE : FULL;
    const inv = loadInventory();
    if (!inv.l3dsr) throw new Error('this lab has no l3dsr namespace: run "npm run lab -- down && npm run lab -- up"');
    const lab: Lab = {
      inv,
      ssh: {} as Lab["ssh"],
      lbMac: new ProviderDriver("DeferredNatLoadBalancer"),
      lbGre: new ProviderDriver("DeferredNatLoadBalancer"),
      hvMac: { hv1: new ProviderDriver("DsrHypervisorFlows"), hv2: new ProviderDriver("DsrHypervisorFlows") },
      hvGre: { hv1: new ProviderDriver("DsrHypervisorFlows"), hv2: new ProviderDriver("DsrHypervisorFlows") },
      servers: [],
    };
    const invariants: Invariant[] = [];
    const run: LabRunOptions = {
      locks: ["hv1-gre"],
      interrupted: "removing this run's resources, flows, tunnel and servers",
      teardown: () => teardown(lab),
      close: () => {
        for (const s of Object.values(lab.ssh)) s.close();
      },
    };
    return labRun(ctx, run, async (interrupted) => {
      for (const h of HOSTS) lab.ssh[h] = await labSsh(inv, h);
      const machine = await machineNote(lab.ssh.gw1);
      await purge(lab);

      ctx.log(
        `starting servers (ports ${Object.values(PORTS).join(", ")}) in ${poolOf(inv)
          .map((b) => b.name)
          .join(", ")}`,
      );
      for (const b of poolOf(inv)) lab.servers.push(await Server.start(inv, b));

      ctx.log("creating the resources through the provider's handlers");
      for (const r of resources(lab)) {
        if (interrupted()) throw new Error("interrupted");
        lab.creating = r.driver.create(r.inputs);
        await lab.creating;
      }
      for (const g of ["gw1", "gw2"] as const) {
        // Counts whatever reaches the gateway from a VIP: a reply that passed through it would.
        for (const vip of Object.values(VIPS)) {
          const from = vip.includes(":") ? `tcp6,ipv6_src=${vip}` : `tcp,nw_src=${vip}`;
          await runChecked(lab.ssh[g], [
            "ovs-ofctl",
            "add-flow",
            "br-seg",
            `cookie=0x${SPY_COOKIE.toString(16)},priority=2000,${from},tp_src=80,actions=NORMAL`,
          ]);
        }
      }
      lab.tunnel = encapsulateVip(inv, { vip: VIPS.l3dsr, hypervisor: "hv1", key: greKeyOf({ name: NAMES.gre }), innerMac: soleOf(inv).mac });
      const cookies = [
        lab.lbMac.outputs.cookie,
        lab.lbGre.outputs.cookie,
        lab.hvMac.hv1.outputs.cookie,
        lab.hvMac.hv2.outputs.cookie,
        lab.hvGre.hv1.outputs.cookie,
        lab.hvGre.hv2.outputs.cookie,
        `0x${SPY_COOKIE.toString(16)}`,
      ] as string[];

      // The servers hold no VIP, no tunnel and no special sysctl.
      const bare = poolOf(inv).filter((b) => {
        const addrs = inNamespace(b.namespace, ["ip", "-o", "addr", "show"]);
        const links = inNamespace(b.namespace, ["ip", "-d", "-o", "link", "show"]);
        const sysctl = ["arp_ignore", "arp_announce"].map((k) => inNamespace(b.namespace, ["sysctl", "-n", `net.ipv4.conf.all.${k}`]).trim());
        return Object.values(VIPS).every((v) => !addrs.includes(v)) && !/\b(gre|gretap|ipip|ip6tnl)\b/.test(links) && sysctl.every((v) => v === "0");
      });
      invariants.push({
        name: "the servers hold no VIP address, no tunnel interface and arp_ignore = arp_announce = 0",
        ok: bare.length === poolOf(inv).length,
        detail: `${bare.length} of ${poolOf(inv).length}`,
      });

      ctx.log(`measuring: ${sizes.rounds} round(s) of ${sizes.seconds} s per path, ${sizes.connections} connections, ${sizes.warmupSeconds} s warm-up each`);
      const measurements: Array<Measurement & { latencies: number[] }> = [];
      for (let round = 0; round < sizes.rounds; round++) {
        const order = round % 2 === 0 ? PATHS : [...PATHS].reverse();
        for (const path of order) {
          if (interrupted()) throw new Error("interrupted");
          const m = await measure(lab, path, round, sizes, ctx);
          measurements.push(m);
          invariants.push(...pathInvariants(lab, m, sizes));
        }
      }
      const results = PATHS.map((p) => combine(p, measurements));

      // Take everything down, and check that nothing is left.
      const failed = await teardown(lab);
      invariants.push({
        name: "every resource, counting flow, tunnel and server of the run was removed",
        ok: failed.length === 0,
        detail: failed.join("; ") || undefined,
      });
      const left = await leftBehind(lab, cookies);
      invariants.push({
        name: "nothing of the run is left (flows with its cookies, ports it owned, the tunnel device, a listener on :8081)",
        ok: left.length === 0,
        detail: left.join("; ") || undefined,
      });

      const direct = results.find((r) => r.path === "direct")!;
      const data = {
        machine,
        tool: `autocannon ${require("autocannon/package.json").version} (npm), run by node ${process.version} in namespace ${inv.client.namespace}`,
        sizes,
        timeoutSeconds: TIMEOUT_S,
        serverPorts: PORTS,
        vips: VIPS,
        results,
        ratiosToDirect: Object.fromEntries(
          results.map((r) => [r.path, { reqPerSec: r.reqPerSec / direct.reqPerSec, p50: r.p50 / direct.p50, p99: r.p99 / direct.p99 }]),
        ),
        measurements: measurements.map(({ latencies: _l, ...m }) => m),
      };
      const markdown = [
        "### HTTP through each path, side by side",
        "",
        table(results, sizes),
        "",
        `autocannon ${require("autocannon/package.json").version}, ${sizes.connections} keep-alive connections, pipelining 1, GET / answered with a ${"hv1-vm1\n".length}-byte body by a node http server; ` +
          `${sizes.rounds} round(s) of ${sizes.seconds} s per path${sizes.rounds > 1 ? " (the second round in reverse order)" : ""}, each after a ${sizes.warmupSeconds} s warm-up that is not counted. ` +
          "Latency percentiles are over every answer's own time (autocannon's response event, microseconds kept); requests/s is answers over the measured seconds.",
        "",
        `The IPv6 row is a second VIP (${VIPS.gre6}) of the same gre load balancer and hypervisor resources, the same 4 servers at their IPv6 addresses (the servers listen on both families), tunnelled over the same IPv4 underlay; ` +
          "the client reaches it by the lab's IPv6 ECMP route over both gateways.",
        "",
        "These are figures of the userspace lab: 2 cores shared by the client, the servers, every emulated host's ovs-vswitchd (userspace datapath, no DPDK) and anything else running; " +
          "each path is as fast as the CPU left to it, and the ratios say what each hop costs relative to the others on this machine, not what a real deployment would do. " +
          "The only published number for this design is an operator's OVS-DPDK + eBPF build: 1,127 requests/s with p99 157 ms (ApacheBench).",
        "",
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} (${os.cpus().length} cores) as the run started; ${machine.date}.`,
      ].join("\n");
      return { name: "dsr-gre", markdown, data, invariants } satisfies BenchReport;
    });
  },
};
