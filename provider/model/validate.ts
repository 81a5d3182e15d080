import type Ajv from "ajv";
import type { ErrorObject, Options, ValidateFunction } from "ajv";
import { createHash } from "node:crypto";
import { join } from "node:path";
import common from "../../schema/common.json";
import type { SshConnection } from "./inputs.generated";

/** A refused input: the property path (dotted, as Pulumi shows it) and why. */
export interface CheckFailure {
  property: string;
  reason: string;
}

/**
 * `"x-unordered": true` on an array schema: the list is a set, its order
 * means nothing (backends, VIPs, gateways, amphorae, ...), and diff compares
 * it order-insensitively (`sameInputs`). `false`: its order matters.
 * Every array in schema/ says which (test/unit/unordered-lists.test.ts).
 * An annotation only: it validates nothing.
 */
export const UNORDERED = "x-unordered";
/**
 * `"x-reach": true` on an object schema (the SSH connection): how a host is
 * reached, not what is on it. A change of any of its properties but `host`
 * (a rotated key, another user, port or timeout) changes nothing on the
 * host, so update logs in to each host the new way to verify it, sends
 * nothing else and records it (`sameInputs` with `reach`, provider/model/reach.ts).
 */
export const REACH = "x-reach";
/**
 * `"x-outputs": { "type": "object", "properties": {...} }` at a resource
 * schema's top: what the resource records besides its inputs (ids, cookie,
 * lastApply, ...), from which schema/generate-types.js generates the state
 * types and the resource classes' outputs. An annotation only: inputs are
 * never validated against it.
 */
export const OUTPUTS = "x-outputs";
/**
 * `"x-key": "{address}:{port}"` on an "x-unordered" array of objects: the
 * identity of its elements, as a template of their properties (`{name|default}`
 * for one with a default). The inputs `check` returns hold such a list as an
 * object keyed by it (provider/model/keyed.ts), so the engine's diff of the
 * checked inputs (all a preview shows of a dynamic provider) names the element
 * added, removed or changed. An annotation only: it validates nothing.
 */
export const KEY = "x-key";

/**
 * Ajv as ovslb validates: every failure (allErrors), each with its schema
 * (verbose: a reason quotes the schema's description), the annotation
 * keywords above, and common.json known by its id.
 */
export function schemaAjv(options: Options = {}): Ajv {
  // Loaded only where a schema is compiled: a process the build's validators serve spares its 60-130 ms.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { default: AjvClass } = require("ajv") as { default: typeof Ajv };
  const ajv = new AjvClass({ allErrors: true, verbose: true, strict: true, useDefaults: false, ...options });
  ajv.addKeyword({ keyword: UNORDERED, type: "array", schemaType: "boolean" });
  ajv.addKeyword({ keyword: REACH, type: "object", schemaType: "boolean" });
  ajv.addKeyword({ keyword: OUTPUTS, schemaType: "object" });
  ajv.addKeyword({ keyword: KEY, type: "array", schemaType: "string" });
  ajv.addSchema(common, "common.json");
  return ajv;
}

/** What names a schema among the precompiled validators: the digest of its JSON text, so a schema that changed is never served a stale one. */
export const schemaDigest = (schema: object): string => createHash("sha256").update(JSON.stringify(schema)).digest("hex");

/**
 * The validators of `schemas` as one CommonJS module (ajv's standalone code),
 * each exported under its schema's digest. The build writes the resources'
 * and components' (schema/build-validators.js, into dist/schema/validators.js).
 */
export function validatorsModule(schemas: readonly object[]): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { default: standaloneCode } = require("ajv/dist/standalone") as { default: (ajv: Ajv, refs: Record<string, string>) => string };
  const ajv = schemaAjv({ code: { source: true } });
  const exported: Record<string, string> = {};
  for (const schema of schemas) {
    const digest = schemaDigest(schema);
    if (exported[digest]) continue;
    ajv.addSchema(schema, digest);
    exported[digest] = digest;
  }
  return standaloneCode(ajv, exported);
}

/** Where the build puts validatorsModule's output for the schemas ovslb ships; absent when run from source. */
export const PRECOMPILED_VALIDATORS = join(__dirname, "..", "..", "schema", "validators.js");

/**
 * Compiling a resource's schema costs 120-210 ms of CPU, in every plugin and
 * program process (each `pulumi preview` or `up` starts them anew); taking
 * the build's validator, 13-30 ms (bench preview-cost). A schema not among them (a stack
 * config's, or any when run from source) is compiled at first use.
 */
let precompiled: Record<string, ValidateFunction> | undefined;
let runtimeAjv: Ajv | undefined;
const validators = new Map<object, { validate: ValidateFunction; precompiled: boolean }>();

function validatorOf(schema: object): { validate: ValidateFunction; precompiled: boolean } {
  let v = validators.get(schema);
  if (!v) {
    precompiled ??= loadPrecompiled();
    const built = precompiled[schemaDigest(schema)];
    v = { validate: built ?? (runtimeAjv ??= schemaAjv()).compile(schema), precompiled: built !== undefined };
    validators.set(schema, v);
  }
  return v;
}

function loadPrecompiled(): Record<string, ValidateFunction> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(PRECOMPILED_VALIDATORS) as Record<string, ValidateFunction>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND" && (e as Error).message.includes(PRECOMPILED_VALIDATORS)) return {};
    throw e;
  }
}

/** Whether `schema` is validated by the build's validator rather than compiled here (a test's view). */
export const servedPrecompiled = (schema: object): boolean => validatorOf(schema).precompiled;

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
  const { validate } = validatorOf(schema);
  if (validate(inputs)) return [];
  const failures = (validate.errors ?? []).filter((e) => e.keyword !== "if" && !(grammarOnly && COUNTS.has(e.keyword))).map(toFailure);
  const seen = new Set<string>();
  return failures.filter((f) => {
    const key = `${f.property}\0${f.reason}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/**
 * Why a connection as the transport uses it cannot log in, if it still names
 * a profile: provider/stack-ssh.ts resolves every profile the stack has and
 * leaves named only one that `ovslb:ssh.profiles` does not have.
 */
export const unknownSshProfile = (c: SshConnection): string | undefined =>
  c.sshProfile === undefined ? undefined : `profile "${c.sshProfile}" is not in ovslb:ssh.profiles`;

/** Rules on a connection (as the transport uses it) that JSON Schema draft-07 cannot say plainly. */
export function checkConnection(c: SshConnection, at: string): CheckFailure[] {
  // No login to check: the one it names is not there.
  const unknown = unknownSshProfile(c);
  if (unknown) return [{ property: `${at}.sshProfile`, reason: unknown }];
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

export type SchemaNode = {
  $ref?: string;
  type?: string;
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  [UNORDERED]?: boolean;
  [REACH]?: boolean;
  [KEY]?: string;
};

const DOCUMENTS: Record<string, object> = { "common.json": common };

/** Resolved "$ref"s per document: a walk of a load balancer's inputs follows the same few refs 100,000s of times. */
const RESOLVED = new WeakMap<object, Map<string, { node: SchemaNode; doc: object }>>();

/** Follows a "$ref" ("common.json#/definitions/x" or "#/definitions/x") from within `doc`. */
export function resolveRef(ref: string, doc: object): { node: SchemaNode; doc: object } {
  let known = RESOLVED.get(doc);
  if (!known) RESOLVED.set(doc, (known = new Map<string, { node: SchemaNode; doc: object }>()));
  const cached = known.get(ref);
  if (cached) return cached;
  const hash = ref.indexOf("#");
  const file = hash < 0 ? ref : ref.slice(0, hash);
  const target = file === "" ? doc : DOCUMENTS[file];
  if (!target) throw new Error(`schema: cannot resolve $ref ${ref}`);
  let node: unknown = target;
  for (const step of (hash < 0 ? "" : ref.slice(hash + 1)).split("/").filter(Boolean)) {
    node = (node as Record<string, unknown> | undefined)?.[step.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  if (!node || typeof node !== "object") throw new Error(`schema: cannot resolve $ref ${ref}`);
  const resolved = { node: node, doc: target };
  known.set(ref, resolved);
  return resolved;
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

/** Replaces a connection ("x-reach") object. */
type Reach = (connection: Record<string, unknown>) => unknown;

/** `value` with each connection the schema marks "x-reach" replaced by `reach(connection)`; nothing else changed. */
function walkAt(node: SchemaNode | undefined, doc: object, value: unknown, depth: number, reach: Reach): unknown {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
  // A part of the inputs with no connection under it is shared, not copied (a load balancer's backends).
  if (!reachesUnder(node, doc)) return value;
  if (node?.[REACH] === true && value && typeof value === "object" && !Array.isArray(value)) return reach(value as Record<string, unknown>);
  if (Array.isArray(value)) return value.map((v) => walkAt(node?.items, doc, v, depth + 1, reach));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out[k] = walkAt(childSchema(node, k), doc, v, depth + 1, reach);
    }
    return out;
  }
  return value;
}

/** The schema of property `key` of an object `node` describes: its own, or the node's additionalProperties. */
export function childSchema(node: SchemaNode | undefined, key: string): SchemaNode | undefined {
  const extra = node?.additionalProperties;
  return node?.properties?.[key] ?? (typeof extra === "object" ? extra : undefined);
}

/**
 * Whether `mark` holds for a schema node or any node under it (refs
 * resolved), each node's answer cached: a walk of large inputs skips, and
 * shares instead of copying, every part with nothing marked under it.
 */
export function markedUnder(mark: (node: SchemaNode) => boolean): (node: SchemaNode | undefined, doc: object) => boolean {
  const known = new WeakMap<object, boolean>();
  const under = (start: SchemaNode | undefined, startDoc: object): boolean => {
    let [node, doc] = [start, startDoc];
    while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
    if (!node) return false;
    const cached = known.get(node);
    if (cached !== undefined) return cached;
    // A cycle through refs counts as marked until known: such a part is walked, never wrongly shared.
    known.set(node, true);
    const extra = node.additionalProperties;
    const children = [node.items, ...Object.values(node.properties ?? {}), typeof extra === "object" ? extra : undefined];
    const found = mark(node) || children.some((child) => under(child, doc));
    known.set(node, found);
    return found;
  };
  return under;
}

/** Whether a connection ("x-reach") can be at or under a schema node, as walkAt walks. */
export const reachesUnder = markedUnder((node) => node[REACH] === true);

/**
 * Whether `a` and `b` are the same inputs: equal, where a list the schema
 * marks "x-unordered" compares as a set (nested lists too) and object key
 * order never counts; properties the schema does not know compare as they
 * are. With `reach`, each connection ("x-reach") counts as what `reach`
 * makes of it. Lists are compared in place first, so inputs that are the
 * same in the same order (a preview with nothing changed) or differ in a
 * list's length (a backend added) cost one walk and no copy; only a list
 * whose order differs is compared as sorted canonical texts.
 */
export function sameInputs(schema: object, a: unknown, b: unknown, opts: { reach?: Reach } = {}): boolean {
  return sameAt(schema, schema, a, b, 0, opts.reach);
}

/** A schema node with its "$ref"s followed. */
export function resolvedNode(node: SchemaNode | undefined, doc: object): { node: SchemaNode | undefined; doc: object } {
  while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
  return { node, doc };
}

/** Whether a set ("x-unordered") or a connection ("x-reach") can be at or under a schema node: below none, values compare as plain JSON. */
const comparedUnder = markedUnder((node) => node[UNORDERED] === true || node[REACH] === true);

/** Plain JSON equality, object key order and undefined properties aside: the compare of a part with no set or connection under it (a backend). */
function plainEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!plainEqual(a[i], b[i])) return false;
    return true;
  }
  const [ra, rb] = [a as Record<string, unknown>, b as Record<string, unknown>];
  let defined = 0;
  for (const k in ra) {
    if (!Object.hasOwn(ra, k) || ra[k] === undefined) continue;
    if (!Object.hasOwn(rb, k) || !plainEqual(ra[k], rb[k])) return false;
    defined++;
  }
  for (const k in rb) if (Object.hasOwn(rb, k) && rb[k] !== undefined) defined--;
  return defined === 0;
}

function sameAt(node: SchemaNode | undefined, doc: object, a: unknown, b: unknown, depth: number, reach: Reach | undefined): boolean {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  if (a === b) return true;
  ({ node, doc } = resolvedNode(node, doc));
  if (!comparedUnder(node, doc)) return plainEqual(a, b);
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
  if (reach && node?.[REACH] === true && isObject(a) && isObject(b)) return stableText(reach(a)) === stableText(reach(b));
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    const unordered = node?.[UNORDERED] === true;
    // Elements with nothing marked under them (a VIP's backends) compare plainly, the schema not looked up for each.
    const items = resolvedNode(node?.items, doc);
    const plain = !comparedUnder(items.node, items.doc);
    // Elements equal in place pair up (as sets too: taking one equal element from each side keeps them equal or not).
    const differ: number[] = [];
    for (let i = 0; i < a.length; i++) {
      if (plain ? plainEqual(a[i], b[i]) : sameAt(items.node, items.doc, a[i], b[i], depth + 1, reach)) continue;
      if (!unordered) return false;
      differ.push(i);
    }
    if (differ.length === 0) return true;
    const texts = (list: unknown[]) => differ.map((i) => textAt(node?.items, doc, list[i], depth + 1, reach)).sort();
    const [ta, tb] = [texts(a), texts(b)];
    return ta.every((t, i) => t === tb[i]);
  }
  if (isObject(a) && isObject(b)) {
    const keys = (o: Record<string, unknown>) => Object.keys(o).filter((k) => o[k] !== undefined);
    const [ka, kb] = [keys(a), keys(b)];
    if (ka.length !== kb.length) return false;
    return ka.every((k) => k in b && sameAt(childSchema(node, k), doc, a[k], b[k], depth + 1, reach));
  }
  return stableText(a) === stableText(b);
}

/** The canonical text of a value: JSON with object keys sorted and every list the schema marks "x-unordered" sorted. */
function textAt(node: SchemaNode | undefined, doc: object, value: unknown, depth: number, reach: Reach | undefined): string {
  if (depth > 64) throw new Error("schema: $ref nesting too deep");
  while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
  if (reach && node?.[REACH] === true && value && typeof value === "object" && !Array.isArray(value)) {
    return stableText(reach(value as Record<string, unknown>));
  }
  if (Array.isArray(value)) {
    const items = value.map((v) => textAt(node?.items, doc, v, depth + 1, reach));
    if (node?.[UNORDERED] === true) items.sort();
    return `[${items.join(",")}]`;
  }
  if (value && typeof value === "object") {
    const record = value as Record<string, unknown>;
    let text = "";
    for (const k of Object.keys(record).sort()) {
      const v = record[k];
      if (v === undefined) continue;
      text += `${text === "" ? "" : ","}${JSON.stringify(k)}:${textAt(childSchema(node, k), doc, v, depth + 1, reach)}`;
    }
    return `{${text}}`;
  }
  return stableText(value);
}

/** `inputs` with every connection ("x-reach") replaced by `f(connection)`; nothing else changed. */
export function mapConnections<T>(schema: object, inputs: T, f: (connection: SshConnection) => SshConnection): T {
  return walkAt(schema, schema, inputs, 0, (c) => f(c as unknown as SshConnection)) as T;
}
