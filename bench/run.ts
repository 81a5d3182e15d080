import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs, UsageError } from "./cli";
import type { Benchmark, BenchContext, BenchReport } from "./common";
import { deferredNatBenchmark } from "./deferred-nat";
import { distributorFailoverBenchmark } from "./distributor-failover";
import { distributorFailoverIpv6Benchmark } from "./distributor-failover-ipv6";
import { dsrGreBenchmark } from "./dsr-gre";
import { fleetPreviewBenchmark } from "./fleet-preview";
import { harnessPluginBenchmark } from "./harness-plugin";
import { livenessBenchmark } from "./liveness";
import { mixedVersionsBenchmark } from "./mixed-versions";
import { ovnIncidentBenchmark } from "./ovn-incident";
import { ovnPeerBenchmark } from "./ovn-peer";
import { peerCommandBenchmark } from "./peer-command";
import { previewCostBenchmark } from "./preview-cost";
import { realNetworksBenchmark } from "./real-networks";
import { scaleFanoutBenchmark } from "./scale-fanout";
import { scalePlanningBenchmark } from "./scale-planning";
import { scaleReadingBenchmark } from "./scale-reading";
import { secondChanceBenchmark } from "./second-chance";
import { sshCommandsBenchmark } from "./ssh-commands";

/**
 * `npm run bench -- [NAME ...] [--smoke] [--record | --out DIR] [--list]`:
 * runs the benchmarks (all, or those named) against the lab and prints each
 * one's tables and the invariants it checked.
 *
 * - Nothing is written unless asked: `--record` writes bench/results/NAME.md
 *   and .json (the tracked results), `--out DIR` writes them to DIR.
 * - `--smoke`: every benchmark runs small (seconds) and still checks all its
 *   invariants; CI runs this so no benchmark can rot. Smoke figures are not
 *   results: `--smoke --record` is refused.
 * - Any invariant that fails makes the run fail (exit 1), and nothing is
 *   written for that benchmark.
 *
 * Add a benchmark by listing it here.
 */
const BENCHMARKS: readonly Benchmark[] = [
  deferredNatBenchmark,
  dsrGreBenchmark,
  livenessBenchmark,
  secondChanceBenchmark,
  distributorFailoverBenchmark,
  distributorFailoverIpv6Benchmark,
  scaleFanoutBenchmark,
  peerCommandBenchmark,
  scalePlanningBenchmark,
  scaleReadingBenchmark,
  previewCostBenchmark,
  fleetPreviewBenchmark,
  realNetworksBenchmark,
  mixedVersionsBenchmark,
  ovnIncidentBenchmark,
  ovnPeerBenchmark,
  sshCommandsBenchmark,
  harnessPluginBenchmark,
];

/** Compiled to dist/bench/run.js: the tracked results sit next to the sources. */
const RESULTS = resolve(__dirname, "..", "..", "bench", "results");

const json = (value: unknown) => JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `0x${v.toString(16)}` : v), 2);

function invariantLines(report: BenchReport): string[] {
  return report.invariants.map((i) => `- ${i.ok ? "ok" : "FAILED"}: ${i.name}${i.detail ? ` (${i.detail})` : ""}`);
}

async function main() {
  const { names, smoke, list, out } = parseArgs(
    process.argv.slice(2),
    RESULTS,
    BENCHMARKS.map((b) => b.name),
  );
  if (list) {
    for (const b of BENCHMARKS) console.log(`${b.name}: ${b.description}`);
    return;
  }
  const selected = BENCHMARKS.filter((b) => names.length === 0 || names.includes(b.name));
  const ctx: BenchContext = { smoke, log: (line) => process.stderr.write(`${line}\n`) };
  const failed: string[] = [];
  for (const b of selected) {
    const start = Date.now();
    ctx.log(`== ${b.name}${smoke ? " (smoke)" : ""}: ${b.description}`);
    const report = await b.run(ctx);
    const seconds = ((Date.now() - start) / 1000).toFixed(0);
    const command = `npm run bench -- ${b.name} --record`;
    const bad = report.invariants.filter((i) => !i.ok);
    const md = [
      `<!-- written by \`${command}\`; do not edit by hand -->`,
      "",
      ...(smoke ? ["**Smoke run: small sizes, not results.**", ""] : []),
      report.markdown,
      "",
      `Invariants checked by this run (${report.invariants.length - bad.length} of ${report.invariants.length} held):`,
      "",
      ...invariantLines(report),
      "",
      `Run took ${seconds} s. Rerun: \`${command}\` (the lab must be up: \`npm run lab -- up\`).`,
      "",
    ].join("\n");
    process.stdout.write(`${md}\n`);
    if (bad.length > 0) {
      failed.push(...bad.map((i) => `${b.name}: ${i.name}${i.detail ? ` (${i.detail})` : ""}`));
      ctx.log(`== ${b.name}: ${bad.length} invariant(s) FAILED; nothing written`);
      continue;
    }
    if (out) {
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, `${b.name}.md`), md);
      writeFileSync(join(out, `${b.name}.json`), `${json({ ...(report.data as object), smoke, invariants: report.invariants, seconds: Number(seconds) })}\n`);
      ctx.log(`== ${b.name}: ${seconds} s; written to ${join(out, `${b.name}.md`)} and .json`);
    } else {
      ctx.log(`== ${b.name}: ${seconds} s; not written (--record writes bench/results/, --out DIR elsewhere)`);
    }
  }
  if (failed.length > 0) {
    process.stderr.write(`bench failed: invariants did not hold:\n  ${failed.join("\n  ")}\n`);
    process.exit(1);
  }
}

main().catch((e: unknown) => {
  if (e instanceof UsageError) {
    process.stderr.write(`bench: ${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
