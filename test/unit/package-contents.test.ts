import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";

/**
 * What `npm pack` ships: the library (dist/index, dist/provider,
 * dist/components, the schemas once, as dist/schema/: what the provider reads
 * at run time), README, LICENSE and CHANGELOG, and never the lab, the
 * benchmarks, the tests or the examples, although tsconfig.tools.json
 * compiles the lab, bench and examples into dist/ beside the library. No
 * source map either: a map points at TypeScript sources that do not ship
 * (tsconfig.json emits none; a stale one from an older build stays out).
 *
 * Asked of npm itself (`npm pack --dry-run --json`), twice: on a copy of
 * package.json over a tree holding every file a full build would make (so
 * the rule is tested whether or not dist/ is built here), and on this
 * checkout as it is.
 */

const repo = resolve(__dirname, "..", "..");
const SKIP = new Set(["node_modules", ".git", "dist"]);

/** Paths that must never ship. */
const FORBIDDEN = [
  /^(dist\/)?(test|tests|bench|examples)(\/|$)/,
  /(^|\/)lab([-_./]|$)/i,
  /(^|\/)Pulumi(\.[\w-]+)?\.yaml$/,
  /(^|\/)\.ci(\/|$)/,
  // Maps point at sources that do not ship; the schemas ship once, as dist/schema/.
  /\.map$/,
  /^schema\//,
  // prepare's incremental build info.
  /\.tsbuildinfo$/,
];
const forbidden = (files: string[]) => files.filter((f) => FORBIDDEN.some((re) => re.test(f)));

function sources(dir = repo): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? sources(path) : [relative(repo, path)];
  });
}

/** What a build, this one or an older one, could leave for a source: foo.ts -> dist/foo.js, .js.map, .d.ts, .d.ts.map; JSON it imports -> dist/x.json; the validators schema/build-validators.js writes; the provider's text tools/build-provider-text.js writes. */
function compiled(source: string): string[] {
  if (source.endsWith(".d.ts")) return [];
  if (source.endsWith(".ts")) {
    const base = `dist/${source.slice(0, -3)}`;
    return [`${base}.js`, `${base}.js.map`, `${base}.d.ts`, `${base}.d.ts.map`];
  }
  if (source.startsWith("schema/") && source.endsWith(".json")) return [`dist/${source}`];
  if (source === "schema/build-validators.js") return ["dist/schema/validators.js"];
  if (source === "tools/build-provider-text.js") return ["dist/provider/provider-text.json"];
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
    for (const file of [...all, ...all.flatMap(compiled), "dist/.tsbuildinfo"]) {
      mkdirSync(join(tree, dirname(file)), { recursive: true });
      writeFileSync(join(tree, file), "");
    }
    copyFileSync(join(repo, "package.json"), join(tree, "package.json"));
    // The tree really holds what must not ship, so the check below can fail.
    expect(all.filter((f) => f.startsWith("test/lab/")).length).toBeGreaterThan(0);
    expect(all.some((f) => f.startsWith("bench/")) && all.some((f) => f.startsWith("examples/"))).toBe(true);

    // ...and stale maps and the schema sources, which must not ship either.
    expect(all.flatMap(compiled).some((f) => f.endsWith(".js.map")) && all.some((f) => /^schema\/.*\.json$/.test(f))).toBe(true);

    const shipped = packList(tree);
    expect(forbidden(shipped)).toEqual([]);
    // ...and the library is all there: entry points, every resource, the schemas, the license and the changelog.
    const pkg = require(join(repo, "package.json"));
    for (const f of [
      pkg.main,
      pkg.types,
      "dist/provider/handlers.js",
      "dist/provider/dynamic.js",
      "dist/schema/validators.js",
      "dist/provider/provider-text.json",
      "README.md",
      "LICENSE",
      "CHANGELOG.md",
      "package.json",
    ]) {
      expect(shipped).toContain(f.replace(/^\.\//, ""));
    }
    const library = all.filter((f) => /^(provider|components)\/.*\.ts$/.test(f) && !f.endsWith(".d.ts")).map((f) => `dist/${f.slice(0, -3)}.js`);
    expect(library.filter((f) => !shipped.includes(f))).toEqual([]);
    // Every schema exactly once, where the compiled provider requires it (dist/provider/... -> ../schema/x.json); the provider's text.
    const schemas = all.filter((f) => /^schema\/.+\.json$/.test(f)).map((f) => `dist/${f}`);
    expect(schemas.length).toBeGreaterThan(1);
    expect(shipped.filter((f) => f.endsWith(".json") && f !== "package.json").sort()).toEqual([...schemas, "dist/provider/provider-text.json"].sort());
  });

  it("ships no lab, bench, test, example, map or second schema file from this checkout as it is", () => {
    const shipped = packList(repo);
    expect(forbidden(shipped)).toEqual([]);
    for (const f of ["LICENSE", "CHANGELOG.md", "README.md"]) expect(shipped).toContain(f);
  });

  it("ships compiled code that names no source map (a map would point at sources that do not ship)", () => {
    // tsc writes a sourceMappingURL comment into each .js when tsconfig.json asks for maps: this checkout's dist, if built.
    const js = packList(repo).filter((f) => f.endsWith(".js"));
    const naming = js.filter((f) => existsSync(join(repo, f)) && /^\/\/# sourceMappingURL=/m.test(readFileSync(join(repo, f), "utf8")));
    expect(naming).toEqual([]);
    const tsconfig = JSON.parse(readFileSync(join(repo, "tsconfig.json"), "utf8"));
    expect([tsconfig.compilerOptions.sourceMap, tsconfig.compilerOptions.declarationMap, tsconfig.compilerOptions.inlineSourceMap]).toEqual([
      false,
      undefined,
      undefined,
    ]);
  });
});

describe("package metadata", () => {
  const pkg = require(join(repo, "package.json"));

  it("is at the version of the changelog's newest release", () => {
    const changelog = readFileSync(join(repo, "CHANGELOG.md"), "utf8");
    const newest = /^## \[(\d+\.\d+\.\d+[^\]]*)\]/m.exec(changelog.replace(/^## \[Unreleased\].*$/im, ""));
    expect(newest?.[1]).toBe(pkg.version);
  });

  it("carries the Apache-2.0 text it names", () => {
    expect(pkg.license).toBe("Apache-2.0");
    const license = readFileSync(join(repo, "LICENSE"), "utf8");
    expect(license).toMatch(/^Apache License\s+Version 2\.0, January 2004/);
    expect(license).toMatch(/END OF TERMS AND CONDITIONS\s*$/);
  });

  it("states how it is found and what it needs", () => {
    expect(pkg.keywords).toEqual(expect.arrayContaining(["pulumi", "kind/component", "category/network"]));
    for (const field of ["repository", "homepage", "bugs"]) expect(pkg[field]).toBeTruthy();
    // TypeScript 5.0: the typings use `export type *`; optional, a JavaScript program needs none.
    expect(pkg.peerDependencies.typescript).toBe(">=5.0.0");
    expect(pkg.peerDependenciesMeta.typescript.optional).toBe(true);
    // A git install builds dist/ (not in git) through prepare, as the build does; npm runs prepare twice there
    // (its install in the clone, then its pack), so the second is incremental, its build info unshipped.
    const tsc = "tsc -p tsconfig.json";
    expect(pkg.scripts.build).toContain(tsc);
    expect(pkg.scripts.prepare).toBe(pkg.scripts.build.replace(tsc, `${tsc} --incremental --tsBuildInfoFile dist/.tsbuildinfo`));
  });
});
