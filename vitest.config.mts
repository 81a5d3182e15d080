import { accessSync, constants, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * Five projects:
 * - unit: test/unit, pure logic. No root, no lab, no dist/; files run in parallel.
 *   `npm run test:unit` runs it alone (CI runs it as an unprivileged user).
 * - integration: test/integration files that use the lab's shared hosts
 *   (gateways, hypervisors, distributors, OVN central, the client): they run
 *   one after another.
 * - integration-own-hosts: files that bring up hosts of their own (fault
 *   hosts, sandboxes) and only read the lab's: one after another too, but
 *   beside the other lanes (tools/test.mjs runs the lanes at once).
 * - integration-b: files of the shared hosts that run on the second lab ("b").
 * - integration-newer: an engine-level subset run again, on the lab of the
 *   newer versions ("c"; NEWER below), by `npm run test:newer`.
 * The integration projects bring their lab up in their global setup. A new
 * file joins the shared lane unless it is listed in OWN_HOSTS.
 */
const OWN_HOSTS = [
  "doctor",
  "faults-concurrent",
  "faults-hung",
  "faults-partial",
  "faults-restart",
  "faults-ssh-cut",
  "harness",
  "harness-engine",
  "hosts",
  "least-privilege",
  "mixed-versions",
  "ovs-versions-newer",
  "stack-config",
  "reach-update",
  "openflow-bridge",
  "ovsdb-client",
  "ovsdb-schemas",
  "southbound-schema",
  "ssh-pool",
].map((name) => `test/integration/${name}.test.ts`);

/** Files of the shared hosts that run on the second lab (the main lab's lane takes the rest). */
const LAB_B = [
  "drift-loop",
  "harness-components",
  "deferred-nat-gre",
  "distributor-ha",
  "deferred-nat-second-chance",
  "deferred-nat-health-ovn",
  "fuzz-ovs",
  "dsr-gre-l3dsr",
  "secrets",
  "deferred-nat-selection",
  "lab-gre",
  "deferred-nat-traffic",
  "udp-fragments",
  // Balanced by the lanes' times (npm test on 2 cores: the main lane 537 s, this one 401 s before these two moved).
  "distributor",
  "distributor-ipv6",
  // The OVN chassis (test/lab/ovn-chassis.ts), brought up by the tests themselves.
  "ovn-chassis",
  "deferred-nat-ovn-stock",
  "ovn-incident",
  "ovn-incident-ovslb",
].map((name) => `test/integration/${name}.test.ts`);

/**
 * The engine-level subset that runs again on the lab of the newer versions
 * ("c": its hosts run Debian 13's Open vSwitch 3.5 and OVN 25.03, or with
 * OVSLB_LAB_RELEASE=noble Ubuntu 24.04's 3.3 and 24.03, from the roots
 * tools/distro-root.sh builds): apply, selection, traffic, DSR, BFD, OVN
 * health checks, the distributor, the drift loop, and what a stock OVN of that
 * release does with the ovn rows (its own chassis). `npm run test:newer`.
 */
const NEWER = [
  "deferred-nat-apply",
  "deferred-nat-selection",
  "deferred-nat-traffic",
  "dsr-hypervisor-flows",
  "dsr-gre-l3dsr",
  "deferred-nat-bfd",
  "deferred-nat-health-ovn",
  "distributor",
  "drift-loop",
  // What a stock OVN of that release does with the ovn rows, with its own ovn-controllers (lab c's roots carry ovn-host).
  "ovn-chassis",
  "deferred-nat-ovn-stock",
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

/** How a lab lane runs: its files one after another, in one process (see `isolate` below). */
const LAB_LANE = {
  fileParallelism: false,
  pool: "forks",
  globalSetup: ["test/global-setup.ts"],
  setupFiles: ["test/lab-file-setup.ts"],
  // The slowest lab test takes about 20 s here; a test that hangs still ends, in 2 minutes.
  testTimeout: 120_000,
} as const;

export default defineConfig({
  cacheDir: cacheDir(),
  test: {
    testTimeout: 60_000,
    // A worker runs file after file with the modules it already loaded
    // (@pulumi/pulumi, ssh2, ajv, the provider): loading them anew for each
    // file was about half of every lane's CPU time (npm test: unit project
    // 92 s -> 28 s wall alone). Tests therefore keep no state at module level
    // that another file could see: each makes its own pools, stacks and
    // temporary directories and restores any environment it changes.
    isolate: false,
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
          ...LAB_LANE,
        },
      },
      {
        extends: true,
        test: {
          name: "integration-b",
          include: LAB_B,
          env: { OVSLB_LAB_INSTANCE: "b" },
          ...LAB_LANE,
        },
      },
      {
        extends: true,
        test: {
          name: "integration-newer",
          include: NEWER,
          env: { OVSLB_LAB_INSTANCE: "c" },
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
