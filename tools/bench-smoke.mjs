#!/usr/bin/env node
// CI's benchmark smoke (`node tools/bench-smoke.mjs`, after `npm run build:tools`):
// every benchmark small, in two processes at once, one per lab, as npm
// test's lanes are: the main lab runs the benchmarks SECOND_LAB does not
// list, the second lab ("b") runs those. Most of a smoke's time is spent
// waiting (liveness timers, drains, traffic), so the two overlap well on
// two cores. Each line is prefixed with its lab (runTagged, as the lanes'
// are); exits non-zero if either run failed, naming it.
import { spawnSync } from "node:child_process";
import { runTagged } from "./lanes.mjs";

/** The second lab's share: about half of the smoke's time, the OVN layer's benchmarks among them (lab b's tests run OVN too). */
const SECOND_LAB = [
  "dsr-gre",
  "distributor-failover",
  "distributor-failover-ipv6",
  "scale-planning",
  "fleet-preview",
  "real-networks",
  "mixed-versions",
  "ovn-incident",
  "ovn-peer",
];

const RUN = "dist/bench/run.js";
const listed = spawnSync(process.execPath, [RUN, "--list"], { encoding: "utf8" });
if (listed.status !== 0) throw new Error(`${RUN} --list failed: ${listed.stderr}`);
const all = listed.stdout
  .split("\n")
  .filter(Boolean)
  .map((line) => line.slice(0, line.indexOf(":")));
const unknown = SECOND_LAB.filter((n) => !all.includes(n));
if (unknown.length > 0) throw new Error(`tools/bench-smoke.mjs: no benchmark named ${unknown.join(", ")}`);

const runs = [
  { lab: "", names: all.filter((n) => !SECOND_LAB.includes(n)) },
  { lab: "b", names: SECOND_LAB },
];
/** A failed run's last stderr lines (its benchmark's progress, the invariants that failed or the stack) are printed again at the end, where a log's tail shows them. */
const TAIL_LINES = 40;
const started = Date.now();
const results = await Promise.all(
  runs.map(({ lab, names }) => {
    const tail = [];
    const keep = (line) => tail.push(line) > TAIL_LINES && tail.shift();
    return runTagged(`bench${lab ? `-${lab}` : ""}`, process.execPath, [RUN, "--smoke", ...names], { OVSLB_LAB_INSTANCE: lab }, keep).then((status) => ({
      lab: lab || "main",
      status,
      tail,
    }));
  }),
);
for (const r of results.filter((r) => r.status !== 0)) {
  console.log(`bench smoke on the ${r.lab} lab failed; the last ${r.tail.length} lines of its stderr:`);
  for (const line of r.tail) console.log(`  ${line}`);
}
for (const r of results) console.log(`bench smoke on the ${r.lab} lab: ${r.status === 0 ? "passed" : `FAILED (exit ${r.status})`}`);
console.log(`bench smoke took ${((Date.now() - started) / 1000).toFixed(0)} s`);
process.exit(results.some((r) => r.status !== 0) ? 1 : 0);
