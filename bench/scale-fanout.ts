import * as os from "node:os";
import { execFileSync } from "node:child_process";
import { existsSync, openSync, readFileSync, readSync, closeSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";
import { cookieOf, vipKey } from "../provider/resources/deferred-nat-load-balancer/plan";
import { HOST_CONNECT_PARALLELISM } from "../provider/transport/ovs-host";
import { observeBundles } from "../provider/engine/bridge";
import { fanOut } from "../provider/engine/converge";
import { LocalRunner } from "../provider/transport/exec";
import { SshSession } from "../provider/transport/ssh";
import { ExtraHosts, readPid, isAlive } from "../test/lab/lab";
import { segmentMacOf, type HostPlan, type LabHost, type LabInventory } from "../test/lab/topology";
import { ProviderDriver } from "../test/support/deferred-nat";
import { loadInventory, sshTo } from "../test/support/lab";
import { waitUntil } from "../test/support/wait";
import { fmtMs, labRun, machineNote, median, teardownSteps, type BenchContext, type BenchReport, type Benchmark, type Invariant } from "./common";

/**
 * Issue 13's fan-out benchmark: one backend added to (and removed from) a
 * DeferredNatLoadBalancer whose gateways are 1, 2, 4, 8 and 16 hosts, through
 * the provider's handler (check + update, as the engine calls it):
 *
 * - wall time of the update against the number of gateways;
 * - the convergence window: from the first to the last gateway's bundle
 *   commit, taken from each host's ovs-vswitchd log (the COMMIT_REPLY it
 *   sent, vconn debug logging with microsecond timestamps: every host is a
 *   process on this machine, one clock), and for comparison from the
 *   provider's side (when each host's `ovs-ofctl bundle` returned, through
 *   observeBundles);
 * - the load: CPU and memory of the extra hosts' daemons, the machine's
 *   CPU during the updates.
 *
 * The lab has two gateways, so the run makes its own: 16 hosts (4 in
 * smoke) built as the lab builds its hosts (ExtraHosts in test/lab/lab.ts:
 * namespace, ovsdb-server, userspace ovs-vswitchd, sshd; management network
 * only; a login shell that reads no ~/.bashrc), removed at the end, also on failure or Ctrl-C. The bundles carry
 * no traffic. Nothing of the lab's own hosts is touched; the run holds its
 * own lock (`scale-fanout`) so that two runs never build the same hosts.
 */

export interface Sizes {
  gateways: readonly number[];
  /** Timed add + remove pairs per gateway count. */
  rounds: number;
}
export const FULL: Sizes = { gateways: [1, 2, 4, 8, 16], rounds: 7 };
export const SMOKE: Sizes = { gateways: [1, 2, 4], rounds: 2 };

const HOSTS_DIR = "/run/ovslb-bench-fanout";
/** Management addresses 172.30.0.151-166: the lab's hosts are .10-.32. */
const FIRST_INDEX = 151;
/** One VIP per gateway count (10.0.0.241-245): all the load balancers stand at once, their rounds interleaved. */
const vipOf = (count: number) => `10.0.0.${241 + Math.log2(count)}`;
const VPORT = 80;
const keyOf = (count: number) => vipKey({ protocol: "tcp", address: vipOf(count), port: VPORT });
const BACKENDS = 8;
const LOCK = "scale-fanout";
const nameOf = (n: number) => `bench-fanout-${n}`;

const plans = (count: number): HostPlan[] =>
  Array.from({ length: count }, (_, i) => ({ name: `fan${i + 1}`, role: "gateway" as const, index: FIRST_INDEX + i, vms: [] }));

/** Synthetic backends (no traffic): 10.0.9.K on hv1. */
const backend = (k: number) => ({
  address: `10.0.9.${k}`,
  port: 8080,
  mac: `02:00:0a:00:09:${k.toString(16).padStart(2, "0")}`,
  hypervisor: "hv1",
});

function inputs(inv: LabInventory, hosts: Record<string, LabHost>, gws: readonly HostPlan[], backends: number): Inputs {
  return {
    name: nameOf(gws.length),
    gateways: gws.map((p) => ({
      name: p.name,
      host: { connection: sshTo(inv, hosts[p.name]), ovsRundir: hosts[p.name].ovsRundir },
      bridge: "br-seg",
      segmentPort: "seg0",
      mac: segmentMacOf(p),
    })),
    hypervisors: [{ name: "hv1" }],
    vips: [{ address: vipOf(gws.length), port: VPORT, protocol: "tcp", backends: Array.from({ length: backends }, (_, i) => backend(i + 1)) }],
  };
}

// ---------------------------------------------------------------- the hosts' own tools and logs

const daemon = (h: LabHost, argv: string[]) =>
  execFileSync("ip", ["netns", "exec", h.namespace, "env", `OVS_RUNDIR=${h.ovsRundir}`, ...argv], { encoding: "utf8" });

const logPath = (h: LabHost) => join(h.ovsRundir!, "ovs-vswitchd.log");

/** The log's bytes from `from` on. */
function logSince(h: LabHost, from: number): string {
  const size = statSync(logPath(h)).size;
  if (size <= from) return "";
  const buf = Buffer.alloc(size - from);
  const fd = openSync(logPath(h), "r");
  try {
    readSync(fd, buf, 0, buf.length, from);
  } finally {
    closeSync(fd);
  }
  return buf.toString("utf8");
}

/** Each COMMIT_REPLY ovs-vswitchd sent, as epoch milliseconds (microsecond timestamps). */
export function commitReplies(log: string): number[] {
  const out: number[] = [];
  const re =
    /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.(\d+))Z\|\d+\|vconn\|DBG\|[^\n]*sent \(Success\): OFPT_BUNDLE_CONTROL[^\n]*\n bundle_id=\S+ type=COMMIT_REPLY/gm;
  for (const m of log.matchAll(re)) {
    const whole = m[1].slice(0, 19);
    const frac = m[2];
    out.push(Date.parse(`${whole}Z`) + Number(`0.${frac}`) * 1000);
  }
  return out;
}

/** CPU seconds (user + system) a process has used, and its resident memory in KiB. */
function processUse(pid: number): { cpu: number; rssKiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rss = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  return { cpu: ticks / 100, rssKiB: rss };
}

/** The machine's busy and total CPU time so far (jiffies), from /proc/stat. */
function machineCpu(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + f[4];
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

function daemonPids(h: LabHost): Record<string, number | undefined> {
  return {
    "ovs-vswitchd": readPid(join(h.ovsRundir!, "ovs-vswitchd.pid")),
    "ovsdb-server": readPid(join(h.ovsRundir!, "ovsdb-server.pid")),
    sshd: readPid(join(dirname(h.ovsRundir!), "sshd.pid")),
  };
}

// ---------------------------------------------------------------- one gateway count

/**
 * How the gateways' bundles go: "together" stages every gateway's bundle and
 * then releases all the commits at once (the provider's way); "one by one"
 * sends and commits each gateway's as soon as it is ready (the way before,
 * the baseline). One gateway has only the one way.
 */
type Commit = "together" | "one by one";
const commitsFor = (count: number): Commit[] => (count === 1 ? ["one by one"] : ["together", "one by one"]);

interface Change {
  kind: "add" | "remove";
  wallMs: number;
  /** From the first to the last COMMIT_REPLY in the hosts' logs. */
  windowMs: number;
  /** From the first to the last `ovs-ofctl bundle` returning to the provider. */
  clientWindowMs: number;
  /** The first commit, from the update's start. */
  firstCommitMs: number;
  commits: number;
  /** SSH commands (exec channels) the update ran, per gateway. */
  commandsPerGateway: number;
  /** CPU the provider's own process used for the update (the part a fleet of real hosts does not share). */
  providerCpuMs: number;
  /** The machine's CPU busy during the update, as a fraction of both cores. */
  machineBusy: number;
  /** Flow and group mods sent to each gateway (lastApply). */
  messages: number[];
}

interface CountResult {
  gateways: number;
  commit: Commit;
  changes: Change[];
  /** The machine's CPU busy during the updates, as a fraction of both cores (median). */
  cpuBusy: number;
  identicalGroups: boolean;
  groupDump: string;
}

/** One add or one remove on the load balancer of `count` gateways, timed. */
async function change(
  inv: LabInventory,
  hosts: Record<string, LabHost>,
  lb: ProviderDriver,
  count: number,
  commit: Commit,
  kind: Change["kind"],
): Promise<Change> {
  const gws = plans(count);
  const marks = gws.map((p) => statSync(logPath(hosts[p.name])).size);
  const returned: number[] = [];
  const cpuStart = process.cpuUsage();
  const machine0 = machineCpu();
  const stop = observeBundles(() => returned.push(performance.timeOrigin + performance.now()));
  // Counts the SSH commands the update runs (a wrapper, no tracing: it costs nothing measurable).
  let commands = 0;
  const run = SshSession.prototype.run;
  SshSession.prototype.run = function (this: SshSession, ...args: Parameters<typeof run>) {
    commands++;
    return run.apply(this, args);
  };
  fanOut.commitTogether = commit === "together";
  const start = performance.timeOrigin + performance.now();
  try {
    await lb.update(inputs(inv, hosts, gws, kind === "add" ? BACKENDS + 1 : BACKENDS));
  } finally {
    stop();
    SshSession.prototype.run = run;
    fanOut.commitTogether = true;
  }
  const wallMs = performance.timeOrigin + performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  const machine1 = machineCpu();
  // ovs-vswitchd logs the reply just after sending it: a loaded machine may run ovs-ofctl's exit first.
  const commits = await waitUntil(
    () => {
      const seen = gws.flatMap((p, i) => commitReplies(logSince(hosts[p.name], marks[i])));
      return seen.length >= gws.length ? seen : undefined;
    },
    { what: `each of ${gws.length} gateways' ovs-vswitchd to log its bundle commit reply`, timeoutMs: 5000, intervalMs: 20 },
  );
  const lastApply = lb.outputs.lastApply as Record<string, { messages: number }>;
  return {
    kind,
    wallMs,
    windowMs: commits.length > 0 ? Math.max(...commits) - Math.min(...commits) : NaN,
    clientWindowMs: returned.length > 0 ? Math.max(...returned) - Math.min(...returned) : NaN,
    firstCommitMs: commits.length > 0 ? Math.min(...commits) - start : NaN,
    commits: commits.length,
    commandsPerGateway: commands / count,
    providerCpuMs: (cpu.user + cpu.system) / 1000,
    machineBusy: (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total),
    messages: gws.map((p) => lastApply[p.name]?.messages ?? -1),
  };
}

/** Every gateway count's load balancer at once; each round adds and removes a backend on each, in turn, so the machine's load falls on every count alike. */
async function runCounts(ctx: BenchContext, inv: LabInventory, hosts: Record<string, LabHost>, sizes: Sizes, made: ProviderDriver[]): Promise<CountResult[]> {
  const lbs = new Map<number, ProviderDriver>();
  for (const count of sizes.gateways) {
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    made.push(lb);
    await lb.create(inputs(inv, hosts, plans(count), BACKENDS));
    lbs.set(count, lb);
  }
  const runs = sizes.gateways.flatMap((count) => commitsFor(count).map((commit) => ({ count, commit, changes: [] as Change[] })));
  for (let r = 0; r < sizes.rounds; r++) {
    for (const one of runs) {
      for (const kind of ["add", "remove"] as const) one.changes.push(await change(inv, hosts, lbs.get(one.count)!, one.count, one.commit, kind));
    }
    ctx.log(`round ${r + 1}: ${runs.map((c) => `${c.count} gateways ${c.commit} ${fmtMs(c.changes.at(-1)!.wallMs)}`).join(", ")}`);
  }
  const results: CountResult[] = [];
  for (const count of sizes.gateways) {
    const lb = lbs.get(count)!;
    const gws = plans(count);
    // Every gateway holds the same group (same ids, buckets, fields; each its own eth_src): one dump each.
    const dumps = gws.map((p) =>
      daemon(hosts[p.name], ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-groups", "br-seg", String(lb.outputs.groupIds[keyOf(count)])])
        .replace(/\(xid=0x[0-9a-f]+\)/, "")
        .split(segmentMacOf(p))
        .join("GATEWAY-MAC")
        .trim(),
    );
    for (const { commit, changes: cs } of runs.filter((one) => one.count === count)) {
      results.push({
        gateways: count,
        commit,
        changes: cs,
        cpuBusy: median(cs.map((c) => c.machineBusy)),
        identicalGroups: dumps.every((d) => d === dumps[0]) && dumps[0].includes("bucket=bucket_id:"),
        groupDump: dumps[0],
      });
    }
    await lb.delete();
    lb.id = "";
  }
  return results;
}

// ---------------------------------------------------------------- the run

interface Load {
  /** The extra hosts' daemons while idle: CPU share of one core, summed, and resident memory, summed (MiB). */
  idle: Record<string, { cpuPercentOfOneCore: number; rssMiB: number }>;
  loadBefore: string;
  loadAfterHosts: string;
  loadAtEnd: string;
  startSeconds: number;
}

async function measureIdle(hosts: LabHost[], seconds: number): Promise<Load["idle"]> {
  const pids = hosts.map(daemonPids);
  const names = ["ovs-vswitchd", "ovsdb-server", "sshd"];
  const before = pids.map((p) => Object.fromEntries(names.map((n) => [n, p[n] ? processUse(p[n]) : undefined])));
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const idle: Load["idle"] = {};
  for (const n of names) {
    let cpu = 0;
    let rss = 0;
    pids.forEach((p, i) => {
      const pid = p[n];
      if (!pid || !before[i][n]) return;
      const now = processUse(pid);
      cpu += now.cpu - before[i][n].cpu;
      rss += now.rssKiB;
    });
    idle[n] = { cpuPercentOfOneCore: (100 * cpu) / seconds, rssMiB: rss / 1024 };
  }
  return idle;
}

async function run(ctx: BenchContext): Promise<BenchReport> {
  const sizes = ctx.smoke ? SMOKE : FULL;
  const inv = loadInventory();
  const maxCount = Math.max(...sizes.gateways);
  const extra = new ExtraHosts(HOSTS_DIR, inv);
  const made: ProviderDriver[] = [];
  let hosts: Record<string, LabHost> = {};
  let torn: Promise<string[]> | undefined;
  const teardown = () =>
    (torn ??= (async () => {
      const { failed, attempt } = teardownSteps();
      for (const lb of made) if (lb.id) await attempt(`delete ${lb.outputs.name ?? "load balancer"}`, () => lb.delete());
      await attempt("remove the extra hosts", () => extra.remove());
      return failed;
    })());
  const invariants: Invariant[] = [];
  const results: CountResult[] = [];
  let load: Load | undefined;
  let left: string[] = [];
  const execTrueMs: Record<string, number[]> = {};
  const machine = await machineNote(new LocalRunner());

  await labRun(ctx, { locks: [LOCK], interrupted: "removing the extra gateway hosts", teardown, close: () => undefined }, async (interrupted) => {
    const loadBefore = os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ");
    const t0 = Date.now();
    hosts = extra.start(plans(maxCount));
    const startSeconds = (Date.now() - t0) / 1000;
    ctx.log(`${maxCount} extra gateway hosts up in ${startSeconds.toFixed(1)} s`);
    for (const h of Object.values(hosts)) {
      daemon(h, ["ovs-appctl", "vlog/set", "vconn:file:dbg"]);
      // vconn rate-limits its message log (a burst of 200): every commit must be seen.
      daemon(h, ["ovs-appctl", "vlog/disable-rate-limit", "vconn"]);
      daemon(h, ["ovs-appctl", "vlog/set", "PATTERN:file:%D{%Y-%m-%dT%H:%M:%S.######Z}|%05N|%c|%p|%m"]);
    }
    const idle = await measureIdle(Object.values(hosts), ctx.smoke ? 2 : 5);
    // What one SSH command costs, before ovslb does anything: an exec of `true`, one after another, on fan1 and on the lab's gw1 (whose login shell reads root's .bashrc).
    for (const [where, h] of [
      ["fan1", hosts.fan1],
      ["gw1", inv.hosts.gw1],
    ] as const) {
      const ssh = await SshSession.connect(sshTo(inv, h));
      try {
        for (let i = 0; i < 5; i++) {
          const t = performance.now();
          await ssh.run(["true"]);
          (execTrueMs[where] ??= []).push(performance.now() - t);
        }
      } finally {
        ssh.close();
      }
    }
    load = {
      idle,
      loadBefore,
      loadAfterHosts: os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" "),
      loadAtEnd: "",
      startSeconds,
    };
    if (interrupted()) return;
    results.push(...(await runCounts(ctx, inv, hosts, sizes, made)));
    load.loadAtEnd = os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ");
    // Nothing of the load balancers is left on any host.
    for (const h of Object.values(hosts)) {
      const flows = daemon(h, ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg"]);
      const groups = daemon(h, ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"]);
      for (const count of sizes.gateways) {
        const cookie = `0x${cookieOf({ name: nameOf(count) }).toString(16)}`;
        if (flows.includes(`cookie=${cookie},`)) left.push(`${h.name}: flows of ${nameOf(count)}`);
      }
      if (/group_id=/.test(groups)) left.push(`${h.name}: groups`);
    }
  });
  const gone = Object.values(hosts).filter(
    (h) => existsSync(`/run/netns/${h.namespace}`) || Object.values(daemonPids(h)).some((p) => p !== undefined && isAlive(p)),
  );
  left = [...left, ...gone.map((h) => `${h.name}: namespace or daemons still there`)];

  // ---------------------------------------------------------------- invariants
  for (const r of results) {
    const who = `${r.gateways} gateways, ${r.commit}`;
    invariants.push({
      name: `${who}: every update committed exactly one bundle on each gateway`,
      ok: r.changes.every((c) => c.commits === r.gateways),
      detail: r.changes.map((c) => c.commits).join(","),
    });
    invariants.push({
      name: `${who}: each change sent each gateway one message (one insert_bucket or remove_bucket)`,
      ok: r.changes.every((c) => c.messages.length === r.gateways && c.messages.every((m) => m === 1)),
    });
    invariants.push({
      name: `${who}: all hold the same group afterwards`,
      ok: r.identicalGroups,
      detail: r.identicalGroups ? undefined : r.groupDump.slice(0, 300),
    });
    invariants.push({
      name: `${who}: the commit window lies within the update`,
      ok: r.changes.every((c) => c.firstCommitMs > 0 && c.firstCommitMs + c.windowMs < c.wallMs),
    });
  }
  invariants.push({ name: "nothing of the run is left (flows, groups, hosts, namespaces)", ok: left.length === 0, detail: left.join("; ") || undefined });

  // ---------------------------------------------------------------- the report
  const one = results.find((r) => r.gateways === 1);
  const med = (r: CountResult, f: (c: Change) => number, kind?: Change["kind"]) => median(r.changes.filter((c) => !kind || c.kind === kind).map(f));
  const max = (r: CountResult, f: (c: Change) => number) => Math.max(...r.changes.map(f));
  const lines: string[] = [
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs}, Node ${machine.node}; load average ${load?.loadBefore ?? "?"} before the run, ${load?.loadAfterHosts ?? "?"} with the extra hosts up, ${load?.loadAtEnd ?? "?"} at the end.`,
    "",
    `One backend added to, then removed from, one VIP of ${BACKENDS} backends (mac delivery), ${sizes.rounds} times per gateway count, through the provider's handler (check + update); one load balancer per gateway count (VIPs 10.0.0.241-245), all standing at once, their updates taking turns round by round so the machine's load falls on every count alike.`,
    `Parallelism: the provider connects to at most ${HOST_CONNECT_PARALLELISM} gateways at once (\`HOST_CONNECT_PARALLELISM\`) and reads, plans and applies every gateway together once connected.`,
    "",
    "| Gateways | Commits | Update wall, median (add / remove) | Worst | vs 1 gateway | Commit window, median | Worst | Window from the provider's side, median | First commit after the update's start, median | Provider's own CPU per update, median | Machine CPU busy during the updates |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...results.map(
      (r) =>
        `| ${r.gateways} | ${r.gateways === 1 ? "-" : r.commit} | ${fmtMs(med(r, (c) => c.wallMs))} (${fmtMs(med(r, (c) => c.wallMs, "add"))} / ${fmtMs(med(r, (c) => c.wallMs, "remove"))}) | ${fmtMs(max(r, (c) => c.wallMs))} | ${one ? `${(med(r, (c) => c.wallMs) / med(one, (c) => c.wallMs)).toFixed(2)}x` : "-"} | ${r.gateways > 1 ? fmtMs(med(r, (c) => c.windowMs)) : "-"} | ${r.gateways > 1 ? fmtMs(max(r, (c) => c.windowMs)) : "-"} | ${r.gateways > 1 ? fmtMs(med(r, (c) => c.clientWindowMs)) : "-"} | ${fmtMs(med(r, (c) => c.firstCommitMs))} | ${fmtMs(med(r, (c) => c.providerCpuMs))} | ${(100 * r.cpuBusy).toFixed(0)}% |`,
    ),
    "",
    "Commits: *together* is the provider's way: every gateway's bundle is staged on its host first (sent whole, kept in a file), and once every gateway's is, the provider sends all the commit lines at once and each host runs `ovs-ofctl bundle` on its file. *one by one* is the way before (the baseline, `fanOut.commitTogether = false`): each gateway's bundle is sent and committed by one command as soon as it is ready. Both run in the same rounds, one after the other.",
    "",
    "Commit window: from the first to the last COMMIT_REPLY the gateways' ovs-vswitchd sent, from their own logs (vconn debug, microsecond timestamps; all hosts are processes on this machine, one clock). From the provider's side: from the first to the last `ovs-ofctl bundle` returning over SSH.",
  ];
  if (execTrueMs.fan1 && execTrueMs.gw1) {
    lines.push(
      "",
      `The lab's sshd gives the login shell no ~/.bashrc (test/lab/lab.ts sshdCommand): this machine's root .bashrc runs \`pyenv init\` in every SSH command, which no real gateway pays and which, 16 hosts on 2 cores, would be most of what is measured. One SSH command (an exec of \`true\`, 5 in a row, median): ${fmtMs(median(execTrueMs.fan1))} on fan1, ${fmtMs(median(execTrueMs.gw1))} on the lab's gw1. ` +
        `Each update ran ${results[0] ? median(results[0].changes.map((c) => c.commandsPerGateway)) : "?"} SSH commands per gateway (its reads of the VIP's group and flows, then the bundle) besides its OVSDB reads over a stream-local channel; on real hosts each gateway's share runs on its own CPU, here all 16 share the 2 cores, which the provider's own CPU (its column) does not.`,
    );
  }
  if (load) {
    lines.push(
      "",
      `The ${maxCount} extra gateway hosts (each: namespace, ovsdb-server, userspace ovs-vswitchd, sshd) took ${load.startSeconds.toFixed(1)} s to build. Idle, summed over them: ` +
        Object.entries(load.idle)
          .map(([n, u]) => `${n} ${u.cpuPercentOfOneCore.toFixed(1)}% of one core, ${u.rssMiB.toFixed(0)} MiB resident`)
          .join("; ") +
        ".",
    );
  }
  return {
    name: "scale-fanout",
    markdown: lines.join("\n"),
    data: { machine, sizes, parallelism: HOST_CONNECT_PARALLELISM, load, execTrueMs, results },
    invariants,
  };
}

export const scaleFanoutBenchmark: Benchmark = {
  name: "scale-fanout",
  description: "one backend change applied to 1-16 gateways: update wall time, commit window, load (issue 13)",
  run,
};
