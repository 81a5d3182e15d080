import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, HarnessError, type Result } from "../harness/engine";
import { removeTempProject, tempProject } from "../support/temp-project";

/**
 * The harness's own engine rules, with a program whose dynamic provider is
 * its own (no host): every provider call lands in a log, so the order of
 * creates, updates and deletes is what the plugin was really asked.
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "engine");
const urn = (name: string) => `urn:pulumi:dev::harness-engine::pulumi-nodejs:dynamic/harness:Thing::${name}`;
let project: string;
let log: string;

const open = (config: Record<string, unknown> = {}) =>
  Harness.open({ cwd: project, config: { log, ...config }, secretConfig: { password: "pw-s3cret" }, passphrase: "p" });
const calls = () => readFileSync(log, "utf8").trim().split("\n").filter(Boolean);
const ops = (r: Result) => r.steps.filter((s) => s.custom).map((s) => `${s.op} ${s.urn.split("::").pop()}`);

beforeAll(() => {
  project = tempProject(fixture);
  log = join(project, "calls.log");
});
afterAll(() => removeTempProject(project));

describe("the harness's engine", () => {
  it("creates in order, passes outputs on, and keeps secrets (secret config, same-named inputs, additionalSecretOutputs) out of the state file", async () => {
    writeFileSync(log, "");
    const r = await (await open({ withC: true })).up();
    expect(ops(r)).toEqual(["create a", "create b", "create c"]);
    expect(calls()).toEqual(["create a", "create b", "create c"]);
    const byName = new Map(r.resources.map((x) => [x.urn, x]));
    expect(byName.get(urn("b"))!.inputs.value).toBe("tok-a");
    expect(byName.get(urn("c"))!.dependencies).toEqual([urn("b")]);
    expect(r.outputs).toEqual({ bValue: "tok-a", aToken: "tok-a" });
    expect(byName.get(urn("a"))!.secretPaths.outputs).toEqual(expect.arrayContaining(["password", "token"]));
    // b's value came from a's secret token: secret as an input, so as the same-named output.
    expect(byName.get(urn("b"))!.secretPaths).toEqual({ inputs: ["value"], outputs: ["value"] });
    const text = readFileSync(join(project, ".ovslb-harness", "dev.json"), "utf8");
    expect(text).not.toContain("pw-s3cret");
    expect(text).not.toContain("tok-a");
  });

  it("replaces create-before-delete (the old copy deleted at the end), updates the dependent, deletes what is gone, dependents first", async () => {
    writeFileSync(log, "");
    const r = await (await open({ keyA: "a2" })).up();
    expect(ops(r)).toEqual(["replace a", "update b", "delete c", "delete a"]);
    expect(calls()).toEqual(["create a2", "update b", "delete c", "delete a"]);
    expect(r.resources.filter((x) => x.urn === urn("a"))).toHaveLength(1);
    expect(r.resources.find((x) => x.urn === urn("a"))!.id).toBe("a2-id");
    expect(r.resources.find((x) => x.urn === urn("b"))!.inputs.value).toBe("tok-a2");
  });

  it("preview asks the provider nothing but check and diff", async () => {
    writeFileSync(log, "");
    const r = await (await open({ keyA: "a3", withC: true })).preview();
    expect(ops(r)).toEqual(["replace a", "update b", "create c"]);
    expect(calls()).toEqual([]);
  });

  it("records a partial failure as the engine does: the id and properties the provider reported, with its reasons", async () => {
    writeFileSync(log, "");
    const stack = await open({ keyA: "a2", withD: true });
    const e = await stack.up().catch((x) => x);
    expect(e).toBeInstanceOf(HarnessError);
    expect(e.message).toContain("d: made, not finished");
    const d = stack.resources().find((x) => x.urn === urn("d"))!;
    expect(d).toMatchObject({ id: "d-partial", initErrors: ["not finished"], outputs: { half: true, key: "d" } });
    // A failed run deletes nothing.
    expect(calls()).toEqual(["create d"]);
  });

  it("destroy deletes every resource, dependents first, and leaves an empty state", async () => {
    writeFileSync(log, "");
    const stack = await open();
    const r = await stack.destroy();
    // d stands on nothing: its place among the deletes is free; b goes before a.
    expect(ops(r).sort()).toEqual(["delete a", "delete b", "delete d"]);
    expect(ops(r).indexOf("delete b")).toBeLessThan(ops(r).indexOf("delete a"));
    expect(calls().sort()).toEqual(["delete a2", "delete b", "delete d"]);
    expect(stack.resources()).toEqual([]);
  });
});
