import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { failed, type DoctorCheck } from "./checks";
import { planFromConfig, readConfigJson, type DoctorPlan, type HostFlags } from "./config";
import { runDoctor } from "./probe";
import { renderJson, renderTable } from "./render";

/**
 * `ovslb doctor`: the preflight of a stack's hosts (README, "ovslb doctor").
 *
 *   pulumi config --json --show-secrets | npx ovslb doctor
 *   npx ovslb doctor --config config.json --json
 *   npx ovslb doctor --host ovslb@192.0.2.11 --host-key 'ssh-ed25519 AAAA...' --key ~/.ssh/ovslb_ed25519
 *
 * Exit status: 0 when no check fails (warnings allowed), 1 when one does, 2 for a usage error.
 */

export const USAGE = `usage: ovslb doctor [options]
  Checks every host of the stack's ovslb:hosts with the login of ovslb:ssh, as the provider reaches them.
  The stack config is read from stdin (pulumi config --json --show-secrets | ovslb doctor) or --config FILE.

  --config FILE          the JSON \`pulumi config --json --show-secrets\` prints ("-": stdin)
  --host USER@ADDR[:PORT] check this one host instead (with --config, under the stack's ovslb:ssh login)
    --host-key KEY       its pinned key ('ssh-ed25519 AAAA...'); without one doctor prints the line to pin
    --known-hosts FILE   or a known_hosts file naming it
    --key PATH           the private key to log in with
    --passphrase-env VAR the key's passphrase, from this environment variable (never on the command line)
    --agent              log in through the agent at $SSH_AUTH_SOCK
    --rundir DIR         where its OVS sockets are (default /var/run/openvswitch)
    --tunnel-address IP  its underlay (gre) address, for the MTU check (repeatable)
  --bridge NAME          check this bridge on every host (repeatable; default: the config's, else every bridge)
  --segment-mtu N        the clients' segment MTU the underlay must carry plus 42 (default 1500)
  --uses dp_hash         a feature in use that an OVS version may not support
  --connect-timeout MS   per connection (default: ovslb:ssh's connectTimeoutMs, else 10000)
  --json                 print JSON instead of the table
Exit status: 0 no check failed, 1 a check failed, 2 usage error.
`;

export interface DoctorArgs {
  config?: string;
  json: boolean;
  bridges: string[];
  segmentMtu?: number;
  uses: string[];
  host?: Omit<HostFlags, "passphrase" | "knownHosts" | "agent"> & { knownHostsFile?: string; passphraseEnv?: string; agent: boolean };
  connectTimeoutMs?: number;
  help: boolean;
}

/** argv after `doctor` -> what to do, or a usage error. */
export function parseDoctorArgs(argv: readonly string[]): DoctorArgs | { error: string } {
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        config: { type: "string" },
        json: { type: "boolean" },
        host: { type: "string" },
        "host-key": { type: "string" },
        "known-hosts": { type: "string" },
        key: { type: "string" },
        "passphrase-env": { type: "string" },
        agent: { type: "boolean" },
        rundir: { type: "string" },
        "tunnel-address": { type: "string", multiple: true },
        bridge: { type: "string", multiple: true },
        "segment-mtu": { type: "string" },
        uses: { type: "string", multiple: true },
        "connect-timeout": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (e) {
    return { error: (e as Error).message };
  }
  const str = (k: string) => values[k] as string | undefined;
  const list = (k: string) => (values[k] as string[] | undefined) ?? [];
  const int = (k: string, min: number, max: number): number | undefined | { error: string } => {
    const v = str(k);
    if (v === undefined) return undefined;
    const n = Number(v);
    return Number.isInteger(n) && n >= min && n <= max ? n : { error: `--${k} must be a whole number from ${min} to ${max}` };
  };
  const segmentMtu = int("segment-mtu", 68, 65535);
  const timeout = int("connect-timeout", 100, 600_000);
  for (const v of [segmentMtu, timeout]) if (typeof v === "object") return v;
  const hostOnly = ["host-key", "known-hosts", "key", "passphrase-env", "agent", "rundir", "tunnel-address"].filter((k) => values[k] !== undefined);
  if (!str("host") && hostOnly.length > 0) return { error: `--${hostOnly[0]} goes with --host` };
  for (const u of list("uses")) if (!["dp_hash", "dp-hash"].includes(u)) return { error: `--uses: unknown feature ${JSON.stringify(u)} (known: dp_hash)` };
  return {
    ...(str("config") !== undefined ? { config: str("config") } : {}),
    json: values.json === true,
    bridges: list("bridge"),
    ...(typeof segmentMtu === "number" ? { segmentMtu } : {}),
    uses: list("uses"),
    ...(typeof timeout === "number" ? { connectTimeoutMs: timeout } : {}),
    ...(str("host")
      ? {
          host: {
            target: str("host")!,
            ...(str("host-key") ? { hostKey: str("host-key") } : {}),
            ...(str("known-hosts") ? { knownHostsFile: str("known-hosts") } : {}),
            ...(str("key") ? { privateKeyPath: str("key") } : {}),
            ...(str("passphrase-env") ? { passphraseEnv: str("passphrase-env") } : {}),
            agent: values.agent === true,
            ...(str("rundir") ? { ovsRundir: str("rundir") } : {}),
            tunnelAddresses: list("tunnel-address"),
          },
        }
      : {}),
    help: values.help === true,
  };
}

export interface CliIo {
  readStdin(): Promise<string>;
  stdinIsTty: boolean;
  readFile(path: string): string;
  env: NodeJS.ProcessEnv;
  out(text: string): void;
  err(text: string): void;
  /** The checks; runDoctor unless a test says otherwise. */
  run?(plan: DoctorPlan): Promise<DoctorCheck[]>;
}

/** The plan from the arguments and the config they point at; a usage error as text. */
export async function planFromArgs(a: DoctorArgs, io: CliIo): Promise<DoctorPlan | { error: string }> {
  let text: string | undefined;
  if (a.config === "-" || (a.config === undefined && !a.host)) {
    if (a.config === undefined && io.stdinIsTty)
      return { error: "no stack config: pipe in `pulumi config --json --show-secrets`, give --config FILE, or check one host with --host" };
    text = await io.readStdin();
  } else if (a.config !== undefined) {
    try {
      text = io.readFile(a.config);
    } catch (e) {
      return { error: `--config ${a.config}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
    }
  }
  const read = text === undefined ? { config: {}, problems: [] } : readConfigJson(text);
  let host: HostFlags | undefined;
  if (a.host) {
    const { knownHostsFile, passphraseEnv, agent, ...rest } = a.host;
    let knownHosts: string | undefined;
    if (knownHostsFile) {
      try {
        knownHosts = io.readFile(knownHostsFile);
      } catch (e) {
        return { error: `--known-hosts ${knownHostsFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
      }
    }
    const passphrase = passphraseEnv ? io.env[passphraseEnv] : undefined;
    if (passphraseEnv && passphrase === undefined) return { error: `--passphrase-env ${passphraseEnv}: that variable is not set` };
    if (agent && !io.env.SSH_AUTH_SOCK) return { error: "--agent: SSH_AUTH_SOCK is not set" };
    host = {
      ...rest,
      ...(knownHosts !== undefined ? { knownHosts } : {}),
      ...(passphrase !== undefined ? { passphrase } : {}),
      ...(agent ? { agent: io.env.SSH_AUTH_SOCK } : {}),
      ...(a.connectTimeoutMs ? { connectTimeoutMs: a.connectTimeoutMs } : {}),
    };
  }
  const plan = planFromConfig(read.config, {
    bridges: a.bridges,
    uses: a.uses,
    ...(a.segmentMtu ? { segmentMtu: a.segmentMtu } : {}),
    ...(host ? { host } : {}),
  });
  if (a.connectTimeoutMs) for (const h of plan.hosts) h.connection = { ...h.connection, connectTimeoutMs: a.connectTimeoutMs };
  return { ...plan, problems: [...read.problems, ...plan.problems] };
}

/** `ovslb doctor ...`: prints the table (or JSON) and resolves with the exit status. */
export async function doctorMain(argv: readonly string[], io: CliIo): Promise<number> {
  const a = parseDoctorArgs(argv);
  if ("error" in a) {
    io.err(`ovslb doctor: ${a.error}\n${USAGE}`);
    return 2;
  }
  if (a.help) {
    io.out(USAGE);
    return 0;
  }
  const plan = await planFromArgs(a, io);
  if ("error" in plan) {
    io.err(`ovslb doctor: ${plan.error}\n`);
    return 2;
  }
  const checks = await (io.run ?? runDoctor)(plan);
  io.out(a.json ? renderJson(checks, plan.secrets) : renderTable(checks, plan.secrets));
  return failed(checks) ? 1 : 0;
}

/** `ovslb COMMAND ...`. */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "doctor") return doctorMain(rest, io);
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    io.out(`usage: ovslb doctor [options]   (ovslb doctor --help)\n`);
    return command === undefined ? 2 : 0;
  }
  io.err(`ovslb: unknown command ${JSON.stringify(command)}; the one command is doctor\n`);
  return 2;
}

/** The process's own stdin, stdout and stderr. */
export function processIo(): CliIo {
  return {
    stdinIsTty: process.stdin.isTTY === true,
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin as AsyncIterable<Buffer | string>) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
      return Buffer.concat(chunks).toString("utf8");
    },
    readFile: (path) => readFileSync(path, "utf8"),
    env: process.env,
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
  };
}
