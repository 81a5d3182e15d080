import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { compileFunction } from "node:vm";
import type { ErrorObject, ValidateFunction } from "ajv";
import { componentSchema } from "../../components/args";
import { schemaAjv, schemaDigest, validatorsModule } from "../../provider/model/validate";
import { KINDS, SCHEMAS, hostileValue, inputsOf } from "../support/fuzz-inputs";

/**
 * The build compiles the validators of the schemas checked at run time
 * (schema/build-validators.js, into dist/schema/validators.js) so that no
 * plugin or program process compiles them. A precompiled validator must
 * answer exactly as the one ajv compiles at run time: the same verdict and
 * the same errors (what failed, where, and the schema description a reason
 * quotes), on valid and hostile inputs alike.
 */

const repo = resolve(__dirname, "..", "..");
const { checkedSchemas } = require(join(repo, "schema", "build-validators.js"));
const schemas: object[] = checkedSchemas(join(repo, "schema"), componentSchema);

/** The module the build writes, loaded as the build's copy is (its runtime helpers from ajv). */
function load(source: string): Record<string, ValidateFunction> {
  const exports: Record<string, ValidateFunction> = {};
  compileFunction(source, ["exports", "require"])(exports, createRequire(join(repo, "package.json")));
  return exports;
}

const precompiled = load(validatorsModule(schemas));
const runtimeAjv = schemaAjv();

const seen = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => ({
    keyword: e.keyword,
    instancePath: e.instancePath,
    schemaPath: e.schemaPath,
    params: e.params,
    message: e.message,
    description: (e.parentSchema as { description?: string } | undefined)?.description,
  }));

function agree(schema: object, inputs: unknown[]) {
  const built = precompiled[schemaDigest(schema)];
  const compiled = runtimeAjv.compile(schema);
  let refused = 0;
  for (const input of inputs) {
    const verdict = built(input);
    expect(verdict).toBe(compiled(input));
    expect(seen(built.errors)).toEqual(seen(compiled.errors));
    if (!verdict) refused++;
  }
  return refused;
}

const id = (schema: object) => (schema as { $id: string }).$id;

describe("the build's precompiled validators", () => {
  it("cover every resource's and component's schema, each under its digest", () => {
    const ids = schemas.map(id);
    for (const kind of KINDS) expect(ids).toContain(id(SCHEMAS[kind]));
    expect(ids.filter((i) => i.includes("/components/")).length).toBe(3);
    for (const schema of schemas) expect(typeof precompiled[schemaDigest(schema)]).toBe("function");
  });

  it.each(KINDS)("%s: the same verdict and errors as a run-time compile, on 300 generated inputs (valid and hostile)", (kind) => {
    const inputs = fc.sample(inputsOf(kind), { numRuns: 300, seed: 7 });
    const refused = agree(SCHEMAS[kind], inputs);
    // Both kinds of input were there: some accepted, some refused.
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBeLessThan(inputs.length);
  });

  it("components: the same verdict and errors on 300 hostile argument objects each", () => {
    for (const schema of schemas.filter((s) => id(s).includes("/components/"))) {
      const names = Object.keys((schema as { properties: object }).properties);
      const args = fc.sample(fc.dictionary(fc.constantFrom(...names, "unknown"), hostileValue, { maxKeys: names.length }), { numRuns: 300, seed: 11 });
      expect(agree(schema, [{}, ...args])).toBeGreaterThan(0);
    }
  });

  it("a schema changed since the build gets no precompiled validator: its digest differs", () => {
    const changed = JSON.parse(JSON.stringify(SCHEMAS.OvsBridge));
    changed.description = `${changed.description} (changed)`;
    expect(precompiled[schemaDigest(changed)]).toBeUndefined();
    expect(precompiled[schemaDigest(SCHEMAS.OvsBridge)]).toBeDefined();
  });

  // The built package: npm test and npm ci build dist/ before the tests run.
  const built = existsSync(join(repo, "dist", "schema", "validators.js"));
  it.skipIf(!built)("the built provider and components validate every checked schema with them, and never load ajv's compiler", () => {
    const script = `
      const { validateAgainstSchema, servedPrecompiled } = require("./dist/provider/model/validate.js");
      const { checkedSchemas } = require("./schema/build-validators.js");
      const { componentSchema } = require("./dist/components/args.js");
      const served = checkedSchemas(require("node:path").resolve("dist/schema"), componentSchema).map((s) => (validateAgainstSchema(s, {}), [s.$id, servedPrecompiled(s)]));
      const loaded = Object.keys(require.cache).some((k) => k.includes("/node_modules/ajv/dist/core.js"));
      process.stdout.write(JSON.stringify({ served, loaded }));`;
    const { served, loaded } = JSON.parse(execFileSync(process.execPath, ["-e", script], { cwd: repo, encoding: "utf8" }));
    expect(served.length).toBe(schemas.length);
    expect(served.filter(([, yes]: [string, boolean]) => !yes)).toEqual([]);
    expect(loaded).toBe(false);
  });
});
