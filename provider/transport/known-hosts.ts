import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Host key pinning: the keys a host may present, from a pinned key
 * ("ssh-ed25519 AAAA...") or OpenSSH known_hosts lines. Pure, so it is
 * tested without a host.
 */

export interface TrustedKey {
  /** Key type as written, e.g. "ssh-ed25519". */
  type: string;
  /** The raw public key blob (what the server sends in its KEX reply). */
  blob: Buffer;
}

const KEY_TYPES = new Set(["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"]);

/** Parses "TYPE BASE64 [comment]"; throws naming what is wrong (never echoing the value). */
export function parsePublicKey(text: string): TrustedKey {
  const [type, b64] = text.trim().split(/\s+/);
  if (!KEY_TYPES.has(type)) throw new Error(`unsupported host key type "${type ?? ""}"`);
  if (!b64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error("host key is not valid base64");
  const blob = Buffer.from(b64, "base64");
  // The blob starts with its own type string: a cheap consistency check.
  if (blobKeyType(blob) !== type) {
    throw new Error(`host key blob does not match its type "${type}"`);
  }
  return { type, blob };
}

/** A public key blob's type, read from the blob itself (its first string); "" when it has none. */
export function blobKeyType(blob: Buffer): string {
  const len = blob.length >= 4 ? blob.readUInt32BE(0) : 0;
  return blob.subarray(4, 4 + len).toString("latin1");
}

/** How known_hosts names a host: bare for port 22, "[host]:port" otherwise. */
export function knownHostsToken(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

function matchesPattern(pattern: string, token: string): boolean {
  if (pattern.startsWith("|1|")) {
    const [, , salt, hash] = pattern.split("|");
    if (!salt || !hash) return false;
    const mac = createHmac("sha1", Buffer.from(salt, "base64")).update(token).digest();
    const want = Buffer.from(hash, "base64");
    return want.length === mac.length && timingSafeEqual(mac, want);
  }
  return pattern === token;
}

/**
 * The keys known_hosts lines trust for host:port. Plain and hashed host
 * patterns are supported; wildcard and negated patterns and @cert-authority
 * lines are not trusted. Keys on a matching @revoked line are returned in
 * `revoked` so the caller can refuse them.
 */
export function trustedKeysFor(knownHosts: string, host: string, port: number): { trusted: TrustedKey[]; revoked: TrustedKey[] } {
  const token = knownHostsToken(host, port);
  const trusted: TrustedKey[] = [];
  const revoked: TrustedKey[] = [];
  for (const raw of knownHosts.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    let fields = line.split(/\s+/);
    let marker: string | undefined;
    if (fields[0].startsWith("@")) {
      marker = fields[0];
      fields = fields.slice(1);
    }
    const [patterns, type, b64] = fields;
    if (!patterns || !type || !b64) continue;
    if (!patterns.split(",").some((p) => matchesPattern(p, token))) continue;
    let key: TrustedKey;
    try {
      key = parsePublicKey(`${type} ${b64}`);
    } catch {
      continue;
    }
    if (marker === "@revoked") revoked.push(key);
    else if (marker === undefined) trusted.push(key);
  }
  return { trusted, revoked };
}

/** The host key algorithms to offer so that the server presents a key we can check. */
export function hostKeyAlgorithmsFor(keys: readonly TrustedKey[]): string[] {
  const algorithms = new Set<string>();
  for (const { type } of keys) {
    if (type === "ssh-rsa") ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"].forEach((a) => algorithms.add(a));
    else algorithms.add(type);
  }
  return [...algorithms];
}

export function keyMatches(presented: Buffer, keys: readonly TrustedKey[]): boolean {
  return keys.some((k) => k.blob.length === presented.length && timingSafeEqual(k.blob, presented));
}
