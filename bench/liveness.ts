import * as os from "node:os";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import type { DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../provider/model/inputs.generated";
import { chosenBucket } from "../provider/transport/openflow-trace";
import { slotChoice, traceFlow } from "../provider/openflow/trace";
import { readSlots } from "../provider/resources/deferred-nat-load-balancer/slots";
import type { Match } from "../provider/openflow/types";
import { bfdKeyOf, greKeyOf, tunnelPorts, withDefaults } from "../provider/resources/deferred-nat-load-balancer/plan";
import { runChecked } from "../provider/transport/exec";
import type { SshSession } from "../provider/transport/ssh";
import { type UnixctlClient, connectVswitchd } from "../provider/transport/unixctl";
import { isAlive, readPid } from "../test/lab/lab";
import { ROUTER_NS, type LabBackend, type LabInventory } from "../test/lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../test/support/deferred-nat";
import { inNamespace, labSsh, loadInventory, spawnInNamespace } from "../test/support/lab";
import { openLiveConnections } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import type { CheckerConfig } from "./programs/tcp-checker";
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
 * Issue 9's benchmark: how long a dead hypervisor's backends keep being
 * chosen, side by side in one run, for
 *
 * 1. ovslb's BFD liveness (healthCheck.bfd: a BFD port per hypervisor on
 *    every gateway, each bucket watching its hypervisor's), at 100/100/3 and
 *    300/300/3: the time from the fault until ofproto/trace on every gateway
 *    shows none of the hypervisor's buckets chosen, and from the repair until
 *    they are chosen again;
 * 2. a keepalived-style checker (TCP connect every 1 s, 1 s timeout, down
 *    after 3 consecutive failures) run concurrently on the same faults;
 * 3. OVN's own probes, quoted from the source (the lab has no ovn-controller);
 * 4. second chance with BFD at 100/100/3: the slot flows' owner groups fail
 *    over to the VIP's select group, so the same traces (each tuple's
 *    backend MAC) show a dead hypervisor's slots leave it, no other slot
 *    moves, and the connections to the other hypervisors' backends, open
 *    at the fault, keep working.
 *
 * Faults, on hv1: its underlay link cut on the router (`ip link set u-hv1
 * down` in ovslb-rtr), and its ovs-vswitchd frozen (SIGSTOP; repaired with
 * SIGCONT). Before each trial every gateway's sessions are up and negotiated
 * at the configured rate. Every trial also checks that no tuple of hv2's or
 * hv3's buckets moved, and that after the repair every traced tuple is back
 * on its bucket. Everything goes through the provider's handlers (check,
 * create, update, delete) and is removed at the end, also on failure or
 * Ctrl-C; the underlay is put back up and ovs-vswitchd resumed.
 */

export interface Sizes {
  /** Trials per (BFD setting, fault). */
  trials: number;
  /** Second chance: long-lived connections opened before each trial (those to hv2's and hv3's backends must survive it). */
  connections: number;
  /** Tuples traced on both gateways before and after each trial (the "nothing else moves" check). */
  wideTuples: number;
}
export const FULL: Sizes = { trials: 10, connections: 30, wideTuples: 300 };
export const SMOKE: Sizes = { trials: 1, connections: 12, wideTuples: 60 };

/** Its own VIP and name: 10.0.0.203-207 are taken by the BFD and health tests and the other benchmarks. */
export const VIP = "10.0.0.208";
export const NAME = "bench-liveness";
const GATEWAYS = ["gw1", "gw2"] as const;
const HYPERVISORS = ["hv1", "hv2", "hv3"] as const;
const VICTIM = "hv1";
type Timers = { minRx: number; minTx: number; multiplier: number };
export const SETTINGS: readonly Timers[] = [
  { minRx: 100, minTx: 100, multiplier: 3 },
  { minRx: 300, minTx: 300, multiplier: 3 },
];
/** The stateless settings, then second chance (healthCheck.bfd with secondChance: the owner groups fail over) at the first. */
/** With `underlay6`, the tunnels (and BFD) run over the lab's IPv6 underlay: ip6gre ports. */
type Variant = { timers: Timers; secondChance: boolean; underlay6?: boolean };
const VARIANTS: readonly Variant[] = [
  ...SETTINGS.map((timers) => ({ timers, secondChance: false })),
  { timers: SETTINGS[0], secondChance: true },
  { timers: SETTINGS[0], secondChance: false, underlay6: true },
];
const variantLabel = (v: Variant) => `${label(v.timers)}${v.secondChance ? ", second chance" : ""}${v.underlay6 ? ", IPv6 underlay (ip6gre)" : ""}`;
/**
 * "underlay-fresh" is the underlay cut made as soon as hv1's sessions are back at their
 * rate after a bounce, before each has sent at that rate: the first second of a session,
 * in which ovs-vswitchd's monitor thread may still wait for a wake-up computed at the
 * slow rate (see `negotiated`). It runs at the first setting only.
 */
type FaultKind = "underlay" | "vswitchd" | "underlay-fresh";
const FAULTS: readonly FaultKind[] = ["underlay", "vswitchd", "underlay-fresh"];
const faultsOf = (vi: number): readonly FaultKind[] => (vi === 0 ? FAULTS : FAULTS.filter((f) => f !== "underlay-fresh"));
const cutsUnderlay = (f: FaultKind) => f !== "vswitchd";
const FAULT_LABEL: Record<FaultKind, string> = {
  underlay: "underlay cut (`ip link set u-hv1 down` on the router)",
  vswitchd: "ovs-vswitchd frozen (SIGSTOP)",
  "underlay-fresh": "underlay cut as soon as hv1's sessions are back at their rate after a bounce",
};
/** keepalived-style check: connect every CHECK_INTERVAL_MS with CHECK_TIMEOUT_MS, down after CHECK_FALL failures in a row, up after one success. */
const CHECK_INTERVAL_MS = 1000;
const CHECK_TIMEOUT_MS = 1000;
const CHECK_FALL = 3;
/** A listener started for the run on hv1's underlay address: the path a checker outside the lab's segment takes. */
const PROBE_PORT = 8091;
/** Give up on a detection or a recovery after this long. */
const GIVE_UP_MS = 15_000;

const detectMs = (t: Timers) => Math.max(t.minRx, t.minTx) * t.multiplier;
const label = (t: Timers) => `${t.minRx}/${t.minTx}/${t.multiplier}`;
const now = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------- the checker

/** keepalived's TCP_CHECK, reduced (bench/programs/tcp-checker.ts): prints each target's up/down changes. */

interface CheckEvent {
  target: string;
  state: "up" | "down";
  at: number;
}

class Checker {
  readonly events: CheckEvent[] = [];
  readonly state: Record<string, string> = {};
  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (l) => {
      try {
        const e = JSON.parse(l) as CheckEvent;
        this.events.push(e);
        this.state[e.target] = e.state;
      } catch {
        /* not ours */
      }
    });
  }
  static start(ns: string, targets: Array<{ name: string; host: string; port: number }>): Checker {
    const cfg: CheckerConfig = { targets, intervalMs: CHECK_INTERVAL_MS, timeoutMs: CHECK_TIMEOUT_MS, fall: CHECK_FALL };
    return new Checker(spawnInNamespace(ns, [process.execPath, benchProgram("tcp-checker.ts"), JSON.stringify(cfg)]));
  }
  /** The first change of `target` to `state` at or after `since`. */
  first(target: string, state: "up" | "down", since: number): CheckEvent | undefined {
    return this.events.find((e) => e.target === target && e.state === state && e.at >= since);
  }
  stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const gone = new Promise<void>((r) => this.child.once("close", () => r()));
    this.child.stdin!.end();
    const t = setTimeout(() => this.child.kill("SIGKILL"), 3000);
    return gone.finally(() => clearTimeout(t));
  }
}

/** A TCP listener on hv1's underlay address, for the checker that probes across the underlay. */
function startListener(inv: LabInventory): Promise<ChildProcess> {
  const child = spawnInNamespace(inv.hosts[VICTIM].namespace, [
    process.execPath,
    benchProgram("tcp-listener.ts"),
    String(PROBE_PORT),
    inv.hosts[VICTIM].underlay!.address,
  ]);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", (l) => (l === "listening" ? resolve(child) : reject(new Error(`hv1 listener: ${l}`))));
    child.once("close", (c) => reject(new Error(`hv1 listener exited (${c})`)));
  });
}

// ---------------------------------------------------------------- resources

interface Lab {
  inv: LabInventory;
  pool: LabBackend[];
  ssh: Record<string, SshSession>;
  unixctl: Record<string, UnixctlClient>;
  lb: ProviderDriver;
  hv: Record<string, ProviderDriver>;
  timers: Timers;
  /** healthCheck.bfd with secondChance (slot flows and owner groups) rather than select buckets. */
  secondChance: boolean;
  /** The tunnels over the IPv6 underlay. */
  underlay6?: boolean;
  checkers: Checker[];
  listener?: ChildProcess;
  /** Set while a fault is in force, so teardown repairs it. */
  faulted?: FaultKind;
  tornDown?: Promise<string[]>;
}

const underlay = (lab: Lab, host: string) => (lab.underlay6 ? lab.inv.hosts[host].underlay!.address6! : lab.inv.hosts[host].underlay!.address);
const vips = (lab: Lab) => [{ address: VIP, port: 80, protocol: "tcp" as const, backends: lab.pool }];

function lbInputs(lab: Lab): DeferredNatLoadBalancerInputs {
  const base = labLoadBalancer(
    lab.inv,
    NAME,
    vips(lab).map((v) => ({ ...v, backends: v.backends.map((b) => labBackend(lab.inv, b)) })),
    { delivery: "gre", ...(lab.secondChance ? { secondChance: {} } : {}) },
  );
  return {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(lab, g.name) })),
    hypervisors: HYPERVISORS.map((name) => ({ name, tunnelAddress: underlay(lab, name) })),
    healthCheck: { bfd: lab.timers },
  };
}

function hvInputs(lab: Lab, name: string): DsrHypervisorFlowsInputs {
  return {
    ...labHypervisorFlows(lab.inv, NAME, name, vips(lab)),
    mode: "gre",
    gre: {
      allowedSources: GATEWAYS.map((g) => underlay(lab, g)),
      // Second chance: the key carries the previous owner's hypervisor, and the others hand packets on.
      ...(lab.secondChance
        ? { secondChance: { peers: HYPERVISORS.filter((h) => h !== name).map((h) => underlay(lab, h)) } }
        : { key: greKeyOf({ name: NAME }) }),
      bfd: { peers: GATEWAYS.map((g) => ({ address: underlay(lab, g), key: bfdKeyOf({ name: NAME }) })), timers: lab.timers },
    },
  };
}

const vswitchdPid = (lab: Lab) => {
  const pid = readPid(`${lab.inv.hosts[VICTIM].ovsRundir}/ovs-vswitchd.pid`);
  if (!pid) throw new Error(`${VICTIM}: no ovs-vswitchd pid`);
  return pid;
};
const stopped = (pid: number) => /^State:\s+[Tt]/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
const setUnderlay = (host: string, up: boolean) => inNamespace(ROUTER_NS, ["ip", "link", "set", `u-${host}`, up ? "up" : "down"]);
const underlayUp = (host: string) => /state UP|,UP[,>]/.test(inNamespace(ROUTER_NS, ["ip", "-o", "link", "show", `u-${host}`]));

function repair(lab: Lab, fault: FaultKind) {
  if (cutsUnderlay(fault)) {
    setUnderlay(VICTIM, true);
    // The router forgot hv1's neighbour: one ping warms the path again (the lab's start-up does the same), in the background.
    spawn("ip", ["netns", "exec", lab.inv.hosts[VICTIM].namespace, "ping", "-c1", "-W2", lab.inv.hosts[VICTIM].underlay!.router], { stdio: "ignore" });
  } else {
    process.kill(vswitchdPid(lab), "SIGCONT");
  }
}

function inflict(lab: Lab, fault: FaultKind) {
  lab.faulted = fault;
  if (cutsUnderlay(fault)) setUnderlay(VICTIM, false);
  else process.kill(vswitchdPid(lab), "SIGSTOP");
}

function teardown(lab: Lab): Promise<string[]> {
  lab.tornDown ??= (async () => {
    const { failed, attempt } = teardownSteps();
    // Repair first: the hypervisor's delete needs its ovs-vswitchd running.
    await attempt("resume ovs-vswitchd", () => {
      const pid = vswitchdPid(lab);
      if (stopped(pid)) process.kill(pid, "SIGCONT");
    });
    await attempt("underlay up", () => {
      if (!underlayUp(VICTIM)) repair(lab, "underlay");
    });
    lab.faulted = undefined;
    await attempt("the client's route to the VIP", () => {
      if (inNamespace(lab.inv.client.namespace, ["ip", "route", "show", `${VIP}/32`]).trim())
        inNamespace(lab.inv.client.namespace, ["ip", "route", "del", `${VIP}/32`]);
    });
    for (const c of lab.checkers) await attempt("checker", () => c.stop());
    await attempt("hv1 listener", () => lab.listener?.stdin?.end());
    await attempt(`delete ${NAME} (load balancer)`, () => (lab.lb.id ? lab.lb.delete() : lab.lb.purge(lbInputs(lab))));
    for (const h of HYPERVISORS) {
      const d = lab.hv[h];
      await attempt(`delete ${NAME} on ${h}`, () => (d.id ? d.delete() : d.purge(hvInputs(lab, h))));
    }
    return failed;
  })();
  return lab.tornDown;
}

async function leftBehind(lab: Lab, cookies: string[]): Promise<string[]> {
  const left: string[] = [];
  for (const h of [...GATEWAYS, ...HYPERVISORS]) {
    for (const c of cookies) {
      const flows = (await runChecked(lab.ssh[h], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `cookie=${c}/-1`]))
        .split("\n")
        .filter((l) => l.includes("cookie="));
      if (flows.length > 0) left.push(`${h}: ${flows.length} flows with cookie ${c}`);
    }
  }
  for (const g of GATEWAYS) {
    const names = tunnelPorts(
      withDefaults(lbInputs(lab)),
      lbInputs(lab).gateways.find((x) => x.name === g)!,
    ).map((p) => p.name);
    const ports = (await runChecked(lab.ssh[g], ["ovs-vsctl", "list-ports", "br-seg"])).split("\n");
    const mine = ports.filter((p) => names.includes(p.trim()));
    if (mine.length > 0) left.push(`${g}: ports ${mine.join(", ")}`);
  }
  if (!underlayUp(VICTIM)) left.push("hv1's underlay link is down");
  if (stopped(vswitchdPid(lab))) left.push("hv1's ovs-vswitchd is stopped");
  if (!isAlive(vswitchdPid(lab))) left.push("hv1's ovs-vswitchd is not running");
  return left;
}

// ---------------------------------------------------------------- tracing

interface Tuple {
  match: Match;
  flow: string;
}

/** Where each tuple goes on a gateway: its bucket id (select buckets), or with second chance its backend's MAC; undefined for nowhere. */
async function traceOn(lab: Lab, gw: string, tuples: readonly Tuple[]): Promise<Array<string | undefined>> {
  const outs = await Promise.all(tuples.map((t) => lab.unixctl[gw].call("ofproto/trace", ["br-seg", t.flow])));
  return outs.map((o) => (lab.secondChance ? slotChoice(o).mac : chosenBucket(o)?.toString()));
}

/**
 * Every tuple on its own backend on the gateway, its BFD sessions counted up
 * by the datapath: without second chance on a live bucket; with it on its
 * slot's owner (an owner group on its fallback sends the slot to another
 * backend, live too, which a check of liveness alone would take for home).
 */
async function allHome(lab: Lab, gw: string, tuples: readonly Tuple[]): Promise<boolean> {
  const outs = await Promise.all(tuples.map((t) => lab.unixctl[gw].call("ofproto/trace", ["br-seg", t.flow])));
  if (!lab.secondChance) return outs.every((o) => chosenBucket(o) !== undefined);
  const table = readSlots(lab.lb.outputs.slotTables[`tcp:${VIP}:80`]);
  const macOf = new Map(lab.pool.map((b) => [`${b.address}:${lab.inv.backendPort}`, b.mac.toLowerCase()]));
  return outs.every((o) => {
    const choice = slotChoice(o);
    return choice.slot !== undefined && choice.mac === macOf.get(table.backends[table.owner[choice.slot]]);
  });
}

/** What traceOn gives -> hypervisor: bucket ids from the load balancer's recorded ids, or the backends' MACs. */
function hypervisorOfPick(lab: Lab): Map<string, string> {
  if (lab.secondChance) return new Map(lab.pool.map((b) => [b.mac.toLowerCase(), b.hypervisor]));
  const ids = lab.lb.outputs.bucketIds[`tcp:${VIP}:80`] as Record<string, number>;
  const byAddress = new Map(lab.pool.map((b) => [`${b.address}:${lab.inv.backendPort}`, b.hypervisor]));
  return new Map(Object.entries(ids).map(([replica, id]) => [String(id), byAddress.get(replica.split("#")[0])!]));
}

/**
 * Each gateway's BFD sessions toward `hvs` are up, forwarding, at the configured rate in
 * both directions with no poll sequence open, and (`steady`, the default) each has sent a
 * control packet since it was first seen so. Why the last: ovs-vswitchd's monitor thread
 * (ofproto/ofproto-dpif-monitor.c) wakes a session at the time bfd_wait() gave on its last
 * run, min(next transmit, detection time). A session that has just come up last ran at the
 * slow rate RFC 5880 6.8.3 sets before Up (1 s); the packets that bring it to its rate are
 * handled in the main thread (lib/bfd.c bfd_process_packet), which moves the detection time
 * but not the monitor's wake-up. Until the session's next transmission, up to a second, a
 * fault is detected only at that stale wake-up: 366-609 ms instead of about 300 in the runs
 * that found it (the log's "Detect Time: now -325ms" with "Last TX Time: now +0ms").
 */
async function negotiated(lab: Lab, hvs: readonly string[], { steady = true } = {}): Promise<void> {
  const inputs = lbInputs(lab);
  const t = lab.timers;
  const rate = Math.max(t.minTx, t.minRx);
  await Promise.all(
    GATEWAYS.map(async (g) => {
      const ports = tunnelPorts(
        withDefaults(inputs),
        inputs.gateways.find((x) => x.name === g)!,
      )
        .filter((p) => p.bfd && hvs.includes(p.hypervisor))
        .map((p) => p.name);
      /** When each port was first seen at its rate: a transmission after it refreshed the monitor's wake-up. */
      const atRateSince = new Map<string, number>();
      await waitUntil(
        async () => {
          const blocks = (await lab.unixctl[g].call("bfd/show", [])).split(/^---- /m);
          const readAt = now();
          return ports.every((name) => {
            const b = blocks.find((x) => x.startsWith(`${name} ----`));
            const atRate =
              b !== undefined &&
              /Forwarding: true/.test(b) &&
              /Local Session State: up/.test(b) &&
              /Local Flags: none/.test(b) &&
              b.includes(`TX Interval: Approx ${rate}ms`) &&
              b.includes(`RX Interval: Approx ${rate}ms`);
            if (!atRate) {
              atRateSince.delete(name);
              return false;
            }
            if (!steady) return true;
            const since = atRateSince.get(name) ?? readAt;
            atRateSince.set(name, since);
            const lastTx = /Last TX Time: now ([-+]\d+)ms/.exec(b)!;
            return readAt + Number(lastTx[1]) > since;
          });
        },
        { what: `${g}: BFD up at ${label(t)} toward ${hvs.join(", ")}${steady ? ", sent at that rate" : ""}`, timeoutMs: 20_000, intervalMs: 20 },
      );
    }),
  );
}

/** Until each gateway's session toward hv1 says down. */
async function victimDown(lab: Lab): Promise<void> {
  const inputs = lbInputs(lab);
  await Promise.all(
    GATEWAYS.map(async (g) => {
      const port = tunnelPorts(
        withDefaults(inputs),
        inputs.gateways.find((x) => x.name === g)!,
      ).find((p) => p.bfd && p.hypervisor === VICTIM)!.name;
      await waitUntil(
        async () => {
          const b = (await lab.unixctl[g].call("bfd/show", [])).split(/^---- /m).find((x) => x.startsWith(`${port} ----`));
          return b !== undefined && !/Local Session State: up/.test(b);
        },
        { what: `${g}: BFD toward ${VICTIM} down`, timeoutMs: 10_000, intervalMs: 20 },
      );
    }),
  );
}

/** When `g`'s ovs-vswitchd logged hv1's BFD session going down between `from` and `to` (ms after `from`), from its log's ms timestamps. */
async function bfdDownLogged(lab: Lab, g: string, from: number, to: number): Promise<number | undefined> {
  const inputs = lbInputs(lab);
  const port = tunnelPorts(
    withDefaults(inputs),
    inputs.gateways.find((x) => x.name === g)!,
  ).find((p) => p.bfd && p.hypervisor === VICTIM)!.name;
  const tail = await runChecked(lab.ssh[g], ["tail", "-c", "100000", `${lab.inv.hosts[g].ovsRundir}/ovs-vswitchd.log`]);
  for (const line of tail.split("\n")) {
    if (!line.includes(`${port}: BFD state change: up->down`)) continue;
    const at = Date.parse(line.split("|")[0]);
    // The log has whole milliseconds; allow for the rounding.
    if (at >= Math.floor(from) - 1 && at <= to) return at - from;
  }
  return undefined;
}

interface Loop {
  /** Per gateway: the end of the first pass in which `done` held (epoch ms). */
  doneAt: Record<string, number>;
  passes: number;
  /** Durations of the passes (ms): the resolution of the times. */
  passMs: number[];
  /** Non-victim tuples seen on another bucket than before, counted per pass and tuple. */
  violations: number;
  violationSamples: string[];
}

/**
 * Traces `tuples` on both gateways, concurrently, pass after pass, until on
 * every gateway `done(picks)` holds; every pass also counts non-victim
 * tuples that are not on their bucket.
 */
async function loopUntil(
  lab: Lab,
  tuples: readonly Tuple[],
  expected: readonly (string | undefined)[],
  victimIdx: ReadonlySet<number>,
  done: (picks: Array<string | undefined>) => boolean,
): Promise<Loop> {
  const loop: Loop = { doneAt: {}, passes: 0, passMs: [], violations: 0, violationSamples: [] };
  const deadline = now() + GIVE_UP_MS;
  await Promise.all(
    GATEWAYS.map(async (g) => {
      while (loop.doneAt[g] === undefined) {
        if (now() > deadline) throw new Error(`${g}: gave up after ${GIVE_UP_MS} ms`);
        const start = now();
        const picks = await traceOn(lab, g, tuples);
        const end = now();
        loop.passes++;
        loop.passMs.push(end - start);
        picks.forEach((b, i) => {
          if (!victimIdx.has(i) && b !== expected[i]) {
            loop.violations++;
            if (loop.violationSamples.length < 5) loop.violationSamples.push(`${g} tuple ${i}: bucket ${b} instead of ${expected[i]}`);
          }
        });
        if (done(picks)) loop.doneAt[g] = end;
      }
    }),
  );
  return loop;
}

// ---------------------------------------------------------------- measuring

interface Trial {
  setting: string;
  fault: FaultKind;
  trial: number;
  loadAverage: string;
  /** Fault until each gateway stopped choosing hv1, and until the last one did (ms). */
  detectPerGateway: Record<string, number>;
  detect: number;
  /** Repair until each gateway chose hv1's buckets again for every tuple that had them, and until the last one did (ms). */
  recoverPerGateway: Record<string, number>;
  recover: number;
  /** Fault until each gateway's ovs-vswitchd logged hv1's BFD session up->down (its log, ms timestamps): BFD's own part of `detectPerGateway`. */
  bfdDownLoggedPerGateway: Record<string, number | undefined>;
  /** Median duration of one trace pass (all probe tuples on one gateway) while detecting. */
  passMs: number;
  /** keepalived-style checkers: fault until "down" (ms), undefined if it never went down before the repair. */
  checkUnderlay?: number;
  checkBackend?: number;
  /** Repair until the checkers saw it up again (ms). */
  checkUnderlayUp?: number;
  checkBackendUp?: number;
  violations: number;
  violationSamples: string[];
  /** The wide trace after the repair differed from before (tuples, both gateways). */
  notRestored: number;
  /** Tuples of hv1 still chosen, in the wide trace after detection. */
  victimStillChosen: number;
  /** Second chance: connections to hv2's and hv3's backends open at the fault, and how many of them broke. */
  kept?: { others: number; broken: number };
}

async function runTrial(
  lab: Lab,
  ctx: BenchContext,
  sizes: Sizes,
  fault: FaultKind,
  trial: number,
  probe: Tuple[],
  probeExpected: (string | undefined)[],
  probeVictim: Set<number>,
  wide: Tuple[],
  wideBefore: Record<string, Array<string | undefined>>,
  ofHv: Map<string, string>,
  underlayCheck: Checker,
  backendCheck: Checker,
  backendTarget: string,
): Promise<Trial> {
  const isVictim = (b: string | undefined) => b === undefined || ofHv.get(b) === VICTIM;
  await negotiated(lab, HYPERVISORS);
  await waitUntil(() => underlayCheck.state.underlay === "up" && backendCheck.state[backendTarget] === "up", {
    what: "the checkers see hv1 up",
    timeoutMs: 10_000,
  });
  // Both gateways pick as before the trial, for every probe tuple.
  for (const g of GATEWAYS) {
    const picks = await traceOn(lab, g, probe);
    if (picks.some((b, i) => b !== probeExpected[i]))
      throw new Error(`${g}: probe tuples not on their buckets before trial: ${JSON.stringify(picks)} vs ${JSON.stringify(probeExpected)}`);
  }
  const loadAverage = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

  // Second chance: connections that must outlive the fault (those to hv2's and hv3's backends).
  const hvOfBackend = new Map(lab.pool.map((b) => [b.name, b.hypervisor]));
  const live = lab.secondChance ? await openLiveConnections(lab.inv.client.namespace, VIP, 80, sizes.connections) : undefined;
  if (fault === "underlay-fresh") {
    // A bounce: hv1's sessions down, back up, and the cut as soon as they are at their rate and every probe tuple is home again.
    setUnderlay(VICTIM, false);
    await victimDown(lab);
    repair(lab, fault);
    await negotiated(lab, [VICTIM], { steady: false });
    await waitUntil(
      async () => (await Promise.all(GATEWAYS.map((g) => traceOn(lab, g, probe)))).every((picks) => picks.every((b, i) => b === probeExpected[i])),
      {
        what: "every probe tuple home on both gateways after the bounce",
        timeoutMs: 10_000,
        intervalMs: 5,
      },
    );
  }
  const t0 = now();
  inflict(lab, fault);
  const detected = await loopUntil(lab, probe, probeExpected, probeVictim, (picks) => picks.every((b) => !isVictim(b)));
  let kept: Trial["kept"];
  if (live) {
    const others = live.initial.filter((c) => !c.broken && hvOfBackend.get(c.backend) !== VICTIM);
    const round = await live.round();
    kept = { others: others.length, broken: round.filter((c) => c.broken && others.some((o) => o.port === c.port)).length };
    live.close();
  }
  // The wide set: hv1's tuples gone, every other tuple where it was.
  let violations = detected.violations;
  const violationSamples = [...detected.violationSamples];
  let victimStillChosen = 0;
  for (const g of GATEWAYS) {
    const picks = await traceOn(lab, g, wide);
    picks.forEach((b, i) => {
      const was = wideBefore[g][i];
      if (isVictim(was)) {
        if (isVictim(b)) victimStillChosen++;
      } else if (b !== was) {
        violations++;
        if (violationSamples.length < 5) violationSamples.push(`${g} wide tuple ${i}: bucket ${b} instead of ${was}`);
      }
    });
  }
  // The checkers on the paths the fault cut go down (3 failures: about 3 s).
  const cutsSegment = !cutsUnderlay(fault);
  await waitUntil(() => underlayCheck.first("underlay", "down", t0) && (!cutsSegment || backendCheck.first(backendTarget, "down", t0)), {
    what: "the checkers declaring hv1 down",
    timeoutMs: GIVE_UP_MS,
  }).catch(() => undefined);
  const uDown = underlayCheck.first("underlay", "down", t0);
  const bDown = backendCheck.first(backendTarget, "down", t0);

  const t1 = now();
  repair(lab, fault);
  lab.faulted = undefined;
  const recovered = await loopUntil(lab, probe, probeExpected, probeVictim, (picks) => picks.every((b, i) => b === probeExpected[i]));
  violations += recovered.violations;
  violationSamples.push(...recovered.violationSamples.slice(0, Math.max(0, 5 - violationSamples.length)));
  await waitUntil(() => underlayCheck.first("underlay", "up", t1) && (!bDown || backendCheck.first(backendTarget, "up", t1)), {
    what: "the checkers seeing hv1 up again",
    timeoutMs: GIVE_UP_MS,
  }).catch(() => undefined);
  // The sessions renegotiated, then the whole wide set maps exactly as before.
  await negotiated(lab, HYPERVISORS);
  let notRestored = 0;
  for (const g of GATEWAYS) {
    const picks = await traceOn(lab, g, wide);
    notRestored += picks.filter((b, i) => b !== wideBefore[g][i]).length;
  }
  const uUp = underlayCheck.first("underlay", "up", t1);
  const bUp = backendCheck.first(backendTarget, "up", t1);
  const bfdDownLoggedPerGateway = Object.fromEntries(await Promise.all(GATEWAYS.map(async (g) => [g, await bfdDownLogged(lab, g, t0, t1)] as const)));
  const per = (loop: Loop, since: number) => Object.fromEntries(GATEWAYS.map((g) => [g, loop.doneAt[g] - since]));
  const detectPerGateway = per(detected, t0);
  const recoverPerGateway = per(recovered, t1);
  const result: Trial = {
    setting: variantLabel(lab),
    fault,
    trial,
    loadAverage,
    detectPerGateway,
    detect: Math.max(...Object.values(detectPerGateway)),
    recoverPerGateway,
    bfdDownLoggedPerGateway,
    recover: Math.max(...Object.values(recoverPerGateway)),
    passMs: median(detected.passMs),
    checkUnderlay: uDown && uDown.at - t0,
    checkBackend: bDown && bDown.at < t1 ? bDown.at - t0 : undefined,
    checkUnderlayUp: uUp && uUp.at - t1,
    checkBackendUp: bDown && bUp ? bUp.at - t1 : undefined,
    violations,
    violationSamples,
    notRestored,
    victimStillChosen,
    ...(kept ? { kept } : {}),
  };
  const f = (ms?: number) => (ms === undefined ? "never" : fmtMs(ms));
  ctx.log(
    `  ${variantLabel(lab)} ${fault} #${trial + 1}: BFD gone on every gateway ${fmtMs(result.detect)} (${GATEWAYS.map((g) => `${g} ${fmtMs(detectPerGateway[g])}, logged down ${f(bfdDownLoggedPerGateway[g])}`).join("; ")}; pass ${fmtMs(result.passMs)}), back ${fmtMs(result.recover)}; checker underlay ${f(result.checkUnderlay)}, backend ${f(result.checkBackend)}; moved ${violations}, not restored ${notRestored}${kept ? `; connections to hv2/hv3 broken ${kept.broken} of ${kept.others}` : ""}; load ${loadAverage}`,
  );
  return result;
}

// ---------------------------------------------------------------- the report

interface Row {
  setting: string;
  fault: FaultKind;
  configuredDetectMs: number;
  trials: number;
  detectMedian: number;
  detectWorst: number;
  detectPerGatewayMedian: Record<string, number>;
  /** Over both gateways' sessions: fault until the session was logged down. */
  bfdDownLogged?: { median: number; worst: number; n: number };
  recoverMedian: number;
  recoverWorst: number;
  passMedian: number;
  checkUnderlay?: { median: number; worst: number; n: number };
  checkBackend?: { median: number; worst: number; n: number };
  violations: number;
  /** Second chance: connections to hv2's and hv3's backends over the trials, and how many broke. */
  kept?: { others: number; broken: number };
}

const stats = (xs: Array<number | undefined>) => {
  const v = xs.filter((x): x is number => x !== undefined);
  return v.length === 0 ? undefined : { median: median(v), worst: Math.max(...v), n: v.length };
};

function rowsOf(trials: readonly Trial[]): Row[] {
  const rows: Row[] = [];
  for (const v of VARIANTS) {
    for (const fault of FAULTS) {
      const mine = trials.filter((x) => x.setting === variantLabel(v) && x.fault === fault);
      if (mine.length === 0) continue;
      rows.push({
        setting: variantLabel(v),
        fault,
        configuredDetectMs: detectMs(v.timers),
        trials: mine.length,
        detectMedian: median(mine.map((x) => x.detect)),
        detectWorst: Math.max(...mine.map((x) => x.detect)),
        detectPerGatewayMedian: Object.fromEntries(GATEWAYS.map((g) => [g, median(mine.map((x) => x.detectPerGateway[g]))])),
        bfdDownLogged: stats(mine.flatMap((x) => GATEWAYS.map((g) => x.bfdDownLoggedPerGateway[g]))),
        recoverMedian: median(mine.map((x) => x.recover)),
        recoverWorst: Math.max(...mine.map((x) => x.recover)),
        passMedian: median(mine.map((x) => x.passMs)),
        checkUnderlay: stats(mine.map((x) => x.checkUnderlay)),
        checkBackend: stats(mine.map((x) => x.checkBackend)),
        violations: mine.reduce((n, x) => n + x.violations, 0),
        ...(mine.some((x) => x.kept)
          ? { kept: mine.reduce((k, x) => ({ others: k.others + x.kept!.others, broken: k.broken + x.kept!.broken }), { others: 0, broken: 0 }) }
          : {}),
      });
    }
  }
  return rows;
}

const ms = (x: number) => fmtMs(x);
const medWorst = (s: { median: number; worst: number; n: number } | undefined, of: number) =>
  s === undefined ? "never (path not cut)" : `${ms(s.median)} / ${ms(s.worst)}${s.n < of ? ` (${s.n} of ${of})` : ""}`;

function markdownOf(rows: readonly Row[], sizes: Sizes, machine: Record<string, string>): string {
  const tableRows = rows.map(
    (r) =>
      `| ${FAULT_LABEL[r.fault]} | ovslb BFD ${r.setting} | ${ms(r.configuredDetectMs)} | **${ms(r.detectMedian)} / ${ms(r.detectWorst)}** (${GATEWAYS.map((g) => `${g} ${ms(r.detectPerGatewayMedian[g])}`).join(", ")}) | ${r.bfdDownLogged ? `${ms(r.bfdDownLogged.median)} / ${ms(r.bfdDownLogged.worst)}${r.bfdDownLogged.n < 2 * r.trials ? ` (${r.bfdDownLogged.n} of ${2 * r.trials})` : ""}` : "n/a"} | ${ms(r.recoverMedian)} / ${ms(r.recoverWorst)} | ${ms(r.passMedian)} | ${r.violations}${r.kept ? `; connections to hv2/hv3 broken: ${r.kept.broken} of ${r.kept.others}` : ""} | ${r.trials} |`,
  );
  const checkRows = rows
    .filter((r) => r.setting === label(SETTINGS[0]) && r.fault !== "underlay-fresh")
    .map(
      (r) =>
        `| ${FAULT_LABEL[r.fault]} | keepalived-style 3 × 1 s, gw1 → hv1's underlay address | ${ms(CHECK_FALL * CHECK_INTERVAL_MS)}-${ms(CHECK_FALL * CHECK_INTERVAL_MS + CHECK_TIMEOUT_MS)} | ${medWorst(stats(rowsTrials(r, "checkUnderlay")), rowsTotal(r))} | | | | | ${rowsTotal(r)} |\n` +
        `| ${FAULT_LABEL[r.fault]} | keepalived-style 3 × 1 s, client → backend hv1-vm1:8080 (the lab's segment) | ${ms(CHECK_FALL * CHECK_INTERVAL_MS)}-${ms(CHECK_FALL * CHECK_INTERVAL_MS + CHECK_TIMEOUT_MS)} | ${medWorst(stats(rowsTrials(r, "checkBackend")), rowsTotal(r))} | | | | | ${rowsTotal(r)} |`,
    );
  return [
    "### Time until a dead hypervisor's backends stop being chosen",
    "",
    "| Fault on hv1 | Detector | Configured detection | Fault → not chosen on every gateway: median / worst (per gateway, median) | BFD session logged down (both gateways' sessions): median / worst | Repair → chosen again: median / worst | Trace pass (resolution) | Other hypervisors' tuples moved | Trials |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...tableRows,
    ...checkRows,
    "",
    `Each row's trials were run one after the other in one run; the keepalived-style checkers ran throughout, on the same faults as the BFD trials (their rows pool all of them). ${sizes.trials} trial(s) per setting and fault. ` +
      `With second chance the traces read each tuple's backend MAC (slot flows and owner groups, no select bucket of its own) and ${sizes.connections} long-lived connections are opened before each trial: those to hv2's and hv3's backends must work after the detection. ` +
      "\"Not chosen on every gateway\" is the end of the first `ofproto/trace` pass, on each of gw1 and gw2 (concurrently, over ovs-vswitchd's unixctl socket), in which none of the probe tuples (one per bucket of the VIP; those that hit hv1's two buckets before) takes an hv1 bucket; the fault's time is taken just before the command that makes it, so both ends err on the slow side by up to a trace pass. " +
      '"Chosen again": from the repair until every probe tuple is back on its own bucket on both gateways. ' +
      `"Other hypervisors' tuples moved": tuples of hv2's and hv3's buckets found on another bucket in any pass, plus ${sizes.wideTuples} tuples traced on both gateways once hv1 was gone; after each repair, once the sessions were negotiated again, those ${sizes.wideTuples} tuples all mapped exactly as before (invariant). ` +
      "OVN's own health check is not in this table: the ovn-incident benchmark measures it with real ovn-controllers (a backend that goes silent, and a chassis that dies), the ovn-peer benchmark on a killed server.",
    "",
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
  ].join("\n");
}

// Checker figures pool both BFD settings' trials of a fault (they do not depend on it).
let ALL_TRIALS: Trial[] = [];
const rowsTrials = (r: Row, key: "checkUnderlay" | "checkBackend") => ALL_TRIALS.filter((t) => t.fault === r.fault).map((t) => t[key]);
const rowsTotal = (r: Row) => ALL_TRIALS.filter((t) => t.fault === r.fault).length;

export const livenessBenchmark: Benchmark = {
  name: "liveness",
  description:
    "issues 9 and 24: a dead hypervisor's backends stop being chosen: ovslb BFD (100/100/3, 300/300/3, and 100/100/3 with second chance) vs keepalived-style 3 x 1 s checks vs OVN's probes (quoted)",
  async run(ctx) {
    const sizes = ctx.smoke ? SMOKE : FULL;
    const inv = loadInventory();
    const lab: Lab = {
      inv,
      pool: HYPERVISORS.flatMap((h) => inv.backends.filter((b) => b.hypervisor === h).slice(0, 2)),
      ssh: {},
      unixctl: {},
      lb: new ProviderDriver("DeferredNatLoadBalancer"),
      hv: Object.fromEntries(HYPERVISORS.map((h) => [h, new ProviderDriver("DsrHypervisorFlows")])),
      timers: SETTINGS[0],
      secondChance: false,
      checkers: [],
    };
    const invariants: Invariant[] = [];
    const run: LabRunOptions = {
      locks: ["hv1-gre"],
      interrupted: "repairing hv1 and removing this run's resources",
      teardown: () => teardown(lab),
      close: () => {
        for (const u of Object.values(lab.unixctl)) u.close();
        for (const s of Object.values(lab.ssh)) s.close();
      },
    };
    return labRun(ctx, run, async (interrupted) => {
      for (const h of [...GATEWAYS, ...HYPERVISORS]) lab.ssh[h] = await labSsh(inv, h);
      for (const g of GATEWAYS) {
        lab.unixctl[g] = await connectVswitchd(lab.ssh[g], inv.hosts[g].ovsRundir);
      }
      const machine = await machineNote(lab.ssh.gw1);
      // Leftovers of an interrupted run: a stopped vswitchd or a cut link first, then its resources.
      if (stopped(vswitchdPid(lab))) process.kill(vswitchdPid(lab), "SIGCONT");
      if (!underlayUp(VICTIM)) repair(lab, "underlay");
      await lab.lb.purge(lbInputs(lab));
      for (const h of HYPERVISORS) await lab.hv[h].purge(hvInputs(lab, h));

      ctx.log(`creating ${NAME} (VIP ${VIP}, 2 backends on each of hv1-hv3, BFD ${label(lab.timers)})`);
      for (const h of HYPERVISORS) await lab.hv[h].create(hvInputs(lab, h));
      await lab.lb.create(lbInputs(lab));
      const cookies = [lab.lb.outputs.cookie, ...HYPERVISORS.map((h) => lab.hv[h].outputs.cookie)] as string[];

      // The VIP is outside the client's gateway range: second chance's connections reach it through both gateways by this route.
      inNamespace(inv.client.namespace, ["ip", "route", "replace", `${VIP}/32`, ...GATEWAYS.flatMap((g) => ["nexthop", "via", inv.hosts[g].segment!.address])]);
      lab.listener = await startListener(inv);
      const backendTarget = lab.pool.find((b) => b.hypervisor === VICTIM)!;
      const underlayCheck = Checker.start(inv.hosts.gw1.namespace, [{ name: "underlay", host: inv.hosts[VICTIM].underlay!.address, port: PROBE_PORT }]);
      const backendCheck = Checker.start(inv.client.namespace, [{ name: backendTarget.name, host: backendTarget.address, port: inv.backendPort }]);
      lab.checkers.push(underlayCheck, backendCheck);

      const trials: Trial[] = [];
      for (const [vi, variant] of VARIANTS.entries()) {
        if (vi > 0 && (variant.secondChance !== lab.secondChance || !!variant.underlay6 !== !!lab.underlay6)) {
          // Another mode or underlay of the same load balancer: made again (second chance's tunnels take the key from the flow; ip6gre ports).
          const underlayChanged = !!variant.underlay6 !== !!lab.underlay6;
          lab.timers = variant.timers;
          lab.secondChance = variant.secondChance;
          lab.underlay6 = variant.underlay6;
          ctx.log(`BFD ${variantLabel(variant)}: the load balancer made again, the hypervisors ${underlayChanged ? "made again" : "updated"}`);
          await lab.lb.delete();
          lab.lb = new ProviderDriver("DeferredNatLoadBalancer");
          // Another underlay family: the hypervisors' flows are made again too (an update of the family in place is not what is measured).
          for (const h of HYPERVISORS) {
            if (!underlayChanged) await lab.hv[h].update(hvInputs(lab, h));
            else {
              await lab.hv[h].delete();
              lab.hv[h] = new ProviderDriver("DsrHypervisorFlows");
              await lab.hv[h].create(hvInputs(lab, h));
            }
          }
          await lab.lb.create(lbInputs(lab));
        } else if (vi > 0) {
          lab.timers = variant.timers;
          ctx.log(`BFD ${variantLabel(variant)}: updating the hypervisors and the load balancer`);
          for (const h of HYPERVISORS) await lab.hv[h].update(hvInputs(lab, h));
          await lab.lb.update(lbInputs(lab));
        }
        await negotiated(lab, HYPERVISORS);
        const ofHv = hypervisorOfPick(lab);
        // Tuples, and the bucket each takes (the same on both gateways): one per bucket for the tight loop, the first wideTuples for the wide check.
        const seg = Number((await runChecked(lab.ssh.gw1, ["ovs-vsctl", "get", "interface", "seg0", "ofport"])).trim());
        const candidates: Tuple[] = Array.from({ length: Math.max(400, sizes.wideTuples) }, (_, i) => {
          const match: Match = {
            protocol: "tcp",
            in_port: seg,
            nw_src: `10.9.${(i >> 8) & 255}.${i & 255 || 1}`,
            nw_dst: VIP,
            tp_src: 1024 + ((i * 7919) % 60000),
            tp_dst: 80,
          };
          return { match, flow: traceFlow(match, `tuple ${i}`) };
        });
        // Every tuple home on both gateways before they are taken: bfd/show can say up before the datapath counts a watched port live.
        await waitUntil(async () => (await Promise.all(GATEWAYS.map((g) => allHome(lab, g, candidates)))).every(Boolean), {
          what: "every tuple on its own backend on both gateways",
          timeoutMs: 10_000,
        });
        const picks = await traceOn(lab, "gw1", candidates);
        const picks2 = await traceOn(lab, "gw2", candidates);
        const what = lab.secondChance ? "backend" : "bucket";
        invariants.push({
          name: `${variantLabel(variant)}: both gateways pick the same ${what} for each of ${candidates.length} tuples, and every ${what} is chosen`,
          ok: picks.every((b, i) => b === picks2[i]) && [...ofHv.keys()].every((id) => picks.includes(id)),
          detail: `${new Set(picks).size} of ${ofHv.size} ${what}s chosen`,
        });
        const probe: Tuple[] = [];
        const probeExpected: string[] = [];
        for (const id of [...ofHv.keys()].sort()) {
          const i = picks.indexOf(id);
          if (i >= 0) {
            probe.push(candidates[i]);
            probeExpected.push(id);
          }
        }
        const probeVictim = new Set(probeExpected.flatMap((id, i) => (ofHv.get(id) === VICTIM ? [i] : [])));
        const wide = candidates.slice(0, sizes.wideTuples);
        const wideBefore = Object.fromEntries(await Promise.all(GATEWAYS.map(async (g) => [g, await traceOn(lab, g, wide)] as const)));
        for (const fault of faultsOf(vi)) {
          for (let trial = 0; trial < sizes.trials; trial++) {
            if (interrupted()) throw new Error("interrupted");
            trials.push(
              await runTrial(
                lab,
                ctx,
                sizes,
                fault,
                trial,
                probe,
                probeExpected,
                probeVictim,
                wide,
                wideBefore,
                ofHv,
                underlayCheck,
                backendCheck,
                backendTarget.name,
              ),
            );
          }
        }
      }
      ALL_TRIALS = trials;
      const rows = rowsOf(trials);

      const violations = trials.reduce((n, t) => n + t.violations, 0);
      invariants.push({
        name: "in every trial, no tuple of hv2's or hv3's buckets moved (tight loop and wide trace, both gateways)",
        ok: violations === 0,
        detail: `${violations} moved${
          violations
            ? `: ${trials
                .flatMap((t) => t.violationSamples)
                .slice(0, 5)
                .join("; ")}`
            : ""
        }`,
      });
      const still = trials.reduce((n, t) => n + t.victimStillChosen, 0);
      invariants.push({
        name: "once detected, no traced tuple of the wide set takes an hv1 bucket on either gateway",
        ok: still === 0,
        detail: `${still} tuples`,
      });
      const notRestored = trials.reduce((n, t) => n + t.notRestored, 0);
      invariants.push({
        name: `after every repair, all ${sizes.wideTuples} wide tuples map exactly as before, on both gateways`,
        ok: notRestored === 0,
        detail: `${notRestored} differ`,
      });
      const sc = trials.filter((t) => t.kept);
      invariants.push({
        name: "second chance: in every trial, the connections to hv2's and hv3's backends open at the fault kept working (only hv1's slots moved)",
        ok: sc.length > 0 && sc.every((t) => t.kept!.others > 0 && t.kept!.broken === 0),
        detail: `${sc.reduce((n, t) => n + t.kept!.broken, 0)} broken of ${sc.reduce((n, t) => n + t.kept!.others, 0)} over ${sc.length} trials`,
      });
      const missedU = trials.filter((t) => t.checkUnderlay === undefined).length;
      invariants.push({
        name: "the keepalived-style checker across the underlay declared hv1 down in every trial",
        ok: missedU === 0,
        detail: `${trials.length - missedU} of ${trials.length}`,
      });
      const missedB = trials.filter((t) => t.fault === "vswitchd" && t.checkBackend === undefined).length;
      invariants.push({
        name: "the keepalived-style checker of the backend declared it down in every ovs-vswitchd trial",
        ok: missedB === 0,
        detail: `${trials.filter((t) => t.fault === "vswitchd").length - missedB} of ${trials.filter((t) => t.fault === "vswitchd").length}`,
      });

      const failed = await teardown(lab);
      invariants.push({
        name: "every resource, checker and listener of the run was removed; hv1's underlay is up and its ovs-vswitchd runs",
        ok: failed.length === 0,
        detail: failed.join("; ") || undefined,
      });
      const left = await leftBehind(lab, cookies);
      invariants.push({
        name: "nothing of the run is left (flows with its cookies, its gateway ports, a cut link, a stopped ovs-vswitchd)",
        ok: left.length === 0,
        detail: left.join("; ") || undefined,
      });

      const data = {
        machine,
        sizes,
        vip: VIP,
        name: NAME,
        settings: SETTINGS.map((t) => ({ ...t, configuredDetectMs: detectMs(t) })),
        checker: {
          intervalMs: CHECK_INTERVAL_MS,
          timeoutMs: CHECK_TIMEOUT_MS,
          fall: CHECK_FALL,
          rise: 1,
          targets: {
            underlay: `${inv.hosts.gw1.namespace} -> ${inv.hosts[VICTIM].underlay!.address}:${PROBE_PORT}`,
            backend: `${inv.client.namespace} -> ${backendTarget.address}:${inv.backendPort}`,
          },
        },
        rows,
        trials,
      };
      return { name: "liveness", markdown: markdownOf(rows, sizes, machine), data, invariants } satisfies BenchReport;
    });
  },
};
