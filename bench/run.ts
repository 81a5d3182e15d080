import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Benchmark, BenchContext } from "./common";
import { deferredNatBenchmark } from "./deferred-nat";

/**
 * `npm run bench [-- NAME ...] [-- --out DIR]`: runs the benchmarks (all, or
 * those named) against the lab, prints each one's tables and writes them to
 * DIR/NAME.md and DIR/NAME.json (default bench/results/). Add a benchmark by
 * listing it here.
 */
const BENCHMARKS: readonly Benchmark[] = [deferredNatBenchmark];

function parseArgs(argv: readonly string[]): { names: string[]; out: string } {
  const names: string[] = [];
  // Compiled to dist/bench/run.js: results go next to the sources.
  let out = resolve(__dirname, "..", "..", "bench", "results");
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") out = resolve(argv[++i] ?? "");
    else if (argv[i] === "--list") {
      for (const b of BENCHMARKS) console.log(`${b.name}: ${b.description}`);
      process.exit(0);
    } else names.push(argv[i]);
  }
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length > 0) throw new Error(`unknown benchmark(s): ${unknown.join(", ")} (known: ${BENCHMARKS.map((b) => b.name).join(", ")})`);
  return { names, out };
}

const json = (value: unknown) => JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `0x${v.toString(16)}` : v), 2);

async function main() {
  const { names, out } = parseArgs(process.argv.slice(2));
  const selected = BENCHMARKS.filter((b) => names.length === 0 || names.includes(b.name));
  const ctx: BenchContext = { log: (line) => process.stderr.write(`${line}\n`) };
  mkdirSync(out, { recursive: true });
  for (const b of selected) {
    const start = Date.now();
    ctx.log(`== ${b.name}: ${b.description}`);
    const report = await b.run(ctx);
    const seconds = ((Date.now() - start) / 1000).toFixed(0);
    const command = `npm run bench -- ${b.name}`;
    const md = `<!-- written by \`${command}\`; do not edit by hand -->\n\n${report.markdown}\n\nRun took ${seconds} s. Rerun: \`${command}\` (the lab must be up: \`npm run lab -- up\`).\n`;
    writeFileSync(join(out, `${b.name}.md`), md);
    writeFileSync(join(out, `${b.name}.json`), `${json({ ...(report.data as object), seconds: Number(seconds) })}\n`);
    process.stdout.write(`${md}\n`);
    ctx.log(`== ${b.name}: ${seconds} s; written to ${join(out, `${b.name}.md`)} and .json`);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
