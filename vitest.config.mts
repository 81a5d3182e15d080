import { accessSync, constants, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * Two projects:
 * - unit: test/unit, pure logic. No root, no lab, no dist/; files run in parallel.
 *   `npm run test:unit` runs it alone (CI runs it as an unprivileged user).
 * - integration: test/integration, against the lab. Its global setup brings
 *   the lab up (root); the files share one set of emulated hosts, so they
 *   run one after another.
 * `npm test` runs both.
 */

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
          // Lab tests share one set of emulated hosts: run files one after another.
          fileParallelism: false,
          pool: "forks",
          globalSetup: ["test/global-setup.ts"],
          // Lab tests trace thousands of tuples and carry real TCP: on a loaded 2-core machine a
          // 2,000-tuple trace takes 20-50 s, so a test gets 3 minutes (a test that hangs still ends).
          testTimeout: 180_000,
        },
      },
    ],
  },
});
