import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The benchmark tables users read (the README's summary, docs/benchmarks.md,
 * bench/README.md) hold the figures `npm run bench -- NAME --record` wrote
 * to bench/results/NAME.md (and .json), and no others: a figure copied by hand
 * goes stale when a benchmark is re-recorded (bench/README.md once said
 * 2.87x at 16 gateways where the recording said otherwise).
 *
 * Every number of a table's body must be one of the figures its benchmark's
 * bench/results/NAME.md shows, as written or rounded to the digits the table
 * shows, in the unit the table uses (ms or s, B or KB or MiB, a share or a
 * percentage). A row's
 * benchmark is the one its cells name (`name`), or else the one the nearest
 * heading above the table names. A table of an earlier recording, kept as
 * history, says so on the line above it with `<!-- earlier recording -->`
 * and is not held to the results.
 */

const root = join(__dirname, "..", "..");
const RESULTS = join(root, "bench", "results");
const DOCS = ["README.md", "docs/benchmarks.md", "bench/README.md"];
const HISTORY = "<!-- earlier recording -->";

const benchmarks = readdirSync(RESULTS)
  .filter((f) => f.endsWith(".md"))
  .map((f) => f.slice(0, -".md".length));

/** Numbers in text: 1,935, 66.2, 0.39; not part of a word (hv1, p99, OpenFlow15) nor an address or a date. */
function numbersIn(text: string): { token: string; value: number; decimals: number }[] {
  const out: { token: string; value: number; decimals: number }[] = [];
  for (const m of text.matchAll(/(?<![\w.\-:/])\d+(?:,\d{3})*(?:\.\d+)*(?![\w.:/-]*\d)/g)) {
    const token = m[0];
    if ((token.match(/\./g) ?? []).length > 1) continue; // an address or a version
    const plain = token.replace(/,/g, "");
    out.push({ token, value: Number(plain), decimals: plain.includes(".") ? plain.split(".")[1].length : 0 });
  }
  return out;
}

/**
 * Every figure a benchmark recorded: the numbers of its .md, the tables and
 * text the bench wrote. Not the JSON's: it holds every raw measurement too
 * (thousands of them), among which nearly any figure would be found.
 */
function recorded(name: string): number[] {
  return numbersIn(readFileSync(join(RESULTS, `${name}.md`), "utf8")).map((n) => n.value);
}

/** The units a table may show a figure in: as recorded, ms as s or B as KB, s as ms, a share as a percentage, B as KiB or MiB. */
const SCALES = [1, 1e-3, 1e3, 100, 1 / 1024, 1 / (1024 * 1024)];

/** Whether a figure shown with `decimals` digits is some recorded value rounded so. */
function matches(shown: { value: number; decimals: number }, values: number[]): boolean {
  const half = 0.5 * 10 ** -shown.decimals + 1e-9;
  return values.some((v) => SCALES.some((s) => Math.abs(v * s - shown.value) <= half));
}

interface Row {
  file: string;
  line: number;
  cells: string[];
  benches: string[];
}

/** The body rows of every table in a markdown file that is not marked as an earlier recording, with the benchmark(s) each is about. */
function tableRows(file: string): Row[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const rows: Row[] = [];
  let heading: string[] = [];
  let inCode = false;
  const named = (text: string, quoted: boolean) =>
    benchmarks.filter((b) => (quoted ? text.includes(`\`${b}\``) : new RegExp(`(?<![\\w-])${b}(?![\\w-])`).test(text)));
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) inCode = !inCode;
    if (inCode) continue;
    if (/^#{1,4} /.test(line)) {
      const found = named(line, false);
      if (found.length > 0 || /^#{1,2} /.test(line)) heading = found;
      continue;
    }
    // A table starts with a header row followed by its separator.
    if (!line.startsWith("|") || !/^\|[\s-|]+\|$/.test(lines[i + 1] ?? "")) continue;
    const marked = lines.slice(Math.max(0, i - 3), i).some((l) => l.includes(HISTORY));
    let j = i + 2;
    for (; j < lines.length && lines[j].startsWith("|"); j++) {
      if (marked) continue;
      const cells = lines[j].split("|").slice(1, -1);
      const own = named(lines[j], true);
      rows.push({ file, line: j + 1, cells, benches: own.length > 0 ? own : heading });
    }
    i = j - 1;
  }
  return rows;
}

/** Each figure of a row that no recorded value of its benchmark(s) rounds to: `file:line: token`. */
function strayFigures(rows: Row[]): string[] {
  const cache = new Map<string, number[]>();
  const valuesOf = (b: string) => cache.get(b) ?? cache.set(b, recorded(b)).get(b)!;
  const stray: string[] = [];
  for (const row of rows) {
    if (row.benches.length === 0) {
      // The README has tables of other things; a benchmark page has none.
      if (row.file !== "README.md") stray.push(`${row.file}:${row.line}: a table row whose benchmark no heading or cell names`);
      continue;
    }
    const values = row.benches.flatMap(valuesOf);
    for (const cell of row.cells) {
      // Code in a cell (a command, a setting) and a goal ("goal < 50 ms") are not figures.
      for (const n of numbersIn(cell.replace(/`[^`]*`/g, "").replace(/goal[^)]*/g, "")))
        if (!matches(n, values)) stray.push(`${row.file}:${row.line}: ${n.token} (${row.benches.join(", ")})`);
    }
  }
  return stray;
}

describe("benchmark tables in the docs", () => {
  it("finds the recorded results and the tables", () => {
    expect(benchmarks.length).toBeGreaterThanOrEqual(10);
    for (const file of DOCS) expect(tableRows(file).length, file).toBeGreaterThan(0);
  });

  for (const file of DOCS) {
    it(`${file}: every figure of its benchmark tables is a recorded one`, () => {
      expect(strayFigures(tableRows(file))).toEqual([]);
    });
  }

  it("the README's summary names a benchmark in every row", () => {
    const summary = tableRows("README.md").filter((r) => r.cells.some((c) => benchmarks.some((b) => c.includes(`\`${b}\``))));
    expect(summary.length).toBeGreaterThanOrEqual(8);
  });

  it("a figure that was not recorded is found, and one rounded from a recording is not", () => {
    const values = recorded("scale-fanout");
    expect(matches({ value: 14.86, decimals: 2 }, values)).toBe(true);
    expect(matches({ value: 2.87, decimals: 2 }, values)).toBe(false);
    expect(matches({ value: 2.29, decimals: 2 }, values)).toBe(false);
    expect(matches({ value: 2.4, decimals: 1 }, values)).toBe(true); // 2,438 ms as seconds
    expect(numbersIn("hv1 p99 10.0.0.200 gw2: 1,935 ms, 66.2 ms, 5th").map((n) => n.token)).toEqual(["1,935", "66.2", "5"]);
  });
});
