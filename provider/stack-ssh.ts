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
 *
 * `ovslb:ssh.profiles` names more logins of the same shape, for a stack
 * that reaches sites with different users or keys: a connection that says
 * `sshProfile: NAME` takes that profile's settings instead of `ovslb:ssh`'s
 * own (a setting the profile leaves out still comes from `ovslb:ssh`), and
 * its own settings still win over both. Only the name is in the inputs. The
 * profiles are inside `ovslb:ssh`, not a config key of their own, because
 * the provider text recorded in state hands the provider `ovslb:ssh` alone
 * (provider/dynamic.ts, docs/state-contract.md): so every recorded text,
 * old or new, gets the profiles too, and the secret stays one config key.
 */

export const STACK_SSH_KEY = "ovslb:ssh";
export const PROFILES_KEY = `${STACK_SSH_KEY}.profiles`;

/** One login's settings: any SshConnection setting but the host's identity (host, hostKey) and a profile name. */
export type SshDefaults = Omit<SshConnection, "host" | "hostKey" | "sshProfile">;

/** `ovslb:ssh`: the stack's login, and the named ones. */
export type StackSsh = SshDefaults & { profiles?: Record<string, SshDefaults> };

const LOGIN = {
  type: "object",
  additionalProperties: false,
  properties: Object.fromEntries(
    Object.keys(common.definitions.sshConnection.properties)
      .filter((k) => k !== "host" && k !== "hostKey" && k !== "sshProfile")
      .map((k) => [k, { $ref: `common.json#/definitions/sshConnection/properties/${k}` }]),
  ),
};

const SCHEMA = { ...LOGIN, properties: { ...LOGIN.properties, profiles: { type: "object", additionalProperties: LOGIN } } };

let configured: StackSsh | undefined;
let failures: CheckFailure[] = [];

const PROFILE_NAME = new RegExp(common.definitions.resourceName.pattern);

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** What is wrong with a value of `ovslb:ssh`, each failure named by its config key (e.g. `ovslb:ssh.port`, `ovslb:ssh.profiles.site-b.port`); never the value. */
export function checkSshDefaults(value: unknown): CheckFailure[] {
  const failures = validateAgainstSchema(SCHEMA, value).map((f) => ({
    property: f.property ? `${STACK_SSH_KEY}.${f.property}` : STACK_SSH_KEY,
    reason: f.reason,
  }));
  // Each name by itself (a name, not a secret): the schema's propertyNames would say only `profiles`.
  const profiles = isObject(value) && isObject(value.profiles) ? Object.keys(value.profiles) : [];
  for (const name of profiles.filter((n) => !PROFILE_NAME.test(n))) {
    failures.push({ property: `${PROFILES_KEY}.${name}`, reason: `must be ${common.definitions.resourceName.description}` });
  }
  return failures;
}

/**
 * Takes the stack's `ovslb:ssh` as the engine sends it (JSON text, or the
 * object itself; undefined when unset). A bad value is reported by every check.
 */
export function configureStackSsh(raw: unknown): void {
  configured = undefined;
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
  if (!isObject(value)) {
    failures = [{ property: STACK_SSH_KEY, reason: "must be an object (set it with `pulumi config set --path ovslb:ssh.user NAME`)" }];
    return;
  }
  failures = checkSshDefaults(value);
  if (failures.length === 0) configured = value;
}

/** The failures of the configured `ovslb:ssh`, for check. */
export const stackSshFailures = (): CheckFailure[] => failures;

/**
 * A connection with the login it names under it: `ssh`'s own settings, or
 * the profile its `sshProfile` names (over `ssh`'s), its own settings first;
 * its jump host with the same login under it unless the jump host names a
 * profile of its own. A profile `ssh` does not have is left named on the
 * connection (and nothing put under it): check refuses it there, and so
 * does the transport.
 */
export function withSshDefaults(c: SshConnection, ssh: StackSsh | undefined): SshConnection {
  if (!ssh) return c;
  const { profiles: _profiles, ...stack } = ssh;
  return underLogin(c, ssh, stack, false);
}

function underLogin(c: SshConnection, ssh: StackSsh, inherited: SshDefaults, hop: boolean): SshConnection {
  let settings = inherited;
  if (c.sshProfile !== undefined) {
    const named = ssh.profiles?.[c.sshProfile];
    if (!named) return c;
    const { profiles: _profiles, ...stack } = ssh;
    settings = { ...stack, ...named };
  }
  const { sshProfile: _name, ...own } = c;
  const { jumpHost: defaultJump, ...login } = settings;
  // A jump host takes a jump host of its own only when it says so: a default one would be its own way in.
  const jump = own.jumpHost ?? (hop ? undefined : defaultJump);
  return { ...login, ...own, ...(jump ? { jumpHost: underLogin(jump, ssh, login, true) } : {}) };
}

/** A connection as the transport uses it: with the stack's `ovslb:ssh` (or the profile it names) under it. */
export const withStackSsh = (c: SshConnection): SshConnection => withSshDefaults(c, configured);
