import { describe, it, expect, afterAll } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { deferSdkModules } from "../support/defer-sdk-modules";

/**
 * The harness's program and plugin processes load the SDK's
 * closure-serializer modules at first use (test/support/defer-sdk-modules.cjs).
 * A process of the SDK this checkout resolves: with the preload, loading
 * @pulumi/pulumi leaves those modules unloaded; when the process serializes
 * a closure and computes a program's code paths (what the two modules are
 * for) it gets the same results as a process without the preload.
 */

const sdk = dirname(require.resolve("@pulumi/pulumi/package.json"));
const deferred = deferSdkModules(sdk);
const files: string[] = JSON.parse(deferred.env.OVSLB_DEFER_SDK_MODULES).map((m: { file: string }) => m.file);
const project = mkdtempSync(join(tmpdir(), "ovslb-defer-"));
writeFileSync(join(project, "package.json"), JSON.stringify({ name: "p", version: "1.0.0", dependencies: {} }));
afterAll(() => rmSync(project, { recursive: true, force: true }));

/** In a fresh process: which of `files` loading the SDK loaded, then a serialized closure and the code paths. */
const CHILD = `
const files = JSON.parse(process.argv[1]);
const loaded = () => files.filter((f) => require.cache[f] !== undefined);
const pulumi = require(process.argv[2]);
const atLoad = loaded();
(async () => {
  const greeting = "hello";
  const sf = await pulumi.runtime.serializeFunction(() => class Greeter { constructor() { this.g = greeting; } });
  const paths = await pulumi.runtime.computeCodePaths();
  console.log(JSON.stringify({ atLoad, text: sf.text, paths: [...paths.keys()].sort(), atEnd: loaded() }));
})();
`;

function run(env: Record<string, string>, execArgv: string[]) {
  const out = execFileSync(process.execPath, [...execArgv, "-e", CHILD, JSON.stringify(files), sdk], {
    cwd: project,
    env: { ...process.env, ...env },
    encoding: "utf8",
    // arborist's dependencies warn when computeCodePaths loads them: not this test's business.
    stdio: ["ignore", "pipe", "ignore"],
  });
  return JSON.parse(out) as { atLoad: string[]; text: string; paths: string[]; atEnd: string[] };
}

let eager: ReturnType<typeof run> | undefined;
/** The SDK's process without the preload, run once for both tests that compare with it. */
const withoutPreload = () => (eager ??= run({}, []));

describe("deferred SDK modules", () => {
  it("names typescript, and @npmcli/arborist where the SDK requires it at load", () => {
    expect(files.some((f) => /typescript(@[\d.]+)?[/\\](lib[/\\])?typescript\.js$/.test(f))).toBe(true);
    // Every module named is one the SDK loads at start without the preload: none is deferred for nothing.
    expect([...withoutPreload().atLoad].sort()).toEqual([...files].sort());
  });

  it("leaves them unloaded at the SDK's load, and loads them when the serializer needs them, with the same results", () => {
    const without = withoutPreload();
    const withPreload = run(deferred.env, deferred.execArgv);
    expect(withPreload.atLoad).toEqual([]);
    expect(withPreload.text).toContain("Greeter");
    expect(withPreload.text).toBe(without.text);
    expect(withPreload.paths).toEqual(without.paths);
    expect(withPreload.atEnd.sort()).toEqual([...files].sort());
  });

  it("fails a require of a module that is missing as the real require does", () => {
    const missing = JSON.stringify([{ file: join(project, "node_modules", "typescript", "lib", "typescript.js") }]);
    const script = `try { require("typescript") } catch (e) { console.log(e.code) }`;
    const out = execFileSync(process.execPath, [...deferred.execArgv, "-e", script], {
      cwd: project,
      env: { ...process.env, OVSLB_DEFER_SDK_MODULES: missing, NODE_PATH: "" },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(out.trim()).toBe("MODULE_NOT_FOUND");
  });
});
