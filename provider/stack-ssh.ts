import common from "../schema/common.json";
import { cliFloorFailures } from "./cli-floor";
import type { SshConnection } from "./model/inputs.generated";
import { validateAgainstSchema, type CheckFailure } from "./model/validate";

/**
 * `ovslb:ssh`, the stack's SSH settings: every connection of every ovslb
 * resource takes them unless it sets its own (user, port, privateKey,
 * passphrase, agent, knownHosts, timeouts, jumpHost). The engine hands the
 * stack config to the dynamic provider (its `configure`), so they live only
 * in the provider process: the transport applies them when it connects and
 * `check` when it checks a connection. They are never written into a
 * resource's inputs or outputs, so the key is not in state at all, a
 * rotated key changes no resource (nothing to update, nothing sent), and a
 * refresh or destroy after a rotation uses the new key.
 */

export const STACK_SSH_KEY = "ovslb:ssh";

export type SshDefaults = Omit<SshConnection, "host" | "hostKey">;

/** Any SshConnection setting but the host's identity (host, hostKey). */
const SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: Object.fromEntries(
    Object.keys(common.definitions.sshConnection.properties)
      .filter((k) => k !== "host" && k !== "hostKey")
      .map((k) => [k, { $ref: `common.json#/definitions/sshConnection/properties/${k}` }]),
  ),
};

let defaults: SshDefaults | undefined;
let failures: CheckFailure[] = [];

/** What is wrong with a value of `ovslb:ssh`, each failure named by its config key (e.g. `ovslb:ssh.port`); never the value. */
export function checkSshDefaults(value: unknown): CheckFailure[] {
  return validateAgainstSchema(SCHEMA, value).map((f) => ({
    property: f.property ? `${STACK_SSH_KEY}.${f.property}` : STACK_SSH_KEY,
    reason: f.reason,
  }));
}

/**
 * Takes the stack's `ovslb:ssh` as the engine sends it (JSON text, or the
 * object itself; undefined when unset). A bad value is reported by every check.
 */
export function configureStackSsh(raw: unknown): void {
  defaults = undefined;
  // Under a CLI below the floor the provider sees no stack config at all: every check says so.
  failures = cliFloorFailures();
  if (failures.length > 0) return;
  if (raw === undefined || raw === null || raw === "") return;
  let value: unknown = raw;
  if (typeof raw === "string") {
    try {
      value = JSON.parse(raw);
    } catch {
      value = undefined;
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    failures = [{ property: STACK_SSH_KEY, reason: "must be an object (set it with `pulumi config set --path ovslb:ssh.user NAME`)" }];
    return;
  }
  failures = checkSshDefaults(value);
  if (failures.length === 0) defaults = value;
}

/** The failures of the configured `ovslb:ssh`, for check. */
export const stackSshFailures = (): CheckFailure[] => failures;

/** A connection with `d` under it (its own settings win), and its jump host with them too. */
export function withSshDefaults(c: SshConnection, d: SshDefaults | undefined): SshConnection {
  if (!d) return c;
  const { jumpHost: defaultJump, ...rest } = d;
  const jump = c.jumpHost ?? defaultJump;
  return { ...rest, ...c, ...(jump ? { jumpHost: withSshDefaults(jump, rest) } : {}) };
}

/** A connection as the transport uses it: with the stack's `ovslb:ssh` under it. */
export const withStackSsh = (c: SshConnection): SshConnection => withSshDefaults(c, defaults);
