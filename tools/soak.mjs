#!/usr/bin/env node
// `npm run test:soak -- [RUNS] [vitest file filters...]`: runs the integration
// suite RUNS times back to back (default 5) against the lab and reports each
// failure with its test, so a flaky test shows itself with its message
// instead of being retried to green. Exits 1 if any run failed.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const args = process.argv.slice(2);
const runs = /^[0-9]+$/.test(args[0] ?? "") ? Number(args.shift()) : 5;
if (runs < 1) throw new Error(`RUNS must be at least 1, not ${runs}`);
const dir = mkdtempSync(join(tmpdir(), "ovslb-soak-"));
const failures = [];
const lines = [];

try {
  for (let run = 1; run <= runs; run++) {
    const report = join(dir, `run-${run}.json`);
    const started = Date.now();
    const vitest = spawnSync(
      "npx",
      ["vitest", "run", "--project", "integration", "--configLoader", "runner", "--reporter=dot", "--reporter=json", `--outputFile.json=${report}`, ...args],
      { stdio: ["ignore", "inherit", "inherit"] },
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    let result;
    try {
      result = JSON.parse(readFileSync(report, "utf8"));
    } catch {
      failures.push({ run, test: "(the whole run)", message: `vitest exited ${vitest.status ?? vitest.signal} and wrote no report` });
      lines.push(`run ${run}: no report (vitest exited ${vitest.status ?? vitest.signal}) after ${seconds} s`);
      continue;
    }
    let failed = 0;
    for (const file of result.testResults) {
      const tests = file.assertionResults.filter((t) => t.status === "failed");
      for (const t of tests)
        failures.push({ run, test: `${file.name.replace(`${process.cwd()}/`, "")} > ${t.fullName}`, message: t.failureMessages.join("\n") });
      // A file that failed outside any test (a hook, an import).
      if (tests.length === 0 && file.status === "failed") failures.push({ run, test: file.name.replace(`${process.cwd()}/`, ""), message: file.message ?? "" });
      failed += tests.length || (file.status === "failed" ? 1 : 0);
    }
    lines.push(`run ${run}: ${result.numPassedTests} passed, ${failed} failed, in ${seconds} s`);
    console.log(`soak: ${lines.at(-1)}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(`\nsoak: ${runs - new Set(failures.map((f) => f.run)).size} of ${runs} runs green`);
for (const l of lines) console.log(`  ${l}`);
for (const f of failures) console.log(`\nFAILED in run ${f.run}: ${f.test}\n${f.message.split("\n").slice(0, 12).join("\n")}`);
process.exit(failures.length > 0 ? 1 : 0);
