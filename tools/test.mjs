#!/usr/bin/env node
// `npm test` after the build and type-check: the labs up, then the unit tests
// and the three lanes at once (tools/lanes.mjs). `--integration` leaves
// the unit tests out; `--newer` runs the newer versions' lane alone
// (`npm run test:newer`); other arguments are vitest file filters, passed to
// every lane. Exits non-zero if any lane failed, naming it.
import { LANES, NEWER_LANE, labUp, runLanes } from "./lanes.mjs";

const newer = process.argv.includes("--newer");
const integrationOnly = newer || process.argv.includes("--integration");
const filters = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const started = Date.now();
// The unit project rides with the own-hosts lane, the shortest: it is short and needs no host.
const lanes = newer
  ? [NEWER_LANE]
  : LANES.map((lane) => (lane.name === "own-hosts" && !integrationOnly ? { ...lane, projects: ["unit", ...lane.projects] } : lane));
labUp(lanes);
const results = await runLanes(lanes, () => filters);
const seconds = ((Date.now() - started) / 1000).toFixed(0);
for (const r of results) console.log(`lane ${r.lane}: ${r.status === 0 ? "passed" : `FAILED (exit ${r.status})`}`);
console.log(`tests took ${seconds} s`);
process.exit(results.some((r) => r.status !== 0) ? 1 : 0);
