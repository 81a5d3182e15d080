import * as os from "node:os";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { attachmentNames, derivedFrontendMac } from "../provider/resources/distributor-attachment/plan";
import { runChecked } from "../provider/transport/exec";
import type { SshSession } from "../provider/transport/ssh";
import { isAlive, readPid, vswitchdCommand } from "../test/lab/lab";
import { rootLinkOf, type LabBackend, type LabInventory } from "../test/lab/topology";
import { ProviderDriver } from "../test/support/deferred-nat";
import { deviceAttachment, frontendTuples, tracedAmphorae } from "../test/support/distributor";
import { inNamespace, labSsh, loadInventory, restartVswitchd, spawnInNamespace, sshTo, amphoraVip } from "../test/support/lab";
import { openLiveConnections, type LiveConnections } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import type { ProberConfig } from "./programs/prober";
import {
  benchProgram,
  fmtMs,
  machineNote,
  median,
  type BenchContext,
  type BenchReport,
  type Benchmark,
  type Invariant,
  labRun,
  teardownSteps,
  type LabRunOptions,
} from "./common";

/**
 * Issue 11's benchmark: one load balancer on two distributor devices (dist1,
 * dist2), routed by the lab's edge router by ECMP over each device's next
 * hop, with the router's neighbour tracking dropping a next hop that stops
 * answering (the mechanism of test/integration/distributor-ha.test.ts, which
 * this measures). Per fault on dist1 (its ovs-vswitchd stopped, its segment
 * link cut, its ovs-vswitchd killed and restarted):
 *
 * 1. fault → new connections from the client to the VIP succeed again: a
 *    prober in the client's namespace opens connections every 20 ms (each
 *    with a 200 ms timeout, fresh 5-tuples, half of them hashed to each
 *    device by the edge router), and the edge router's `ip monitor neigh`
 *    says when dist1's next hop went FAILED (detection, apart from the
 *    probe loop);
 * 2. 40 long-lived connections held across every trial: how many went
 *    through dist1, how many broke, and whether each still answers from its
 *    own amphora;
 * 3. repair (SIGCONT, link up, or the update after a restart) → the edge
 *    router routes dist1's tuples through dist1 again, and what the
 *    attachment's update sent (0 OpenFlow messages unless restarted).
 *
 * Everything goes through the provider's handlers and is removed at the end,
 * also on failure or Ctrl-C; the link is put back up and ovs-vswitchd
 * resumed. Holds the lab's `distributor` and `hv1-gre` locks throughout.
 */

export interface Sizes {
  /** Trials per fault kind (the kinds take turns). */
  trials: number;
  /** Tuples traced on both devices (the same group on each). */
  tracedTuples: number;
}
export const FULL: Sizes = { trials: 10, tracedTuples: 1000 };
export const SMOKE: Sizes = { trials: 1, tracedTuples: 100 };

/** Its own VIP, ids and next hops: the HA test has 10.0.0.213 with lb-ha at 10.0.0.41/.42; 10.0.0.210-212 are the other distributor tests'. */
export const VIP = "10.0.0.214";
export const LB = "bench-dfo";
const DEVICES = ["dist1", "dist2"] as const;
type Device = (typeof DEVICES)[number];
export const NEXT_HOP: Record<Device, string> = { dist1: "10.0.0.43", dist2: "10.0.0.44" };
const VICTIM: Device = "dist1";
const LIVE_CONNECTIONS = 40;

type FaultKind = "stopped" | "cut" | "restarted";
const FAULTS: readonly FaultKind[] = ["stopped", "cut", "restarted"];
const FAULT_LABEL: Record<FaultKind, string> = {
  stopped: "ovs-vswitchd stopped (SIGSTOP; repair SIGCONT)",
  cut: "link cut (`ip link set s-dist1 down` at the segment bridge; repair `up`)",
  restarted: "ovs-vswitchd killed and restarted (SIGKILL, started again; its flows are gone until the update)",
};

/** The prober: a round every PROBE_INTERVAL_MS, each connect given PROBE_TIMEOUT_MS to greet, PER_ROUND fresh tuples per round. */
const PROBE_INTERVAL_MS = 20;
const PROBE_TIMEOUT_MS = 200;
const PER_ROUND = 4;
/** Probing before the fault (every probe must succeed) and after the last failed round (every probe must succeed). */
const BASELINE_MS = 300;
const HOLD_MS = 500;
/** Give up on a recovery or a return after this long. */
const GIVE_UP_MS = 10_000;
/** Source ports of the probes: below the client's ephemeral range (32768-60999, the live connections'), never reused in a run. */
const PROBE_PORTS = { from: 1024, to: 32767 };
const GOAL_MS = 1000;
/** The edge router's port on the lab's segment bridge (root namespace), where the capture runs. */
const SEGMENT_PORT_OF_EDGE = rootLinkOf("s", "edge");

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- the prober

/** bench/programs/prober.ts: fresh connections to the VIP from the client's namespace, one round of source ports per interval. */

interface Probe {
  /** Round, source port, start and end (epoch ms), greeted, why not, the amphora that greeted. */
  r: number;
  p: number;
  s: number;
  e: number;
  ok: boolean;
  why?: string;
  b?: string;
}

class Prober {
  readonly probes: Probe[] = [];
  readonly started: Promise<number>;
  readonly finished: Promise<void>;
  private constructor(private readonly child: ChildProcess) {
    let start: (t: number) => void = () => undefined;
    this.started = new Promise((r) => (start = r));
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    createInterface({ input: child.stdout! }).on("line", (l) => {
      const m = JSON.parse(l) as Probe & { started?: number; done?: boolean };
      if (m.started !== undefined) start(m.started);
      else if (!m.done) this.probes.push(m);
    });
    this.finished = new Promise((resolve, reject) =>
      child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`prober exited (${code}) ${stderr.trim()}`)))),
    );
    this.finished.catch(() => undefined);
  }
  static start(inv: LabInventory, rounds: number[][]): Prober {
    const cfg: ProberConfig = { host: VIP, port: inv.backendPort, src: inv.client.address, intervalMs: PROBE_INTERVAL_MS, timeoutMs: PROBE_TIMEOUT_MS, rounds };
    return new Prober(spawnInNamespace(inv.client.namespace, [process.execPath, benchProgram("prober.ts"), JSON.stringify(cfg)]));
  }
  /** Ends the prober after the probes in flight. */
  async stop(): Promise<void> {
    this.child.stdin!.end();
    const t = setTimeout(() => this.child.kill("SIGKILL"), 5000);
    await this.finished.finally(() => clearTimeout(t));
  }
  kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

// ---------------------------------------------------------------- what the edge router did

/**
 * A capture of the edge router's segment port (`s-edge`, in the root
 * namespace) by bench/programs/edge-sniffer.pl: one line per IPv4 TCP frame to
 * the VIP. The frame's destination MAC is the next hop the router chose (each
 * attachment answers ARP for its next hop with its own frontend MAC): the path
 * each packet really took, whatever `ip route get` predicts.
 */

interface Frame {
  at: number;
  device?: Device;
  sport: number;
  syn: boolean;
}

class Sniffer {
  readonly frames: Frame[] = [];
  readonly ready: Promise<void>;
  private constructor(private readonly child: ChildProcess) {
    const byMac = new Map(DEVICES.map((d) => [frontendMac(d).replace(/:/g, ""), d]));
    let ready: () => void = () => undefined;
    this.ready = new Promise((r) => (ready = r));
    createInterface({ input: child.stdout! }).on("line", (l) => {
      if (l === "ready") return ready();
      const [at, mac, sport, flags] = l.split(" ");
      this.frames.push({ at: Number(at) * 1000, device: byMac.get(mac), sport: Number(sport), syn: (Number(flags) & 2) !== 0 });
    });
  }
  static async start(port: string): Promise<Sniffer> {
    const child = spawn("perl", [benchProgram("edge-sniffer.pl"), port, VIP], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const s = new Sniffer(child);
    await Promise.race([s.ready, new Promise((_, reject) => child.once("close", (c) => reject(new Error(`sniffer exited (${c}) ${stderr.trim()}`))))]);
    return s;
  }
  /**
   * The devices each source port's frames were sent to since `since`, once
   * the capture holds a frame since then from each of `answered` (the ports
   * of connections that got their echo: their frames went through the edge
   * router, and the capture may lag the sockets).
   */
  async paths(since: number, answered: readonly number[]): Promise<Map<number, Set<Device>>> {
    await waitUntil(
      () => {
        const seen = new Set(this.frames.filter((f) => f.at >= since).map((f) => f.sport));
        return answered.every((p) => seen.has(p));
      },
      { what: `the capture of a frame from each of ${answered.length} answered connections`, timeoutMs: 5000, intervalMs: 10 },
    );
    const out = new Map<number, Set<Device>>();
    for (const f of this.frames) {
      if (f.at < since || !f.device) continue;
      if (!out.has(f.sport)) out.set(f.sport, new Set());
      out.get(f.sport)!.add(f.device);
    }
    return out;
  }
  /** Drops frames older than `before`. */
  forget(before: number) {
    const i = this.frames.findIndex((f) => f.at >= before);
    this.frames.splice(0, i < 0 ? this.frames.length : i);
  }
  stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGTERM");
  }
}
const only = (s: Set<Device> | undefined, d: Device) => s !== undefined && s.size === 1 && s.has(d);

// ---------------------------------------------------------------- the edge router

const edgeNs = (inv: LabInventory) => inv.edgeRouter!.namespace;

/** The next hop the edge router forwards each client source port's packets to the VIP through (`ip route get ... iif eth0`, one `ip -batch`). */
async function nextHops(inv: LabInventory, ports: readonly number[]): Promise<string[]> {
  const lines = ports.map((p) => `route get ${VIP} from ${inv.client.address} iif eth0 ipproto tcp sport ${p} dport ${inv.backendPort}\n`).join("");
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn("ip", ["netns", "exec", edgeNs(inv), "ip", "-batch", "-"], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`ip route get: ${stderr.trim()}`))));
    child.stdin.end(lines);
  });
  const hops = out
    .split("\n")
    .filter((l) => l.startsWith(`${VIP} `))
    .map((l) => /via (\S+)/.exec(l)?.[1] ?? "none");
  if (hops.length !== ports.length) throw new Error(`ip route get: ${hops.length} answers for ${ports.length} ports: ${JSON.stringify(out.slice(0, 2000))}`);
  return hops;
}
const deviceOfHop = (hop: string) => DEVICES.find((d) => NEXT_HOP[d] === hop);

interface NeighEvent {
  at: number;
  address: string;
  state: string;
}

/** `ip -ts monitor neigh` in the edge router: its neighbour table's changes, with their own (local time) timestamps. */
class NeighMonitor {
  readonly events: NeighEvent[] = [];
  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (l) => {
      // "[2026-12-01T12:01:15.593210] 10.0.0.43 dev eth0 lladdr 02:.. REACHABLE", "[...] Deleted 10.0.0.43 dev eth0 ..."
      const m = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})(\d*)\]\s+(Deleted\s+)?(\d+\.\d+\.\d+\.\d+)\s.*?(\S+)\s*$/.exec(l);
      if (!m) return;
      // ip prints local time with microseconds and no zone; Date.parse reads it as local time too.
      this.events.push({ at: Date.parse(m[1]) + Number(`0.${m[2] || "0"}`), address: m[4], state: m[3] ? "deleted" : m[5] });
    });
  }
  static start(inv: LabInventory): NeighMonitor {
    return new NeighMonitor(spawnInNamespace(edgeNs(inv), ["ip", "-ts", "monitor", "neigh"]));
  }
  first(address: string, states: readonly string[], since: number): NeighEvent | undefined {
    return this.events.find((e) => e.address === address && states.includes(e.state) && e.at >= since);
  }
  stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGTERM");
  }
}
const VALID = ["REACHABLE", "STALE", "DELAY", "PROBE"];

/** The edge router's neighbour state of an address ("" if it has no entry). */
function neighState(inv: LabInventory, address: string): string {
  const l = inNamespace(edgeNs(inv), ["ip", "neigh", "show", address, "dev", inv.edgeRouter!.port]).trim();
  return /\b(REACHABLE|STALE|DELAY|PROBE|FAILED|INCOMPLETE|PERMANENT|NOARP)\b/.exec(l)?.[1] ?? "";
}

// ---------------------------------------------------------------- resources

interface Lab {
  inv: LabInventory;
  amphorae: LabBackend[];
  ssh: Partial<Record<Device, SshSession>>;
  device: Record<Device, ProviderDriver>;
  attachment: Record<Device, ProviderDriver>;
  live?: LiveConnections;
  prober?: Prober;
  monitor?: NeighMonitor;
  sniffer?: Sniffer;
  /** Probe source ports not used yet. */
  pool: number[];
  tornDown?: Promise<string[]>;
}

const hostOf = (lab: Lab, d: Device) => ({ connection: sshTo(lab.inv, d), ovsRundir: lab.inv.hosts[d].ovsRundir });
const deviceInputs = (lab: Lab, d: Device) => ({ host: hostOf(lab, d), deviceId: d, uplinkBridge: "br-seg" });
const frontendMac = (d: Device) => derivedFrontendMac(`${LB}/${NEXT_HOP[d]}`);

const attachmentInputs = (lab: Lab, d: Device) =>
  deviceAttachment(lab.inv, d, { id: LB, vip: VIP, nextHop: NEXT_HOP }, lab.amphorae, ["active", "active", "standby"]);

const ARP_SYSCTLS = ["arp_ignore", "arp_announce"] as const;
const rundir = (lab: Lab) => lab.inv.hosts[VICTIM].ovsRundir!;
const vswitchdPid = (lab: Lab) => readPid(`${rundir(lab)}/ovs-vswitchd.pid`);
const stopped = (pid: number) => /^State:\s+[Tt]/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
const setLink = (d: Device, up: boolean) => execFileSync("ip", ["link", "set", rootLinkOf("s", d), up ? "up" : "down"]);
const linkUp = (d: Device) => /^\S+:\s+\S+:\s+<[^>]*\bUP\b/.test(execFileSync("ip", ["-o", "link", "show", rootLinkOf("s", d)], { encoding: "utf8" }));
const vswitchdRunning = (lab: Lab) => {
  const pid = vswitchdPid(lab);
  return pid !== undefined && isAlive(pid);
};

/** Puts dist1 back: resumed, link up, ovs-vswitchd running (started as the lab does if it is not). */
function repairAll(lab: Lab) {
  const pid = vswitchdPid(lab);
  if (pid !== undefined && isAlive(pid) && stopped(pid)) process.kill(pid, "SIGCONT");
  if (!linkUp(VICTIM)) setLink(VICTIM, true);
  if (!vswitchdRunning(lab)) {
    execFileSync("ip", ["netns", "exec", lab.inv.hosts[VICTIM].namespace, ...vswitchdCommand(rundir(lab))], {
      env: { ...process.env, OVS_RUNDIR: rundir(lab), OVS_DBDIR: rundir(lab), OVS_LOGDIR: rundir(lab) },
    });
  }
}

/** Routes, VIPs and neighbour entries of the run (also an interrupted one's): idempotent. */
function removeNetworkState(lab: Lab) {
  // Each may not be there: quietly.
  const ignore = (ns: string, argv: string[]) => {
    try {
      execFileSync("ip", ["netns", "exec", ns, ...argv], { stdio: "ignore" });
    } catch {
      /* not there */
    }
  };
  ignore(lab.inv.client.namespace, ["ip", "route", "del", `${VIP}/32`]);
  ignore(edgeNs(lab.inv), ["ip", "route", "del", `${VIP}/32`]);
  for (const d of DEVICES) ignore(edgeNs(lab.inv), ["ip", "neigh", "del", NEXT_HOP[d], "dev", lab.inv.edgeRouter!.port]);
  for (const b of lab.amphorae) amphoraVip(b, VIP, false);
}

function teardown(lab: Lab): Promise<string[]> {
  lab.tornDown ??= (async () => {
    const { failed, attempt } = teardownSteps();
    // Repair first: the deletes need dist1's ovs-vswitchd running and reachable.
    await attempt("repair dist1", () => repairAll(lab));
    await attempt("prober", () => lab.prober?.kill());
    await attempt("live connections", () => lab.live?.close());
    await attempt("neighbour monitor", () => lab.monitor?.stop());
    await attempt("capture", () => lab.sniffer?.stop());
    for (const d of DEVICES) {
      await attempt(`delete attachment ${LB} on ${d}`, () =>
        lab.attachment[d].id ? lab.attachment[d].delete() : lab.attachment[d].purge(attachmentInputs(lab, d)),
      );
    }
    for (const d of DEVICES) await attempt(`delete device ${d}`, () => (lab.device[d].id ? lab.device[d].delete() : undefined));
    await attempt("routes, VIPs, neighbour entries", () => removeNetworkState(lab));
    return failed;
  })();
  return lab.tornDown;
}

async function leftBehind(lab: Lab): Promise<string[]> {
  const left: string[] = [];
  const names = attachmentNames({ attachmentId: LB });
  for (const d of DEVICES) {
    const s = lab.ssh[d]!;
    if ((await s.run(["ovs-vsctl", "br-exists", names.bridge])).exitCode === 0) left.push(`${d}: bridge ${names.bridge}`);
    const ports = (await runChecked(s, ["ovs-vsctl", "list-ports", "br-seg"])).split("\n").map((p) => p.trim());
    if (ports.includes(names.uplinkPort)) left.push(`${d}: port ${names.uplinkPort} on br-seg`);
    if (lab.device[d].id && (await lab.device[d].read()).id) left.push(`${d}: still registered as a distributor device`);
  }
  for (const ns of [lab.inv.client.namespace, edgeNs(lab.inv)]) {
    const r = inNamespace(ns, ["ip", "route", "show", `${VIP}/32`]).trim();
    if (r) left.push(`${ns}: route ${r}`);
  }
  for (const d of DEVICES) if (neighState(lab.inv, NEXT_HOP[d])) left.push(`edge router: neighbour entry for ${NEXT_HOP[d]}`);
  for (const b of lab.amphorae) {
    if (inNamespace(b.namespace, ["ip", "-o", "addr", "show", "dev", "lo"]).includes(`${VIP}/32`)) left.push(`${b.name}: ${VIP} on lo`);
    for (const k of ARP_SYSCTLS) {
      const v = inNamespace(b.namespace, ["sysctl", "-n", `net.ipv4.conf.all.${k}`]).trim();
      if (v !== "0") left.push(`${b.name}: ${k}=${v}`);
    }
  }
  if (!linkUp(VICTIM)) left.push(`${rootLinkOf("s", "dist1")} is down`);
  const pid = vswitchdPid(lab);
  if (pid === undefined || !isAlive(pid)) left.push("dist1's ovs-vswitchd is not running");
  else if (stopped(pid)) left.push("dist1's ovs-vswitchd is stopped");
  return left;
}

/** The amphora MAC each traced tuple goes to on a device. */
const picks = (lab: Lab, d: Device, count: number) =>
  tracedAmphorae(
    lab.ssh[d]!,
    lab.inv,
    d,
    LB,
    lab.attachment[d].outputs.groupId,
    frontendTuples(count, lab.attachment[d].outputs.frontendMac, VIP, lab.inv.backendPort),
  );

// ---------------------------------------------------------------- a trial

interface Trial {
  fault: FaultKind;
  trial: number;
  loadAverage: string;
  /** Fault → the end of the first round after the last round with a failed probe: new connections succeed again (ms). */
  recover: number;
  /** Fault → the edge router's neighbour entry of dist1's next hop FAILED (ip monitor neigh; ms). */
  neighFailed?: number;
  /** Fault → the first probe that failed (its start; ms). */
  firstFailure: number;
  rounds: number;
  probes: number;
  /** Probes after the fault that failed, by the device the router sent their SYN to (captured). */
  failedVia: Record<Device | "unseen", number>;
  /** Probes whose SYN the router sent to dist1 after it had marked the next hop FAILED. */
  sentToVictimAfterFailed: number;
  /** The failed probes: start and end after the fault (ms), the device their SYN went to, why. */
  failures: Array<{ s: number; e: number; device?: Device; why?: string }>;
  /**
   * Live connections: working before; through dist1 before (captured), and as `ip route get` predicts;
   * how many of the captured ones went through dist2 once recovered, and through dist1 again after the return;
   * broken in this trial; answering from their own amphora after it.
   */
  live: {
    before: number;
    viaVictim: number;
    viaVictimByRouteGet: number;
    routeGetAgrees: number;
    movedToSurvivor: number;
    backOnVictim: number;
    broken: number;
    sameAmphoraAfter: number;
  };
  /** What the attachment's update on dist1 sent after the repair. */
  update: { messages: number; bytes: number; ms: number };
  /** dist1's attachment's own flows as the device's read saw them after the restart, before the update (restart only). */
  flowsBeforeUpdate?: number;
  /** Repair → `ip route get` in the edge router sends dist1-hashed 5-tuples through dist1 again (ms). */
  back: number;
  /** Repair → the neighbour entry valid again (ip monitor neigh), and the state it came back in: REACHABLE (an answer to the router's own ARP) or STALE (the update's gratuitous ARP). */
  neighBack?: number;
  neighBackState?: string;
}

/** Fresh probe ports for `rounds` rounds. */
function takeRounds(lab: Lab, rounds: number): number[][] {
  if (lab.pool.length < rounds * PER_ROUND) throw new Error("out of probe ports");
  return Array.from({ length: rounds }, () => lab.pool.splice(0, PER_ROUND));
}

/** The first round from which every later round succeeded, given at least HOLD_MS of them; undefined if not yet. */
function recoveredRound(probes: readonly Probe[], complete: (r: number) => boolean): { round: number; lastFailed: number } | undefined {
  const failedRounds = probes.filter((p) => !p.ok).map((p) => p.r);
  if (failedRounds.length === 0) return undefined;
  const lastFailed = Math.max(...failedRounds);
  const hold = Math.ceil(HOLD_MS / PROBE_INTERVAL_MS);
  for (let r = lastFailed + 1; r <= lastFailed + hold; r++) if (!complete(r)) return undefined;
  return { round: lastFailed + 1, lastFailed };
}

async function runTrial(lab: Lab, ctx: BenchContext, fault: FaultKind, trial: number, live: LiveConnections, hashedToVictim: number[]): Promise<Trial> {
  const { inv } = lab;
  const sniffer = lab.sniffer!;
  // Before: both next hops in use, every live connection answering; where each one's packets went.
  await waitUntil(() => DEVICES.every((d) => neighState(inv, NEXT_HOP[d]) !== "FAILED"), {
    what: "both next hops valid in the edge router",
    timeoutMs: GIVE_UP_MS,
  });
  sniffer.forget(now() - 1000);
  const tBefore = now();
  const before = (await live.round()).filter((c) => !c.broken);
  const pathsBefore = await sniffer.paths(
    tBefore,
    before.map((c) => c.port),
  );
  const viaVictim = before.filter((c) => only(pathsBefore.get(c.port), VICTIM));
  const predicted = await nextHops(
    inv,
    before.map((c) => c.port),
  );
  const routeGetAgrees = before.filter((c, i) => only(pathsBefore.get(c.port), deviceOfHop(predicted[i])!)).length;
  if (viaVictim.length === 0) throw new Error("no live connection goes through dist1");
  const loadAverage = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

  const rounds = takeRounds(lab, Math.ceil((BASELINE_MS + GIVE_UP_MS + HOLD_MS) / PROBE_INTERVAL_MS));
  const prober = Prober.start(inv, rounds);
  lab.prober = prober;
  const t0 = await prober.started;
  await sleep(BASELINE_MS - (now() - t0));
  const pid = vswitchdPid(lab)!;
  const faultAt = now();
  if (fault === "stopped") process.kill(pid, "SIGSTOP");
  else if (fault === "cut") setLink(VICTIM, false);
  else await restartVswitchd(inv.hosts[VICTIM]);

  let recovered: { round: number; lastFailed: number } | undefined;
  try {
    const complete = (r: number) => prober.probes.filter((p) => p.r === r).length === rounds[r].length && prober.probes.every((p) => p.r !== r || p.ok);
    recovered = await waitUntil(() => recoveredRound(prober.probes, complete), {
      what: `new connections succeeding again after dist1 ${fault}`,
      timeoutMs: GIVE_UP_MS,
      intervalMs: 20,
    });
  } finally {
    await prober.stop().catch(() => undefined);
    lab.prober = undefined;
  }
  const probes = prober.probes;
  // The rounds never started give their ports back.
  const started = Math.max(...probes.map((p) => p.r));
  lab.pool.unshift(...rounds.slice(started + 1).flat());
  const baseline = probes.filter((p) => p.s + PROBE_TIMEOUT_MS < faultAt);
  const baselineFailed = baseline.filter((p) => !p.ok);
  if (baselineFailed.length > 0)
    throw new Error(
      `before the fault, ${baselineFailed.length} of ${baseline.length} probes failed: ${baselineFailed
        .slice(0, 3)
        .map((p) => `port ${p.p} ${p.why}`)
        .join(", ")}`,
    );
  const failed = probes.filter((p) => !p.ok);
  const recoveredAt = Math.max(...probes.filter((p) => p.r === recovered.round).map((p) => p.e));
  // Where each probe's SYN went.
  const synTo = new Map<number, Device>();
  for (const f of sniffer.frames) if (f.syn && f.device && f.at >= t0 - 1 && !synTo.has(f.sport)) synTo.set(f.sport, f.device);
  const failedVia = { dist1: 0, dist2: 0, unseen: 0 };
  for (const p of failed) failedVia[synTo.get(p.p) ?? "unseen"]++;
  const neighFailedAt = lab.monitor!.first(NEXT_HOP[VICTIM], ["FAILED"], faultAt - 1)?.at;
  const sentToVictimAfterFailed =
    neighFailedAt === undefined ? 0 : sniffer.frames.filter((f) => f.syn && f.device === VICTIM && f.at > neighFailedAt + 1 && f.at < recoveredAt).length;

  // Recovered: every live connection answers, dist1's now through dist2, from the amphora it had.
  const tDuring = now();
  const during = await live.round();
  const pathsDuring = await sniffer.paths(
    tDuring,
    during.filter((c) => !c.broken).map((c) => c.port),
  );
  const movedToSurvivor = viaVictim.filter((c) => only(pathsDuring.get(c.port), "dist2")).length;

  // Repair, then the attachment's update (re-programs after a restart, announces the next hop in every case).
  let flowsBeforeUpdate: number | undefined;
  if (fault === "restarted") {
    flowsBeforeUpdate = ((await lab.device[VICTIM].read()).props.attachmentHealth?.[LB]?.flows ?? -1) as number;
  }
  const repairAt = now();
  if (fault === "stopped") process.kill(pid, "SIGCONT");
  else if (fault === "cut") setLink(VICTIM, true);
  let backAt: number | undefined;
  const watching = (async () => {
    const deadline = repairAt + GIVE_UP_MS;
    while (backAt === undefined && now() < deadline) {
      const hops = await nextHops(inv, hashedToVictim);
      if (hops.every((h) => h === NEXT_HOP[VICTIM])) backAt = now();
      else await sleep(PROBE_INTERVAL_MS);
    }
  })();
  const updateStart = now();
  await lab.attachment[VICTIM].update(attachmentInputs(lab, VICTIM));
  const updateEnd = now();
  await watching;
  if (backAt === undefined) throw new Error(`the edge router did not route dist1's 5-tuples through dist1 within ${GIVE_UP_MS} ms of the repair`);
  const lastApply = lab.attachment[VICTIM].outputs.lastApply as { messages: number; bytes: number };

  const tAfter = now();
  const afterRound = await live.round();
  const pathsAfter = await sniffer.paths(
    tAfter,
    afterRound.filter((c) => !c.broken).map((c) => c.port),
  );
  const mine = new Set(before.map((c) => c.port));
  const nb = lab.monitor!.first(NEXT_HOP[VICTIM], VALID, repairAt - 1);
  const result: Trial = {
    fault,
    trial,
    loadAverage,
    recover: recoveredAt - faultAt,
    ...(neighFailedAt !== undefined ? { neighFailed: neighFailedAt - faultAt } : {}),
    firstFailure: Math.min(...failed.map((p) => p.s)) - faultAt,
    rounds: new Set(probes.map((p) => p.r)).size,
    probes: probes.length,
    failedVia,
    sentToVictimAfterFailed,
    failures: failed.map((p) => ({ s: Math.round(p.s - faultAt), e: Math.round(p.e - faultAt), device: synTo.get(p.p), why: p.why })),
    live: {
      before: before.length,
      viaVictim: viaVictim.length,
      viaVictimByRouteGet: predicted.filter((h) => deviceOfHop(h) === VICTIM).length,
      routeGetAgrees,
      movedToSurvivor,
      backOnVictim: viaVictim.filter((c) => only(pathsAfter.get(c.port), VICTIM)).length,
      // A connection that broke stays broken in every later round.
      broken: afterRound.filter((c) => mine.has(c.port) && c.broken).length,
      sameAmphoraAfter: afterRound.filter((c) => !c.broken).length,
    },
    update: { messages: lastApply.messages, bytes: lastApply.bytes, ms: updateEnd - updateStart },
    ...(flowsBeforeUpdate !== undefined ? { flowsBeforeUpdate } : {}),
    back: backAt - repairAt,
    ...(nb ? { neighBack: nb.at - repairAt, neighBackState: nb.state } : {}),
  };
  const f = (x?: number) => (x === undefined ? "not seen" : fmtMs(x));
  ctx.log(
    `  ${fault} #${trial + 1}: new connections again ${fmtMs(result.recover)} (neighbour FAILED ${f(result.neighFailed)}; failed probes sent to dist1 ${failedVia.dist1}, to dist2 ${failedVia.dist2}, unseen ${failedVia.unseen}); live: ${result.live.viaVictim}/${result.live.before} through dist1 (route get: ${result.live.viaVictimByRouteGet}, agrees for ${routeGetAgrees}), ${movedToSurvivor} moved to dist2, ${result.live.backOnVictim} back, ${result.live.broken} broken; update ${result.update.messages} messages in ${fmtMs(result.update.ms)}; back ${fmtMs(result.back)} (neighbour ${f(result.neighBack)} ${result.neighBackState ?? ""}); load ${loadAverage}`,
  );
  // The next fault starts from both next hops resolved in the edge router (REACHABLE or STALE, not mid-probe).
  await waitUntil(() => DEVICES.every((d) => ["REACHABLE", "STALE"].includes(neighState(lab.inv, NEXT_HOP[d]))), {
    what: "both next hops resolved in the edge router",
    timeoutMs: GIVE_UP_MS,
  });
  return result;
}

// ---------------------------------------------------------------- the report

interface Row {
  fault: FaultKind;
  trials: number;
  recoverMedian: number;
  recoverWorst: number;
  underGoal: number;
  neighFailed?: { median: number; worst: number; n: number };
  failedVia: Record<Device | "unseen", number>;
  sentToVictimAfterFailed: number;
  liveViaVictim: number[];
  liveMoved: number;
  liveBack: number;
  liveBroken: number;
  liveSameAfter: number[];
  routeGetAgrees: number;
  routeGetOf: number;
  backMedian: number;
  backWorst: number;
  neighBackStates: string[];
  updateMessages: number[];
  updateMsMedian: number;
}

const stats = (xs: Array<number | undefined>) => {
  const v = xs.filter((x): x is number => x !== undefined);
  return v.length === 0 ? undefined : { median: median(v), worst: Math.max(...v), n: v.length };
};
const sum = (xs: readonly number[]) => xs.reduce((n, x) => n + x, 0);

function rowsOf(trials: readonly Trial[]): Row[] {
  return FAULTS.map((fault) => {
    const mine = trials.filter((t) => t.fault === fault);
    return {
      fault,
      trials: mine.length,
      recoverMedian: median(mine.map((t) => t.recover)),
      recoverWorst: Math.max(...mine.map((t) => t.recover)),
      underGoal: mine.filter((t) => t.recover < GOAL_MS).length,
      neighFailed: stats(mine.map((t) => t.neighFailed)),
      failedVia: {
        dist1: sum(mine.map((t) => t.failedVia.dist1)),
        dist2: sum(mine.map((t) => t.failedVia.dist2)),
        unseen: sum(mine.map((t) => t.failedVia.unseen)),
      },
      sentToVictimAfterFailed: sum(mine.map((t) => t.sentToVictimAfterFailed)),
      liveViaVictim: mine.map((t) => t.live.viaVictim),
      liveMoved: sum(mine.map((t) => t.live.movedToSurvivor)),
      liveBack: sum(mine.map((t) => t.live.backOnVictim)),
      liveBroken: sum(mine.map((t) => t.live.broken)),
      liveSameAfter: mine.map((t) => t.live.sameAmphoraAfter),
      routeGetAgrees: sum(mine.map((t) => t.live.routeGetAgrees)),
      routeGetOf: sum(mine.map((t) => t.live.before)),
      backMedian: median(mine.map((t) => t.back)),
      backWorst: Math.max(...mine.map((t) => t.back)),
      neighBackStates: [...new Set(mine.map((t) => t.neighBackState ?? "not seen"))].sort(),
      updateMessages: [...new Set(mine.map((t) => t.update.messages))].sort((a, b) => a - b),
      updateMsMedian: median(mine.map((t) => t.update.ms)),
    };
  });
}

const range = (xs: readonly number[]) => (Math.min(...xs) === Math.max(...xs) ? `${xs[0]}` : `${Math.min(...xs)}-${Math.max(...xs)}`);

function markdownOf(rows: readonly Row[], sizes: Sizes, machine: Record<string, string>, probesPerTrial: number): string {
  const ms = (s: { median: number; worst: number; n: number } | undefined, of: number) =>
    s ? `${fmtMs(s.median)} / ${fmtMs(s.worst)}${s.n < of ? ` (${s.n} of ${of})` : ""}` : "not seen";
  const detect = rows.map(
    (r) =>
      `| ${FAULT_LABEL[r.fault]} | **${fmtMs(r.recoverMedian)} / ${fmtMs(r.recoverWorst)}** | ${r.underGoal} of ${r.trials} | ${ms(r.neighFailed, r.trials)} | ${r.failedVia.dist1} / ${r.failedVia.dist2} / ${r.failedVia.unseen} | ${r.sentToVictimAfterFailed} | ${r.trials} |`,
  );
  const conns = rows.map(
    (r) =>
      `| ${FAULT_LABEL[r.fault]} | ${range(r.liveViaVictim)} of ${LIVE_CONNECTIONS} | ${r.liveMoved} of ${sum(r.liveViaVictim)} | ${r.liveBroken} | ${range(r.liveSameAfter)} of ${LIVE_CONNECTIONS} | ${r.liveBack} of ${sum(r.liveViaVictim)} | ${r.routeGetAgrees} of ${r.routeGetOf} |`,
  );
  const back = rows.map(
    (r) =>
      `| ${FAULT_LABEL[r.fault]} | ${fmtMs(r.backMedian)} / ${fmtMs(r.backWorst)} | ${r.neighBackStates.join(", ")} | ${r.updateMessages.join(", ")} | ${fmtMs(r.updateMsMedian)} |`,
  );
  return [
    "### Failover: fault on dist1 → new connections succeed again",
    "",
    "| Fault on dist1 | Fault → new connections succeed again: median / worst | Under 1 s | Fault → edge router's neighbour entry FAILED: median / worst | Failed probes (SYN sent to dist1 / to dist2 / not captured) | SYNs sent to dist1 after FAILED | Trials |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...detect,
    "",
    `### ${LIVE_CONNECTIONS} live connections held through every trial`,
    "",
    "| Fault on dist1 | Through dist1 before the fault (captured) | Of those, through dist2 once recovered | Broken | Answering from their own amphora after the trial | Through dist1 again after the return | `ip route get` predicted the path |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...conns,
    "",
    "### dist1 back",
    "",
    "| Fault on dist1 | Repair → edge router routes dist1's 5-tuples through dist1 again: median / worst | Neighbour entry came back as | Update after the repair: OpenFlow messages | Update: median time |",
    "| --- | --- | --- | --- | --- |",
    ...back,
    "",
    `${sizes.trials} trial(s) per fault, the kinds taking turns, one after another in one run; the same ${LIVE_CONNECTIONS} live connections are held through all of them. ` +
      `Probes: a round every ${PROBE_INTERVAL_MS} ms from the lab's client to the VIP, ${PER_ROUND} connections from fresh source ports, each given ${PROBE_TIMEOUT_MS} ms to reach an amphora (its greeting); ${BASELINE_MS} ms of rounds before the fault must all succeed; ` +
      `"new connections succeed again" is the end of the first round after the last round with a failed probe, once ${HOLD_MS} ms of rounds after it all succeeded (median ${probesPerTrial} probes a trial). Each connection's path is the router's own hash of its packet (in this lab the client socket's random hash: see the README), so about half of each round's probes go to dist1. ` +
      "Where a packet went is captured on the edge router's segment port (its destination MAC is the next hop's attachment's frontend MAC). The neighbour times are the edge router's own (`ip -ts monitor neigh`). " +
      "Repair: SIGCONT, link up, or (restart) nothing more; then at once the attachment's update on dist1 (which announces the next hop by gratuitous ARP); \"back\" is until `ip route get ... iif eth0` in the edge router sends 5-tuples it hashes to dist1 through dist1's next hop again (polled every 20 ms). " +
      "A neighbour entry back as REACHABLE was an answer to the router's own ARP probe (sent before the fault took, answered late); STALE, the update's gratuitous ARP.",
    "",
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
  ].join("\n");
}

// ---------------------------------------------------------------- the benchmark

export const distributorFailoverBenchmark: Benchmark = {
  name: "distributor-failover",
  description:
    "issue 11: one load balancer on two distributor devices; dist1 stopped, cut or restarted: time until new connections succeed again, live connections kept, the device's return",
  async run(ctx) {
    const sizes = ctx.smoke ? SMOKE : FULL;
    const inv = loadInventory();
    if (!inv.edgeRouter) throw new Error("the lab has no edge router: run `npm run lab -- up` again");
    const lab: Lab = {
      inv,
      amphorae: inv.backends.filter((b) => b.hypervisor === "hv3").slice(0, 3),
      ssh: {},
      device: { dist1: new ProviderDriver("DistributorDevice"), dist2: new ProviderDriver("DistributorDevice") },
      attachment: { dist1: new ProviderDriver("DistributorAttachment"), dist2: new ProviderDriver("DistributorAttachment") },
      pool: [],
    };
    const invariants: Invariant[] = [];
    const run: LabRunOptions = {
      locks: ["distributor", "hv1-gre"],
      lockTimeoutMs: 900_000,
      interrupted: "repairing dist1 and removing this run's resources",
      teardown: () => teardown(lab),
      close: () => {
        for (const s of Object.values(lab.ssh)) s?.close();
      },
    };
    return labRun(ctx, run, async (interrupted) => {
      for (const d of DEVICES) lab.ssh[d] = await labSsh(inv, d);
      const machine = await machineNote(lab.ssh.dist1!);
      // Leftovers of an interrupted run.
      repairAll(lab);
      for (const d of DEVICES) await lab.attachment[d].purge(attachmentInputs(lab, d));
      removeNetworkState(lab);

      ctx.log(
        `creating ${LB} on dist1 and dist2 (VIP ${VIP}, next hops ${NEXT_HOP.dist1} and ${NEXT_HOP.dist2}; amphorae ${lab.amphorae.map((b) => b.name).join(", ")})`,
      );
      for (const b of lab.amphorae) amphoraVip(b, VIP, true);
      inNamespace(edgeNs(inv), [
        "ip",
        "route",
        "replace",
        `${VIP}/32`,
        ...DEVICES.flatMap((d) => ["nexthop", "via", NEXT_HOP[d], "dev", inv.edgeRouter!.port]),
      ]);
      inNamespace(inv.client.namespace, ["ip", "route", "replace", `${VIP}/32`, "via", inv.edgeRouter!.address, "dev", "eth0"]);
      for (const d of DEVICES) await lab.device[d].create(deviceInputs(lab, d));
      for (const d of DEVICES) await lab.attachment[d].create(attachmentInputs(lab, d));
      lab.monitor = NeighMonitor.start(inv);

      // The same group on both devices.
      const [one, two] = await Promise.all(DEVICES.map((d) => picks(lab, d, sizes.tracedTuples)));
      const actives = new Set([lab.amphorae[0].mac, lab.amphorae[1].mac]);
      invariants.push({
        name: `both devices hold the same group: each of ${sizes.tracedTuples} traced tuples picks the same amphora on dist1 and dist2, always an active one`,
        ok: one.every((m, i) => m === two[i] && m !== undefined && actives.has(m)) && new Set(one).size === 2,
        detail: `${one.filter((m, i) => m !== two[i]).length} differ`,
      });

      // Probe ports: not one the client holds a socket on (an earlier run's TIME_WAIT would refuse the bind).
      const held = new Set(
        inNamespace(inv.client.namespace, ["ss", "-Htan"])
          .split("\n")
          .map((l) => Number(/\S+:(\d+)\s+\S+:\d+\s*$/.exec(l.trim())?.[1])),
      );
      lab.pool = Array.from({ length: PROBE_PORTS.to - PROBE_PORTS.from + 1 }, (_, i) => PROBE_PORTS.from + i).filter((p) => !held.has(p));
      // 5-tuples the edge router hashes to dist1 (by \`ip route get\`, both next hops valid: no entry yet), to see it take dist1 back.
      const sample = Array.from({ length: 200 }, (_, i) => 60000 + i);
      const sampleHops = await nextHops(inv, sample);
      const hashedToVictim = sample.filter((_, i) => deviceOfHop(sampleHops[i]) === VICTIM).slice(0, 8);
      invariants.push({
        name: "the edge router hashes 5-tuples over both next hops (`ip route get`)",
        ok: hashedToVictim.length === 8 && sampleHops.some((h) => deviceOfHop(h) === "dist2"),
        detail: DEVICES.map((d) => `${d} ${sampleHops.filter((h) => deviceOfHop(h) === d).length} of ${sample.length}`).join(", "),
      });
      lab.sniffer = await Sniffer.start(SEGMENT_PORT_OF_EDGE);

      lab.live = await openLiveConnections(inv.client.namespace, VIP, inv.backendPort, LIVE_CONNECTIONS);
      const initial = lab.live.initial;
      const tInitial = now();
      const initialRound = await lab.live.round();
      const initialPaths = await lab.sniffer.paths(
        tInitial,
        initialRound.filter((c) => !c.broken).map((c) => c.port),
      );
      invariants.push({
        name: `all ${LIVE_CONNECTIONS} live connections opened, spread over both devices (captured), each to an active amphora`,
        ok:
          initial.every((c) => !c.broken) &&
          DEVICES.every((d) => initial.some((c) => only(initialPaths.get(c.port), d))) &&
          initial.every((c) => c.backend === lab.amphorae[0].name || c.backend === lab.amphorae[1].name),
        detail: DEVICES.map((d) => `${d} ${initial.filter((c) => only(initialPaths.get(c.port), d)).length}`).join(", "),
      });

      const trials: Trial[] = [];
      for (let k = 0; k < sizes.trials; k++) {
        for (const fault of FAULTS) {
          if (interrupted()) throw new Error("interrupted");
          trials.push(await runTrial(lab, ctx, fault, k, lab.live, hashedToVictim));
        }
      }
      const rows = rowsOf(trials);
      const finalRound = await lab.live.round();

      invariants.push({
        name: "every fault made probes sent to dist1 fail, and new connections succeeded again (within 10 s)",
        ok: trials.every((t) => t.failedVia.dist1 > 0),
        detail: `${trials.filter((t) => t.failedVia.dist1 > 0).length} of ${trials.length}`,
      });
      invariants.push({
        name: "the edge router's neighbour entry of dist1's next hop went FAILED in every trial",
        ok: trials.every((t) => t.neighFailed !== undefined),
        detail: `${trials.filter((t) => t.neighFailed !== undefined).length} of ${trials.length}`,
      });
      invariants.push({
        name: "in every trial some live connections went through dist1 (captured), all of them through dist2 once recovered, and through dist1 again after the return",
        ok: trials.every((t) => t.live.viaVictim > 0 && t.live.movedToSurvivor === t.live.viaVictim && t.live.backOnVictim === t.live.viaVictim),
        detail: `through dist1: ${range(trials.map((t) => t.live.viaVictim))}; moved ${sum(trials.map((t) => t.live.movedToSurvivor))}, back ${sum(trials.map((t) => t.live.backOnVictim))} of ${sum(trials.map((t) => t.live.viaVictim))}`,
      });
      const broken = finalRound.filter((c) => c.broken);
      invariants.push({
        name: `no live connection broke in any trial: all ${LIVE_CONNECTIONS} still answer, each from the amphora that greeted it`,
        ok: broken.length === 0 && finalRound.length === LIVE_CONNECTIONS,
        detail: broken.length
          ? broken
              .slice(0, 3)
              .map((c) => `port ${c.port}: ${c.broken}`)
              .join("; ")
          : undefined,
      });
      const upd = trials.map((t) => `${t.fault} ${t.update.messages}`);
      invariants.push({
        name: "the update after the repair sent 0 OpenFlow messages after a stop or a cut, and re-programmed dist1 (messages > 0) after a restart",
        ok: trials.every((t) => (t.fault === "restarted" ? t.update.messages > 0 : t.update.messages === 0)),
        detail: [...new Set(upd)].join(", "),
      });
      invariants.push({
        name: "after each restart, the device's read showed the attachment with 0 flows until the update",
        ok: trials.filter((t) => t.fault === "restarted").every((t) => t.flowsBeforeUpdate === 0),
        detail: trials
          .filter((t) => t.fault === "restarted")
          .map((t) => t.flowsBeforeUpdate)
          .join(", "),
      });

      const failed = await teardown(lab);
      invariants.push({
        name: "every resource of the run was removed (attachments, devices, routes, VIPs), dist1 repaired",
        ok: failed.length === 0,
        detail: failed.join("; ") || undefined,
      });
      const left = await leftBehind(lab);
      invariants.push({
        name: "nothing of the run is left: no bridge or port of the attachment, no device registration, no route for the VIP in the edge router or the client, no neighbour entry for its next hops, no VIP or arp sysctl on the amphorae; s-dist1 up, dist1's ovs-vswitchd running",
        ok: left.length === 0,
        detail: left.join("; ") || undefined,
      });

      const probesPerTrial = Math.round(median(trials.map((t) => t.probes)));
      const data = {
        machine,
        sizes,
        vip: VIP,
        loadBalancerId: LB,
        nextHops: NEXT_HOP,
        amphorae: lab.amphorae.map((b) => b.name),
        probe: { intervalMs: PROBE_INTERVAL_MS, timeoutMs: PROBE_TIMEOUT_MS, perRound: PER_ROUND, baselineMs: BASELINE_MS, holdMs: HOLD_MS },
        liveConnections: LIVE_CONNECTIONS,
        goalMs: GOAL_MS,
        rows,
        trials,
      };
      return { name: "distributor-failover", markdown: markdownOf(rows, sizes, machine, probesPerTrial), data, invariants } satisfies BenchReport;
    });
  },
};
