import common from "../../schema/common.json";
import type { OvsHost, SshConnection } from "../model/inputs.generated";
import { checkConnection, validateAgainstSchema } from "../model/validate";
import { STACK_SSH_KEY, checkSshDefaults, withSshDefaults, type StackSsh } from "../stack-ssh";
import { fail, type DoctorCheck } from "./checks";

/**
 * What `ovslb doctor` checks, read from the stack config as the Pulumi CLI
 * prints it (`pulumi config --json --show-secrets`) or from `--host`. Pure:
 * no host is reached here. The hosts are `ovslb:hosts` and the login is
 * `ovslb:ssh` (with its profiles), put under each host exactly as the
 * provider does (provider/stack-ssh.ts: withSshDefaults, checkSshDefaults).
 */

export const HOSTS_KEY = "ovslb:hosts";
/** Host of the rows about the stack config as a whole. */
export const STACK = "(stack)";

/** One host to check: its name, the connection as the transport will use it (the login under it), and what else the config says of it. */
export interface DoctorHost {
  name: string;
  /** The config key it came from (`ovslb:hosts.gw1`), or `--host`. */
  configKey: string;
  host: OvsHost;
  /** The connection with the stack's login (or the profile it names) under it. */
  connection: SshConnection;
  /** Underlay addresses the config gives this host (a `tunnelAddress` next to its `name`): where gre delivery leaves and arrives. */
  tunnelAddresses: string[];
  /** Bridges named for this host alone (a `bridge` next to its `name`). */
  bridges: string[];
}

export interface DoctorPlan {
  hosts: DoctorHost[];
  /** Bridges named for every host (`--bridge`, `<project>:bridge(s)`); none named: every bridge of each host is checked. */
  bridges: string[];
  /** The MTU of the segment the clients send on (the frames gre delivery carries): --segment-mtu, default 1500. */
  segmentMtu: number;
  /** Whether a dp_hash select group is in use (`selectionMethod: dp_hash` in the config, or `--uses dp_hash`). */
  dpHash: boolean;
  /** Rows about the config itself (a value refused, a secret not shown): each a FAIL. */
  problems: DoctorCheck[];
  /** Every secret the config holds (keys, passphrases): never printed; the output is scrubbed of them. */
  secrets: string[];
}

export interface PlanOptions {
  bridges?: string[];
  segmentMtu?: number;
  uses?: string[];
  /** `--host`: this host alone (named by its address), the config's login under it if a config was given. */
  host?: HostFlags;
}

/** `--host user@address[:port]` and the flags that go with it. */
export interface HostFlags {
  target: string;
  hostKey?: string;
  /** The text of a known_hosts file (--known-hosts FILE). */
  knownHosts?: string;
  privateKeyPath?: string;
  /** The passphrase, read from the environment variable --passphrase-env names (never from argv). */
  passphrase?: string;
  agent?: string;
  ovsRundir?: string;
  tunnelAddresses?: string[];
  connectTimeoutMs?: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

const HOST_SCHEMA = { $ref: "common.json#/definitions/ovsHost" };
const CONNECTION_SCHEMA = { $ref: "common.json#/definitions/sshConnection" };
const HOST_NAME = new RegExp(common.definitions.resourceName.pattern);
/** What the Pulumi CLI prints for a secret it was not asked to show. */
const HIDDEN = "[secret]";

/** The config as key -> value, read from what `pulumi config --json [--show-secrets]` prints (or a plain key -> value object); problems name keys, never values. */
export function readConfigJson(text: string): { config: Record<string, unknown>; problems: DoctorCheck[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { config: {}, problems: [fail(STACK, "config", `the stack config is not JSON (${(e as Error).message.split("\n")[0]})`, PIPE_FIX)] };
  }
  if (!isObject(parsed)) return { config: {}, problems: [fail(STACK, "config", "the stack config is not a JSON object of config keys", PIPE_FIX)] };
  const config: Record<string, unknown> = {};
  const problems: DoctorCheck[] = [];
  for (const [key, entry] of Object.entries(parsed)) {
    // The CLI's form: {"value": "<text>", "objectValue": <object>, "secret": bool}; without --show-secrets a secret has no value.
    if (isObject(entry) && typeof entry.secret === "boolean" && Object.keys(entry).every((k) => ["value", "objectValue", "secret"].includes(k))) {
      if (entry.objectValue !== undefined) config[key] = entry.objectValue;
      else if (typeof entry.value === "string") config[key] = parseMaybeJson(entry.value);
      else if (entry.secret) problems.push(fail(STACK, "config", `${key} is a secret and the JSON holds no value for it`, PIPE_FIX));
      continue;
    }
    config[key] = entry;
  }
  return { config, problems };
}

const PIPE_FIX = "pipe in what `pulumi config --json --show-secrets` prints (in the project's directory, for the stack), or give --config FILE holding it";

function parseMaybeJson(text: string): unknown {
  const t = text.trim();
  if (!t.startsWith("{") && !t.startsWith("[")) return text;
  try {
    return JSON.parse(t);
  } catch {
    return text;
  }
}

/** `user@address[:port]` -> its parts; undefined when it is not that. */
export function parseTarget(target: string): { user?: string; host: string; port?: number } | undefined {
  const m = /^(?:([^@\s]+)@)?([^@:\s]+)(?::([0-9]+))?$/.exec(target);
  if (!m) return undefined;
  return { ...(m[1] ? { user: m[1] } : {}), host: m[2], ...(m[3] ? { port: Number(m[3]) } : {}) };
}

/** What to check: the hosts with their logins, the bridges, the features in use; and what is wrong with the config itself. */
export function planFromConfig(config: Record<string, unknown>, opts: PlanOptions = {}): DoctorPlan {
  const problems: DoctorCheck[] = [];
  const sshValue = config[STACK_SSH_KEY];
  let ssh: StackSsh | undefined;
  if (sshValue !== undefined) {
    if (containsHidden(sshValue)) {
      problems.push(fail(STACK, "config", `${STACK_SSH_KEY} holds secrets the CLI did not show`, PIPE_FIX));
    } else {
      const failures = checkSshDefaults(sshValue);
      for (const f of failures)
        problems.push(fail(STACK, "config", `${f.property}: ${f.reason}`, "correct it with `pulumi config set --path` (README, Connections)"));
      if (failures.length === 0) ssh = sshValue as StackSsh;
    }
  }
  const secrets = collectSecrets(config);
  const declared: { name: string; configKey: string; host: OvsHost }[] = [];
  if (opts.host) {
    const h = hostFromFlags(opts.host);
    if ("problem" in h) problems.push(h.problem);
    else declared.push({ name: opts.host.target, configKey: "--host", host: h.host });
    if (opts.host.passphrase) secrets.push(opts.host.passphrase);
  } else {
    const hosts = config[HOSTS_KEY];
    if (hosts === undefined)
      problems.push(
        fail(
          STACK,
          "config",
          `${HOSTS_KEY} is not set: no host to check`,
          "set each host with `pulumi config set --path 'ovslb:hosts.NAME.connection.host' ADDRESS` (README, Quick start), or check one with --host",
        ),
      );
    else if (!isObject(hosts))
      problems.push(
        fail(
          STACK,
          "config",
          `${HOSTS_KEY} is not an object of hosts by name`,
          "set each host with `pulumi config set --path 'ovslb:hosts.NAME.connection.host' ADDRESS`",
        ),
      );
    else {
      for (const [name, value] of Object.entries(hosts)) {
        const key = `${HOSTS_KEY}.${name}`;
        if (!HOST_NAME.test(name)) {
          problems.push(fail(name, "config", `${key}: the name must be ${common.definitions.resourceName.description}`, "rename it"));
          continue;
        }
        const failures = validateAgainstSchema(HOST_SCHEMA, value);
        if (failures.length > 0) {
          for (const f of failures)
            problems.push(fail(name, "config", `${key}${f.property ? `.${f.property}` : ""}: ${f.reason}`, `correct ${key} with \`pulumi config set --path\``));
          continue;
        }
        declared.push({ name, configKey: key, host: value as OvsHost });
      }
    }
  }
  const named = namedThings(config, new Set(declared.map((d) => d.name)));
  const hosts: DoctorHost[] = [];
  for (const d of declared) {
    const connection = withSshDefaults(d.host.connection, ssh);
    // A missing pin is the host-key check's to report (it prints the line to pin); the rest stops the host here.
    const failures = checkConnection(connection, `${d.configKey}.connection`).filter((f) => f.property !== `${d.configKey}.connection.hostKey`);
    if (failures.length > 0) {
      for (const f of failures) problems.push(fail(d.name, "config", `${f.property}: ${f.reason}`, loginFix(d.configKey)));
      continue;
    }
    hosts.push({
      name: d.name,
      configKey: d.configKey,
      host: d.host,
      connection,
      tunnelAddresses: d.configKey === "--host" ? (opts.host?.tunnelAddresses ?? []) : (named.tunnels.get(d.name) ?? []),
      bridges: named.hostBridges.get(d.name) ?? [],
    });
  }
  return {
    hosts,
    bridges: [...new Set([...(opts.bridges ?? []), ...named.bridges])],
    segmentMtu: opts.segmentMtu ?? 1500,
    dpHash: named.dpHash || (opts.uses ?? []).some((u) => u.replace("-", "_") === "dp_hash"),
    problems,
    secrets: [...new Set(secrets)].filter((s) => s.length >= 4),
  };
}

const loginFix = (configKey: string) =>
  configKey === "--host"
    ? "give --key PATH (or --agent), and user@ in --host"
    : "set the login in ovslb:ssh (user, privateKey as a secret, or privateKeyPath): README, Connections";

function hostFromFlags(f: HostFlags): { host: OvsHost } | { problem: DoctorCheck } {
  const t = parseTarget(f.target);
  if (!t) return { problem: fail(f.target, "config", "--host must be user@address[:port]", "e.g. --host ovslb@192.0.2.11:22") };
  const connection: SshConnection = {
    host: t.host,
    ...(t.port !== undefined ? { port: t.port } : {}),
    ...(t.user ? { user: t.user } : {}),
    ...(f.hostKey ? { hostKey: f.hostKey } : {}),
    ...(f.knownHosts ? { knownHosts: f.knownHosts } : {}),
    ...(f.privateKeyPath ? { privateKeyPath: f.privateKeyPath } : {}),
    ...(f.passphrase ? { passphrase: f.passphrase } : {}),
    ...(f.agent ? { agent: f.agent } : {}),
    ...(f.connectTimeoutMs ? { connectTimeoutMs: f.connectTimeoutMs } : {}),
  };
  const failures = validateAgainstSchema(CONNECTION_SCHEMA, connection);
  if (failures.length > 0) {
    const flag: Record<string, string> = { host: "--host", port: "--host", user: "--host", hostKey: "--host-key", privateKeyPath: "--key" };
    const detail = failures.map((x) => `${flag[x.property.split(".")[0]] ?? x.property}: ${x.reason}`).join("; ");
    return { problem: fail(f.target, "config", detail, "correct the flag") };
  }
  return { host: { connection, ...(f.ovsRundir ? { ovsRundir: f.ovsRundir } : {}) } };
}

function containsHidden(v: unknown): boolean {
  if (v === HIDDEN) return true;
  if (Array.isArray(v)) return v.some(containsHidden);
  if (isObject(v)) return Object.values(v).some(containsHidden);
  return false;
}

const SECRET_PROPERTIES = new Set(["privateKey", "passphrase"]);

/** Every value under a privateKey or passphrase property, anywhere in the config. */
function collectSecrets(v: unknown, out: string[] = []): string[] {
  if (Array.isArray(v)) v.forEach((x) => collectSecrets(x, out));
  else if (isObject(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (SECRET_PROPERTIES.has(k) && typeof x === "string") out.push(x);
      else collectSecrets(x, out);
    }
  }
  return out;
}

/**
 * What the program's own config names (keys outside `ovslb:`): an object
 * with a `name` of a host and a `tunnelAddress` gives that host's underlay
 * address (the quick start's `gateways` and `hypervisors`); a `bridge` or
 * `uplinkBridge` beside such a `name` names a bridge of that host, elsewhere
 * a bridge of every host, as does a key `<project>:bridge` or
 * `<project>:bridges`; `selectionMethod: dp_hash` anywhere means dp_hash
 * groups are in use.
 */
function namedThings(config: Record<string, unknown>, hostNames: Set<string>) {
  const tunnels = new Map<string, string[]>();
  const hostBridges = new Map<string, string[]>();
  const bridges: string[] = [];
  let dpHash = false;
  const add = (m: Map<string, string[]>, k: string, v: string) => m.set(k, [...new Set([...(m.get(k) ?? []), v])]);
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (!isObject(v)) return;
    const owner = typeof v.name === "string" && hostNames.has(v.name) ? v.name : undefined;
    if (v.selectionMethod === "dp_hash") dpHash = true;
    if (owner && typeof v.tunnelAddress === "string") add(tunnels, owner, v.tunnelAddress);
    for (const k of ["bridge", "uplinkBridge"]) {
      const b = v[k];
      if (typeof b !== "string") continue;
      if (owner) add(hostBridges, owner, b);
      else bridges.push(b);
    }
    Object.values(v).forEach(walk);
  };
  for (const [key, value] of Object.entries(config)) {
    if (key.startsWith("ovslb:")) continue;
    const last = key.slice(key.indexOf(":") + 1);
    if (last === "bridge" && typeof value === "string") bridges.push(value);
    else if (last === "bridges" && Array.isArray(value)) bridges.push(...value.filter((b): b is string => typeof b === "string"));
    walk(value);
  }
  return { tunnels, hostBridges, bridges, dpHash };
}
