// Generates, from the JSON Schemas (the one source of truth for inputs and outputs):
//  - provider/model/inputs.generated.ts: each resource's input types (the schema itself);
//  - provider/model/outputs.generated.ts: what each resource records besides its inputs
//    (its "x-outputs" object schema), e.g. `interface OvsBridgeOutputs`, which the handlers use as their state;
//  - provider/model/resource-outputs.generated.ts: for each resource class, its outputs as
//    `pulumi.Output` properties (`interface OvsBridgeOutputProperties`, merged into the class) and
//    their names (`OVS_BRIDGE_OUTPUTS`), from which its constructor declares them.
// A schema without "x-outputs" gets inputs only. `--check` fails, naming them, if any file is stale.
"use strict";
const { compile } = require("json-schema-to-typescript");
const { readFileSync, writeFileSync, readdirSync } = require("node:fs");
const { join } = require("node:path");

const schemaDir = __dirname;
const modelDir = join(schemaDir, "..", "provider", "model");
const OUTPUTS = "x-outputs";
/** Top-level outputs the provider itself records for every kind (provider/handlers.ts, provider/secrets.ts): no kind may declare them. */
const RESERVED = ["__provider", "sshCredentials", "id", "urn"];

const BANNER = "/* eslint-disable */\n// Generated from schema/*.json by schema/generate-types.js. Do not edit.";
const OPTIONS = {
  cwd: schemaDir,
  bannerComment: BANNER,
  additionalProperties: false,
  declareExternallyReferenced: true,
  ignoreMinAndMaxItems: true,
  style: { printWidth: 120 },
};

const resourceFiles = () =>
  readdirSync(schemaDir)
    .filter((f) => f.endsWith(".json") && f !== "common.json")
    .sort();
const readSchema = (f) => JSON.parse(readFileSync(join(schemaDir, f), "utf8"));

/** One root referencing every resource schema (or every outputs section): each shared definition is emitted once. */
function root(title, entries) {
  return { title, type: "object", additionalProperties: false, properties: Object.fromEntries(entries) };
}

/** Follows "$ref"s ("common.json#/definitions/x", "#/definitions/x") from within the document `file`. */
function resolve(node, file) {
  for (let depth = 0; node && node.$ref; depth++) {
    if (depth > 32) throw new Error(`${file}: $ref nesting too deep`);
    const [target, pointer = ""] = node.$ref.split("#");
    if (target) file = target;
    node = pointer
      .split("/")
      .filter(Boolean)
      .reduce((n, step) => n && n[step.replace(/~1/g, "/").replace(/~0/g, "~")], readSchema(file));
    if (!node) throw new Error(`${file}: cannot resolve $ref`);
  }
  return node;
}

/** "deferred-nat-load-balancer.json" -> "DEFERRED_NAT_LOAD_BALANCER_OUTPUTS" */
const namesConst = (file) =>
  `${file
    .replace(/\.json$/, "")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .toUpperCase()}_OUTPUTS`;

/** A TSDoc block of `text` at `indent`, as json-schema-to-typescript writes them. */
function doc(text, indent) {
  const lines = String(text).replace(/\*\//g, "*\\/").split("\n");
  return [`${indent}/**`, ...lines.map((l) => `${indent} * ${l}`.trimEnd()), `${indent} */`].join("\n");
}

/** Each resource schema with an "x-outputs" section: its kind, its outputs' type name, and the outputs in declaration order. */
function outputKinds() {
  const kinds = [];
  for (const file of resourceFiles()) {
    const schema = readSchema(file);
    const outputs = schema[OUTPUTS];
    if (outputs === undefined) continue;
    const inputsTitle = String(schema.title ?? "");
    if (!inputsTitle.endsWith("Inputs")) throw new Error(`${file}: a schema with "${OUTPUTS}" needs a title KindInputs`);
    const kind = inputsTitle.slice(0, -"Inputs".length);
    if (outputs.type !== "object" || outputs.title !== `${kind}Outputs` || !outputs.properties) {
      throw new Error(`${file}: "${OUTPUTS}" must be an object schema titled ${kind}Outputs, with properties`);
    }
    const names = Object.keys(outputs.properties);
    const clash = names.filter((n) => n in (schema.properties ?? {}) || RESERVED.includes(n));
    if (clash.length > 0) throw new Error(`${file}: outputs ${clash.join(", ")} are also inputs or recorded by the provider itself`);
    const missing = (outputs.required ?? []).filter((n) => !names.includes(n));
    if (missing.length > 0) throw new Error(`${file}: "${OUTPUTS}" requires ${missing.join(", ")}, which it does not declare`);
    const properties = names.map((name) => {
      const own = outputs.properties[name];
      const description = own.description ?? resolve(own, file).description;
      if (!description) throw new Error(`${file}: output ${name} has no description`);
      return { name, description };
    });
    kinds.push({ file, kind, type: outputs.title, description: outputs.description, properties });
  }
  return kinds;
}

/** The resource classes' side: Output<...> properties (to merge into each class) and the output names. */
function resourceOutputs(kinds) {
  const parts = [
    BANNER,
    "",
    'import type * as pulumi from "@pulumi/pulumi";',
    kinds.length > 0 ? `import type { ${kinds.map((k) => k.type).join(", ")} } from "./outputs.generated";` : undefined,
    "",
    doc(
      "`{ name: undefined, ... }` for each output name: what a resource class passes its constructor beside the inputs, so that Pulumi exposes each output.",
      "",
    ),
    "export function outputPlaceholders<N extends string>(names: readonly N[]): Record<N, undefined> {",
    "  return Object.fromEntries(names.map((n) => [n, undefined])) as Record<N, undefined>;",
    "}",
  ].filter((l) => l !== undefined);
  for (const k of kinds) {
    parts.push(
      "",
      doc(`The outputs of a ${k.kind} resource, as Pulumi outputs (schema/${k.file}, "${OUTPUTS}"). ${k.description ?? ""}`.trim(), ""),
      `export interface ${k.kind}OutputProperties {`,
      ...k.properties.flatMap((p) => [doc(p.description, "  "), `  readonly ${p.name}: pulumi.Output<${k.type}[${JSON.stringify(p.name)}]>;`]),
      "}",
      doc(`The names of ${k.kind}'s outputs, as declared in schema/${k.file}.`, ""),
      `export const ${namesConst(k.file)} = [${k.properties.map((p) => JSON.stringify(p.name)).join(", ")}] as const;`,
    );
  }
  return `${parts.join("\n")}\n`;
}

/** Names a generated file exports. */
const exported = (text) => new Set([...text.matchAll(/^export (?:interface|type|const|function) (\w+)/gm)].map((m) => m[1]));

async function generate() {
  const files = resourceFiles();
  const kinds = outputKinds();
  const inputs = await compile(
    root(
      "AllInputs",
      files.map((f) => [f.replace(/\.json$/, ""), { $ref: f }]),
    ),
    "AllInputs",
    OPTIONS,
  );
  const outputs = await compile(
    root(
      "AllOutputs",
      kinds.map((k) => [k.file.replace(/\.json$/, ""), { $ref: `${k.file}#/${OUTPUTS}` }]),
    ),
    "AllOutputs",
    OPTIONS,
  );
  // Outputs reuse no input type: each type is declared once, in one file.
  const inputNames = exported(inputs);
  const twice = [...exported(outputs)].filter((n) => inputNames.has(n));
  if (twice.length > 0) throw new Error(`types generated both as inputs and as outputs: ${twice.join(", ")}; give the outputs their own definitions`);
  return new Map([
    [join(modelDir, "inputs.generated.ts"), inputs],
    [join(modelDir, "outputs.generated.ts"), outputs],
    [join(modelDir, "resource-outputs.generated.ts"), resourceOutputs(kinds)],
  ]);
}

generate()
  .then((targets) => {
    if (process.argv.includes("--check")) {
      const stale = [...targets].filter(([target, text]) => {
        try {
          return readFileSync(target, "utf8") !== text;
        } catch {
          return true;
        }
      });
      if (stale.length > 0) {
        for (const [target] of stale) console.error(`${target} is stale: run "npm run gen:types"`);
        process.exit(1);
      }
    } else {
      for (const [target, text] of targets) writeFileSync(target, text);
    }
  })
  .catch((e) => {
    console.error(e);
    process.exit(1);
  });
