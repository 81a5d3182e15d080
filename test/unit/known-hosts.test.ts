import { describe, it, expect } from "vitest";
import { createHmac, randomBytes } from "node:crypto";
import { hostKeyAlgorithmsFor, keyMatches, parsePublicKey, trustedKeysFor } from "../../provider/transport/known-hosts";

function blob(type: string, body: Buffer): string {
  const t = Buffer.from(type);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(t.length);
  return Buffer.concat([len, t, body]).toString("base64");
}
const KEY_A = `ssh-ed25519 ${blob("ssh-ed25519", randomBytes(36))}`;
const KEY_B = `ssh-ed25519 ${blob("ssh-ed25519", randomBytes(36))}`;

function hashed(token: string): string {
  const salt = randomBytes(20);
  return `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update(token).digest("base64")}`;
}

describe("host key pinning", () => {
  it("parses a pinned key and refuses malformed ones without echoing them", () => {
    expect(parsePublicKey(`${KEY_A} comment`).type).toBe("ssh-ed25519");
    expect(() => parsePublicKey("ssh-dss AAAA")).toThrow(/unsupported host key type/);
    expect(() => parsePublicKey("ssh-ed25519 !!!")).toThrow(/not valid base64/);
    expect(() => parsePublicKey(`ssh-rsa ${KEY_A.split(" ")[1]}`)).toThrow(/does not match its type/);
  });

  it("matches plain, bracketed-port and hashed known_hosts entries", () => {
    const lines = [`# comment`, `10.0.0.1,gw1 ${KEY_A}`, `[10.0.0.2]:2222 ${KEY_B}`, `${hashed("10.0.0.3")} ${KEY_A}`].join("\n");
    expect(trustedKeysFor(lines, "gw1", 22).trusted).toHaveLength(1);
    expect(trustedKeysFor(lines, "10.0.0.2", 2222).trusted).toHaveLength(1);
    expect(trustedKeysFor(lines, "10.0.0.2", 22).trusted).toHaveLength(0);
    expect(trustedKeysFor(lines, "10.0.0.3", 22).trusted).toHaveLength(1);
    expect(trustedKeysFor(lines, "10.0.0.4", 22).trusted).toHaveLength(0);
  });

  it("does not trust wildcards or cert-authority lines, and reports revoked keys", () => {
    const lines = [`* ${KEY_A}`, `@cert-authority gw1 ${KEY_A}`, `gw1 ${KEY_B}`, `@revoked gw1 ${KEY_B}`].join("\n");
    const { trusted, revoked } = trustedKeysFor(lines, "gw1", 22);
    expect(trusted.map((k) => k.blob.toString("base64"))).toEqual([KEY_B.split(" ")[1]]);
    expect(keyMatches(trusted[0].blob, revoked)).toBe(true);
  });

  it("offers only the algorithms of the trusted keys", () => {
    const rsa = parsePublicKey(`ssh-rsa ${blob("ssh-rsa", randomBytes(64))}`);
    expect(hostKeyAlgorithmsFor([parsePublicKey(KEY_A), rsa])).toEqual(["ssh-ed25519", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]);
  });
});
