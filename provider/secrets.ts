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

/** A deep copy of value without credential fields, and the credentials by path. */
export function liftCredentials<T>(value: T): { value: T; credentials: Credentials } {
  const credentials: Credentials = {};
  const walk = (v: Json, path: string): Json => {
    if (Array.isArray(v)) return v.map((item, i) => walk(item, `${path}[${i}]`));
    if (v === null || typeof v !== "object") return v;
    const out: Record<string, Json> = {};
    for (const [k, child] of Object.entries(v as Record<string, Json>)) {
      if ((CREDENTIAL_KEYS as readonly string[]).includes(k) && typeof child === "string") {
        (credentials[path] ??= {})[k] = child;
      } else {
        out[k] = walk(child, path ? `${path}.${k}` : k);
      }
    }
    return out;
  };
  return { value: walk(value, "") as T, credentials };
}

/** Puts lifted credentials back where they were. Paths that no longer exist are ignored. */
export function restoreCredentials<T>(value: T, credentials: Credentials | undefined): T {
  if (!credentials) return value;
  const copy = structuredClone(value) as Json;
  for (const [path, fields] of Object.entries(credentials)) {
    let target: Json = copy;
    for (const step of path.match(/[^.[\]]+/g) ?? []) {
      if (target === null || typeof target !== "object") break;
      target = (target as Record<string, Json>)[step];
    }
    if (target !== null && typeof target === "object") Object.assign(target, fields);
  }
  return copy as T;
}
