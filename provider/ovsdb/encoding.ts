/**
 * OVSDB values (RFC 7047 section 5.1) as plain TypeScript values, and their
 * wire encodings. Only this module knows the encodings: everything else reads
 * and writes strings, numbers, booleans, Uuid, arrays (sets) and Maps.
 */

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ID_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The UUID of a row that exists in the database. */
export class Uuid {
  constructor(readonly id: string) {
    if (!UUID_PATTERN.test(id)) throw new Error(`not a UUID: ${JSON.stringify(id)}`);
  }
}

/** Names a row inserted earlier in the same transaction (`uuid-name`). */
export class NamedUuid {
  constructor(readonly name: string) {
    if (!ID_PATTERN.test(name)) throw new Error(`not a valid uuid-name: ${JSON.stringify(name)}`);
  }
}

export type Atom = string | number | boolean | Uuid;
/** A column's value as read: an atom, a set (array) or a map. */
export type Value = Atom | Atom[] | Map<Atom, Atom>;
/** A row as read: column name to value. */
export type Row = Record<string, Value>;

/** What may be written: a named uuid is also an atom, and a plain object is a string-keyed map. */
export type AtomInput = Atom | NamedUuid;
export type ValueInput = AtomInput | readonly AtomInput[] | ReadonlyMap<AtomInput, AtomInput> | Readonly<Record<string, AtomInput>>;
export type RowInput = Readonly<Record<string, ValueInput>>;

export type WireAtom = string | number | boolean | ["uuid", string] | ["named-uuid", string];
export type WireValue = WireAtom | ["set", WireAtom[]] | ["map", [WireAtom, WireAtom][]];
export type WireRow = Record<string, WireValue>;

export type AtomicType = "integer" | "real" | "boolean" | "string" | "uuid";

/** A column's type, normalized: the bare `"string"` form becomes `{ key: "string", min: 1, max: 1 }`. */
export interface ColumnType {
  key: AtomicType;
  /** Present for maps only. */
  value?: AtomicType;
  min: number;
  max: number | "unlimited";
}

export interface TableSchema {
  columns: Record<string, ColumnType>;
}

export interface DatabaseSchema {
  name: string;
  version: string;
  tables: Record<string, TableSchema>;
}

export function encodeAtom(atom: AtomInput): WireAtom {
  if (atom instanceof Uuid) return ["uuid", atom.id];
  if (atom instanceof NamedUuid) return ["named-uuid", atom.name];
  if (typeof atom === "number" && !Number.isFinite(atom)) throw new Error(`OVSDB numbers must be finite: ${atom}`);
  return atom;
}

/** Arrays become sets and Maps or plain objects become maps, whatever their size. */
export function encodeValue(value: ValueInput): WireValue {
  if (isArray(value)) return ["set", value.map(encodeAtom)];
  if (value instanceof Map) {
    return ["map", [...(value as ReadonlyMap<AtomInput, AtomInput>)].map(([k, v]): [WireAtom, WireAtom] => [encodeAtom(k), encodeAtom(v)])];
  }
  if (typeof value === "object" && !(value instanceof Uuid) && !(value instanceof NamedUuid)) {
    return ["map", Object.entries(value as Readonly<Record<string, AtomInput>>).map(([k, v]): [WireAtom, WireAtom] => [k, encodeAtom(v)])];
  }
  return encodeAtom(value);
}

export function encodeRow(row: RowInput): WireRow {
  const wire: WireRow = {};
  for (const [column, value] of Object.entries(row)) wire[column] = encodeValue(value);
  return wire;
}

export function decodeAtom(wire: unknown): Atom {
  if (typeof wire === "string" || typeof wire === "boolean") return wire;
  if (typeof wire === "number" && Number.isFinite(wire)) return wire;
  if (Array.isArray(wire) && wire.length === 2 && wire[0] === "uuid" && typeof wire[1] === "string") {
    return new Uuid(wire[1]);
  }
  throw new Error(`not an OVSDB atom: ${JSON.stringify(wire)}`);
}

/**
 * With the column's type, the value gets the column's shape: a set comes back
 * as an array even when the server sent its single element bare, and an
 * optional column (min 0, max 1) is a set of zero or one element. Without a
 * type (e.g. `_uuid`), the value is decoded as sent.
 */
export function decodeValue(wire: unknown, type?: ColumnType): Value {
  if (type?.value !== undefined || isTagged(wire, "map")) return decodeMap(wire);
  if (isTagged(wire, "set")) {
    const atoms = wire[1].map(decodeAtom);
    if (type && isScalar(type)) {
      if (atoms.length !== 1) throw new Error(`expected one value, got ${JSON.stringify(wire)}`);
      return atoms[0];
    }
    return atoms;
  }
  const atom = decodeAtom(wire);
  return type && !isScalar(type) ? [atom] : atom;
}

/** Columns the schema does not list (`_uuid`, `_version`) are decoded as sent. */
export function decodeRow(wire: unknown, table?: TableSchema): Row {
  if (!isRecord(wire)) throw new Error(`not an OVSDB row: ${JSON.stringify(wire)}`);
  const row: Row = {};
  for (const [column, value] of Object.entries(wire)) {
    try {
      row[column] = decodeValue(value, table?.columns[column]);
    } catch (err) {
      throw new Error(`column ${column}: ${(err as Error).message}`);
    }
  }
  return row;
}

/** Parses a `get_schema` reply, keeping what decoding needs. */
export function parseDatabaseSchema(wire: unknown): DatabaseSchema {
  if (!isRecord(wire) || typeof wire.name !== "string" || typeof wire.version !== "string" || !isRecord(wire.tables)) {
    throw new Error("not an OVSDB schema");
  }
  const tables: Record<string, TableSchema> = {};
  for (const [tableName, table] of Object.entries(wire.tables)) {
    if (!isRecord(table) || !isRecord(table.columns)) throw new Error(`schema: table ${tableName} has no columns`);
    const columns: Record<string, ColumnType> = {};
    for (const [columnName, column] of Object.entries(table.columns)) {
      if (!isRecord(column)) throw new Error(`schema: bad column ${tableName}.${columnName}`);
      columns[columnName] = parseColumnType(column.type, `${tableName}.${columnName}`);
    }
    tables[tableName] = { columns };
  }
  return { name: wire.name, version: wire.version, tables };
}

function parseColumnType(wire: unknown, where: string): ColumnType {
  if (!isRecord(wire)) return { key: parseAtomicType(wire, where), min: 1, max: 1 };
  const { min = 1, max = 1 } = wire;
  if (typeof min !== "number" || !(typeof max === "number" || max === "unlimited")) {
    throw new Error(`schema: bad min/max for ${where}`);
  }
  const type: ColumnType = { key: parseBaseType(wire.key, where), min, max };
  if (wire.value !== undefined) type.value = parseBaseType(wire.value, where);
  return type;
}

/** A base type is an atomic type name or an object whose `type` is one (with constraints we do not need). */
function parseBaseType(wire: unknown, where: string): AtomicType {
  return parseAtomicType(isRecord(wire) ? wire.type : wire, where);
}

function parseAtomicType(wire: unknown, where: string): AtomicType {
  switch (wire) {
    case "integer":
    case "real":
    case "boolean":
    case "string":
    case "uuid":
      return wire;
    default:
      throw new Error(`schema: unknown type ${JSON.stringify(wire)} for ${where}`);
  }
}

function decodeMap(wire: unknown): Map<Atom, Atom> {
  if (!isTagged(wire, "map")) throw new Error(`not an OVSDB map: ${JSON.stringify(wire)}`);
  const map = new Map<Atom, Atom>();
  for (const pair of wire[1]) {
    if (!Array.isArray(pair) || pair.length !== 2) throw new Error(`not a map pair: ${JSON.stringify(pair)}`);
    map.set(decodeAtom(pair[0]), decodeAtom(pair[1]));
  }
  return map;
}

function isScalar(type: ColumnType): boolean {
  return type.min === 1 && type.max === 1;
}

function isTagged(wire: unknown, tag: "set" | "map"): wire is [typeof tag, unknown[]] {
  return Array.isArray(wire) && wire.length === 2 && wire[0] === tag && Array.isArray(wire[1]);
}

// Array.isArray does not narrow readonly arrays out of a union.
function isArray(value: ValueInput): value is readonly AtomInput[] {
  return Array.isArray(value);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
