import { accessSync, constants, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * Four projects:
 * - unit: test/unit, pure logic. No root, no lab, no dist/; files run in parallel.
 *   `npm run test:unit` runs it alone (CI runs it as an unprivileged user).
 * - integration and integration-b: test/integration files that use the
 *   lab's shared hosts (gateways, hypervisors, distributors, OVN central, the
 *   client): two lanes, each running its files one after another, under the
 *   lab lock (below).
 * - integration-own-hosts: files that bring up hosts of their own (fault
 *   hosts, sandboxes) and only read the lab's: one after another too, in a
 *   third lane (tools/test.mjs runs the three lanes at once).
 * The integration projects bring the lab up in their global setup. A new
 * file joins the first shared lane unless it is listed in OWN_HOSTS or LAB_B.
 */
const OWN_HOSTS = [
  "faults-concurrent",
  "faults-hung",
  "faults-partial",
  "faults-restart",
  "faults-ssh-cut",
  "harness",
  "harness-engine",
  "least-privilege",
  "stack-config",
  "reach-update",
  "openflow-bridge",
  "ovsdb-client",
  "ovsdb-schemas",
  "southbound-schema",
  "ssh-pool",
].map((name) => `test/integration/${name}.test.ts`);

/**
 * The shared lab's files run in two lanes at once (integration and
 * integration-b), each file holding the lab lock (test/support/lab-share.ts):
 * shared, except the files of WHOLE_LAB, which disrupt the shared hosts for
 * everyone or assert on a whole shared host, and run alone. Shares of the lab that one file at a time may use
 * (the GRE set-up on hv1, the distributor, OVN central) have locks of their
 * own (lockLab). LAB_B is the second lane's share, chosen so that both take
 * about as long; a new file joins the first lane.
 */
const WHOLE_LAB = [
  // They restart a gateway's ovs-vswitchd.
  "drift-loop",
  "deferred-nat-scoped",
  // They assert on a whole shared host: every flow and group of gw1's bridge unchanged, one SSH connection to the host.
  "deferred-nat-ovn",
  "ssh",
].map((name) => `test/integration/${name}.test.ts`);
const LAB_B = [
  "drift-loop",
  "distributor-ha",
  "distributor",
  "state-compat",
  "deferred-nat-second-chance",
  "deferred-nat-health-ovn",
  "fuzz-ovs",
  "health-check",
  "lab-gre",
  "secrets",
  "dsr-hypervisor-flows",
  "ssh",
  "deferred-nat-ovn",
].map((name) => `test/integration/${name}.test.ts`);

/**
 * Vite's cache (vitest keeps its results there) is node_modules/.vite. On a
 * clone whose node_modules belongs to someone else (CI installs as root and
 * runs the unit project as an unprivileged user), use a directory of this
 * user's own instead.
 */
function cacheDir(): string {
  const local = "node_modules/.vite";
  const probe = existsSync(local) ? local : "node_modules";
  try {
    accessSync(probe, constants.W_OK);
    return local;
  } catch {
    return join(tmpdir(), `ovslb-vite-cache-${process.getuid?.() ?? "user"}`);
  }
}

/** How a lab lane runs: its files one after another, each in its own process. */
const LAB_LANE = {
  fileParallelism: false,
  pool: "forks",
  globalSetup: ["test/global-setup.ts"],
  // The slowest lab test takes about 20 s here; a test that hangs still ends, in 2 minutes.
  testTimeout: 120_000,
} as const;

export default defineConfig({
  cacheDir: cacheDir(),
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          fileParallelism: true,
          testTimeout: 20_000,
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          exclude: [...OWN_HOSTS, ...LAB_B],
          setupFiles: ["test/support/lab-share.ts"],
          provide: { wholeLab: WHOLE_LAB },
          ...LAB_LANE,
        },
      },
      {
        extends: true,
        test: {
          name: "integration-b",
          include: LAB_B,
          setupFiles: ["test/support/lab-share.ts"],
          provide: { wholeLab: WHOLE_LAB },
          ...LAB_LANE,
        },
      },
      {
        extends: true,
        test: {
          name: "integration-own-hosts",
          include: OWN_HOSTS,
          ...LAB_LANE,
        },
      },
    ],
  },
});
