import { createHash } from "node:crypto";
import type { SshConnection } from "./inputs.generated";
import { mapConnections } from "./validate";

/**
 * Which logins prove a new way of reaching the hosts (an update that changes
 * only connections, "x-reach" in schema/): one per distinct login among the
 * connections of the inputs. Pure, so it is tested without a host.
 */

/** The settings that make one login differ from another; timeouts do not (they bound it, they do not change who logs in where). */
function loginKey(c: SshConnection): string {
  const identity = {
    host: c.host,
    port: c.port ?? 22,
    user: c.user ?? null,
    hostKey: c.hostKey ?? null,
    knownHosts: c.knownHosts ?? null,
    privateKey: c.privateKey ?? null,
    privateKeyPath: c.privateKeyPath ?? null,
    passphrase: c.passphrase ?? null,
    agent: c.agent ?? null,
    jumpHost: c.jumpHost ? loginKey(c.jumpHost) : null,
  };
  // Hashed: the key carries credentials, and a hash of them is all a comparison needs.
  return createHash("sha256").update(JSON.stringify(identity)).digest("hex");
}

/**
 * Every connection ("x-reach") of `inputs`, as `asUsed` turns it into the one
 * the transport logs in with (the stack's `ovslb:ssh` under it), once per
 * distinct host, port, user, host-key pin, credentials and jump host, in the
 * order the inputs first name them. Two connections that differ only in
 * their timeouts are one login (the first one's timeouts).
 */
export function loginsToVerify(schema: object, inputs: unknown, asUsed: (c: SshConnection) => SshConnection = (c) => c): SshConnection[] {
  const logins = new Map<string, SshConnection>();
  mapConnections(schema, inputs, (declared) => {
    const c = asUsed(declared);
    const key = loginKey(c);
    if (!logins.has(key)) logins.set(key, c);
    return declared;
  });
  return [...logins.values()];
}
