import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import { dirname, join } from "node:path";
import type { Benchmark, BenchContext, Invariant } from "./common";
import { childResult, fmtInt, fmtMs, labRun, machineNote, median, teardownSteps } from "./common";
import { profiled, type CpuSplit } from "./cpu-split";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";
import { changed, largeLoadBalancer, withAdded, type LoadBalancerSize } from "./large-load-balancer";
import { parseFlows, parseGroups, renderBundle, type Modification } from "../provider/openflow";
import { deferredNatLoadBalancerHandler as handler, type DeferredNatState } from "../provider/resources/deferred-nat-load-balancer/handler";
import {
  assignIds,
  cookieOf,
  foreignGroupsOn,
  mergeIds,
  planGateway,
  vipKey,
  withDefaults,
  type RecordedIds,
} from "../provider/resources/deferred-nat-load-balancer/plan";
import { idsOf, planGatewayScoped, updateScope, recordPorts } from "../provider/resources/deferred-nat-load-balancer/scope";
import * as provider from "../provider/handlers";
import { CREDENTIALS_OUTPUT } from "../provider/secrets";
import { labSsh, loadInventory, sshTo } from "../test/support/lab";
import type { LabInventory } from "../test/lab/topology";

/**
 * scale-planning (issue 13): the largest VIP set one DeferredNatLoadBalancer
 * accepts (the schema's vips.maxItems, 1,024, each of 100 backends), planned
 * from scratch, and one backend change in it, side by side with today's
 * full path (read every group and flow, plan every VIP):
 *
 * 1. pure planning, no host: from scratch (ids, plan, bundle text); one
 *    added backend planned in full (parse the gateway's whole dump, plan
 *    every VIP: what an update did before) and scoped (what it touches only);
 * 2. through the handler against a real lab gateway (gw2, a bridge of its
 *    own): create (plan and apply from scratch), then one backend added and
 *    removed by update, scoped, and again with the recorded port numbers
 *    stripped from the state, which makes update take the full path;
 * 3. the same change as the engine makes it, through provider/handlers.ts
 *    (check, diff, update), in a process warmed the same way.
 *
 * Every measurement runs in a fresh child process (node, this file, --child):
 * wall and CPU time (process.cpuUsage) around the operation only, peak
 * memory as the child's maximum resident set (process.resourceUsage().maxRSS)
 * and its resident set just before the operation (modules and inputs loaded).
 */

const FULL = { vips: 1024, backends: 100, runs: 3 };
const SMOKE = { vips: 16, backends: 10, runs: 1 };
const GATEWAY = "gw2";
const BRIDGE = "br-scale";
const PORT = "scale0";
const NAME = "bench-scale-planning";

interface Figures {
  wallMs: number;
  cpuMs: number;
  /** Resident set just before the measured operation, MiB. */
  rssBeforeMiB: number;
  /** The child's peak resident set, MiB. */
  peakRssMiB: number;
  detail: Record<string, unknown>;
}

const KB_PER_MIB = 1024;

async function measure<T>(fn: () => Promise<T>): Promise<{ value: T; figures: Omit<Figures, "detail"> }> {
  const rssBeforeMiB = process.memoryUsage().rss / 2 ** 20;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const value = await fn();
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  return {
    value,
    figures: { wallMs, cpuMs: (cpu.user + cpu.system) / 1000, rssBeforeMiB, peakRssMiB: process.resourceUsage().maxRSS / KB_PER_MIB },
  };
}

function inputsFor(inv: LabInventory | undefined, size: LoadBalancerSize): Inputs {
  const h = inv?.hosts[GATEWAY];
  return largeLoadBalancer(
    NAME,
    {
      name: GATEWAY,
      host: h ? { connection: sshTo(inv, h), ovsRundir: h.ovsRundir } : { connection: { host: "192.0.2.1", user: "root", hostKey: "x", privateKeyPath: "/k" } },
      bridge: BRIDGE,
      segmentPort: PORT,
      mac: "02:00:0a:00:01:0c",
    },
    size,
  );
}

// ---------------------------------------------------------------- the gateway as OVS 3.1 prints it (pure part)

/** dump-groups and dump-flows of a gateway holding exactly `inputs` (format: test/fixtures/dumps, OVS 3.1 -O OpenFlow15 --no-names). */
function gatewayDump(d: Inputs, ids: RecordedIds, segmentOfport: number): { groups: string; flows: string } {
  const gwMac = d.gateways[0].mac;
  const groups = ["OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):"];
  const flows = ["OFPST_FLOW reply (OF1.5) (xid=0x2):"];
  const cookie = cookieOf(d).toString(16);
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const g = ids.groupIds[key];
    const buckets = vip.backends.map(
      (b) =>
        `bucket=bucket_id:${ids.bucketIds[key][`${b.address}:${b.port}#0`]},weight:100,actions=set_field:${gwMac}->eth_src,set_field:${b.mac}->eth_dst,IN_PORT`,
    );
    groups.push(` group_id=${g},type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),${buckets.join(",")}`);
    flows.push(
      ` cookie=0x${cookie}, duration=12.5s, table=0, n_packets=0, n_bytes=0, idle_age=12, priority=100,tcp,in_port=${segmentOfport},nw_dst=${vip.address},tp_dst=${vip.port} actions=group:${g}`,
    );
  }
  flows.push(" cookie=0x0, duration=802.488s, table=0, n_packets=558, n_bytes=36439, idle_age=93, priority=0 actions=NORMAL");
  return { groups: `${groups.join("\n")}\n`, flows: `${flows.join("\n")}\n` };
}

const opsOf = (mods: readonly Modification[]) => {
  const n: Record<string, number> = {};
  for (const m of mods) n[m.op] = (n[m.op] ?? 0) + 1;
  return n;
};

/** The pure scenarios, each in its own child. */
async function pureScenario(name: string, size: { vips: number; backends: number }): Promise<Figures> {
  const d = withDefaults(inputsFor(undefined, size));
  const port = { segmentOfport: 1, mac: d.gateways[0].mac };
  const empty = { ports: new Map([[PORT, 1]]), flows: [], groups: [] };
  if (name === "plan-scratch") {
    const { value, figures } = await measure(async () => {
      const ids = assignIds(d, { groupIds: {}, bucketIds: {} }, new Set());
      const mods = planGateway("gw", d, ids, port, empty);
      return { mods, bytes: renderBundle(mods).reduce((n, l) => n + l.length + 1, 0) };
    });
    return { ...figures, detail: { operations: opsOf(value.mods), bundleBytes: value.bytes } };
  }
  // The gateway holds `d` as applied; the change adds one backend to one VIP.
  const recorded = assignIds(d, { groupIds: {}, bucketIds: {} }, new Set());
  const news = withDefaults(withAdded(d, size));
  if (name === "plan-change-full") {
    const dump = gatewayDump(d, recorded, 1);
    const { value, figures } = await measure(async () => {
      const observed = { ports: empty.ports, groups: parseGroups(dump.groups), flows: parseFlows(dump.flows) };
      const ids = assignIds(news, recorded, foreignGroupsOn(news, observed, recorded));
      return planGateway("gw", news, mergeIds(recorded, ids), port, observed);
    });
    return { ...figures, detail: { operations: opsOf(value), dumpBytes: dump.groups.length + dump.flows.length } };
  }
  if (name === "plan-change-scoped") {
    const state = { ...recorded, drift: [], gatewayPorts: { gw2: recordPorts(port) } };
    const key = vipKey(news.vips[changed(size).vip]);
    const one = gatewayDump({ ...d, vips: [d.vips[changed(size).vip]] }, recorded, 1);
    const { value, figures } = await measure(async () => {
      const scope = updateScope(d, news, state);
      if (scope.kind !== "vips") throw new Error(`not scoped: ${scope.reason}`);
      const observed = { ports: empty.ports, groups: parseGroups(one.groups), flows: parseFlows(one.flows) };
      const ids = assignIds({ ...news, vips: scope.touchedVips }, idsOf(recorded, [key]), new Set());
      return { scope, mods: planGatewayScoped("gw", news, scope, mergeIds(idsOf(recorded, [key]), ids), port, observed) };
    });
    return { ...figures, detail: { operations: opsOf(value.mods), touched: value.scope.kind === "vips" ? value.scope.touched.length : -1 } };
  }
  throw new Error(`unknown scenario ${name}`);
}

// ---------------------------------------------------------------- the handler against the lab

/**
 * What a "warm" process has done before the measured update, in the same
 * process: "changes", two one-backend updates of another VIP of the same
 * resource (added, then removed, each sent), as a provider that has already
 * served updates of this kind. false: a fresh process.
 */
type Warmup = "changes" | false;

/** How a lab child runs its operation. */
interface LabOptions {
  /** The state without its recorded port numbers, which makes update read and plan everything (the path before issue 13). */
  full: boolean;
  warm: Warmup;
  profile: boolean;
  /**
   * The measured call's inputs made before the warm-up, as this bench made them until issue 21's third round (before):
   * objects that lived through the warm-up. A provider decodes each call's inputs in that call, after the calls before it.
   */
  inputsBeforeWarmup: boolean;
  /** Through the provider's entry point (engineScenario), not the handler alone. */
  engine: boolean;
  /** With engine: the SDK's own part of the same calls too (sdkPlumbing). */
  plumbing?: boolean;
}

/** How long a warm process idles after its warm-up, before the measured update. */
const WARM_IDLE_MS = 300;

interface Saved {
  id: string;
  inputs: Inputs;
  state: DeferredNatState;
}

async function labScenario(name: string, size: { vips: number; backends: number }, file: string, opts: LabOptions): Promise<Figures> {
  const { warm, profile } = opts;
  const inv = loadInventory();
  const base = inputsFor(inv, size);
  if (name === "lab-create") {
    const d = withDefaults(base);
    const { value, figures } = await measure(() => handler.create(d));
    writeFileSync(file, JSON.stringify({ id: value.id, inputs: d, state: value.state }));
    return {
      ...figures,
      detail: { operations: value.state.lastApply[GATEWAY].operations, bytes: value.state.lastApply[GATEWAY].bytes, lastRead: value.state.lastRead },
    };
  }
  const text = readFileSync(file, "utf8");
  const saved = JSON.parse(text) as Saved;
  if (name === "lab-delete") {
    const { figures } = await measure(() => handler.delete(saved.id, withDefaults(saved.inputs), saved.state));
    return { ...figures, detail: {} };
  }
  // The measured call's inputs: the recorded ones parsed from the state, the desired ones built and defaulted. The full
  // path: a state without recorded port numbers makes update read and plan everything.
  const measuredInputs = () => {
    const recorded = JSON.parse(text) as Saved;
    const { gatewayPorts: _p, ...stripped } = recorded.state;
    return {
      old: { inputs: withDefaults(recorded.inputs), state: opts.full ? (stripped as DeferredNatState) : recorded.state },
      news: withDefaults(name === "lab-add" ? withAdded(inputsFor(inv, size), size) : inputsFor(inv, size)),
    };
  };
  let measured = opts.inputsBeforeWarmup ? measuredInputs() : undefined;
  // Warm: this process has already updated the resource (see Warmup). Copies: a provider gets fresh objects in every
  // call, so nothing of the warm-up is reused but the compiled code. Made as the measured call's are (recorded inputs
  // parsed, desired ones built and defaulted), as one provider decodes every resource alike: a warm-up of other object
  // shapes leaves code the measured call deoptimizes.
  if (warm === "changes") {
    // A backend added to VIP 0 and removed again, each sent: the gateway ends as it was, so the measured update's state still holds.
    let at = JSON.parse(JSON.stringify(saved)) as Saved;
    for (const step of ["add", "remove"]) {
      const fresh = inputsFor(inv, size);
      const desired = name === "lab-add" ? fresh : withAdded(fresh, size);
      const next = withDefaults(step === "add" ? withAdded(desired, size, 0) : desired);
      const state = await handler.update(at.id, { inputs: withDefaults(at.inputs), state: at.state }, next);
      at = JSON.parse(JSON.stringify({ id: at.id, inputs: next, state })) as Saved;
    }
  }
  // Made after the warm-up, as a provider decodes a call's inputs in that call.
  measured ??= measuredInputs();
  const { old, news } = measured;
  // A provider idles between the engine's calls: the garbage collector's work on the warm-up's garbage, left to run in the
  // idle time, is the warm-up's, not the measured update's.
  if (warm) await new Promise((resolve) => setTimeout(resolve, WARM_IDLE_MS));
  const run = () => handler.update(saved.id, old, news);
  const { value, figures } = await measure(async () => (profile ? profiled(run) : { value: await run(), split: undefined }));
  const state = value.value;
  writeFileSync(file, JSON.stringify({ id: saved.id, inputs: news, state }));
  return {
    ...figures,
    detail: { operations: state.lastApply[GATEWAY].operations, bytes: state.lastApply[GATEWAY].bytes, lastRead: state.lastRead, cpuSplit: value.split },
  };
}

// ---------------------------------------------------------------- through the provider's entry point

const KIND = "DeferredNatLoadBalancer";
type Props = Record<string, unknown>;

/** What crosses the engine's gRPC: each call's objects fresh (JSON here, protobuf there). */
const decoded = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** One call profiled: its wall (the profiler's start and stop with it) and its CPU split. */
async function profiledCall<T>(fn: () => Promise<T>): Promise<{ value: T; wallMs: number; split: CpuSplit }> {
  const t0 = process.hrtime.bigint();
  const { value, split } = await profiled(fn);
  return { value, wallMs: Number(process.hrtime.bigint() - t0) / 1e6, split };
}

/**
 * The same change as the engine makes it, through provider/handlers.ts (the entry point the serialized provider
 * calls): check of the desired inputs, then diff and update against the recorded outputs, each profiled. The process
 * is warmed as labScenario's "changes" (VIP 0's backend added and removed, each sent), through the same calls. Each
 * call's objects are decoded before the calls (the engine's gRPC decode is not in the figures).
 */
async function engineScenario(name: string, size: { vips: number; backends: number }, file: string, plumbingToo: boolean): Promise<Figures> {
  const inv = loadInventory();
  const saved = JSON.parse(readFileSync(file, "utf8")) as Saved;
  // What the engine recorded: the inputs (listed, defaulted) beside the state.
  let olds: Props = decoded({ ...saved.inputs, ...saved.state });
  // Before the measured change (the warm-up's base) and after it.
  const before = (): Props & Inputs => ({ ...(name === "lab-add" ? inputsFor(inv, size) : withAdded(inputsFor(inv, size), size)) });
  const after = (): Props & Inputs => ({ ...(name === "lab-add" ? withAdded(inputsFor(inv, size), size) : inputsFor(inv, size)) });
  const change = async (news: Props) => {
    const checked = await provider.check(KIND, decoded(olds), decoded(news));
    if (checked.failures.length > 0) throw new Error(`check refused the inputs: ${JSON.stringify(checked.failures[0])}`);
    await provider.diff(KIND, saved.id, decoded(olds), decoded(checked.inputs));
    olds = decoded((await provider.update(KIND, saved.id, decoded(olds), decoded(checked.inputs))).outs);
  };
  await change({ ...withAdded(before(), size, 0) });
  await change(before());
  const news = decoded(after());
  const checkArgs = decoded(olds);
  const diffArgs = decoded(olds);
  const updateArgs = decoded(olds);
  await new Promise((resolve) => setTimeout(resolve, WARM_IDLE_MS));
  const check = await profiledCall(() => provider.check(KIND, checkArgs, news));
  const [keyedForDiff, keyedForUpdate] = [decoded(check.value.inputs), decoded(check.value.inputs)];
  const diff = await profiledCall(() => provider.diff(KIND, saved.id, diffArgs, keyedForDiff));
  const update = await profiledCall(() => provider.update(KIND, saved.id, updateArgs, keyedForUpdate));
  // Back to the handler's record for the next child: the outputs that are not inputs are the state.
  const properties = (handler.schema as { properties: Record<string, unknown> }).properties;
  const state = Object.fromEntries(
    Object.entries(update.value.outs).filter(([k]) => !(k in properties) && k !== CREDENTIALS_OUTPUT && k !== "__provider"),
  ) as unknown as DeferredNatState;
  writeFileSync(file, JSON.stringify({ id: saved.id, inputs: withDefaults(after()), state }));
  const calls = (c: typeof check | typeof diff) => ({ wallMs: c.wallMs, split: c.split });
  // Measured once per kind of change (about a minute at the full size), not in every run.
  const plumbing =
    plumbingToo &&
    sdkPlumbing({
      keyedBefore: provider.asKeyed(KIND, withDefaults(before()) as unknown as Props),
      news,
      checked: check.value.inputs,
      outputsBefore: diffArgs,
      outputsAfter: update.value.outs,
    });
  return {
    wallMs: update.wallMs,
    cpuMs: update.split.sampledMs,
    rssBeforeMiB: 0,
    peakRssMiB: process.resourceUsage().maxRSS / KB_PER_MIB,
    detail: {
      operations: state.lastApply[GATEWAY].operations,
      bytes: state.lastApply[GATEWAY].bytes,
      lastRead: state.lastRead,
      cpuSplit: update.split,
      changes: diff.value.changes,
      check: calls(check),
      diff: calls(diff),
      ...(plumbing ? { plumbing } : {}),
    },
  };
}

/** The google-protobuf Struct codec @pulumi/pulumi's dynamic-provider plugin passes every call's properties through (its own dependency). */
interface StructCodec {
  Struct: {
    fromJavaScript(v: unknown): { serializeBinary(): Uint8Array };
    deserializeBinary(b: Uint8Array): { toJavaScript(): unknown };
  };
}
const structCodec = (): StructCodec => {
  const sdk = dirname(require.resolve("@pulumi/pulumi/package.json"));
  return require(require.resolve("google-protobuf/google/protobuf/struct_pb.js", { paths: [sdk] })) as StructCodec;
};

/** CPU of `fn` (process.cpuUsage), ms. */
function cpuOf(fn: () => void): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/**
 * What the SDK's dynamic-provider plugin itself spends per engine call, before and after the provider's code: each
 * request's olds and news decoded (deserializeBinary, toJavaScript), check's inputs and update's outputs encoded
 * (fromJavaScript, serializeBinary), on the objects of this very change. Check's olds are the recorded inputs (keyed).
 */
function sdkPlumbing(objects: { keyedBefore: unknown; news: unknown; checked: unknown; outputsBefore: unknown; outputsAfter: unknown }) {
  const { Struct } = structCodec();
  const encoded = new Map<unknown, Uint8Array>();
  const encodeMs = (v: unknown) => cpuOf(() => encoded.set(v, Struct.fromJavaScript(v).serializeBinary()));
  const decodeMs = (v: unknown) => {
    if (!encoded.has(v)) encoded.set(v, Struct.fromJavaScript(v).serializeBinary());
    return cpuOf(() => Struct.deserializeBinary(encoded.get(v)!).toJavaScript());
  };
  const { keyedBefore, news, checked, outputsBefore, outputsAfter } = objects;
  const [decKeyedBefore, decNews, decOutputs, decChecked] = [decodeMs(keyedBefore), decodeMs(news), decodeMs(outputsBefore), decodeMs(checked)];
  const [encChecked, encOutputs] = [encodeMs(checked), encodeMs(outputsAfter)];
  return {
    checkMs: decKeyedBefore + decNews + encChecked,
    diffMs: decOutputs + decChecked,
    updateMs: decOutputs + decChecked + encOutputs,
    wireBytes: { checkedInputs: encoded.get(checked)!.length, outputs: encoded.get(outputsAfter)!.length },
  };
}

/** Runs one scenario in a fresh node process and returns its figures. */
function child(ctx: BenchContext, scenario: string, size: { vips: number; backends: number }, file = "", opts: Partial<LabOptions> = {}): Figures {
  const { full = false, warm = false, profile = false, inputsBeforeWarmup = false, engine = false, plumbing = false } = opts;
  const r = spawnSync(
    process.execPath,
    [__filename, "--child", JSON.stringify({ scenario, size, file, full, warm, profile, inputsBeforeWarmup, engine, plumbing })],
    {
      encoding: "utf8",
      maxBuffer: 1 << 24,
    },
  );
  if (r.status !== 0) throw new Error(`scale-planning child ${scenario} failed (exit ${r.status}): ${r.stderr.slice(-2000)}`);
  const figures = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Figures;
  ctx.log(
    `  ${scenario}${full ? " (full path)" : ""}${warm ? ` (warm: ${warm})` : ""}${inputsBeforeWarmup ? " (inputs made before the warm-up)" : ""}${engine ? " (through the provider's entry point)" : ""}${profile ? " (profiled)" : ""}: ${fmtMs(figures.wallMs)} wall, ${fmtMs(figures.cpuMs)} CPU, peak ${figures.peakRssMiB.toFixed(0)} MiB`,
  );
  return figures;
}

if (process.argv[2] === "--child") {
  const { scenario, size, file, ...opts } = JSON.parse(process.argv[3]);
  const run = !scenario.startsWith("lab-")
    ? pureScenario(scenario, size)
    : opts.engine
      ? engineScenario(scenario, size, file, opts.plumbing === true)
      : labScenario(scenario, size, file, opts as LabOptions);
  childResult(run);
}

// ---------------------------------------------------------------- the run

const mib = (f: Figures) => `${f.peakRssMiB.toFixed(0)} MiB (${(f.peakRssMiB - f.rssBeforeMiB).toFixed(0)} over the ${f.rssBeforeMiB.toFixed(0)} before)`;
const med = (runs: Figures[], k: "wallMs" | "cpuMs" | "peakRssMiB") => median(runs.map((r) => r[k]));
const medRow = (what: string, path: string, runs: Figures[], ops: string) =>
  `| ${what} | ${path} | ${fmtMs(med(runs, "wallMs"))} | ${fmtMs(med(runs, "cpuMs"))} | ${med(runs, "peakRssMiB").toFixed(0)} MiB (${(med(runs, "peakRssMiB") - median(runs.map((r) => r.rssBeforeMiB))).toFixed(0)} over) | ${ops} |`;
const splitRow = (what: string, warmup: string, runs: Figures[]) => {
  const part = (k: keyof CpuSplit) => fmtMs(median(runs.map((r) => (r.detail.cpuSplit as CpuSplit)[k])));
  return `| ${what} | scoped, the provider's own CPU (profiled run: samples outside SSH), ${warmup} | ${fmtMs(med(runs, "wallMs"))} | ${part("providerMs")} | ${med(runs, "peakRssMiB").toFixed(0)} MiB | of ${part("sampledMs")} sampled: SSH ${part("sshMs")}, socket I/O ${part("ioMs")}, GC ${part("gcMs")} |`;
};
/** The engine's check, diff and update of one change through provider/handlers.ts: each call's CPU, and update's own part. */
const engineRow = (what: string, runs: Figures[]) => {
  const splits = (k: "check" | "diff" | "update") =>
    runs.map((r) => (k === "update" ? r.detail.cpuSplit : (r.detail[k] as { split: CpuSplit }).split) as CpuSplit);
  const part = (k: "check" | "diff" | "update", p: keyof CpuSplit) => fmtMs(median(splits(k).map((x) => x[p])));
  const each = (p: keyof CpuSplit) => `${part("check", p)} / ${part("diff", p)} / ${part("update", p)}`;
  return `| ${what} | scoped, through the provider's entry point (provider/handlers.ts), the provider's own CPU (profiled: samples outside SSH) of check / diff / update | ${fmtMs(med(runs, "wallMs"))} (update) | ${each("providerMs")} | ${med(runs, "peakRssMiB").toFixed(0)} MiB | of ${each("sampledMs")} sampled; GC ${each("gcMs")}; update's SSH ${part("update", "sshMs")}; ${opsText(runs[0].detail.operations)} |`;
};
/** The SDK plugin's decode and encode around the same calls (sdkPlumbing). */
const plumbingRow = (what: string, runs: Figures[]) => {
  type Plumbing = ReturnType<typeof sdkPlumbing>;
  const measured = runs.flatMap((r) => (r.detail.plumbing ? [r.detail.plumbing as Plumbing] : []));
  const of = (k: "checkMs" | "diffMs" | "updateMs") => fmtMs(median(measured.map((p) => p[k])));
  const wire = measured[0].wireBytes;
  return `| ${what} | @pulumi/pulumi's dynamic-provider plugin: each request's properties decoded, check's and update's results encoded (protobuf Structs), CPU of check / diff / update | — | ${of("checkMs")} / ${of("diffMs")} / ${of("updateMs")} | — | on the wire: check's inputs ${fmtInt(wire.checkedInputs)} B, the outputs ${fmtInt(wire.outputs)} B |`;
};
const opsText = (ops: unknown) =>
  Object.entries((ops ?? {}) as Record<string, number>)
    .map(([k, n]) => `${k} ×${fmtInt(n)}`)
    .join(", ") || "nothing";

export const scalePlanningBenchmark: Benchmark = {
  name: "scale-planning",
  description:
    "issue 13: the largest DeferredNatLoadBalancer (1,024 VIPs x 100 backends) planned from scratch, and one backend change, scoped vs the full read and plan",
  async run(ctx) {
    const size = ctx.smoke ? SMOKE : FULL;
    const invariants: Invariant[] = [];
    const inv = loadInventory();
    // The full size must be one the provider accepts (the schema's vips.maxItems, and check's rules).
    const schemaMax = (handler.schema as { properties: { vips: { maxItems: number } } }).properties.vips.maxItems;
    const fullInputs = withDefaults(inputsFor(inv, FULL));
    const { validateAgainstSchema } = await import("../provider/model/validate");
    const failures = [...validateAgainstSchema(handler.schema, fullInputs), ...handler.checkRules!(fullInputs)];
    invariants.push({
      name: `check accepts the full size, the schema's largest VIP set (${FULL.vips} VIPs x ${FULL.backends} backends)`,
      ok: failures.length === 0 && schemaMax === FULL.vips,
      detail: failures.length ? JSON.stringify(failures[0]) : `vips.maxItems ${schemaMax}`,
    });

    ctx.log(`1. pure planning, ${size.vips} VIPs x ${size.backends} backends`);
    const scratch = Array.from({ length: size.runs }, () => child(ctx, "plan-scratch", size));
    const pureFull = Array.from({ length: size.runs }, () => child(ctx, "plan-change-full", size));
    const pureScoped = Array.from({ length: size.runs }, () => child(ctx, "plan-change-scoped", size));
    const insertOnly = (f: Figures) => JSON.stringify(f.detail.operations) === JSON.stringify({ "insert-buckets": 1 });
    invariants.push({ name: "one added backend plans one insert-buckets, in full and scoped", ok: [...pureFull, ...pureScoped].every(insertOnly) });
    invariants.push({
      name: "from scratch plans one add-group and one add-flow per VIP",
      ok: scratch.every((f) => JSON.stringify(f.detail.operations) === JSON.stringify({ "add-group": size.vips, "add-flow": size.vips })),
    });

    ctx.log(`2. through the handler on ${GATEWAY}, bridge ${BRIDGE} (its own)`);
    const gw = await labSsh(inv, GATEWAY);
    const dir = mkdtempSync(join(os.tmpdir(), "ovslb-scale-planning-"));
    const file = join(dir, "state.json");
    const vsctl = (...args: string[]) => gw.run(["ovs-vsctl", ...args]);
    const teardown = async () => {
      const steps = teardownSteps();
      // The bridge is this run's alone: deleting it removes every group and flow the run made.
      await steps.attempt(`delete bridge ${BRIDGE} on ${GATEWAY}`, async () => {
        const r = await vsctl("--if-exists", "del-br", BRIDGE);
        if (r.exitCode !== 0) throw new Error(r.stderr.trim());
      });
      rmSync(dir, { recursive: true, force: true });
      return steps.failed;
    };
    return labRun(ctx, { locks: [], interrupted: `deleting bridge ${BRIDGE} on ${GATEWAY}`, teardown, close: () => gw.close() }, async () => {
      await vsctl("--if-exists", "del-br", BRIDGE);
      const made = await vsctl(
        "add-br",
        BRIDGE,
        "--",
        "set",
        "bridge",
        BRIDGE,
        "datapath_type=netdev",
        "--",
        "add-port",
        BRIDGE,
        PORT,
        "--",
        "set",
        "interface",
        PORT,
        "type=internal",
      );
      if (made.exitCode !== 0) throw new Error(`cannot make ${BRIDGE} on ${GATEWAY}: ${made.stderr}`);
      const machine = await machineNote(gw);
      const create = child(ctx, "lab-create", size, file);
      const runs = () => ({ add: [] as Figures[], remove: [] as Figures[] });
      const lab = {
        scoped: runs(),
        full: runs(),
        scopedWarm: runs(),
        fullWarm: runs(),
        scopedWarmProfiled: runs(),
        scopedEarlyWarmProfiled: runs(),
        engineWarmProfiled: runs(),
      };
      for (let r = 0; r < size.runs; r++) {
        for (const path of ["scoped", "full", "scopedWarm", "fullWarm", "scopedWarmProfiled", "scopedEarlyWarmProfiled", "engineWarmProfiled"] as const) {
          const opts: LabOptions = {
            engine: path.startsWith("engine"),
            plumbing: r === 0,
            full: path.startsWith("full"),
            warm: path.includes("Warm") ? "changes" : false,
            profile: path.endsWith("Profiled"),
            inputsBeforeWarmup: path.includes("Early"),
          };
          lab[path].add.push(child(ctx, "lab-add", size, file, opts));
          lab[path].remove.push(child(ctx, "lab-remove", size, file, opts));
        }
      }
      const dumpGroups = await gw.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", BRIDGE]);
      const groupsLeft = dumpGroups.stdout.split("\n").filter((l) => l.includes("group_id=")).length;
      const bucketsLeft = (dumpGroups.stdout.match(/bucket=/g) ?? []).length;
      invariants.push({
        name: "after the changes the bridge holds exactly the load balancer's groups and buckets",
        ok: groupsLeft === size.vips && bucketsLeft === size.vips * size.backends,
        detail: `${groupsLeft} groups, ${bucketsLeft} buckets`,
      });
      const del = child(ctx, "lab-delete", size, file);
      const after = await gw.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", BRIDGE]);
      invariants.push({ name: "delete leaves no group", ok: !after.stdout.includes("group_id=") });

      const all = [
        ...lab.scoped.add,
        ...lab.scoped.remove,
        ...lab.scopedWarm.add,
        ...lab.scopedWarm.remove,
        ...lab.scopedWarmProfiled.add,
        ...lab.scopedWarmProfiled.remove,
        ...lab.scopedEarlyWarmProfiled.add,
        ...lab.scopedEarlyWarmProfiled.remove,
        ...lab.engineWarmProfiled.add,
        ...lab.engineWarmProfiled.remove,
      ];
      invariants.push({
        name: "every scoped update read only the one VIP it changed",
        ok: all.every((f) => JSON.stringify(f.detail.lastRead) === JSON.stringify({ scope: "vips", vips: 1 })),
        detail: JSON.stringify(all.map((f) => f.detail.lastRead)),
      });
      const fulls = [...lab.full.add, ...lab.full.remove, ...lab.fullWarm.add, ...lab.fullWarm.remove];
      invariants.push({
        name: "every update without recorded port numbers read everything (today's path)",
        ok: fulls.every((f) => (f.detail.lastRead as { scope?: string })?.scope === "all"),
      });
      invariants.push({
        name: "both paths sent the same one-bucket bundle (insert on add, remove on remove)",
        ok:
          [
            ...lab.scoped.add,
            ...lab.full.add,
            ...lab.scopedWarm.add,
            ...lab.fullWarm.add,
            ...lab.scopedWarmProfiled.add,
            ...lab.scopedEarlyWarmProfiled.add,
            ...lab.engineWarmProfiled.add,
          ].every((f) => JSON.stringify(f.detail.operations) === JSON.stringify({ "insert-buckets": 1 })) &&
          [
            ...lab.scoped.remove,
            ...lab.full.remove,
            ...lab.scopedWarm.remove,
            ...lab.fullWarm.remove,
            ...lab.scopedWarmProfiled.remove,
            ...lab.scopedEarlyWarmProfiled.remove,
            ...lab.engineWarmProfiled.remove,
          ].every((f) => JSON.stringify(f.detail.operations) === JSON.stringify({ "remove-buckets": 1 })),
      });

      const cores = os.cpus().length;
      const markdown = [
        `## scale-planning: ${fmtInt(size.vips)} VIPs x ${fmtInt(size.backends)} backends (${fmtInt(size.vips * size.backends)} buckets), one DeferredNatLoadBalancer`,
        "",
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} (${cores} cores) as the run started; ${machine.date}.`,
        "",
        `Each figure is one fresh node process doing only that operation: wall and CPU (process.cpuUsage, user + system, this process only: not ovs-vswitchd's or sshd's) around the operation, peak memory the process's maximum resident set (process.resourceUsage().maxRSS), with how much it grew over the resident set just before the operation. Medians of ${size.runs}.`,
        "",
        "| Operation | Path | Wall | CPU | Peak memory (RSS) | Planned / sent |",
        "| --- | --- | --- | --- | --- | --- |",
        medRow(
          "plan from scratch (ids, plan, bundle text; no host)",
          "—",
          scratch,
          `${opsText(scratch[0].detail.operations)}; ${fmtInt(Number(scratch[0].detail.bundleBytes))} B of bundle`,
        ),
        medRow(
          "plan one added backend (no host)",
          "full: parse the gateway's whole dump, plan every VIP (before)",
          pureFull,
          `${opsText(pureFull[0].detail.operations)}; dump ${fmtInt(Number(pureFull[0].detail.dumpBytes))} B`,
        ),
        medRow("plan one added backend (no host)", "scoped: compare, plan the one VIP", pureScoped, opsText(pureScoped[0].detail.operations)),
        `| create from scratch on ${GATEWAY} (connect, read, plan, apply one bundle) | — | ${fmtMs(create.wallMs)} | ${fmtMs(create.cpuMs)} | ${mib(create)} | ${opsText(create.detail.operations)}; ${fmtInt(Number(create.detail.bytes))} B |`,
        medRow(
          `update: one backend added, on ${GATEWAY}`,
          "full (before): read every group and flow, plan every VIP",
          lab.full.add,
          opsText(lab.full.add[0].detail.operations),
        ),
        medRow(
          `update: one backend added, on ${GATEWAY}`,
          "scoped: read and plan that VIP's group and flow",
          lab.scoped.add,
          opsText(lab.scoped.add[0].detail.operations),
        ),
        medRow(`update: that backend removed, on ${GATEWAY}`, "full (before)", lab.full.remove, opsText(lab.full.remove[0].detail.operations)),
        medRow(`update: that backend removed, on ${GATEWAY}`, "scoped", lab.scoped.remove, opsText(lab.scoped.remove[0].detail.operations)),
        medRow(`update, warm process: one backend added`, "full (before)", lab.fullWarm.add, opsText(lab.fullWarm.add[0].detail.operations)),
        medRow(`update, warm process: one backend added`, "scoped", lab.scopedWarm.add, opsText(lab.scopedWarm.add[0].detail.operations)),
        medRow(`update, warm process: that backend removed`, "full (before)", lab.fullWarm.remove, opsText(lab.fullWarm.remove[0].detail.operations)),
        medRow(`update, warm process: that backend removed`, "scoped", lab.scopedWarm.remove, opsText(lab.scopedWarm.remove[0].detail.operations)),
        splitRow(`update, warm process: one backend added`, "its inputs made before the warm-up (before)", lab.scopedEarlyWarmProfiled.add),
        splitRow(`update, warm process: one backend added`, "its inputs made after the warm-up", lab.scopedWarmProfiled.add),
        splitRow(`update, warm process: that backend removed`, "its inputs made before the warm-up (before)", lab.scopedEarlyWarmProfiled.remove),
        splitRow(`update, warm process: that backend removed`, "its inputs made after the warm-up", lab.scopedWarmProfiled.remove),
        engineRow(`the engine's calls, warm process: one backend added`, lab.engineWarmProfiled.add),
        engineRow(`the engine's calls, warm process: that backend removed`, lab.engineWarmProfiled.remove),
        plumbingRow(`the SDK's own part of the same calls: one backend added`, lab.engineWarmProfiled.add),
        plumbingRow(`the SDK's own part of the same calls: that backend removed`, lab.engineWarmProfiled.remove),
        `| delete | — | ${fmtMs(del.wallMs)} | ${fmtMs(del.cpuMs)} | ${mib(del)} | |`,
        "",
        "An update's figures include opening its SSH connection (key exchange), the OVSDB reads of the gateway's ports and tunnels, the read, the plan and the one bundle. " +
          "A fresh process pays for compiling the code it runs the first time (the SSH client alone is about 30 ms of CPU on its first connection, 8 ms after). \"Warm\" is a process that has already served two one-backend updates of the same resource, of another VIP (a backend added, then removed, each read, planned and sent), as a provider plugin is once it has served updates of this kind (a stack with many such load balancers); a provider's first update of a `pulumi up` is the fresh-process figure. The measured call's inputs (the recorded ones parsed, the desired ones built and defaulted) are made after the warm-up, as a provider decodes each call's inputs in that call; \"made before the warm-up\" is how this bench made them until issue 21's third round, objects that lived through the warm-up.",
        "The provider's own CPU (SSH excluded) is from another warm scoped update of each kind, run under V8's sampling profiler (every 200 µs, in the process; bench/cpu-split.ts): each sample goes to whoever's frame is nearest the top of its stack: the provider (provider/, its transport aside), SSH (ssh2 and provider/transport: key exchange, channels, packet crypto, the OVSDB client's JSON), node's socket I/O and events when neither, or garbage collection. Profiling slows the process, so these are at most what an unprofiled run spends.",
        "The engine's calls: the same change (warmed the same way) as the engine makes it, through provider/handlers.ts, the entry point the serialized provider calls: check of the desired inputs (schema, defaults, rules, keyed sets), diff and update against the recorded outputs (sets listed again, the recorded and new inputs validated, compared, defaulted; the handler's update; the outputs joined with the credentials lifted), each call under the profiler, its objects decoded before it (the gRPC decode is not in these figures).",
        "The SDK's own part: what @pulumi/pulumi's dynamic-provider plugin spends around the provider's code in each of those calls, on the same objects: the request's olds and news decoded from protobuf Structs (google-protobuf's deserializeBinary and toJavaScript), check's inputs and update's outputs encoded (fromJavaScript and serializeBinary), unprofiled CPU, in the first run of each kind of change. A dynamic provider cannot avoid it: the properties of a resource cross gRPC whole in every call.",
        "The scoped read is `dump-groups BR GROUP` and `dump-flows BR table=0,MATCH` for the one VIP (4 channels at most at once); the full read is `dump-groups BR` and `dump-flows` of tables 0 and 20, parsed as they stream in.",
      ].join("\n");
      return {
        name: "scale-planning",
        markdown,
        invariants,
        data: { size, machine, pure: { scratch, full: pureFull, scoped: pureScoped }, lab: { create, ...lab, delete: del } },
      };
    });
  },
};
