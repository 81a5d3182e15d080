import { childSchema, reachesUnder, resolveRef, REACH, type SchemaNode } from "./model/validate";

/**
 * SSH credentials (privateKey, passphrase) never sit in a resource's plain
 * outputs: they are lifted into one top-level output, `sshCredentials`, which
 * every resource declares as an additional secret output, keyed by where
 * they were found. Before a host is contacted they are put back.
 */

export const CREDENTIAL_KEYS = ["privateKey", "passphrase"] as const;
export const CREDENTIALS_OUTPUT = "sshCredentials";

export type Credentials = Record<string, Record<string, string>>;

type Json = unknown;

/**
 * A copy of value without credential fields, and the credentials by path.
 * With a resource's schema, only the parts that can hold a connection
 * ("x-reach") are walked and copied; the rest is shared, not copied (a load
 * balancer's 100,000 backends). Without one, everything is walked.
 */
export function liftCredentials<T>(value: T, schema?: object): { value: T; credentials: Credentials } {
  const credentials: Credentials = {};
  const walk = (v: Json, path: string, node: SchemaNode | undefined, doc: object | undefined): Json => {
    if (v === null || typeof v !== "object") return v;
    if (doc) {
      while (node?.$ref) ({ node, doc } = resolveRef(node.$ref, doc));
      // Below a connection everything is walked: its jump host's credentials too.
      if (node?.[REACH] === true) [node, doc] = [undefined, undefined];
      else if (!reachesUnder(node, doc)) return v;
    }
    if (Array.isArray(v)) return v.map((item, i) => walk(item, `${path}[${i}]`, node?.items, doc));
    const out: Record<string, Json> = {};
    for (const [k, child] of Object.entries(v as Record<string, Json>)) {
      if ((CREDENTIAL_KEYS as readonly string[]).includes(k) && typeof child === "string") {
        (credentials[path] ??= {})[k] = child;
      } else {
        out[k] = walk(child, path ? `${path}.${k}` : k, doc && childSchema(node, k), doc);
      }
    }
    return out;
  };
  return { value: walk(value, "", schema, schema) as T, credentials };
}

/**
 * Puts lifted credentials back where they were: the objects on each path are
 * copied, nothing else (value itself is not changed). Paths that no longer
 * exist are ignored.
 */
export function restoreCredentials<T>(value: T, credentials: Credentials | undefined): T {
  if (!credentials) return value;
  const put = (v: Json, steps: string[], fields: Record<string, string>): Json => {
    if (v === null || typeof v !== "object") return v;
    if (steps.length === 0) return Array.isArray(v) ? v : { ...(v as Record<string, Json>), ...fields };
    const [step, ...rest] = steps;
    const container = v as Record<string, Json>;
    if (!Object.hasOwn(container, step)) return v;
    const copy = (Array.isArray(v) ? [...(v as Json[])] : { ...container }) as Record<string, Json>;
    copy[step] = put(container[step], rest, fields);
    return copy;
  };
  let out = value as Json;
  for (const [path, fields] of Object.entries(credentials)) out = put(out, path.match(/[^.[\]]+/g) ?? [], fields);
  return out as T;
}
