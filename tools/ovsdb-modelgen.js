#!/usr/bin/env node
// Generates provider/ovsdb/models.generated.ts, the typed rows of the OVSDB
// tables ovslb touches, from the .ovsschema files committed in
// test/fixtures/ovsdb-schemas/ (as libovsdb's cmd/modelgen does from a
// schema). Those are byte-for-byte copies of what Debian 12's packages install
// (openvswitch-switch 3.1.0, ovn-central 23.03.1): reading the copies, not
// /usr/share, makes the model a function of the repository alone, so the
// unit tests run `--check` with no Open vSwitch or OVN installed, and a
// package upgrade cannot change it unnoticed. The integration test
// test/integration/ovsdb-schemas.test.ts compares the copies with the
// installed files and with what the lab's servers serve. `--check` fails,
// naming the first difference, if the committed file is not what the copies
// give. Plain Node, no dependencies: it runs before anything is compiled.
//
//   node tools/ovsdb-modelgen.js            write the file
//   node tools/ovsdb-modelgen.js --check    exit 1 if it is stale
"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const { join } = require("node:path");

const root = join(__dirname, "..");
const target = join(root, "provider", "ovsdb", "models.generated.ts");
/** Where the committed copies of the schemas are, relative to the repository root. */
const SCHEMA_DIR = "test/fixtures/ovsdb-schemas";

/** The databases, and the tables of each that ovslb reads or writes. Add a table here, then regenerate. */
const DATABASES = [
  {
    file: "vswitch.ovsschema",
    installed: "/usr/share/openvswitch/vswitch.ovsschema",
    package: "openvswitch-switch 3.1.0",
    constName: "OPEN_VSWITCH",
    tables: ["Open_vSwitch", "Bridge", "Port", "Interface"],
  },
  {
    file: "ovn-nb.ovsschema",
    installed: "/usr/share/ovn/ovn-nb.ovsschema",
    package: "ovn-central 23.03.1",
    constName: "OVN_NORTHBOUND",
    tables: ["Load_Balancer", "Load_Balancer_Health_Check", "Logical_Router", "Logical_Switch", "Logical_Switch_Port"],
  },
  {
    file: "ovn-sb.ovsschema",
    installed: "/usr/share/ovn/ovn-sb.ovsschema",
    package: "ovn-central 23.03.1",
    constName: "OVN_SOUTHBOUND",
    tables: ["Service_Monitor", "Port_Binding", "Chassis"],
  },
];

/**
 * Columns that later releases add to these tables, checked against the
 * ovn-org/ovn history. They are typed as optional properties: absent from
 * rows read from a server whose schema predates them. They are not in the
 * model's runtime schema, so a typed transaction that names one fails
 * before it is sent when the server's schema lacks it (OvsdbClient.run).
 */
const LATER_COLUMNS = {
  OVN_Southbound: {
    Service_Monitor: {
      // ovn-org/ovn c3bc0f851 "rbac: Only allow relevant chassis to update service monitors" (SB 20.31.0).
      chassis_name: { type: "string", since: "OVN 24.03 (OVN_Southbound 20.31.0)" },
    },
  },
};

function pascal(table) {
  return table
    .split("_")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}

/** A base type as {type, enum?, refTable?, refType?}: the bare "string" form is expanded. */
function baseType(wire) {
  return typeof wire === "string" ? { type: wire } : wire;
}

/** The column type normalized as provider/ovsdb/encoding.ts's ColumnType has it. */
function columnType(wire) {
  if (typeof wire === "string") return { key: { type: wire }, min: 1, max: 1 };
  const type = { key: baseType(wire.key), min: wire.min ?? 1, max: wire.max ?? 1 };
  if (wire.value !== undefined) type.value = baseType(wire.value);
  return type;
}

function enumValues(base) {
  if (base.enum === undefined) return undefined;
  const e = base.enum;
  return Array.isArray(e) && e[0] === "set" ? e[1] : [e];
}

function atomTs(base) {
  const values = enumValues(base);
  if (values) return values.map((v) => JSON.stringify(v)).join(" | ");
  switch (base.type) {
    case "string":
      return "string";
    case "integer":
    case "real":
      return "number";
    case "boolean":
      return "boolean";
    case "uuid":
      return "Uuid";
    default:
      throw new Error(`unknown atomic type ${JSON.stringify(base.type)}`);
  }
}

const paren = (ts) => (ts.includes("|") ? `(${ts})` : ts);

/** The value a decoded row holds: scalar, [] | [x] for an optional column, an array for a set, a Map for a map. */
function valueTs(type) {
  const key = atomTs(type.key);
  if (type.value !== undefined) return `Map<${key}, ${atomTs(type.value)}>`;
  if (type.min === 1 && type.max === 1) return key;
  if (type.min === 0 && type.max === 1) return `[] | [${key}]`;
  return `${paren(key)}[]`;
}

function baseDoc(base) {
  let text = base.type;
  if (base.refTable) text += ` -> ${base.refTable}${base.refType === "weak" ? " (weak)" : ""}`;
  if (base.minInteger !== undefined || base.maxInteger !== undefined) {
    text += ` ${base.minInteger ?? ""}..${base.maxInteger ?? ""}`;
  }
  if (base.maxLength !== undefined) text += ` (max length ${base.maxLength})`;
  return text;
}

function typeDoc(type, column) {
  let text;
  if (type.value !== undefined) text = `map ${baseDoc(type.key)} to ${baseDoc(type.value)}`;
  else if (type.min === 1 && type.max === 1) text = baseDoc(type.key);
  else if (type.min === 0 && type.max === 1) text = `optional ${baseDoc(type.key)}`;
  else text = `set of ${type.min}..${type.max} ${baseDoc(type.key)}`;
  if (type.value !== undefined && !(type.min === 0 && type.max === "unlimited")) text += `, ${type.min}..${type.max} pairs`;
  if (column.ephemeral) text += "; ephemeral";
  if (column.mutable === false) text += "; immutable";
  return text;
}

/** The runtime column type, atomic types only (what decoding needs). */
function runtimeType(type) {
  const parts = [`key: ${JSON.stringify(type.key.type)}`];
  if (type.value !== undefined) parts.push(`value: ${JSON.stringify(type.value.type)}`);
  parts.push(`min: ${JSON.stringify(type.min)}`, `max: ${JSON.stringify(type.max)}`);
  return `{ ${parts.join(", ")} }`;
}

/** The committed copy of a database's schema, parsed. */
function readSchema(db) {
  return JSON.parse(readFileSync(join(root, SCHEMA_DIR, db.file), "utf8"));
}

function generate() {
  const out = [];
  out.push("/* eslint-disable */");
  out.push(`// Generated by tools/ovsdb-modelgen.js from the .ovsschema files in ${SCHEMA_DIR}/. Do not edit:`);
  out.push("// run `node tools/ovsdb-modelgen.js` (or `--check`).");
  for (const db of DATABASES) {
    const schema = readSchema(db);
    out.push(`//   ${db.file} (${db.installed} of Debian 12's ${db.package}): ${schema.name} ${schema.version}, cksum ${schema.cksum}`);
  }
  out.push("");
  out.push('import type { Uuid } from "./encoding";');
  out.push('import type { DatabaseModel } from "./model";');
  const rowNames = new Set();
  for (const db of DATABASES) {
    const schema = readSchema(db);
    const later = LATER_COLUMNS[schema.name] ?? {};
    const tablesType = `${pascal(schema.name.replace(/^OVN_/, "Ovn_"))}Tables`;
    for (const table of db.tables) {
      const t = schema.tables[table];
      if (!t) throw new Error(`${db.file}: no table ${table}`);
      const rowName = `${pascal(table)}Row`;
      if (rowNames.has(rowName)) throw new Error(`two tables give the row type ${rowName}: qualify one`);
      rowNames.add(rowName);
      out.push("");
      const traits = [t.isRoot ? "root table" : "non-root table (a row no one references is deleted)"];
      if (t.maxRows !== undefined) traits.push(`at most ${t.maxRows} row${t.maxRows === 1 ? "" : "s"}`);
      if (t.indexes?.length) traits.push(`indexes: ${t.indexes.map((i) => i.join("+")).join(", ")}`);
      out.push(`/** ${schema.name}.${table} (${schema.name} ${schema.version}): ${traits.join("; ")}. */`);
      out.push(`export type ${rowName} = {`);
      out.push("  _uuid: Uuid;");
      out.push("  _version: Uuid;");
      for (const name of Object.keys(t.columns).sort()) {
        const column = t.columns[name];
        const type = columnType(column.type);
        out.push(`  /** ${typeDoc(type, column)} */`);
        out.push(`  ${name}: ${valueTs(type)};`);
      }
      for (const [name, extra] of Object.entries(later[table] ?? {}).sort()) {
        if (t.columns[name]) throw new Error(`${schema.name}.${table}.${name} is in the committed schema now: drop it from LATER_COLUMNS`);
        const type = columnType(extra.type);
        out.push(`  /** ${typeDoc(type, {})}. Since ${extra.since}: absent before, and not in ${schema.name} ${schema.version}. */`);
        out.push(`  ${name}?: ${valueTs(type)};`);
      }
      out.push("};");
    }
    out.push("");
    out.push(`/** The ${schema.name} tables ovslb touches, by name. */`);
    out.push(`export type ${tablesType} = {`);
    for (const table of db.tables) out.push(`  ${table}: ${pascal(table)}Row;`);
    out.push("};");
    out.push("");
    out.push(`/** ${schema.name} ${schema.version} (${db.package}): the tables ovslb touches, with their column types. */`);
    out.push(`export const ${db.constName}: DatabaseModel<${JSON.stringify(schema.name)}, ${tablesType}> = {`);
    out.push(`  name: ${JSON.stringify(schema.name)},`);
    out.push(`  version: ${JSON.stringify(schema.version)},`);
    out.push("  tables: {");
    for (const table of db.tables) {
      out.push(`    ${table}: {`);
      out.push("      columns: {");
      const columns = schema.tables[table].columns;
      for (const name of Object.keys(columns).sort()) out.push(`        ${name}: ${runtimeType(columnType(columns[name].type))},`);
      out.push("      },");
      out.push("    },");
    }
    out.push("  },");
    out.push("};");
  }
  return out.join("\n") + "\n";
}

function firstDifference(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] !== y[i]) return `line ${i + 1}:\n  committed: ${x[i] ?? "(end of file)"}\n  generated: ${y[i] ?? "(end of file)"}`;
  }
  return "";
}

function main() {
  let text;
  try {
    text = generate();
  } catch (err) {
    console.error(`ovsdb-modelgen: ${err.message}`);
    process.exit(2);
  }
  if (process.argv.includes("--check")) {
    let current = "";
    try {
      current = readFileSync(target, "utf8");
    } catch {
      // No file yet: it is stale.
    }
    if (current !== text) {
      console.error(`${target} is stale against the .ovsschema files in ${SCHEMA_DIR}/: run "node tools/ovsdb-modelgen.js"\n${firstDifference(current, text)}`);
      process.exit(1);
    }
  } else {
    writeFileSync(target, text);
  }
}

if (require.main === module) main();
module.exports = { generate, DATABASES, LATER_COLUMNS, SCHEMA_DIR };
