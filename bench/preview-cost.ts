import { execFileSync } from "node:child_process";
import * as os from "node:os";
import { resolve } from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { Benchmark, Invariant } from "./common";
import { fmtMs, median } from "./common";
import { RESOURCE_KINDS, asLists, handle } from "../provider/handlers";
import { listedInputs } from "../provider/model/keyed";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";
import { largeLoadBalancer, withAdded, type LoadBalancerSize } from "./large-load-balancer";
import { UNORDERED, sameInputs } from "../provider/model/validate";
import schema from "../schema/deferred-nat-load-balancer.json";
import common from "../schema/common.json";

/**
 * preview-cost (issue 21): what `pulumi preview` asks of the provider for
 * one DeferredNatLoadBalancer of the largest size (1,024 VIPs x 100
 * backends): `check` of the new inputs and `diff` against the recorded ones,
 * with one backend added, with nothing changed, and with every list
 * reordered. The comparison diff made before (a canonical copy of each
 * side, every set sorted by its elements' text, then a deep equality) runs
 * side by side with today's `sameInputs`, in the same process, alternately;
 * both must agree. No host is contacted: check and diff never do.
 *
 * And what the first check of each kind costs a new process (every plugin
 * and program process of a `pulumi preview` or `up` is one): its validator
 * compiled there, as before, or taken from the build's validators
 * (dist/schema/validators.js), in fresh processes, alternately; and what the
 * serialized provider costs a new program process: the SDK's closure
 * serializer, as before, or the build's template filled in.
 */

const FULL = { vips: 1024, backends: 100, runs: 5 };
const SMOKE = { vips: 16, backends: 10, runs: 1 };
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
type Props = Record<string, unknown>;

const inputsFor = (size: LoadBalancerSize) =>
  largeLoadBalancer(
    "bench-preview",
    {
      name: "gw1",
      host: { connection: { host: "192.0.2.1", user: "root", hostKey: KEY, privateKeyPath: "/k" } },
      bridge: "br-seg",
      segmentPort: "seg0",
      mac: "02:00:0a:00:01:0c",
    },
    size,
  );

// ------------------------------------------------ the comparison diff made before (baseline)

type Node = { $ref?: string; items?: Node; properties?: Record<string, Node>; additionalProperties?: unknown; [k: string]: unknown };
const DOCUMENTS: Record<string, object> = { "common.json": common };

function resolveRef(ref: string, doc: object): { node: Node; doc: object } {
  const hash = ref.indexOf("#");
  const file = hash < 0 ? ref : ref.slice(0, hash);
  const target = file === "" ? doc : DOCUMENTS[file];
  let node: unknown = target;
  for (const step of (hash < 0 ? "" : ref.slice(hash + 1)).split("/").filter(Boolean)) node = (node as Props)[step];
  return { node: node as Node, doc: target };
}

function stableText(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableText).join(",")}]`;
  if (v && typeof v === "object") {
    const entries = Object.entries(v as Props).filter(([, x]) => x !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, x]) => `${JSON.stringify(k)}:${stableText(x)}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/** The canonical copy diff made of each side before: every "x-unordered" list sorted by its elements' text. */
function canonicalCopy(node: Node | undefined, doc: object, value: unknown): unknown {
  while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
  if (Array.isArray(value)) {
    const items = value.map((v) => canonicalCopy(node?.items, doc, v));
    if (node?.[UNORDERED] !== true) return items;
    return items
      .map((v) => [stableText(v), v] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, v]) => v);
  }
  if (value && typeof value === "object") {
    const out: Props = {};
    for (const [k, v] of Object.entries(value as Props)) {
      const extra = node?.additionalProperties;
      out[k] = canonicalCopy(node?.properties?.[k] ?? (typeof extra === "object" ? (extra as Node) : undefined), doc, v);
    }
    return out;
  }
  return value;
}

const sameBefore = (a: unknown, b: unknown) => isDeepStrictEqual(canonicalCopy(schema as Node, schema, a), canonicalCopy(schema as Node, schema, b));

// ------------------------------------------------------------------------------ the run

function cpuMs<T>(fn: () => T): { value: T; ms: number } {
  const t = process.cpuUsage();
  const value = fn();
  const used = process.cpuUsage(t);
  return { value, ms: (used.user + used.system) / 1000 };
}

async function cpuMsAsync<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t = process.cpuUsage();
  const value = await fn();
  const used = process.cpuUsage(t);
  return { value, ms: (used.user + used.system) / 1000 };
}

const reversed = <T>(list: readonly T[]) => [...list].reverse();

// ------------------------------------------------ the first check in a new process

/** Compiled to dist/bench/preview-cost.js: the built provider beside it, with the build's validators. */
const DIST = resolve(__dirname, "..");

/**
 * A new process loads the built validate.js, then (CPU counted from here)
 * validates `{}` against each schema of its group: "before" compiles each
 * with ajv as every process did, "now" takes the build's. It answers with
 * that CPU, the verdicts, whether each schema was served precompiled and
 * whether ajv's compiler was loaded.
 */
const FIRST_CHECK = `
  const [dist, mode, group] = process.argv.slice(1);
  const { join } = require("node:path");
  const v = require(join(dist, "provider", "model", "validate.js"));
  // The components' schemas as the build lists them; only they need components/args.js (and so @pulumi/pulumi) to bundle theirs.
  const files = group === "components"
    ? require(join(dist, "..", "schema", "build-validators.js"))
        .checkedSchemas(join(dist, "schema"), require(join(dist, "components", "args.js")).componentSchema)
        .filter((s) => s.$id.includes("/components/"))
    : [require(join(dist, "schema", group + ".json"))];
  const t = process.cpuUsage();
  let verdicts, served = [];
  if (mode === "before") {
    const ajv = v.schemaAjv();
    verdicts = files.map((s) => ajv.compile(s)({}));
  } else {
    verdicts = files.map((s) => v.validateAgainstSchema(s, {}).length === 0);
    served = files.map((s) => v.servedPrecompiled(s));
  }
  const used = process.cpuUsage(t);
  const compiler = Object.keys(require.cache).some((k) => k.includes(join("ajv", "dist", "core.js")));
  process.stdout.write(JSON.stringify({ ms: (used.user + used.system) / 1000, verdicts, served, compiler }));
`;

const FIRST_CHECK_GROUPS = [
  "deferred-nat-load-balancer",
  "dsr-hypervisor-flows",
  "distributor-attachment",
  "distributor-device",
  "health-check",
  "ovs-bridge",
  "components",
];

interface FirstCheck {
  ms: number;
  verdicts: boolean[];
  served: boolean[];
  compiler: boolean;
}

const firstCheck = (mode: "before" | "now", group: string): FirstCheck =>
  JSON.parse(execFileSync(process.execPath, ["-e", FIRST_CHECK, DIST, mode, group], { encoding: "utf8" })) as FirstCheck;

// ------------------------------------------------ the serialized provider in a new program process

/**
 * A new process loads @pulumi/pulumi and the built provider/dynamic.js, then
 * (CPU counted from here) gets the `__provider` text of each kind of its
 * group: "before" runs the SDK's closure serializer over the provider
 * object, as pulumi.dynamic.Resource does in every program, "now" fills the
 * build's template (providerText). It answers with that CPU, the texts and
 * whether each "now" text came without waiting (no serializer run).
 */
const PROVIDER_TEXT = `
  const [dist, mode, kinds] = process.argv.slice(1);
  const { join } = require("node:path");
  const pulumi = require("@pulumi/pulumi");
  const dynamic = require(join(dist, "provider", "dynamic.js"));
  (async () => {
    const t = process.cpuUsage();
    const texts = [], immediate = [];
    for (const kind of kinds.split(",")) {
      if (mode === "before") {
        const provider = dynamic.dynamicProvider(kind);
        texts.push((await pulumi.runtime.serializeFunction(() => provider, { allowSecrets: true })).text);
      } else {
        const text = dynamic.providerText(kind);
        immediate.push(typeof text === "string");
        texts.push(await text);
      }
    }
    const used = process.cpuUsage(t);
    process.stdout.write(JSON.stringify({ ms: (used.user + used.system) / 1000, texts, immediate }));
  })();
`;

const PROVIDER_TEXT_GROUPS: Record<string, readonly string[]> = { "one kind (OvsBridge)": ["OvsBridge"], "all six kinds": RESOURCE_KINDS };

interface ProviderTexts {
  ms: number;
  texts: string[];
  immediate: boolean[];
}

const providerTexts = (mode: "before" | "now", kinds: readonly string[]): ProviderTexts =>
  // The serializer's walk of Node's built-in modules prints deprecation warnings (sys, WASI) on stderr: not this benchmark's output.
  JSON.parse(
    execFileSync(process.execPath, ["-e", PROVIDER_TEXT, DIST, mode, kinds.join(",")], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
  ) as ProviderTexts;

/**
 * Each group measured in fresh processes, "before" then "now", run after run
 * (so load drifts hit both alike); `firstRun` sees the first run's pair.
 */
function alternatingRuns<R extends { ms: number }>(
  runs: number,
  groups: readonly string[],
  measure: (mode: "before" | "now", group: string) => R,
  firstRun: (group: string, before: R, now: R) => void,
): Record<string, { before: number[]; now: number[] }> {
  const ms: Record<string, { before: number[]; now: number[] }> = {};
  for (let run = 0; run < runs; run++) {
    for (const group of groups) {
      const before = measure("before", group);
      const now = measure("now", group);
      const f = (ms[group] ??= { before: [], now: [] });
      f.before.push(before.ms);
      f.now.push(now.ms);
      if (run === 0) firstRun(group, before, now);
    }
  }
  return ms;
}

export const previewCostBenchmark: Benchmark = {
  name: "preview-cost",
  description:
    "issue 21: check and diff of a DeferredNatLoadBalancer of 1,024 VIPs x 100 backends (what preview asks per resource), today's comparison vs the one before",
  async run(ctx) {
    const size = ctx.smoke ? SMOKE : FULL;
    const kind = "DeferredNatLoadBalancer";
    const checked = async (i: Inputs) => {
      const r = (await handle(kind, "check", [{}, i])) as { inputs: Props; failures: unknown[] };
      if (r.failures.length > 0) throw new Error(`check refused the bench's inputs: ${JSON.stringify(r.failures.slice(0, 3))}`);
      return r.inputs;
    };
    // What the state's outputs hold: lists. The new inputs are as check returns them: sets keyed by identity.
    const recorded = asLists(kind, await checked(inputsFor(size)));
    const cases = {
      "one backend added": await checked(withAdded(inputsFor(size), size)),
      "nothing changed": await checked(inputsFor(size)),
      "every list reordered": await checked({
        ...inputsFor(size),
        vips: reversed(inputsFor(size).vips).map((v) => ({ ...v, backends: reversed(v.backends) })),
      }),
    };
    const expected: Record<keyof typeof cases, boolean> = { "one backend added": true, "nothing changed": false, "every list reordered": false };
    const figures: Record<string, { before: number[]; now: number[]; diff: number[] }> = {};
    const check: number[] = [];
    const invariants: Invariant[] = [];
    ctx.log(`${size.vips} VIPs x ${size.backends} backends, ${size.runs} run(s) each, alternating`);
    for (let run = 0; run < size.runs; run++) {
      check.push((await cpuMsAsync(() => checked(withAdded(inputsFor(size), size)))).ms);
      for (const [name, news] of Object.entries(cases) as [keyof typeof cases, Props][]) {
        const f = (figures[name] ??= { before: [], now: [], diff: [] });
        // Both comparisons get what diff compares: the new inputs listed in the recorded order (listing is in "Whole diff").
        const listed = listedInputs(schema, news, recorded);
        const before = cpuMs(() => sameBefore(recorded, listed));
        const now = cpuMs(() => sameInputs(schema, recorded, listed));
        const diff = await cpuMsAsync(() => handle(kind, "diff", ["bench", recorded, news]) as Promise<{ changes: boolean }>);
        f.before.push(before.ms);
        f.now.push(now.ms);
        f.diff.push(diff.ms);
        if (run === 0) {
          invariants.push({
            name: `${name}: the comparison before and sameInputs agree, and diff says ${expected[name] ? "changes" : "no changes"}`,
            ok: before.value === now.value && diff.value.changes === expected[name] && now.value === !expected[name],
            detail: `before ${before.value}, now ${now.value}, diff.changes ${diff.value.changes}`,
          });
        }
      }
      ctx.log(
        `  run ${run + 1}: check ${fmtMs(check.at(-1)!)}; ${Object.entries(figures)
          .map(([n, f]) => `${n}: before ${fmtMs(f.before.at(-1)!)}, now ${fmtMs(f.now.at(-1)!)}, diff ${fmtMs(f.diff.at(-1)!)}`)
          .join("; ")}`,
      );
    }
    ctx.log(`the first check in a new process: ${FIRST_CHECK_GROUPS.length} groups, ${size.runs} run(s) each, alternating`);
    const firstChecks = alternatingRuns(size.runs, FIRST_CHECK_GROUPS, firstCheck, (group, before, now) =>
      invariants.push({
        name: `${group}: a new process takes the build's validator${now.served.length > 1 ? "s" : ""}, loads no ajv compiler, and its verdict on {} is the compiled one's`,
        ok: now.served.length > 0 && now.served.every(Boolean) && !now.compiler && isDeepStrictEqual(now.verdicts, before.verdicts),
        detail: `served ${JSON.stringify(now.served)}, compiler loaded ${now.compiler}, verdicts ${JSON.stringify(now.verdicts)} vs ${JSON.stringify(before.verdicts)}`,
      }),
    );
    const textGroups = Object.keys(PROVIDER_TEXT_GROUPS);
    ctx.log(`the serialized provider in a new program process: ${textGroups.length} groups, ${size.runs} run(s) each, alternating`);
    const serialized = alternatingRuns(
      size.runs,
      textGroups,
      (mode, group) => providerTexts(mode, PROVIDER_TEXT_GROUPS[group]),
      (group, before, now) =>
        invariants.push({
          name: `${group}: a new program process has the provider's text from the build's template without running the serializer, and it is the serializer's text`,
          ok: now.immediate.length === PROVIDER_TEXT_GROUPS[group].length && now.immediate.every(Boolean) && isDeepStrictEqual(now.texts, before.texts),
          detail: `immediate ${JSON.stringify(now.immediate)}, texts equal ${isDeepStrictEqual(now.texts, before.texts)} (${now.texts.map((t) => t.length).join(", ")} B)`,
        }),
    );
    const cpus = os.cpus();
    const markdown = [
      `## preview-cost: check and diff of one DeferredNatLoadBalancer, ${size.vips} VIPs x ${size.backends} backends`,
      "",
      `Machine: ${cpus[0]?.model ?? "unknown"} x${cpus.length}, Node ${process.version}; load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(
          " ",
        )} as the run ended; ${new Date().toISOString()}. CPU (process.cpuUsage) of one process, medians of ${size.runs} alternating runs after the inputs were built and checked once.`,
      "",
      "| Recorded vs new inputs | Compare, before (canonical copies, deep equality) | Compare, now (`sameInputs`) | Whole `diff` now |",
      "| --- | --- | --- | --- |",
      ...Object.entries(figures).map(([n, f]) => `| ${n} | ${fmtMs(median(f.before))} | ${fmtMs(median(f.now))} | ${fmtMs(median(f.diff))} |`),
      "",
      `\`check\` of the new inputs (schema, defaults, rules): ${fmtMs(median(check))}.`,
      "",
      `The first check in a new process (every plugin and program process of a \`pulumi preview\` or \`up\` is one): CPU from after the provider's modules load to the verdict on \`{}\`, medians of ${size.runs} alternating fresh processes each.`,
      "",
      "| Schema | Compiled in the process (before) | The build's validator (now) |",
      "| --- | --- | --- |",
      ...Object.entries(firstChecks).map(
        ([g, f]) => `| ${g === "components" ? "the three components" : g} | ${fmtMs(median(f.before))} | ${fmtMs(median(f.now))} |`,
      ),
      "",
      `The serialized provider a program puts in each resource's \`__provider\`, in a new process (every program process of a \`pulumi preview\` or \`up\` is one): CPU from after @pulumi/pulumi and the provider's module load to the texts in hand, medians of ${size.runs} alternating fresh processes each.`,
      "",
      "| Resource kinds in the program | The SDK's closure serializer (before: `pulumi.dynamic.Resource`) | The build's template, filled (now) |",
      "| --- | --- | --- |",
      ...Object.entries(serialized).map(([g, f]) => `| ${g} | ${fmtMs(median(f.before))} | ${fmtMs(median(f.now))} |`),
    ].join("\n");
    return { name: "preview-cost", markdown, invariants, data: { size, check, figures, firstChecks, serialized } };
  },
};
