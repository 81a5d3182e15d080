// Generates provider/model/inputs.generated.ts from the JSON Schemas, which
// stay the one source of truth for inputs. `--check` fails if the file is stale.
"use strict";
const { compile } = require("json-schema-to-typescript");
const { readFileSync, writeFileSync, readdirSync } = require("node:fs");
const { join } = require("node:path");

const schemaDir = __dirname;
const target = join(schemaDir, "..", "provider", "model", "inputs.generated.ts");

async function generate() {
  const files = readdirSync(schemaDir).filter((f) => f.endsWith(".json") && f !== "common.json").sort();
  // One root referencing every resource schema: each shared definition is emitted once.
  const root = {
    title: "AllInputs",
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(files.map((f) => [f.replace(/\.json$/, ""), { $ref: f }])),
  };
  const ts = await compile(root, "AllInputs", {
    cwd: schemaDir,
    bannerComment: "/* eslint-disable */\n// Generated from schema/*.json by schema/generate-types.js. Do not edit.",
    additionalProperties: false,
    declareExternallyReferenced: true,
    ignoreMinAndMaxItems: true,
    style: { printWidth: 120 },
  });
  return ts;
}

generate().then((text) => {
  if (process.argv.includes("--check")) {
    let current = "";
    try { current = readFileSync(target, "utf8"); } catch {}
    if (current !== text) {
      console.error(`${target} is stale: run "npm run gen:types"`);
      process.exit(1);
    }
  } else {
    writeFileSync(target, text);
  }
}).catch((e) => { console.error(e); process.exit(1); });
