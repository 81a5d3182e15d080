import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";

/**
 * What `npm pack` ships: the library (dist/index, dist/provider,
 * dist/components, the schemas) and never the lab, the benchmarks, the tests
 * or the examples, although tsconfig.tools.json compiles the lab, bench and
 * examples into dist/ beside the library.
 *
 * Asked of npm itself (`npm pack --dry-run --json`), twice: on a copy of
 * package.json over a tree holding every file a full build would make (so
 * the rule is tested whether or not dist/ is built here), and on this
 * checkout as it is.
 */

const repo = resolve(__dirname, "..", "..");
const SKIP = new Set(["node_modules", ".git", "dist"]);

/** Paths that must never ship. */
const FORBIDDEN = [/^(dist\/)?(test|tests|bench|examples)(\/|$)/, /(^|\/)lab([-_./]|$)/i, /(^|\/)Pulumi(\.[\w-]+)?\.yaml$/, /(^|\/)\.ci(\/|$)/];
const forbidden = (files: string[]) => files.filter((f) => FORBIDDEN.some((re) => re.test(f)));

function sources(dir = repo): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? sources(path) : [relative(repo, path)];
  });
}

/** What tsc would write for a source: foo.ts -> dist/foo.js, .js.map, .d.ts; JSON it imports -> dist/x.json. */
function compiled(source: string): string[] {
  if (source.endsWith(".d.ts")) return [];
  if (source.endsWith(".ts")) {
    const base = `dist/${source.slice(0, -3)}`;
    return [`${base}.js`, `${base}.js.map`, `${base}.d.ts`, `${base}.d.ts.map`];
  }
  if (source.startsWith("schema/") && source.endsWith(".json")) return [`dist/${source}`];
  return [];
}

let scratch: string;

/** `npm pack --dry-run --json` in dir: the paths it would put in the tarball. */
function packList(dir: string): string[] {
  const npmCli = process.env.npm_execpath;
  const [cmd, args] = npmCli && /npm-cli\.js$/.test(npmCli) ? [process.execPath, [npmCli]] : ["npm", []];
  const out = execFileSync(cmd, [...args, "pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: dir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    // npm writes its cache and logs under the cache dir: one of our own, so neither HOME nor root is needed.
    env: {
      ...process.env,
      npm_config_cache: join(scratch, "npm-cache"),
      npm_config_update_notifier: "false",
      npm_config_fund: "false",
      npm_config_audit: "false",
      npm_config_loglevel: "error",
    },
  });
  const [result] = JSON.parse(out) as { files: { path: string }[] }[];
  return result.files.map((f) => f.path).sort();
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "ovslb-pack-"));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe("npm pack", () => {
  it("ships the library and no lab, bench, test or example file, whatever has been built", () => {
    const tree = join(scratch, "tree");
    const all = sources();
    for (const file of [...all, ...all.flatMap(compiled)]) {
      mkdirSync(join(tree, dirname(file)), { recursive: true });
      writeFileSync(join(tree, file), "");
    }
    copyFileSync(join(repo, "package.json"), join(tree, "package.json"));
    // The tree really holds what must not ship, so the check below can fail.
    expect(all.filter((f) => f.startsWith("test/lab/")).length).toBeGreaterThan(0);
    expect(all.some((f) => f.startsWith("bench/")) && all.some((f) => f.startsWith("examples/"))).toBe(true);

    const shipped = packList(tree);
    expect(forbidden(shipped)).toEqual([]);
    // ...and the library is all there: entry points, every resource, the schemas.
    const pkg = require(join(repo, "package.json"));
    for (const f of [pkg.main, pkg.types, "dist/provider/handlers.js", "dist/provider/dynamic.js", "dist/schema/common.json", "schema/common.json"]) {
      expect(shipped).toContain(f.replace(/^\.\//, ""));
    }
    const library = all.filter((f) => /^(provider|components)\/.*\.ts$/.test(f) && !f.endsWith(".d.ts")).map((f) => `dist/${f.slice(0, -3)}.js`);
    expect(library.filter((f) => !shipped.includes(f))).toEqual([]);
  });

  it("ships no lab, bench, test or example file from this checkout as it is", () => {
    expect(forbidden(packList(repo))).toEqual([]);
  });
});
