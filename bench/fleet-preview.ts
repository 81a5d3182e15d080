import * as os from "node:os";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { Harness, type Result } from "../test/harness/engine";
import { ExtraHosts, isAlive, readPid } from "../test/lab/lab";
import { labConnections, repoRoot } from "../test/lab/stack-config";
import type { HostPlan, LabHost } from "../test/lab/topology";
import { loadInventory } from "../test/support/lab";
import type { PluginMethod, PluginObserver } from "../test/support/provider-plugin";
import { waitUntil } from "../test/support/wait";
import { LocalRunner } from "../provider/transport/exec";
import { SESSIONS_PER_CONNECTION, SSH_IDLE_MS } from "../provider/transport/ssh";
import { fleetService } from "./fleet/services";
import { fmtInt, fmtMs, labRun, machineNote, median, teardownSteps, type BenchContext, type BenchReport, type Benchmark, type Invariant } from "./common";

/**
 * Issue 21's fleet-size benchmark: a stack of one DsrHypervisorFlows per
 * service (1,000 services on 16 hypervisors; 16 on 4 in smoke), run as
 * `pulumi up` runs it, through the test harness (bench/fleet/ is a Pulumi
 * program: the SDK's program runner, the real dynamic-provider plugin over
 * gRPC, the default parallelism of 16): up, preview, refresh,
 * preview --refresh, a one-service change and destroy, each timed. Per step:
 * SSH logins per host (from each host's sshd log), the CPU of the plugin,
 * the program and the harness's engine, and every provider call as the
 * engine saw it (when sent, when answered), so the report says where a
 * step's time went and how many calls ran at once.
 *
 * The hosts are its own (ExtraHosts: namespace, ovsdb-server, userspace
 * ovs-vswitchd, sshd, a br-seg with a port seg0; management network only),
 * removed at the end, also on failure or Ctrl-C; it holds its own lock
 * (`fleet-preview`) and touches nothing of the lab's hosts.
 */

export interface Sizes {
  hosts: number;
  services: number;
}
/** The issue's 1,000 resources over 16 hosts. */
export const FULL: Sizes = { hosts: 16, services: 1000 };
export const SMOKE: Sizes = { hosts: 4, services: 16 };

const HOSTS_DIR = "/run/ovslb-bench-fleet";
/** Management addresses 172.30.0.171-186: the lab's hosts are .10-.32, scale-fanout's .151-166. */
const FIRST_INDEX = 171;
const LOCK = "fleet-preview";
/** The service the one-resource change moves to another backend port (fleetService). */
const MOVED = 5;
const CLK_TCK = 100;

const plans = (count: number): HostPlan[] =>
  Array.from({ length: count }, (_, i) => ({ name: `fleet${i + 1}`, role: "hypervisor" as const, index: FIRST_INDEX + i, vms: [] }));

// ---------------------------------------------------------------- pure figures (test/unit/bench-fleet.test.ts)

/** SSH logins in a piece of an sshd log (each `Accepted publickey` line). */
export function countLogins(log: string): number {
  return (log.match(/^.*\bAccepted publickey for \S+ from /gm) ?? []).length;
}

export interface Interval {
  start: number;
  end: number;
}

/** The most intervals open at one moment, and the time at least one was (their union). */
export function overlap(intervals: readonly Interval[]): { maxInFlight: number; busyMs: number } {
  const edges = intervals.flatMap((i) => [
    { at: i.start, d: 1 },
    { at: i.end, d: -1 },
  ]);
  // An end before a start at the same moment: back-to-back calls are not at once.
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let open = 0;
  let maxInFlight = 0;
  let busyMs = 0;
  let since = 0;
  for (const e of edges) {
    if (open > 0) busyMs += e.at - since;
    since = e.at;
    open += e.d;
    maxInFlight = Math.max(maxInFlight, open);
  }
  return { maxInFlight, busyMs };
}

/** The CPU seconds a process has used (user + system) and, for this process, its reaped children's. */
export function cpuOfStat(stat: string): { own: number; children: number } {
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { own: (Number(f[11]) + Number(f[12])) / CLK_TCK, children: (Number(f[13]) + Number(f[14])) / CLK_TCK };
}

export const spread = (values: readonly number[]) => ({ min: Math.min(...values), median: median(values), max: Math.max(...values) });

// ---------------------------------------------------------------- one step

interface Call {
  method: PluginMethod;
  urn: string;
  sent: number;
  answered: number;
  ok: boolean;
}

interface MethodFigures {
  count: number;
  summedMs: number;
  maxInFlight: number;
}

export interface StepFigures {
  step: string;
  wallMs: number;
  /** Custom resources' steps by op (create, same, update, refresh, delete). */
  ops: Record<string, number>;
  changes: boolean;
  /** Logins per host during the step, in host order. */
  logins: number[];
  /** The calls per host that open a session on it (create, read, update, delete): what would each log in without shared connections. */
  connectingCalls: number[];
  calls: Partial<Record<PluginMethod, MethodFigures>>;
  /** Every call at once: the most in flight, and the time at least one was. */
  maxInFlight: number;
  busyMs: number;
  /** From the step's start to the plugin saying its port, and to the first call answered. */
  pluginUpMs: number;
  firstCallMs: number;
  cpu: { pluginS: number; programS: number; engineS: number };
  loadAfter: string;
}

const loadNow = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

/** The sshd log of an extra host: beside its OVS run directory. */
const sshdLog = (h: LabHost) => join(dirname(h.ovsRundir!), "sshd.log");

function bytesFrom(path: string, from: number): string {
  const size = statSync(path).size;
  if (size <= from) return "";
  const buf = Buffer.alloc(size - from);
  const fd = openSync(path, "r");
  try {
    readSync(fd, buf, 0, buf.length, from);
  } finally {
    closeSync(fd);
  }
  return buf.toString("utf8");
}

const HOST_CALLS: readonly PluginMethod[] = ["create", "read", "update", "delete"];

class StepRecorder implements PluginObserver {
  calls: Call[] = [];
  pluginCpuS = 0;
  pluginPid?: number;
  pluginUpAt?: number;

  started(pid: number) {
    this.pluginPid = pid;
    this.pluginUpAt = performance.now();
  }
  stopping(pid: number) {
    try {
      this.pluginCpuS = cpuOfStat(readFileSync(`/proc/${pid}/stat`, "utf8")).own;
    } catch {
      /* gone already: its time is then in the children's */
    }
  }
  call(method: PluginMethod, urn: string, sent: number, answered: number, ok: boolean) {
    this.calls.push({ method, urn, sent, answered, ok });
  }
}

/** Runs one harness step and measures it. `hostOf` names the host (index) a resource's URN is on. */
async function measured(
  name: string,
  hosts: readonly LabHost[],
  hostOf: (urn: string) => number,
  recorder: { current?: StepRecorder },
  run: () => Promise<Result>,
): Promise<{ figures: StepFigures; result: Result }> {
  const marks = hosts.map((h) => statSync(sshdLog(h)).size);
  const rec = new StepRecorder();
  recorder.current = rec;
  const self0 = cpuOfStat(readFileSync("/proc/self/stat", "utf8"));
  const engine0 = process.cpuUsage();
  const start = performance.now();
  let result: Result;
  try {
    result = await run();
  } finally {
    recorder.current = undefined;
  }
  const wallMs = performance.now() - start;
  const engine = process.cpuUsage(engine0);
  // The plugin is ended as the run ends: once it is reaped, its CPU and the program's are this process's children's.
  const pid = rec.pluginPid;
  if (pid !== undefined)
    await waitUntil(() => !existsSync(`/proc/${pid}`), { what: `the plugin (pid ${pid}) to be reaped`, timeoutMs: 10_000, intervalMs: 20 });
  const childrenS = cpuOfStat(readFileSync("/proc/self/stat", "utf8")).children - self0.children;
  const logins = hosts.map((h, i) => countLogins(bytesFrom(sshdLog(h), marks[i])));
  const connectingCalls = hosts.map(() => 0);
  for (const c of rec.calls) if (HOST_CALLS.includes(c.method) && c.urn) connectingCalls[hostOf(c.urn)]++;
  const calls: StepFigures["calls"] = {};
  for (const method of new Set(rec.calls.map((c) => c.method))) {
    const of = rec.calls.filter((c) => c.method === method);
    calls[method] = {
      count: of.length,
      summedMs: of.reduce((a, c) => a + (c.answered - c.sent), 0),
      maxInFlight: overlap(of.map((c) => ({ start: c.sent, end: c.answered }))).maxInFlight,
    };
  }
  const all = overlap(rec.calls.filter((c) => c.method !== "configure").map((c) => ({ start: c.sent, end: c.answered })));
  const ops: Record<string, number> = {};
  for (const s of result.steps.filter((x) => x.custom)) ops[s.op] = (ops[s.op] ?? 0) + 1;
  return {
    result,
    figures: {
      step: name,
      wallMs,
      ops,
      changes: result.changes,
      logins,
      connectingCalls,
      calls,
      ...all,
      pluginUpMs: rec.pluginUpAt === undefined ? NaN : rec.pluginUpAt - start,
      firstCallMs: rec.calls.length > 0 ? Math.min(...rec.calls.filter((c) => c.method !== "configure").map((c) => c.answered)) - start : NaN,
      cpu: { pluginS: rec.pluginCpuS, programS: Math.max(0, childrenS - rec.pluginCpuS), engineS: (engine.user + engine.system) / 1e6 },
      loadAfter: loadNow(),
    },
  };
}

/** What the one-at-a-time steps cost per resource, and so at the issue's 1,000. */
function serialNote(steps: readonly StepFigures[], sizes: Sizes): string[] {
  const serial = steps.filter((s) => s.maxInFlight === 1 && (s.calls.read ?? s.calls.delete));
  if (serial.length === 0) return [];
  return [
    `Only one call at a time in ${serial.map((s) => s.step).join(", ")}: the harness reads (and deletes) resource by resource. Per resource: ${serial
      .map((s) => `${s.step} ${fmtMs(s.wallMs / sizes.services)} (about ${(((s.wallMs / sizes.services) * 1000) / 60_000).toFixed(1)} min for 1,000)`)
      .join(", ")}.`,
    "",
  ];
}

// ---------------------------------------------------------------- the hosts' flows

const ofctl = (h: LabHost, argv: string[]) =>
  execFileSync("ip", ["netns", "exec", h.namespace, "env", `OVS_RUNDIR=${h.ovsRundir}`, "ovs-ofctl", ...argv], { encoding: "utf8" });

/** The distinct non-zero cookies on a host's br-seg (one per DsrHypervisorFlows there), and the flows' text. */
function ownedFlows(h: LabHost): { cookies: number; dump: string } {
  const dump = ofctl(h, ["-O", "OpenFlow15", "dump-flows", "br-seg"]);
  const cookies = new Set([...dump.matchAll(/cookie=(0x[0-9a-f]+)/g)].map((m) => m[1]).filter((c) => c !== "0x0"));
  return { cookies: cookies.size, dump };
}

// ---------------------------------------------------------------- the run

async function run(ctx: BenchContext): Promise<BenchReport> {
  const sizes = ctx.smoke ? SMOKE : FULL;
  const inv = loadInventory();
  const extra = new ExtraHosts(HOSTS_DIR, inv);
  const scratch = mkdtempSync(join(os.tmpdir(), "ovslb-bench-fleet-"));
  const names = plans(sizes.hosts).map((p) => p.name);
  let hosts: LabHost[] = [];
  const invariants: Invariant[] = [];
  const steps: StepFigures[] = [];
  const flowsPerHost: Record<string, number[]> = {};
  let movedOn: { host: string; seen: boolean; elsewhere: string[] } | undefined;
  let startSeconds = NaN;
  const loadBefore = loadNow();
  const machine = await machineNote(new LocalRunner());
  const teardown = async () => {
    const { failed, attempt } = teardownSteps();
    // The hosts take every flow with them: a run that failed half-way needs no destroy.
    await attempt("remove the fleet's hosts", () => extra.remove());
    return failed;
  };

  await labRun(
    ctx,
    { locks: [LOCK], interrupted: "removing the fleet's hosts", teardown, close: () => rmSync(scratch, { recursive: true, force: true }) },
    async (interrupted) => {
      const t0 = Date.now();
      const made = extra.start(plans(sizes.hosts));
      hosts = names.map((n) => made[n]);
      startSeconds = (Date.now() - t0) / 1000;
      ctx.log(`${sizes.hosts} fleet hosts up in ${startSeconds.toFixed(1)} s`);
      const recorder: { current?: StepRecorder } = {};
      const observer: PluginObserver = {
        started: (pid) => recorder.current?.started(pid),
        stopping: (pid) => recorder.current?.stopping(pid),
        call: (...a) => recorder.current?.call(...a),
      };
      const config = (moved?: number) => ({
        ...labConnections({ ...inv, hosts: made }),
        "ovslb-fleet:hypervisors": names,
        "ovslb-fleet:services": sizes.services,
        ...(moved === undefined ? {} : { "ovslb-fleet:movedService": moved }),
      });
      const open = (moved?: number) =>
        Harness.open({
          cwd: join(repoRoot(), "bench", "fleet"),
          stack: "bench",
          statePath: join(scratch, "state.json"),
          config: config(moved),
          observer,
          pluginStart: "first-resource",
          deferSdkModules: false,
        });
      const hostOf = (urn: string) => (Number(/::svc-(\d+)$/.exec(urn)?.[1] ?? 0) - 1) % sizes.hosts;
      const step = async (name: string, fn: (h: Harness) => Promise<Result>, moved?: number) => {
        if (interrupted()) throw new Error("interrupted");
        const h = await open(moved);
        const { figures, result } = await measured(name, hosts, hostOf, recorder, () => fn(h));
        steps.push(figures);
        ctx.log(
          `${name}: ${fmtMs(figures.wallMs)}, ${Object.entries(figures.ops)
            .map(([op, n]) => `${n} ${op}`)
            .join(
              ", ",
            )}; logins per host ${figures.logins.join(",")}; CPU plugin ${figures.cpu.pluginS.toFixed(1)} s, program ${figures.cpu.programS.toFixed(1)} s, engine ${figures.cpu.engineS.toFixed(1)} s`,
        );
        return result;
      };

      await step("up (create all)", (h) => h.up());
      flowsPerHost.afterUp = hosts.map((h) => ownedFlows(h).cookies);
      await step("preview", (h) => h.preview());
      await step("refresh", (h) => h.refresh());
      await step("preview --refresh", (h) => h.preview({ refresh: true }));
      const changed = await step("up, one service changed", (h) => h.up(), MOVED);
      const movedService = fleetService(MOVED, names, true);
      const flows = hosts.map(ownedFlows);
      movedOn = {
        host: movedService.hypervisor,
        seen: flows[names.indexOf(movedService.hypervisor)].dump.includes(`nat(dst=${movedService.backend.address}:8081)`),
        elsewhere: names.filter((n, i) => n !== movedService.hypervisor && flows[i].dump.includes(":8081")),
      };
      const updated = changed.steps.filter((s) => s.op === "update").map((s) => s.urn.split("::").pop());
      invariants.push({
        name: "the one-service change updated exactly that resource, on its host only",
        ok: updated.length === 1 && updated[0] === movedService.name && movedOn.seen && movedOn.elsewhere.length === 0,
        detail: `updated ${updated.join(", ") || "none"}; ${movedService.backend.address}:8081 on ${movedService.hypervisor}: ${movedOn.seen}; elsewhere: ${movedOn.elsewhere.join(", ") || "none"}`,
      });
      await step("destroy", (h) => h.destroy(), MOVED);
      flowsPerHost.afterDestroy = hosts.map((h) => ownedFlows(h).cookies);
    },
  );
  const gone = hosts.filter(
    (h) =>
      existsSync(`/run/netns/${h.namespace}`) ||
      ["ovs-vswitchd.pid", "ovsdb-server.pid"].some((f) => {
        const pid = readPid(join(h.ovsRundir!, f));
        return pid !== undefined && isAlive(pid);
      }),
  );

  // ---------------------------------------------------------------- invariants
  const at = (name: string) => steps.find((s) => s.step === name);
  const expected = names.map((_, i) => Math.floor(sizes.services / sizes.hosts) + (i < sizes.services % sizes.hosts ? 1 : 0));
  const up = at("up (create all)");
  invariants.push({
    name: `up created all ${sizes.services} resources, each host holding its services' flows`,
    ok: up?.ops.create === sizes.services && flowsPerHost.afterUp?.every((n, i) => n === expected[i]) === true,
    detail: `created ${up?.ops.create}; cookies per host ${flowsPerHost.afterUp?.join(",")}`,
  });
  for (const name of ["preview", "refresh", "preview --refresh"]) {
    const s = at(name);
    // preview --refresh has a step per resource for its refresh and another for the program's registration.
    const same = name === "preview --refresh" ? 2 * sizes.services : sizes.services;
    invariants.push({
      name: `${name}: no changes (every resource the same)`,
      ok: s !== undefined && !s.changes && s.ops.same === same && Object.keys(s.ops).length === 1,
      detail: s ? JSON.stringify(s.ops) : "not run",
    });
  }
  const preview = at("preview");
  invariants.push({
    name: "preview contacted no host (check and diff only: no login)",
    ok: preview !== undefined && preview.logins.every((n) => n === 0) && HOST_CALLS.every((m) => preview.calls[m] === undefined),
    detail: preview?.logins.join(","),
  });
  for (const name of ["refresh", "preview --refresh"]) {
    const s = at(name);
    invariants.push({
      name: `${name} read every resource once`,
      ok: s?.calls.read?.count === sizes.services,
      detail: `${s?.calls.read?.count} reads`,
    });
  }
  for (const s of steps.filter((x) => x.step !== "preview")) {
    const touched = s.connectingCalls.map((n) => n > 0);
    invariants.push({
      name: `${s.step}: every host it worked on was logged in to, and at most once per operation there`,
      ok: s.logins.every((n, i) => (touched[i] ? n >= 1 : n === 0) && n <= s.connectingCalls[i]),
      detail: `logins ${s.logins.join(",")}; operations ${s.connectingCalls.join(",")}`,
    });
  }
  const destroy = at("destroy");
  invariants.push({
    name: "destroy deleted every resource and left no flow of the stack on any host; the hosts are gone",
    ok: destroy?.ops.delete === sizes.services && flowsPerHost.afterDestroy?.every((n) => n === 0) === true && gone.length === 0,
    detail: `deleted ${destroy?.ops.delete}; cookies per host ${flowsPerHost.afterDestroy?.join(",")}; hosts left ${gone.map((h) => h.name).join(",") || "none"}`,
  });

  // ---------------------------------------------------------------- the report
  const s1 = (x: number) => x.toFixed(1);
  const callCell = (s: StepFigures, m: PluginMethod) => {
    const c = s.calls[m];
    return c ? `${fmtInt(c.count)}: ${fmtMs(c.summedMs)} summed, ${c.maxInFlight} at once` : "-";
  };
  const loginCell = (s: StepFigures) => {
    const d = spread(s.logins);
    const total = s.logins.reduce((a, b) => a + b, 0);
    const ops = s.connectingCalls.reduce((a, b) => a + b, 0);
    return `${d.min} / ${d.median} / ${d.max} (${fmtInt(total)} in all; ${fmtInt(ops)} operations)`;
  };
  const lines: string[] = [
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs}, Node ${machine.node}; load average ${loadBefore} before the run (shared with other work: wall times move with it, CPU times much less).`,
    "",
    `A stack of ${fmtInt(sizes.services)} DsrHypervisorFlows (one per service: a VIP, one backend, mac mode) on ${sizes.hosts} hypervisors (service i on host i mod ${sizes.hosts}), run by the test harness as \`pulumi\` runs it: the program (bench/fleet/) through the SDK's program runner, every resource through the real dynamic-provider plugin over gRPC, parallelism ${16} (the CLI's default). Shared SSH connections: ${SESSIONS_PER_CONNECTION} sessions per connection, logged out after ${SSH_IDLE_MS / 1000} s idle; each step is a new plugin process, so it logs in anew.`,
    "",
    "| Step | Wall | Steps | Plugin CPU | Program CPU | Engine (harness) CPU | Load after |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...steps.map(
      (s) =>
        `| ${s.step} | ${fmtMs(s.wallMs)} | ${Object.entries(s.ops)
          .map(([op, n]) => `${fmtInt(n)} ${op}`)
          .join(", ")} | ${s1(s.cpu.pluginS)} s | ${s1(s.cpu.programS)} s | ${s1(s.cpu.engineS)} s | ${s.loadAfter} |`,
    ),
    "",
    "Provider calls, as the engine saw them (count: summed time from sent to answered, most in flight at once); when the plugin was up and the first call answered, from the step's start; the time at least one call was in flight:",
    "",
    "| Step | check | diff | create / read / update / delete | Most calls at once | Some call in flight | Plugin up at | First answer at |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...steps.map(
      (s) =>
        `| ${s.step} | ${callCell(s, "check")} | ${callCell(s, "diff")} | ${HOST_CALLS.filter((m) => s.calls[m])
          .map((m) => `${m} ${callCell(s, m)}`)
          .join(
            "; ",
          )} | ${s.maxInFlight} | ${fmtMs(s.busyMs)} (${((100 * s.busyMs) / s.wallMs).toFixed(0)}% of wall) | ${fmtMs(s.pluginUpMs)} | ${fmtMs(s.firstCallMs)} |`,
    ),
    "",
    `SSH logins per host during each step (min / median / max over the ${sizes.hosts} hosts, from each host's sshd log), against the operations that open a session on a host (create, read, update, delete), each of which would log in without shared connections:`,
    "",
    "| Step | Logins per host | Per host, in host order |",
    "| --- | --- | --- |",
    ...steps.map((s) => `| ${s.step} | ${loginCell(s)} | ${s.logins.join(" ")} |`),
    "",
    ...serialNote(steps, sizes),
    `The ${sizes.hosts} hosts (each: namespace, ovsdb-server, userspace ovs-vswitchd, sshd) took ${s1(startSeconds)} s to build.`,
  ];
  return {
    name: "fleet-preview",
    markdown: lines.join("\n"),
    data: {
      machine,
      sizes,
      parallel: 16,
      sessionsPerConnection: SESSIONS_PER_CONNECTION,
      sshIdleMs: SSH_IDLE_MS,
      loadBefore,
      startSeconds,
      steps,
      flowsPerHost,
      movedOn,
    },
    invariants,
  };
}

export const fleetPreviewBenchmark: Benchmark = {
  name: "fleet-preview",
  description:
    "a 1,000-resource stack on 16 hosts through the harness: up, preview, refresh, one change, destroy; wall, logins per host, CPU, provider calls (issue 21)",
  run,
};
