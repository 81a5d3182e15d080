// The test lanes: vitest processes that run at the same time, each running
// its files one after another. Two labs of the same topology stand side by
// side (test/lab/topology.ts, OVSLB_LAB_INSTANCE): the main lab's shared
// hosts carry one lane and the second lab's ("b") another; the files that
// bring up hosts of their own (vitest.config.mts, OWN_HOSTS) and the unit
// tests carry the third. Within one lab the files cannot share the hosts:
// nearly all of them plan flows for the same backend VMs on the same
// hypervisors, which one owner at a time may hold.
import { spawn, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** Node 22.1+ keeps the bytecode of what it compiled there (ignored by older Nodes): every harness step starts a program and a plugin that load @pulumi/pulumi again. */
const compileCache = process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), "ovslb-node-compile-cache");

export const LANES = [
  { name: "lab", projects: ["integration"], lab: "" },
  { name: "lab-b", projects: ["integration-b"], lab: "b" },
  { name: "own-hosts", projects: ["integration-own-hosts"], lab: "" },
];

/** The engine-level subset again, on the lab of the newer versions (Debian 13's Open vSwitch and OVN): `npm run test:newer`. */
export const NEWER_LANE = { name: "newer", projects: ["integration-newer"], lab: "c" };

/** Brings the lanes' labs up (idempotent) before the lanes start, so their global setups find them up rather than race to build them. */
export function labUp(lanes = LANES) {
  for (const instance of new Set(lanes.map((l) => l.lab))) {
    const up = spawnSync(process.execPath, ["dist/test/lab/cli.js", "up"], { stdio: "inherit", env: { ...process.env, OVSLB_LAB_INSTANCE: instance } });
    if (up.status !== 0) throw new Error(`the lab${instance ? ` "${instance}"` : ""} did not come up (exit ${up.status ?? up.signal})`);
  }
}

/**
 * Runs `vitest run` once per lane at the same time, each line of its output
 * prefixed with the lane's name; resolves with each lane's exit status.
 * `extraArgs(lane)` adds arguments (reporters, file filters) per lane.
 */
export function runLanes(lanes, extraArgs = () => []) {
  return Promise.all(
    lanes.map((lane) =>
      runTagged(
        lane.name,
        "npx",
        ["vitest", "run", "--configLoader", "runner", "--passWithNoTests", ...lane.projects.flatMap((p) => ["--project", p]), ...extraArgs(lane)],
        { FORCE_COLOR: process.env.FORCE_COLOR ?? "1", NODE_COMPILE_CACHE: compileCache, OVSLB_LAB_INSTANCE: lane.lab },
      ).then((status) => ({ lane: lane.name, status })),
    ),
  );
}

/**
 * Runs one command with `env` over this process's, each line of its output
 * prefixed with `[name]`; resolves with its exit status. `onStderrLine` also
 * sees each line of its stderr, untagged.
 */
export function runTagged(name, command, args, env = {}, onStderrLine = () => undefined) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    const tag = `[${name}] `;
    createInterface({ input: child.stdout }).on("line", (line) => process.stdout.write(`${tag}${line}\n`));
    createInterface({ input: child.stderr }).on("line", (line) => {
      process.stderr.write(`${tag}${line}\n`);
      onStderrLine(line);
    });
    child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}
