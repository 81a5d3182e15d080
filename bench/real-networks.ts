import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";
import { check } from "../provider/handlers";
import { renderBundle, type Modification } from "../provider/openflow";
import type { ObservedBridge } from "../provider/engine/plan";
import {
  assignIds,
  foreignGroupsOn,
  greKeyOf,
  pathMtuFlows,
  planGateway,
  tunnelPorts,
  withDefaults,
  type GatewayPort,
  type RecordedIds,
} from "../provider/resources/deferred-nat-load-balancer/plan";
import { runChecked } from "../provider/transport/exec";
import { OpenFlowBridge } from "../provider/transport/openflow-bridge";
import { type UnixctlClient, connectVswitchd } from "../provider/transport/unixctl";
import { CLIENT } from "../test/lab/topology";
import { CAPTURE, ConntrackFlood, GATEWAYS, INJECTOR, LIMIT, MAXCONNS, VIP_A, VIP_B, flood } from "../test/support/real-networks";
import { labSsh, loadInventory, spawnInNamespace, sshTo } from "../test/support/lab";
import { startOvsSandbox, type OvsSandbox } from "../test/support/sandbox";
import { openLiveConnections, type LiveConnections } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import {
  fmtInt,
  labRun,
  machineNote,
  median,
  teardownSteps,
  type BenchContext,
  type BenchReport,
  type Benchmark,
  type Invariant,
  type LabRunOptions,
} from "./common";

/**
 * The "Real networks" features' costs and effects, side by side in one run:
 *
 * 1. pathMtu's ICMP fan-out per hypervisor count: a gateway sends each ICMP
 *    "fragmentation needed" error addressed to a VIP to every hypervisor
 *    serving it. On a private ovs-vswitchd (userspace datapath, the lab's
 *    OVS) whose bridge is planned by DeferredNatLoadBalancer's own planner
 *    (check, withDefaults, tunnelPorts, assignIds, planGateway, which holds
 *    pathMtuFlows), errors are sent as packets from a raw socket on the far
 *    end of its segment port (a veth), and what leaves is read from the
 *    ports' tx counters (segment port, underlay port), from a capture of
 *    every frame sent, and ovs-vswitchd's CPU from /proc; with and without
 *    pathMtu, mac and gre delivery, 1 to 16 hypervisors.
 * 2. connectionLimit's flood figures: the conntrack-limits scenario
 *    (test/support/real-networks.ts) measured on the lab: SYNs sent, zone
 *    A's entries with and without the limit, B's established and new
 *    connections during the flood, the gateways' conntrack entries.
 *
 * Every figure is measured in the run; the invariants (copies = hypervisor
 * count, zone A <= limit, B's connections all kept, gateways' conntrack 0)
 * fail the run when they do not hold.
 */

export interface Sizes {
  /** Hypervisor counts of the fan-out. */
  hypervisors: readonly number[];
  /** ICMP errors per timed injection. */
  errors: number;
  /** Timed injections per configuration (median reported). */
  runs: number;
  /** Distinct errors captured per configuration (every copy's destination checked). */
  captured: number;
  /** The flood: SYNs at A, B's long-lived connections, B's new ones tried during the flood (with the limit; half without). */
  syns: number;
  liveB: number;
  newB: number;
}
export const FULL: Sizes = { hypervisors: [1, 2, 4, 8, 16], errors: 20_000, runs: 3, captured: 16, syns: 6000, liveB: 20, newB: 20 };
export const SMOKE: Sizes = { hypervisors: [1, 2], errors: 2_000, runs: 1, captured: 4, syns: 3000, liveB: 10, newB: 10 };

const NAME = "bench-real-networks";
const VIP = "10.0.0.160";
/** The sandbox gateway: the lab's gw1 segment MAC and address, its underlay on 172.31.0.0/16. */
const GW = { mac: "02:00:0a:00:00:0b", address: "10.0.0.11/24", tunnel: "172.31.0.1", underlayMac: "02:00:ac:1f:00:01" };
/** Who sends the errors: the lab's edge router (10.0.0.5), about the far client (10.0.3.2). */
const ROUTER = { mac: "02:00:0a:00:00:05", address: "10.0.0.5" };
const FAR_CLIENT = "10.0.3.2";
const SEGMENT_OFPORT = 1;
/** A Linux router's ICMP error: 576 bytes of IP at most (icmp_send), so a full-size segment's error is 576 B (590 B framed). */
const ERROR_IP_BYTES = 576;
const ERROR_FRAME_BYTES = 14 + ERROR_IP_BYTES;
/** GRE with a key (8) + outer IPv4 (20) + outer Ethernet (14). */
const GRE_OVERHEAD = 42;
/** Distinct errors (each about its own connection), sent in turn. */
const DISTINCT = 64;
/** The injector's pace: a burst of this many frames, then PACE_MS (about 16,000 a second: the port's socket buffer never fills). */
const BURST = 16;
const PACE_MS = 1;

type Delivery = "mac" | "gre";
const DELIVERIES: readonly Delivery[] = ["mac", "gre"];

const hvName = (i: number) => `hv${i}`;
const hex2 = (i: number) => i.toString(16).padStart(2, "0");
const backendMac = (i: number) => `02:00:00:01:00:${hex2(i)}`;
const tunnelAddress = (i: number) => `172.31.1.${i}`;
const underlayMac = (i: number) => `02:00:ac:1f:01:${hex2(i)}`;

// ---------------------------------------------------------------- ICMP errors

function checksum(b: Buffer): number {
  let s = 0;
  for (let i = 0; i + 1 < b.length; i += 2) s += b.readUInt16BE(i);
  if (b.length % 2) s += b[b.length - 1] << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return ~s & 0xffff;
}

const ip4 = (a: string) => Buffer.from(a.split(".").map(Number));
const macBytes = (m: string) => Buffer.from(m.replace(/:/g, ""), "hex");

function ipv4Header(total: number, id: number, flags: number, ttl: number, proto: number, src: string, dst: string, tos = 0): Buffer {
  const h = Buffer.alloc(20);
  h.writeUInt8(0x45, 0);
  h.writeUInt8(tos, 1);
  h.writeUInt16BE(total, 2);
  h.writeUInt16BE(id, 4);
  h.writeUInt16BE(flags, 6);
  h.writeUInt8(ttl, 8);
  h.writeUInt8(proto, 9);
  ip4(src).copy(h, 12);
  ip4(dst).copy(h, 16);
  h.writeUInt16BE(checksum(h), 10);
  return h;
}

/**
 * Error `i`: ICMP type 3 code 4 (next-hop MTU 1400) from the edge router to
 * the VIP, about a 1500-byte segment VIP:80 -> far client (port 40000+i),
 * quoting as much of it as a Linux router does; framed to the gateway's MAC.
 */
function icmpError(i: number): Buffer {
  const quoted = Buffer.alloc(ERROR_IP_BYTES - 28);
  ipv4Header(1500, i, 0x4000, 63, 6, VIP, FAR_CLIENT).copy(quoted, 0);
  const tcp = quoted.subarray(20);
  tcp.writeUInt16BE(80, 0);
  tcp.writeUInt16BE(40000 + i, 2);
  tcp.writeUInt32BE(1000 + i * 1448, 4);
  tcp.writeUInt8(5 << 4, 12);
  tcp.writeUInt8(0x18, 13);
  const icmp = Buffer.concat([Buffer.from([3, 4, 0, 0, 0, 0, 0x05, 0x78]), quoted]);
  icmp.writeUInt16BE(checksum(icmp), 2);
  const ip = ipv4Header(ERROR_IP_BYTES, 0x1000 + i, 0, 64, 1, ROUTER.address, VIP, 0xc0);
  return Buffer.concat([macBytes(GW.mac), macBytes(ROUTER.mac), Buffer.from([0x08, 0x00]), ip, icmp]);
}

// ---------------------------------------------------------------- the sandbox gateway

interface Sandbox {
  sbx: OvsSandbox;
  ns: string;
  pid: number;
  unixctl: UnixctlClient;
  bridge: OpenFlowBridge;
  ul0: number;
  /** Tunnel ports made for the current configuration, by name. */
  ports: Set<string>;
}

const nsRun = (ns: string, argv: string[]) => execFileSync("ip", ["netns", "exec", ns, ...argv], { encoding: "utf8" });

/**
 * A private ovsdb-server + ovs-vswitchd (test/support/sandbox.ts), but with
 * the namespace's routes: a gre port's local_ip needs a local route for it in
 * ovs-vswitchd's route table, which `--disable-system-route` leaves empty
 * ("native tunnel routing failed"). br-seg (the lab's gateway MAC and
 * address, seg0 a veth whose other end inj0 the errors come from) and
 * br-phy (ul0 a veth to ulp, the
 * gateway's tunnel address on its local port) as the lab's gateways have them.
 */
async function startSandbox(maxHypervisors: number): Promise<Sandbox> {
  const sbx = startOvsSandbox({ vswitchd: false });
  const ns = `ovslb-sbx-${sbx.dir.slice(-6)}`;
  try {
    if (!execFileSync("ip", ["netns", "list"], { encoding: "utf8" }).includes(ns)) throw new Error(`sandbox namespace ${ns} not found`);
    // No IPv6 on the bridges' local ports: their router solicitations would leave by the underlay and count.
    for (const k of ["all", "default"]) nsRun(ns, ["sysctl", "-q", "-w", `net.ipv6.conf.${k}.disable_ipv6=1`]);
    const env = { ...process.env, OVS_RUNDIR: sbx.dir, OVS_DBDIR: sbx.dir, OVS_LOGDIR: sbx.dir, OVS_SYSCONFDIR: sbx.dir };
    execFileSync(
      "ip",
      [
        "netns",
        "exec",
        ns,
        "ovs-vswitchd",
        `unix:${sbx.dbSock}`,
        "--disable-system",
        `--pidfile=${join(sbx.dir, "ovs-vswitchd.pid")}`,
        "--detach",
        "-vconsole:err",
        `--log-file=${join(sbx.dir, "ovs-vswitchd.log")}`,
      ],
      { env },
    );
    const pid = Number(readFileSync(join(sbx.dir, "ovs-vswitchd.pid"), "utf8").trim());
    const vsctl = (...args: string[]) => runChecked(sbx.runner, ["ovs-vsctl", ...args]);
    const socket = sbx.addBridge("br-seg");
    await vsctl("set", "bridge", "br-seg", `other_config:hwaddr=${GW.mac}`);
    for (const [port, peer] of [
      ["seg0", "inj0"],
      ["ul0", "ulp"],
    ]) {
      nsRun(ns, ["ip", "link", "add", port, "type", "veth", "peer", "name", peer]);
      for (const l of [port, peer]) nsRun(ns, ["ip", "link", "set", l, "up"]);
    }
    await vsctl("add-port", "br-seg", "seg0", "--", "set", "interface", "seg0", `ofport_request=${SEGMENT_OFPORT}`);
    sbx.addBridge("br-phy");
    await vsctl("set", "bridge", "br-phy", `other_config:hwaddr=${GW.underlayMac}`);
    await vsctl("add-port", "br-phy", "ul0");
    nsRun(ns, ["ip", "link", "set", "br-seg", "up"]);
    nsRun(ns, ["ip", "addr", "add", GW.address, "dev", "br-seg"]);
    nsRun(ns, ["ip", "link", "set", "br-phy", "up"]);
    nsRun(ns, ["ip", "addr", "add", `${GW.tunnel}/16`, "dev", "br-phy"]);
    const appctl = (...args: string[]) => runChecked(sbx.runner, ["ovs-appctl", ...args]);
    await waitUntil(async () => new RegExp(`${GW.tunnel.replace(/\./g, "\\.")}/32 dev br-phy .*local`).test(await appctl("ovs/route/show")), {
      what: "the sandbox's local route for its tunnel address",
      timeoutMs: 10_000,
    });
    // The "hypervisors" do not exist: their underlay MACs are set by hand, so every copy is sent (and counted by ul0).
    for (let i = 1; i <= maxHypervisors; i++) await appctl("tnl/neigh/set", "br-phy", tunnelAddress(i), underlayMac(i));
    const ul0 = Number((await vsctl("get", "interface", "ul0", "ofport")).trim());
    const unixctl = await connectVswitchd(sbx.runner, sbx.rundir);
    return { sbx, ns, pid, unixctl, bridge: new OpenFlowBridge(sbx.runner, socket), ul0, ports: new Set() };
  } catch (e) {
    sbx.stop();
    throw e;
  }
}

/** ovs-vswitchd's CPU time so far, all threads, in ns (schedstat: time on a CPU). */
function cpuNs(pid: number): number {
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      /* a thread that ended */
    }
  }
  return ns;
}

interface PortCounts {
  rxPackets: number;
  txPackets: number;
  txBytes: number;
}

/** Port counters by ofport ("LOCAL" for the local port), straight from the datapath (dump-ports). */
async function portCounts(sb: Sandbox, bridge: string): Promise<Map<string, PortCounts>> {
  const out = await runChecked(sb.sbx.runner, ["ovs-ofctl", "dump-ports", bridge]);
  const map = new Map<string, PortCounts>();
  for (const m of out.matchAll(/port\s+(\S+?):\s+rx pkts=(\d+), bytes=\d+.*\n\s+tx pkts=(\d+), bytes=(\d+)/g))
    map.set(m[1], { rxPackets: Number(m[2]), txPackets: Number(m[3]), txBytes: Number(m[4]) });
  return map;
}

interface Counters {
  segTx: PortCounts;
  ulTx: PortCounts;
  localTx: PortCounts;
}
async function counters(sb: Sandbox): Promise<Counters> {
  const [seg, phy] = await Promise.all([portCounts(sb, "br-seg"), portCounts(sb, "br-phy")]);
  const get = (m: Map<string, PortCounts>, k: string) => {
    const c = m.get(k);
    if (!c) throw new Error(`no counters for port ${k}`);
    return c;
  };
  return {
    segTx: get(seg, String(SEGMENT_OFPORT)),
    ulTx: get(phy, String(sb.ul0)),
    localTx: get(seg, "LOCAL"),
  };
}
const delta = (a: PortCounts, b: PortCounts) => ({ packets: b.txPackets - a.txPackets, bytes: b.txBytes - a.txBytes });

/** Sends `count` errors in turn into seg0 (from inj0, its veth's other end); resolves once all are sent. */
function inject(sb: Sandbox, hexes: readonly string[], count: number, burst = BURST, paceMs = PACE_MS): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawnInNamespace(sb.ns, ["python3", "-c", INJECTOR, "inj0", String(count), String(burst), String(paceMs), ...hexes]);
    let out = "";
    let err = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    child.once("close", (code) =>
      code === 0 && Number(out.trim()) === count ? resolve() : reject(new Error(`injector exited ${code}: ${err.trim() || out.trim()}`)),
    );
  });
}

/** Packets the datapath's main thread received since the last clear (the segment port is its only busy port). */
async function received(sb: Sandbox): Promise<number> {
  return Number(/packets received: (\d+)/.exec(await sb.unixctl.call("dpif-netdev/pmd-stats-show", []))?.[1] ?? NaN);
}

// ---------------------------------------------------------------- ovslb's plan on the sandbox

function rawInputs(delivery: Delivery, n: number, pathMtu: boolean): Inputs {
  const gre = delivery === "gre";
  return {
    name: NAME,
    // The sandbox is planned and applied locally: this connection is never used (check wants one).
    gateways: [
      {
        name: "gw1",
        host: { connection: { ...sshTo(loadInventory(), "gw1"), host: "sandbox.invalid" } },
        bridge: "br-seg",
        segmentPort: "seg0",
        mac: GW.mac,
        ...(gre ? { tunnelAddress: GW.tunnel } : {}),
      },
    ],
    hypervisors: Array.from({ length: n }, (_, k) => ({ name: hvName(k + 1), ...(gre ? { tunnelAddress: tunnelAddress(k + 1) } : {}) })),
    delivery,
    pathMtu,
    vips: [
      {
        address: VIP,
        port: 80,
        protocol: "tcp",
        backends: Array.from({ length: n }, (_, k) => ({ address: `10.0.1.${k + 1}`, port: 8080, mac: backendMac(k + 1), hypervisor: hvName(k + 1) })),
      },
    ],
  };
}

async function refusals(inputs: Inputs): Promise<string[]> {
  const { failures } = await check("DeferredNatLoadBalancer", {}, inputs as unknown as Record<string, unknown>);
  return failures.map((f) => `${f.property} ${f.reason}`);
}

interface Applied {
  d: ReturnType<typeof withDefaults>;
  ids: RecordedIds;
  port: GatewayPort;
  mods: Modification[];
}

async function observe(sb: Sandbox): Promise<ObservedBridge> {
  const [flows, groups] = await Promise.all([sb.bridge.dumpFlows({ cookie: 0n, mask: 0n, table: 0 }), sb.bridge.dumpGroups()]);
  return { ports: new Map(), flows, groups };
}

/** Takes the sandbox gateway to these inputs as DeferredNatLoadBalancer's create does on one gateway: tunnel ports, ids, the plan, one bundle. */
async function applyLoadBalancer(sb: Sandbox, inputs: Inputs): Promise<Applied> {
  const refused = await refusals(inputs);
  if (refused.length > 0) throw new Error(`bench inputs refused by check: ${refused.join("; ")}`);
  const d = withDefaults(inputs);
  const wanted = tunnelPorts(d, d.gateways[0]);
  const vsctl = (...args: string[]) => runChecked(sb.sbx.runner, ["ovs-vsctl", ...args]);
  for (const name of [...sb.ports]) {
    if (!wanted.some((w) => w.name === name)) {
      await vsctl("del-port", "br-seg", name);
      sb.ports.delete(name);
    }
  }
  const tunnelOfports = new Map<string, number>();
  for (const w of wanted) {
    if (!sb.ports.has(w.name)) {
      await vsctl(
        "add-port",
        "br-seg",
        w.name,
        ...(w.tag === undefined ? [] : [`tag=${w.tag}`]),
        ...Object.entries(w.externalIds).map(([k, v]) => `external_ids:"${k}"="${v}"`),
        "--",
        "set",
        "interface",
        w.name,
        "type=gre",
        `ofport_request=${w.ofportRequest}`,
        ...Object.entries(w.options).map(([k, v]) => `options:${k}=${v}`),
      );
      sb.ports.add(w.name);
    }
    tunnelOfports.set(w.hypervisor, Number((await vsctl("get", "interface", w.name, "ofport")).trim()));
  }
  const port: GatewayPort = { segmentOfport: SEGMENT_OFPORT, mac: GW.mac, ...(wanted.length ? { tunnelOfports } : {}) };
  const empty: RecordedIds = { groupIds: {}, bucketIds: {} };
  const observed = await observe(sb);
  const ids = assignIds(d, empty, foreignGroupsOn(d, observed, empty));
  const mods = planGateway("sandbox gw1", d, ids, port, observed);
  await sb.bridge.applyBundle(mods);
  return { d, ids, port, mods };
}

/** What the load balancer owns on the sandbox gateway, removed by its own plan (no VIPs). */
async function removeLoadBalancer(sb: Sandbox, a: Applied): Promise<void> {
  const mods = planGateway("sandbox gw1", { ...a.d, vips: [] }, a.ids, a.port, await observe(sb));
  if (mods.length > 0) await sb.bridge.applyBundle(mods);
}

/**
 * What a datapath action list sends: its top-level outputs (a port number:
 * mac copies, or the local port) and its tunnel pushes (each gre copy; the
 * underlay output after each is not counted again).
 */
function datapathCopies(actions: string): { outputs: number; tunnelPushes: number } {
  const items: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of actions) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      items.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur) items.push(cur);
  const tunnelPushes = actions.split("tnl_push(").length - 1;
  return { outputs: tunnelPushes > 0 ? 0 : items.filter((x) => /^\d+$/.test(x.trim())).length, tunnelPushes };
}

// ---------------------------------------------------------------- captures

interface Capture {
  /** copies[e][hv]: copies of error e that reached hypervisor hv (by MAC on seg0, by tunnel on ul0). */
  copies: Map<number, Map<string, number>>;
  /** Frames out seg0 or ul0 that are not an intact copy of an injected error for a hypervisor of the VIP. */
  other: string[];
  frames: number;
}

/**
 * Sends `count` distinct errors while a raw socket on each veth's far end
 * (inj0 for seg0, ulp for ul0) reads every frame the gateway sent, and
 * classifies them: a copy is the error unchanged but for its MACs (eth_dst a
 * backend of the hypervisor), on seg0 (mac) or on ul0 inside GRE to the
 * hypervisor's tunnel address with the load balancer's key (gre).
 */
async function captured(
  sb: Sandbox,
  errors: readonly Buffer[],
  count: number,
  key: number,
  hvOfMac: Map<string, string>,
  hvOfTunnel: Map<string, string>,
): Promise<Capture> {
  const cap = spawnInNamespace(sb.ns, ["python3", "-c", CAPTURE, "inj0", "ulp"]);
  const lines: string[] = [];
  let ready: () => void = () => undefined;
  const isReady = new Promise<void>((r) => (ready = r));
  createInterface({ input: cap.stdout! }).on("line", (l) => (l === "ready" ? ready() : lines.push(l)));
  const exited = new Promise<void>((r) => cap.once("close", () => r()));
  try {
    await Promise.race([isReady, exited.then(() => Promise.reject(new Error("capture exited")))]);
    await inject(
      sb,
      errors.slice(0, count).map((e) => e.toString("hex")),
      count,
      // One at a time, a few ms apart: the capture reads every copy.
      1,
      5,
    );
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    cap.stdin!.end();
    await exited;
  }
  const byBody = new Map(errors.slice(0, count).map((e, i) => [e.subarray(12).toString("hex"), i]));
  const result: Capture = { copies: new Map(), other: [], frames: 0 };
  const count1 = (e: number, hv: string) => {
    const m = result.copies.get(e) ?? result.copies.set(e, new Map()).get(e)!;
    m.set(hv, (m.get(hv) ?? 0) + 1);
  };
  const asCopy = (frame: Buffer): { e: number; hv: string } | undefined => {
    const e = byBody.get(frame.subarray(12).toString("hex"));
    const hv = hvOfMac.get(frame.subarray(0, 6).toString("hex"));
    return e !== undefined && hv !== undefined && frame.subarray(6, 12).equals(macBytes(GW.mac)) ? { e, hv } : undefined;
  };
  for (const line of lines) {
    const [iface, hex] = line.split(" ");
    const frame = Buffer.from(hex, "hex");
    result.frames++;
    if (iface === "inj0") {
      const c = asCopy(frame);
      if (c) count1(c.e, c.hv);
      else result.other.push(`seg0: ${frame.length} B to ${frame.subarray(0, 6).toString("hex")}`);
    } else {
      const outerDst = [...frame.subarray(30, 34)].join(".");
      const gre = frame.readUInt16BE(12) === 0x0800 && frame[23] === 47 && frame.readUInt16BE(34) === 0x2000 && frame.readUInt16BE(36) === 0x6558;
      const c = gre && frame.readUInt32BE(38) === key ? asCopy(frame.subarray(14 + 20 + 8)) : undefined;
      if (c && hvOfTunnel.get(outerDst) === c.hv && frame.length === ERROR_FRAME_BYTES + GRE_OVERHEAD) count1(c.e, c.hv);
      else result.other.push(`ul0: ${frame.length} B to ${outerDst}`);
    }
  }
  return result;
}

// ---------------------------------------------------------------- part 1: the fan-out

interface FanoutRow {
  delivery: Delivery;
  hypervisors: number;
  pathMtu: boolean;
  /** Per error, medians over the runs: copies and bytes out the segment port and the underlay port, to the gateway's own stack (LOCAL). */
  copiesPerError: number;
  bytesPerError: number;
  localPerError: number;
  cpuMsPer1000: number;
  cpuMsPer1000Runs: number[];
  /** The fan-out flow as planned: its OpenFlow actions and its line in the bundle (undefined without pathMtu). */
  flowActions?: number;
  flowLineBytes?: number;
  /** ofproto/trace of one error: the datapath actions, their length, and the copies in them. */
  datapathActions: string;
  datapathOutputs: number;
  datapathTunnelPushes: number;
  /** The capture: each captured error's copies per hypervisor. */
  captured: { errors: number; frames: number; everyHypervisorOnce: boolean; other: string[] };
  /** Every timed run: errors received, copies and bytes out. */
  runs: Array<{ received: number; seg: { packets: number; bytes: number }; ul: { packets: number; bytes: number }; local: number; cpuNs: number }>;
}

async function fanoutRow(
  ctx: BenchContext,
  sb: Sandbox,
  sizes: Sizes,
  delivery: Delivery,
  n: number,
  pathMtu: boolean,
  errors: readonly Buffer[],
): Promise<FanoutRow> {
  const a = await applyLoadBalancer(sb, rawInputs(delivery, n, pathMtu));
  try {
    const flows = pathMtuFlows(a.d, a.port);
    const lines = renderBundle(a.mods).filter((l) => l.includes("icmp_type=3"));
    const trace = await sb.unixctl.call("ofproto/trace", ["br-seg", `in_port=${SEGMENT_OFPORT}`, errors[0].toString("hex")]);
    const dp = /^Datapath actions: (.*)$/m.exec(trace)?.[1] ?? "";
    const dpCopies = datapathCopies(dp);
    const hvOfMac = new Map(Array.from({ length: n }, (_, k) => [backendMac(k + 1).replace(/:/g, ""), hvName(k + 1)]));
    const hvOfTunnel = new Map(Array.from({ length: n }, (_, k) => [tunnelAddress(k + 1), hvName(k + 1)]));
    const cap = await captured(sb, errors, sizes.captured, greKeyOf({ name: NAME }), hvOfMac, hvOfTunnel);
    const want = pathMtu ? n : 0;
    const everyHypervisorOnce =
      cap.other.length === 0 &&
      Array.from({ length: sizes.captured }, (_, e) => e).every((e) => {
        const m = cap.copies.get(e) ?? new Map<string, number>();
        return m.size === want && [...m.values()].every((c) => c === 1);
      });
    const hexes = errors.map((e) => e.toString("hex"));
    const runs: FanoutRow["runs"] = [];
    for (let r = 0; r < sizes.runs; r++) {
      await sb.unixctl.call("dpif-netdev/pmd-stats-clear", []);
      const before = await counters(sb);
      const cpu0 = cpuNs(sb.pid);
      await inject(sb, hexes, sizes.errors);
      // The last burst is read at once: a moment, then the CPU, then the counters (which must show every error received).
      await new Promise((res) => setTimeout(res, 50));
      const cpu = cpuNs(sb.pid) - cpu0;
      const after = await counters(sb);
      runs.push({
        received: await received(sb),
        seg: delta(before.segTx, after.segTx),
        ul: delta(before.ulTx, after.ulTx),
        local: delta(before.localTx, after.localTx).packets,
        cpuNs: cpu,
      });
    }
    const per = (f: (x: FanoutRow["runs"][number]) => number) => median(runs.map((x) => f(x) / sizes.errors));
    const cpuRuns = runs.map((x) => x.cpuNs / 1e6 / (sizes.errors / 1000));
    const row: FanoutRow = {
      delivery,
      hypervisors: n,
      pathMtu,
      copiesPerError: per((x) => x.seg.packets + x.ul.packets),
      bytesPerError: per((x) => x.seg.bytes + x.ul.bytes),
      localPerError: per((x) => x.local),
      cpuMsPer1000: median(cpuRuns),
      cpuMsPer1000Runs: cpuRuns,
      ...(flows.length ? { flowActions: flows[0].actions.length, flowLineBytes: Buffer.byteLength(lines[0] ?? "") } : {}),
      datapathActions: dp,
      datapathOutputs: dpCopies.outputs,
      datapathTunnelPushes: dpCopies.tunnelPushes,
      captured: { errors: sizes.captured, frames: cap.frames, everyHypervisorOnce, other: cap.other.slice(0, 5) },
      runs,
    };
    ctx.log(
      `  ${delivery}, ${n} hypervisor(s), pathMtu ${pathMtu ? "on" : "off"}: ${row.copiesPerError} copies, ${row.bytesPerError} B per error; ${row.cpuMsPer1000.toFixed(1)} ms CPU per 1,000`,
    );
    return row;
  } finally {
    await removeLoadBalancer(sb, a);
  }
}

// ---------------------------------------------------------------- part 2: the flood

interface FloodPhase {
  limit?: number;
  synsSent: number;
  /** Zone A's entries: the most of every sample during and after the flood, and once it settled. */
  zoneAMax: number;
  zoneASettled: number;
  zoneASamples: number;
  /** The limit's own count (with the limit). */
  limitCount?: number;
  bEstablished: number;
  bBroken: number;
  bNewTried: number;
  bNewOpened: number;
  aNewTried?: number;
  aNewOpened?: number;
  /** Each gateway's conntrack entries, the most of every sample. */
  gatewayMax: Record<string, number>;
  gatewaySamples: number;
}

async function floodPhase(s: ConntrackFlood, live: LiveConnections, sizes: Sizes, limit: number | undefined): Promise<FloodPhase> {
  const gatewayMax: Record<string, number> = Object.fromEntries(GATEWAYS.map((g) => [g, 0]));
  let gatewaySamples = 0;
  let zoneAMax = 0;
  let zoneASamples = 0;
  const sample = async () => {
    const [n, gws] = await Promise.all([s.entries(s.hvA), s.gatewayEntries()]);
    zoneAMax = Math.max(zoneAMax, n);
    zoneASamples++;
    for (const g of GATEWAYS) gatewayMax[g] = Math.max(gatewayMax[g], gws[g]);
    gatewaySamples++;
    return n;
  };
  await s.hvA.update(s.hvInputs("a", limit));
  await sample();
  const f = flood(VIP_A, sizes.syns);
  let flooding = true;
  const sent = f.done.finally(() => (flooding = false));
  // Sampled until the flood ends (the new connections below block this process while they are tried; samples resume after).
  const sampler = (async () => {
    while (flooding) {
      await sample();
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  if (limit !== undefined) {
    // The limit's own count: the entries made since it was set.
    await waitUntil(async () => (await s.zoneLimit(s.hvA)).count >= limit, { what: "A's zone at its limit", timeoutMs: 10_000, intervalMs: 100 });
  } else {
    await waitUntil(async () => (await s.entries(s.hvA)) >= MAXCONNS * 0.9, {
      what: `A's zone at ${MAXCONNS * 0.9} entries`,
      timeoutMs: 10_000,
      intervalMs: 100,
    });
  }
  // While the flood goes on: B's new connections (and, at its limit, A's); then B's established ones.
  const bNewTried = limit !== undefined ? sizes.newB : sizes.newB / 2;
  const bNewOpened = s.opened(VIP_B, bNewTried);
  const aNewOpened = limit !== undefined ? s.opened(VIP_A, 5) : undefined;
  const round = await live.round();
  const synsSent = await sent;
  await sampler;
  const zoneASettled = await s.settled(s.hvA);
  await sample();
  return {
    ...(limit !== undefined ? { limit } : {}),
    synsSent,
    zoneAMax: Math.max(zoneAMax, zoneASettled),
    zoneASettled,
    zoneASamples,
    ...(limit !== undefined ? { limitCount: (await s.zoneLimit(s.hvA)).count } : {}),
    bEstablished: round.length,
    bBroken: round.filter((c) => c.broken).length,
    bNewTried,
    bNewOpened,
    ...(aNewOpened !== undefined ? { aNewTried: 5, aNewOpened } : {}),
    gatewayMax,
    gatewaySamples,
  };
}

// ---------------------------------------------------------------- report

function markdownOf(
  rows: readonly FanoutRow[],
  phases: { limited: FloodPhase; unlimited: FloodPhase },
  sizes: Sizes,
  machine: Record<string, string>,
  idleMsPerS: number,
): string {
  const fmt1 = (x: number) => x.toFixed(1);
  const fanRows = rows.map(
    (r) =>
      `| ${r.delivery} | ${r.hypervisors} | ${r.pathMtu ? "on" : "off"} | **${r.copiesPerError}** | ${fmtInt(r.bytesPerError)} B | ${r.localPerError} | ${fmt1(r.cpuMsPer1000)} ms | ${r.flowActions !== undefined ? `${r.flowActions} / ${fmtInt(r.flowLineBytes!)} B` : "no flow"} | ${r.pathMtu ? r.datapathTunnelPushes + r.datapathOutputs : "1, to LOCAL"} (${fmtInt(r.datapathActions.length)} chars) |`,
  );
  // The fan-out's CPU per copy: the slope between the fewest and the most hypervisors, with pathMtu.
  const slopes = DELIVERIES.flatMap((delivery) => {
    const on = rows.filter((r) => r.delivery === delivery && r.pathMtu).sort((a, b) => a.hypervisors - b.hypervisors);
    if (on.length < 2) return [];
    const [lo, hi] = [on[0], on[on.length - 1]];
    const off = rows.find((r) => r.delivery === delivery && !r.pathMtu && r.hypervisors === hi.hypervisors)!;
    return [
      `${delivery}: ${((((hi.cpuMsPer1000 - lo.cpuMsPer1000) / (hi.hypervisors - lo.hypervisors)) * 1000) / 1000).toFixed(2)} ms per 1,000 copies (${lo.hypervisors} to ${hi.hypervisors} hypervisors); at ${hi.hypervisors}, ${(hi.cpuMsPer1000 - off.cpuMsPer1000).toFixed(1)} ms per 1,000 errors over pathMtu off`,
    ];
  });
  const { limited: l, unlimited: u } = phases;
  const gw = (p: FloodPhase) => GATEWAYS.map((g) => `${g} ${p.gatewayMax[g]}`).join(", ");
  return [
    "### pathMtu: what a gateway sends per ICMP error, by hypervisor count",
    "",
    "| Delivery | Hypervisors | pathMtu | Copies to hypervisors per error | Bytes sent per error | To the gateway's own stack per error | ovs-vswitchd CPU per 1,000 errors | Fan-out flow: OpenFlow actions / bundle line | Datapath copies (actions' length) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...fanRows,
    "",
    `The fan-out's CPU (medians, with pathMtu): ${slopes.join("; ")}.`,
    "",
    `${fmtInt(sizes.errors)} errors per run, ${sizes.runs} run(s) per row (medians); each error a ${ERROR_FRAME_BYTES}-byte frame (${ERROR_IP_BYTES} B of IP, as a Linux router quotes a 1500-byte segment), sent into the sandbox gateway's seg0 from a raw socket on its veth's other end (${BURST} every ${PACE_MS} ms, ${DISTINCT} distinct errors in turn). ` +
      `Copies and bytes are the tx counters of seg0 (mac delivery: back onto the segment) and of the underlay port ul0 (gre: the encapsulated frames, ${GRE_OVERHEAD} B more each); "to the gateway's own stack" is br-seg's LOCAL port. ` +
      `CPU is ovs-vswitchd's (every thread, /proc schedstat) over the run: receiving each error, and sending each copy (the pathMtu-off rows: NORMAL hands the error to the gateway's own stack); idle it used ${idleMsPerS.toFixed(2)} ms per second. ` +
      `${sizes.captured} distinct errors per row were also captured on the veths' far ends: every copy checked by destination (the hypervisor's backend MAC; in gre its tunnel address and the load balancer's GRE key) and content.`,
    "",
    "### connectionLimit: a SYN flood at service A (conntrack-limits scenario)",
    "",
    `| hv1's table (\`ct-set-maxconns\`) | A's connectionLimit | SYNs sent at A | Zone A's entries at most (settled) | B's established connections kept | B's new connections during the flood | A's new connections during the flood | Gateways' conntrack entries at most |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    `| ${fmtInt(MAXCONNS)} | ${l.limit} | ${fmtInt(l.synsSent)} | **${fmtInt(l.zoneAMax)}** (${fmtInt(l.zoneASettled)}; the limit's count ${fmtInt(l.limitCount!)}) | ${l.bEstablished - l.bBroken} of ${l.bEstablished} | **${l.bNewOpened} of ${l.bNewTried}** | ${l.aNewOpened} of ${l.aNewTried} | ${gw(l)} |`,
    `| ${fmtInt(MAXCONNS)} | none | ${fmtInt(u.synsSent)} | **${fmtInt(u.zoneAMax)}** (${fmtInt(u.zoneASettled)}) | ${u.bEstablished - u.bBroken} of ${u.bEstablished} | **${u.bNewOpened} of ${u.bNewTried}** | | ${gw(u)} |`,
    "",
    `The limited phase first, then the same flood without the limit (no flush in between, as in conntrack-limits.test.ts). Zone A's entries: \`dpctl/dump-conntrack zone=A\` on hv1, sampled every 100 ms during the flood (${l.zoneASamples} and ${u.zoneASamples} samples) and once the count stopped growing; the gateways' entries (\`dpctl/dump-conntrack\`, every zone) at every sample (${l.gatewaySamples} and ${u.gatewaySamples}). ` +
      `B's ${l.bEstablished} long-lived connections were opened before the flood and each exchanged a line after the new connections were tried, in both phases.`,
    "",
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
  ].join("\n");
}

// ---------------------------------------------------------------- the benchmark

export const realNetworksBenchmark: Benchmark = {
  name: "real-networks",
  description:
    "pathMtu's ICMP fan-out per hypervisor count (copies, bytes, ovs-vswitchd CPU; mac and gre, with and without pathMtu) and connectionLimit's SYN flood figures (zone A with and without the limit, B's connections, the gateways' conntrack)",
  async run(ctx) {
    const sizes = ctx.smoke ? SMOKE : FULL;
    const inv = loadInventory();
    const invariants: Invariant[] = [];
    let sb: Sandbox | undefined;
    const flood_ = new ConntrackFlood(inv);
    let live: LiveConnections | undefined;
    let tornDown: Promise<string[]> | undefined;
    const teardown = () =>
      (tornDown ??= (async () => {
        const { failed, attempt } = teardownSteps();
        await attempt("B's live connections", () => live?.close());
        await attempt("the flood scenario", async () => failed.push(...(await flood_.tearDown())));
        await attempt("the sandbox", () => {
          sb?.unixctl.close();
          sb?.sbx.stop();
        });
        return failed;
      })());
    const run: LabRunOptions = {
      locks: ["hv1-gre"],
      interrupted: "stopping the sandbox and removing the flood scenario's resources",
      teardown,
      close: () => undefined,
    };
    return labRun(ctx, run, async (interrupted) => {
      // ---- part 1: the fan-out, on a sandbox gateway
      const maxN = Math.max(...sizes.hypervisors);
      for (const n of FULL.hypervisors) {
        const refused = await refusals(rawInputs("gre", n, true));
        invariants.push({
          name: `check accepts the full run's load balancer of ${n} hypervisor(s), gre, pathMtu`,
          ok: refused.length === 0,
          detail: refused.join("; ") || undefined,
        });
      }
      ctx.log(`sandbox gateway: br-seg (seg0 a veth), br-phy (ul0 a veth, ${GW.tunnel}), ${maxN} hypervisors' neighbours`);
      sb = await startSandbox(maxN);
      const machine = await machineNote(sb.sbx.runner);
      const idle0 = cpuNs(sb.pid);
      await new Promise((r) => setTimeout(r, 2000));
      const idleMsPerS = (cpuNs(sb.pid) - idle0) / 1e6 / 2;
      const errors = Array.from({ length: DISTINCT }, (_, i) => icmpError(i));
      // Warm-up, untimed: the first packets of a process cost more (the datapath's first flows, page faults).
      await inject(
        sb,
        errors.map((e) => e.toString("hex")),
        sizes.errors / 2,
      );
      const rows: FanoutRow[] = [];
      for (const delivery of DELIVERIES) {
        for (const n of sizes.hypervisors) {
          for (const pathMtu of [false, true]) {
            if (interrupted()) throw new Error("interrupted");
            rows.push(await fanoutRow(ctx, sb, sizes, delivery, n, pathMtu, errors));
          }
        }
      }
      const received = rows.flatMap((r) => r.runs.map((x) => x.received));
      invariants.push({
        name: `every error sent was received by the gateway's datapath (${fmtInt(sizes.errors)} on every run)`,
        ok: received.every((x) => x === sizes.errors),
        detail: `${received.filter((x) => x !== sizes.errors).length} of ${received.length} runs short`,
      });
      const badCopies = rows.filter((r) => r.runs.some((x) => x.seg.packets + x.ul.packets !== (r.pathMtu ? r.hypervisors : 0) * sizes.errors));
      invariants.push({
        name: "with pathMtu every error left as exactly one copy per hypervisor; without it none reached a hypervisor (tx counters, every run)",
        ok: badCopies.length === 0,
        detail: badCopies.map((r) => `${r.delivery} ${r.hypervisors} ${r.pathMtu ? "on" : "off"}: ${r.copiesPerError} per error`).join("; ") || undefined,
      });
      const badBytes = rows.filter((r) =>
        r.runs.some((x) => x.seg.bytes !== x.seg.packets * ERROR_FRAME_BYTES || x.ul.bytes !== x.ul.packets * (ERROR_FRAME_BYTES + GRE_OVERHEAD)),
      );
      invariants.push({
        name: `every copy is the error's frame: ${ERROR_FRAME_BYTES} B on the segment (mac), ${ERROR_FRAME_BYTES + GRE_OVERHEAD} B on the underlay (gre)`,
        ok: badBytes.length === 0,
        detail: badBytes.map((r) => `${r.delivery} ${r.hypervisors}`).join("; ") || undefined,
      });
      const badDelivery = rows.filter((r) => (r.delivery === "mac" ? r.runs.some((x) => x.ul.packets !== 0) : r.runs.some((x) => x.seg.packets !== 0)));
      invariants.push({
        name: "mac delivery sends its copies back onto the segment only, gre into the tunnels only",
        ok: badDelivery.length === 0,
        detail: badDelivery.map((r) => `${r.delivery} ${r.hypervisors}`).join("; ") || undefined,
      });
      const badCapture = rows.filter((r) => !r.captured.everyHypervisorOnce);
      invariants.push({
        name: "captured: each error reached every hypervisor of the VIP exactly once (its backend's MAC; in gre its tunnel address and key), unchanged, and nothing else was sent",
        ok: badCapture.length === 0,
        detail: badCapture.map((r) => `${r.delivery} ${r.hypervisors} ${r.pathMtu ? "on" : "off"}: ${r.captured.other.join(", ")}`).join("; ") || undefined,
      });
      const badLocal = rows.filter((r) => r.runs.some((x) => x.local !== (r.pathMtu ? 0 : sizes.errors)));
      invariants.push({
        name: "without pathMtu every error goes to the gateway's own stack (NORMAL: the VIP's flow matches tcp port 80 only); with it none does",
        ok: badLocal.length === 0,
        detail: badLocal.map((r) => `${r.delivery} ${r.hypervisors} ${r.pathMtu ? "on" : "off"}: ${r.localPerError}`).join("; ") || undefined,
      });
      const badPlan = rows.filter((r) =>
        r.pathMtu
          ? r.flowActions !== 1 + 2 * r.hypervisors || (r.delivery === "gre" ? r.datapathTunnelPushes : r.datapathOutputs) !== r.hypervisors
          : r.flowActions !== undefined || r.datapathOutputs !== 1 || r.datapathTunnelPushes !== 0,
      );
      invariants.push({
        name: "the planned fan-out flow holds one eth_dst and one output per hypervisor (plus eth_src), and the datapath actions one copy per hypervisor (without pathMtu: no flow, one output to LOCAL)",
        ok: badPlan.length === 0,
        detail:
          badPlan.map((r) => `${r.delivery} ${r.hypervisors} ${r.pathMtu ? "on" : "off"}: ${r.flowActions} actions, ${r.datapathActions}`).join("; ") ||
          undefined,
      });
      const leftFlows = (await sb.bridge.dumpFlows({ cookie: 0n, mask: 0n, table: 0 })).filter((f) => f.cookie !== 0n).length;
      const leftGroups = (await sb.bridge.dumpGroups()).length;
      invariants.push({
        name: "the load balancer's removal (its plan with no VIPs) left no flow or group on the sandbox gateway",
        ok: leftFlows === 0 && leftGroups === 0,
        detail: `${leftFlows} flows, ${leftGroups} groups`,
      });

      // ---- part 2: the flood, on the lab
      ctx.log(`flood: services A (${VIP_A}) and B (${VIP_B}) on hv1 behind gw1 and gw2; hv1's table ${MAXCONNS}`);
      await flood_.setUp();
      await flood_.appctl("hv1", "dpctl/ct-set-maxconns", String(MAXCONNS));
      live = await openLiveConnections(CLIENT.namespace, VIP_B, 80, sizes.liveB);
      invariants.push({
        name: `B's ${sizes.liveB} long-lived connections opened`,
        ok: live.initial.length === sizes.liveB && live.initial.every((c) => !c.broken),
        detail: `${live.initial.filter((c) => !c.broken).length} working`,
      });
      ctx.log(`  connectionLimit ${LIMIT} on A: ${fmtInt(sizes.syns)} SYNs`);
      const limited = await floodPhase(flood_, live, sizes, LIMIT);
      ctx.log(`  no limit: ${fmtInt(sizes.syns)} SYNs`);
      const unlimited = await floodPhase(flood_, live, sizes, undefined);
      for (const [label, p] of [
        ["with the limit", limited],
        ["without", unlimited],
      ] as const) {
        invariants.push({ name: `${label}: the flood sent all ${fmtInt(sizes.syns)} SYNs`, ok: p.synsSent === sizes.syns, detail: fmtInt(p.synsSent) });
        invariants.push({
          name: `${label}: B's established connections all kept working`,
          ok: p.bBroken === 0 && p.bEstablished === sizes.liveB,
          detail: `${p.bBroken} broken of ${p.bEstablished}`,
        });
        invariants.push({
          name: `${label}: the gateways held no conntrack entry at any sample`,
          ok: GATEWAYS.every((g) => p.gatewayMax[g] === 0) && p.gatewaySamples > 0,
          detail: `${GATEWAYS.map((g) => `${g} ${p.gatewayMax[g]}`).join(", ")} over ${p.gatewaySamples} samples`,
        });
      }
      invariants.push({
        name: `with the limit: zone A held at most ${LIMIT} entries at every sample and once settled, and the limit counts what it holds`,
        ok: limited.zoneAMax <= LIMIT && limited.limitCount === limited.zoneASettled,
        detail: `at most ${limited.zoneAMax}, settled ${limited.zoneASettled}, limit's count ${limited.limitCount}`,
      });
      invariants.push({
        name: "with the limit: B opened every new connection during the flood, A none (at its limit)",
        ok: limited.bNewOpened === limited.bNewTried && limited.aNewOpened === 0,
        detail: `B ${limited.bNewOpened} of ${limited.bNewTried}, A ${limited.aNewOpened} of ${limited.aNewTried}`,
      });
      invariants.push({
        name: `without the limit: the flood filled zone A past ${MAXCONNS * 0.9} of the table's ${MAXCONNS} entries and B opened no new connection`,
        ok: unlimited.zoneAMax >= MAXCONNS * 0.9 && unlimited.bNewOpened === 0,
        detail: `zone A at most ${unlimited.zoneAMax}; B ${unlimited.bNewOpened} of ${unlimited.bNewTried}`,
      });

      const maxconns = flood_.maxconns;
      const failed = await teardown();
      invariants.push({
        name: "the sandbox stopped; the flood scenario's resources, routes and hv1's table size put back",
        ok: failed.length === 0,
        detail: failed.join("; ") || undefined,
      });
      const hv1 = await labSsh(inv, "hv1");
      const after = await runChecked(hv1, ["ovs-appctl", "dpctl/ct-get-maxconns"])
        .catch((e: Error) => e.message)
        .finally(() => hv1.close());
      invariants.push({
        name: "hv1's conntrack table size is back to what it was",
        ok: after.trim() === maxconns,
        detail: `${after.trim()} (was ${maxconns})`,
      });

      const data = {
        machine,
        sizes,
        vip: VIP,
        errorFrameBytes: ERROR_FRAME_BYTES,
        greOverhead: GRE_OVERHEAD,
        idleCpuMsPerSecond: idleMsPerS,
        fanout: rows,
        flood: { maxconns: MAXCONNS, limit: LIMIT, vipA: VIP_A, vipB: VIP_B, limited, unlimited },
      };
      return { name: "real-networks", markdown: markdownOf(rows, { limited, unlimited }, sizes, machine, idleMsPerS), data, invariants } satisfies BenchReport;
    });
  },
};
