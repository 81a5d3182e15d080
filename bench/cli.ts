import { resolve } from "node:path";

/**
 * The bench command line, pure (bench/run.ts runs it; test/unit/bench.test.ts
 * pins it): `npm run bench -- [NAME ...] [--smoke] [--record | --out DIR] [--list]`.
 * Results are written only when asked: `--record` to the tracked
 * bench/results/, `--out DIR` elsewhere; a plain run writes nothing.
 */

export const USAGE = "usage: npm run bench -- [NAME ...] [--smoke] [--record | --out DIR] [--list]";

/** A bad command line: reported without a stack, exit 2. */
export class UsageError extends Error {}

export interface BenchArgs {
  /** Benchmarks to run; empty: all. */
  names: string[];
  smoke: boolean;
  list: boolean;
  /** Where to write NAME.md and NAME.json; undefined: nowhere. */
  out?: string;
}

/** `results` is the tracked results directory (bench/results), `known` the benchmarks' names. */
export function parseArgs(argv: readonly string[], results: string, known: readonly string[]): BenchArgs {
  const names: string[] = [];
  let smoke = false;
  let record = false;
  let list = false;
  let out: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--out") {
      const dir = argv[++i];
      if (!dir || dir.startsWith("--")) throw new UsageError(`--out needs a directory\n${USAGE}`);
      out = resolve(dir);
    } else if (a === "--record") record = true;
    else if (a === "--smoke") smoke = true;
    else if (a === "--list") list = true;
    else if (a.startsWith("-")) throw new UsageError(`unknown option ${a}\n${USAGE}`);
    else names.push(a);
  }
  if (record && out) throw new UsageError(`give --record (writes ${results}) or --out DIR, not both`);
  if (record && smoke) throw new UsageError("--smoke runs are small and not results: they are never recorded (use --out DIR to keep one)");
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length > 0) throw new UsageError(`unknown benchmark(s): ${unknown.join(", ")} (known: ${known.join(", ")})`);
  return { names, smoke, list, out: record ? results : out };
}
