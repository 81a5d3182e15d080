import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import common from "../../schema/common.json";
import type { SshConnection } from "./inputs.generated";

/** A refused input: the property path (dotted, as Pulumi shows it) and why. */
export interface CheckFailure {
  property: string;
  reason: string;
}

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, useDefaults: false });
/**
 * `"x-unordered": true` on an array schema: the list is a set, its order
 * means nothing (backends, VIPs, gateways, amphorae, ...), and diff compares
 * it order-insensitively (`canonicalInputs`). `false`: its order matters.
 * Every array in schema/ says which (test/unit/unordered-lists.test.ts).
 * An annotation only: it validates nothing.
 */
export const UNORDERED = "x-unordered";
ajv.addKeyword({ keyword: UNORDERED, type: "array", schemaType: "boolean" });
/**
 * `"x-reach": true` on an object schema (the SSH connection): how a host is
 * reached, not what is on it. A change of any of its properties but `host`
 * (a rotated key, another user, port or timeout) changes nothing on the
 * host, so update logs in to each host the new way to verify it, sends
 * nothing else and records it (`dataplaneInputs`, provider/model/reach.ts).
 */
export const REACH = "x-reach";
ajv.addKeyword({ keyword: REACH, type: "object", schemaType: "boolean" });
/**
 * `"x-outputs": { "type": "object", "properties": {...} }` at a resource
 * schema's top: what the resource records besides its inputs (ids, cookie,
 * lastApply, ...), from which schema/generate-types.js generates the state
 * types and the resource classes' outputs. An annotation only: inputs are
 * never validated against it.
 */
export const OUTPUTS = "x-outputs";
ajv.addKeyword({ keyword: OUTPUTS, schemaType: "object" });
ajv.addSchema(common, "common.json");
const compiled = new Map<object, ValidateFunction>();

/** "/gateways/0/connection/host" -> "gateways[0].connection.host" */
function propertyPath(pointer: string, extra?: string): string {
  const parts = pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) parts.push(extra);
  let path = "";
  for (const p of parts) path = /^\d+$/.test(p) ? `${path}[${p}]` : joinProperty(path, p);
  return path;
}

/**
 * `path.key`, or `path["key"]` for a key that is not a plain name (a user's
 * unknown or map key with `.`, `[`, spaces or control characters), so a
 * property path always reads back to the property it names.
 */
export function joinProperty(path: string, key: string): string {
  if (!/^[A-Za-z0-9_$:-]+$/.test(key) || /^\d+$/.test(key)) return `${path}[${JSON.stringify(key)}]`;
  return path ? `${path}.${key}` : key;
}

/** Reasons say what was expected, from the schema's own description; the value itself is never echoed (it may be a secret). */
function toFailure(e: ErrorObject): CheckFailure {
  const described = (e.parentSchema as { description?: string } | undefined)?.description;
  switch (e.keyword) {
    case "required":
      return { property: propertyPath(e.instancePath, (e.params as { missingProperty: string }).missingProperty), reason: "is required" };
    case "additionalProperties":
      return {
        property: propertyPath(e.instancePath, (e.params as { additionalProperty: string }).additionalProperty),
        reason: "is not a known property",
      };
    case "pattern":
    case "type":
    case "minimum":
    case "maximum":
    case "maxLength":
    case "minLength":
      return { property: propertyPath(e.instancePath), reason: described ? `must be ${described}` : `${e.message}` };
    case "enum":
      return {
        property: propertyPath(e.instancePath),
        reason: `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(", ")}`,
      };
    default:
      return { property: propertyPath(e.instancePath), reason: e.message ?? "is invalid" };
  }
}

/** Keywords about how much is declared, not about what a value is: a read back from a host that holds less keeps the grammar. */
const COUNTS = new Set(["required", "minItems", "minProperties"]);

/**
 * Validates inputs against a resource schema; one failure per problem,
 * deduplicated. `grammarOnly`: every value present must be well formed, but
 * nothing need be present (recorded inputs a read wrote, e.g. no VIP left on
 * a gateway whose ovs-vswitchd restarted).
 */
export function validateAgainstSchema(schema: object, inputs: unknown, grammarOnly = false): CheckFailure[] {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (validate(inputs)) return [];
  const failures = (validate.errors ?? []).filter((e) => e.keyword !== "if" && !(grammarOnly && COUNTS.has(e.keyword))).map(toFailure);
  const seen = new Set<string>();
  return failures.filter((f) => {
    const key = `${f.property}\0${f.reason}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** Rules on a connection that JSON Schema draft-07 cannot say plainly. */
export function checkConnection(c: SshConnection, at: string): CheckFailure[] {
  const failures: CheckFailure[] = [];
  if (!c.user) failures.push({ property: `${at}.user`, reason: "is required: give it here or in the stack's ovslb:ssh" });
  if (!c.hostKey && !c.knownHosts) {
    failures.push({ property: `${at}.hostKey`, reason: "give hostKey or knownHosts: host keys are always verified" });
  }
  if (!c.privateKey && !c.privateKeyPath && !c.agent) {
    failures.push({ property: `${at}.privateKey`, reason: "give privateKey, privateKeyPath or agent: only key authentication is used" });
  }
  if (c.jumpHost) failures.push(...checkConnection(c.jumpHost, `${at}.jumpHost`));
  return failures;
}

type SchemaNode = {
  $ref?: string;
  type?: string;
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  [UNORDERED]?: boolean;
  [REACH]?: boolean;
};

const DOCUMENTS: Record<string, object> = { "common.json": common };

/** Follows a "$ref" ("common.json#/definitions/x" or "#/definitions/x") from within `doc`. */
function resolveRef(ref: string, doc: object): { node: SchemaNode; doc: object } {
  const hash = ref.indexOf("#");
  const file = hash < 0 ? ref : ref.slice(0, hash);
  const target = file === "" ? doc : DOCUMENTS[file];
  if (!target) throw new Error(`schema: cannot resolve $ref ${ref}`);
  let node: unknown = target;
  for (const step of (hash < 0 ? "" : ref.slice(hash + 1)).split("/").filter(Boolean)) {
    node = (node as Record<string, unknown> | undefined)?.[step.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  if (!node || typeof node !== "object") throw new Error(`schema: cannot resolve $ref ${ref}`);
  return { node: node, doc: target };
}

/** JSON with object keys sorted: equal values give equal text, whatever their key order. */
function stableText(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableText).join(",")}]`;
  if (v && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, x]) => `${JSON.stringify(k)}:${stableText(x)}`)
      .join(",")}}`;
  }
  return typeof v === "bigint" ? `"${v.toString()}n"` : (JSON.stringify(v) ?? "null");
}

interface Walk {
  /** Sort the lists the schema marks "x-unordered". */
  sortSets: boolean;
  /** Replaces each connection ("x-reach") object. */
  reach?: (connection: Record<string, unknown>) => unknown;
}

function walkAt(node: SchemaNode | undefined, doc: object, value: unknown, depth: number, walk: Walk): unknown {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
  if (walk.reach && node?.[REACH] === true && value && typeof value === "object" && !Array.isArray(value)) {
    return walk.reach(value as Record<string, unknown>);
  }
  if (Array.isArray(value)) {
    const items = value.map((v) => walkAt(node?.items, doc, v, depth + 1, walk));
    if (!walk.sortSets || node?.[UNORDERED] !== true) return items;
    // A set: ordered by each element's whole canonical text, a stable and total key.
    return items
      .map((v) => [stableText(v), v] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, v]) => v);
  }
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const extra = node?.additionalProperties;
      const sub = node?.properties?.[k] ?? (typeof extra === "object" ? extra : undefined);
      out[k] = walkAt(sub, doc, v, depth + 1, walk);
    }
    return out;
  }
  return value;
}

/**
 * `inputs` with every list the schema marks "x-unordered" sorted into one
 * canonical order (nested lists first), so two inputs that differ only in
 * the order of such lists are deeply equal. Everything else is kept as is;
 * properties the schema does not know are kept untouched.
 */
export function canonicalInputs<T>(schema: object, inputs: T): T {
  return walkAt(schema, schema, inputs, 0, { sortSets: true }) as T;
}

/**
 * What of `inputs` is on the hosts: canonicalInputs with every connection
 * ("x-reach") reduced to its host. Two inputs with the same dataplane
 * inputs differ only in how the hosts are reached.
 */
export function dataplaneInputs<T>(schema: object, inputs: T): T {
  return walkAt(schema, schema, inputs, 0, { sortSets: true, reach: (c) => ({ host: c.host }) }) as T;
}

/** `inputs` with every connection ("x-reach") replaced by `f(connection)`; nothing else changed. */
export function mapConnections<T>(schema: object, inputs: T, f: (connection: SshConnection) => SshConnection): T {
  return walkAt(schema, schema, inputs, 0, { sortSets: false, reach: (c) => f(c as unknown as SshConnection) }) as T;
}
