// The test lanes: vitest processes that run at the same time. The lab's
// shared hosts carry one lane; the files that bring up hosts of their own
// (vitest.config.mts, OWN_HOSTS) and the unit tests carry the other. Each
// lane runs its files one after another; the lanes share nothing but the
// machine's cores. (The lab's files cannot share it: nearly all of them
// plan flows for the same backend VMs on the same hypervisors, which one
// owner at a time may hold.)
import { spawn, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** Node 22.1+ keeps the bytecode of what it compiled there (ignored by older Nodes): every harness step starts a program and a plugin that load @pulumi/pulumi again. */
const compileCache = process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), "ovslb-node-compile-cache");

export const LANES = [
  { name: "lab", projects: ["integration"] },
  { name: "own-hosts", projects: ["integration-own-hosts"] },
];

/** Brings the lab up (idempotent) before the lanes start, so their global setups find it up rather than race to build it. */
export function labUp() {
  const up = spawnSync(process.execPath, ["dist/test/lab/cli.js", "up"], { stdio: "inherit" });
  if (up.status !== 0) throw new Error(`the lab did not come up (exit ${up.status ?? up.signal})`);
}

/**
 * Runs `vitest run` once per lane at the same time, each line of its output
 * prefixed with the lane's name; resolves with each lane's exit status.
 * `extraArgs(lane)` adds arguments (reporters, file filters) per lane.
 */
export function runLanes(lanes, extraArgs = () => []) {
  return Promise.all(
    lanes.map(
      (lane) =>
        new Promise((resolve) => {
          const args = [
            "vitest",
            "run",
            "--configLoader",
            "runner",
            "--passWithNoTests",
            ...lane.projects.flatMap((p) => ["--project", p]),
            ...extraArgs(lane),
          ];
          const child = spawn("npx", args, {
            stdio: ["ignore", "pipe", "pipe"],
            env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? "1", NODE_COMPILE_CACHE: compileCache },
          });
          const tag = `[${lane.name}] `;
          createInterface({ input: child.stdout }).on("line", (line) => process.stdout.write(`${tag}${line}\n`));
          createInterface({ input: child.stderr }).on("line", (line) => process.stderr.write(`${tag}${line}\n`));
          child.on("close", (code, signal) => resolve({ lane: lane.name, status: code ?? (signal ? 128 : 1) }));
        }),
    ),
  );
}
