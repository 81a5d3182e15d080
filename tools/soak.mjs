#!/usr/bin/env node
// `npm run test:soak -- [RUNS] [vitest file filters...]`: runs the integration
// suite RUNS times back to back (default 5), its two lanes at once as `npm
// test` does, and reports each failure with its test, so a flaky test shows
// itself with its message instead of being retried to green. Exits 1 if any
// run failed.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LANES, labUp, runLanes } from "./lanes.mjs";

const args = process.argv.slice(2);
const runs = /^[0-9]+$/.test(args[0] ?? "") ? Number(args.shift()) : 5;
if (runs < 1) throw new Error(`RUNS must be at least 1, not ${runs}`);
const dir = mkdtempSync(join(tmpdir(), "ovslb-soak-"));
const failures = [];
const lines = [];

try {
  labUp();
  for (let run = 1; run <= runs; run++) {
    const report = (lane) => join(dir, `run-${run}-${lane.name}.json`);
    const started = Date.now();
    const exits = await runLanes(LANES, (lane) => ["--reporter=dot", "--reporter=json", `--outputFile.json=${report(lane)}`, ...args]);
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    let passed = 0;
    let failed = 0;
    for (const [i, lane] of LANES.entries()) {
      let result;
      try {
        result = JSON.parse(readFileSync(report(lane), "utf8"));
      } catch {
        failures.push({ run, test: `(lane ${lane.name})`, message: `vitest exited ${exits[i].status} and wrote no report` });
        failed++;
        continue;
      }
      passed += result.numPassedTests;
      for (const file of result.testResults) {
        const name = file.name.replace(`${process.cwd()}/`, "");
        const tests = file.assertionResults.filter((t) => t.status === "failed");
        for (const t of tests) failures.push({ run, test: `${name} > ${t.fullName}`, message: t.failureMessages.join("\n") });
        // A file that failed outside any test (a hook, an import).
        if (tests.length === 0 && file.status === "failed") failures.push({ run, test: name, message: file.message ?? "" });
        failed += tests.length || (file.status === "failed" ? 1 : 0);
      }
    }
    lines.push(`run ${run}: ${passed} passed, ${failed} failed, in ${seconds} s`);
    console.log(`soak: ${lines.at(-1)}`);
  }
} finally {
  // A failure's whole message (its diff included) stays in its run's report.
  if (failures.length === 0) rmSync(dir, { recursive: true, force: true });
}

console.log(`\nsoak: ${runs - new Set(failures.map((f) => f.run)).size} of ${runs} runs green`);
for (const l of lines) console.log(`  ${l}`);
for (const f of failures) console.log(`\nFAILED in run ${f.run}: ${f.test}\n${f.message.split("\n").slice(0, 12).join("\n")}`);
if (failures.length > 0) console.log(`\nthe runs' reports, each failure's whole message: ${dir}`);
process.exit(failures.length > 0 ? 1 : 0);
