import { KEY, childSchema, markedUnder, reachesUnder, resolvedNode, type SchemaNode } from "./validate";

/**
 * Set-like lists keyed by identity, for the engine's eyes only.
 *
 * A dynamic provider returns no detailed diff, so what `pulumi preview`
 * shows of a change is the engine's own diff of the checked inputs, and the
 * engine diffs a list by index: one backend inserted in the middle reads as
 * every later backend changed. So the inputs `check` returns hold each list
 * the schema gives an identity ("x-key") as an object keyed by it
 * (`vips: {"10.1.0.1:80/tcp": {..., backends: {"10.0.0.5:80": {...}}}}`), and
 * the engine's diff names the one backend added, removed or changed; a
 * reordered list is no change at all.
 *
 * Every other method takes its inputs back as lists (`listedInputs`), in the
 * order of record: elements the recorded inputs hold keep their order, new
 * ones follow in key order. Outputs keep lists, so what programs read and
 * what older state holds are unchanged, and a group's bucket order on every
 * gateway stays what it was.
 *
 * Not keyed: a list whose identity is not known yet (an unknown value in a
 * preview), whose keys collide, or which holds a connection (its secrets are
 * marked by the engine position by position, and a keyed copy would lose them).
 */

type Record_ = Record<string, unknown>;

/** The engine's placeholder for a value not known during preview. */
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

type KeyOf = (item: unknown) => string | undefined;

const TEMPLATES = new Map<string, KeyOf>();

const isRecord = (v: unknown): v is Record_ => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The key function of a template: "{address}:{port}/{protocol|tcp}" ->
 * item => "10.0.0.1:80/tcp", or undefined when a part is missing or not
 * known yet. In a key of several parts an address with ":" (IPv6) is
 * bracketed, so address and port stay apart.
 */
function keyFunction(text: string): KeyOf {
  let known = TEMPLATES.get(text);
  if (known) return known;
  const literals: string[] = [];
  const fields: Array<{ field: string; fallback?: string }> = [];
  const re = /\{([A-Za-z0-9_]+)(?:\|([^}]*))?\}/g;
  let at = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    literals.push(text.slice(at, m.index));
    fields.push({ field: m[1], fallback: m[2] });
    at = m.index + m[0].length;
  }
  literals.push(text.slice(at));
  const bracket = fields.length > 1;
  const partOf = (item: Record_, i: number): string | undefined => {
    const v = item[fields[i].field] ?? fields[i].fallback;
    const part = typeof v === "number" ? String(v) : v;
    if (typeof part !== "string" || part === UNKNOWN) return undefined;
    return bracket && part.includes(":") ? `[${part}]` : part;
  };
  // "{address}:{port}", the key of 100,000 backends, without the general loop.
  if (fields.length === 2 && literals[0] === "" && literals[2] === "") {
    const middle = literals[1];
    known = (item) => {
      if (!isRecord(item)) return undefined;
      const a = partOf(item, 0);
      const b = a === undefined ? undefined : partOf(item, 1);
      return b === undefined ? undefined : a + middle + b;
    };
  } else {
    known = (item) => {
      if (!isRecord(item)) return undefined;
      let key = literals[0];
      for (let i = 0; i < fields.length; i++) {
        const part = partOf(item, i);
        if (part === undefined) return undefined;
        key += part + literals[i + 1];
      }
      return key;
    };
  }
  TEMPLATES.set(text, known);
  return known;
}

/** Whether a keyed list ("x-key") can be at or under a schema node. */
const keysUnder = markedUnder((node) => typeof node[KEY] === "string");

/** The key function of a list that is keyed: "x-key" and no connection under its elements. */
function keyedTemplate(node: SchemaNode, doc: object): KeyOf | undefined {
  const text = node[KEY];
  return typeof text === "string" && !reachesUnder(node.items, doc) ? keyFunction(text) : undefined;
}

function keyedAt(schemaNode: SchemaNode | undefined, schemaDoc: object, value: unknown, depth: number): unknown {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  const { node, doc } = resolvedNode(schemaNode, schemaDoc);
  if (!keysUnder(node, doc)) return value;
  if (Array.isArray(value)) {
    // Elements with no keyed list under them are taken as they are (a load balancer's 100,000 backends).
    const items = keysUnder(node?.items, doc) ? value.map((v) => keyedAt(node?.items, doc, v, depth + 1)) : value;
    const keyOf = node && keyedTemplate(node, doc);
    if (!keyOf) return items;
    const keyed: Record_ = {};
    for (const item of items) {
      const k = keyOf(item);
      if (k === undefined || k === "__proto__" || Object.hasOwn(keyed, k)) return items;
      keyed[k] = item;
    }
    return keyed;
  }
  if (isRecord(value)) {
    const out: Record_ = {};
    for (const [k, v] of Object.entries(value)) out[k] = keyedAt(childSchema(node, k), doc, v, depth + 1);
    return out;
  }
  return value;
}

function listedAt(schemaNode: SchemaNode | undefined, schemaDoc: object, value: unknown, like: unknown, depth: number): unknown {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  const { node, doc } = resolvedNode(schemaNode, schemaDoc);
  if (!keysUnder(node, doc)) return value;
  const deeper = keysUnder(node?.items, doc);
  if (Array.isArray(value)) return deeper ? value.map((v) => listedAt(node?.items, doc, v, undefined, depth + 1)) : value;
  const text = node?.[KEY];
  if (typeof text === "string" && isRecord(value)) {
    const keyOf = keyFunction(text);
    const item = (k: string, old: unknown) => (deeper ? listedAt(node?.items, doc, value[k], old, depth + 1) : value[k]);
    const list: unknown[] = [];
    const taken = new Set<string>();
    // The order of record first: what `like` (the recorded inputs, a list) holds, in its order.
    if (Array.isArray(like)) {
      for (const old of like) {
        const k = keyOf(old);
        if (k === undefined || !Object.hasOwn(value, k) || taken.has(k)) continue;
        taken.add(k);
        list.push(item(k, old));
      }
    }
    const keys = Object.keys(value);
    if (taken.size < keys.length) for (const k of keys.filter((x) => !taken.has(x)).sort()) list.push(item(k, undefined));
    return list;
  }
  if (isRecord(value)) {
    const out: Record_ = {};
    for (const [k, v] of Object.entries(value)) out[k] = listedAt(childSchema(node, k), doc, v, isRecord(like) ? like[k] : undefined, depth + 1);
    return out;
  }
  return value;
}

/** `inputs` with every list the schema keys ("x-key") as an object keyed by its elements' identity, where it can be. */
export function keyedInputs<T>(schema: object, inputs: T): T {
  return keyedAt(schema, schema, inputs, 0) as T;
}

/**
 * `inputs` with every keyed list a list again (a list stays as it is), in
 * `like`'s order where `like` (recorded inputs, lists) holds the element,
 * then in key order.
 */
export function listedInputs<T>(schema: object, inputs: T, like?: unknown): T {
  return listedAt(schema, schema, inputs, like, 0) as T;
}
