import { spawnSync } from "node:child_process";
import type { TestProject } from "vitest/node";

/**
 * Brings the project's lab up once for the whole run (idempotent: a healthy
 * lab is reused), with its stack config for the repo's projects. The lab is
 * the one the project's environment names (OVSLB_LAB_INSTANCE in
 * vitest.config.mts), built by the lab's CLI in a process of its own: this
 * process may serve projects of both labs.
 */
export default function setup(project: TestProject) {
  const instance = project.config.env?.OVSLB_LAB_INSTANCE ?? process.env.OVSLB_LAB_INSTANCE ?? "";
  const up = spawnSync(process.execPath, ["dist/test/lab/cli.js", "up"], {
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, OVSLB_LAB_INSTANCE: instance },
  });
  if (up.status !== 0)
    throw new Error(
      `the lab${instance ? ` "${instance}"` : ""} did not come up (exit ${up.status ?? up.signal}); is dist/ built (npx tsc -p tsconfig.tools.json)?`,
    );
}
