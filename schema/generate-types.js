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
  const parts = [
    "/* eslint-disable */\n// Generated from schema/*.json by schema/generate-types.js. Do not edit.\n",
  ];
  const seen = new Set();
  for (const file of files) {
    const schema = JSON.parse(readFileSync(join(schemaDir, file), "utf8"));
    let ts = await compile(schema, schema.title, {
      cwd: schemaDir,
      bannerComment: "",
      additionalProperties: false,
      declareExternallyReferenced: true,
      style: { printWidth: 120 },
    });
    // Shared definitions appear once, however many schemas reference them.
    ts = ts.replace(/\n(\/\*\*[\s\S]*?\*\/\n)?export (interface|type) (\w+)[\s\S]*?\n(}|[^\n]*;)\n/g, (block, _doc, _kind, name) => {
      if (seen.has(name)) return "\n";
      seen.add(name);
      return block;
    });
    parts.push(ts.trim() + "\n");
  }
  return parts.join("\n");
}

generate().then((text) => {
  if (process.argv.includes("--check")) {
    let current = "";
    try { current = readFileSync(target, "utf8"); } catch {}
    if (current !== text) {
      console.error(`${target} is stale: run "node schema/generate-types.js"`);
      process.exit(1);
    }
  } else {
    writeFileSync(target, text);
  }
}).catch((e) => { console.error(e); process.exit(1); });
