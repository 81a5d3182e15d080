#!/usr/bin/env node
// `npm test` after the build and type-check: the labs up, then the unit tests
// and the three lanes at once (tools/lanes.mjs). `--integration` leaves
// the unit tests out; other arguments are vitest file filters, passed to
// every lane. Exits non-zero if any lane failed, naming it.
import { LANES, labUp, runLanes } from "./lanes.mjs";

const integrationOnly = process.argv.includes("--integration");
const filters = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const started = Date.now();
labUp();
// The unit project rides with the own-hosts lane, the shortest: it is short and needs no host.
const lanes = LANES.map((lane) => (lane.name === "own-hosts" && !integrationOnly ? { ...lane, projects: ["unit", ...lane.projects] } : lane));
const results = await runLanes(lanes, () => filters);
const seconds = ((Date.now() - started) / 1000).toFixed(0);
for (const r of results) console.log(`lane ${r.lane}: ${r.status === 0 ? "passed" : `FAILED (exit ${r.status})`}`);
console.log(`tests took ${seconds} s`);
process.exit(results.some((r) => r.status !== 0) ? 1 : 0);
