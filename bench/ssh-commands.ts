import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { Client, type ClientChannel, type ConnectConfig } from "ssh2";
import type { CommandResult } from "../provider/transport/exec";
import { ipFamily, ipv6Number } from "../provider/openflow/address";
import { hostKeyAlgorithmsFor, keyMatches, parsePublicKey } from "../provider/transport/known-hosts";
import { closeIdleSshConnections, quoteArgv, SERVER_DEBUG, SshSession } from "../provider/transport/ssh";
import type { LabHost } from "../test/lab/topology";
import { loadInventory, runDirEnv, sshTo } from "../test/support/lab";
import { fmtMs, labRun, machineNote, median, teardownSteps, type Benchmark, type BenchContext, type BenchReport, type Invariant } from "./common";

/**
 * ssh-commands: what one command over an SSH connection costs, with and
 * without Nagle's algorithm on the connection's TCP socket (7aaadbe set
 * TCP_NODELAY on it), side by side in one run on one lab host (hv2):
 *
 * - "nagle": a raw ssh2 Client over `net.createConnection({host, port})`,
 *   as ovslb's login made its socket before 7aaadbe, configured as that
 *   login is (key, host key pinned and checked with known-hosts.ts, the same
 *   algorithms, timeouts and debug hook);
 * - "nodelay": the same client over a socket made with `noDelay: true`;
 * - "session": ovslb's own `SshSession.connect` (provider/transport/ssh.ts),
 *   its connection pool and command path as the provider runs them.
 *
 * Rows: a login (socket to "ready"); `true` and `ovs-ofctl --version` one at
 * a time; a provider-like sequence of 4 dependent commands; N `true` at once
 * on one connection. The columns alternate within every round (the column
 * that goes first rotates), so the machine's load falls on them alike.
 * Client CPU is process.cpuUsage around each measurement (the whole
 * process: ssh2's crypto and parsing, and ovslb's session code). The host is
 * only read from: no lab lock.
 *
 * Counting logins: this process's TCP connections to the host are read from
 * /proc (its socket fds, matched in /proc/self/net/tcp) after every step, so
 * SshSession's connections are seen too; the host's sshd log must hold
 * exactly one "Accepted publickey" line for each of their source ports.
 */

const HOST = "hv2";
const FULL = { commands: 40, parallelRounds: 10 };
const SMOKE = { commands: 5, parallelRounds: 2 };

const COLUMNS = ["nagle", "nodelay", "session"] as const;
type Column = (typeof COLUMNS)[number];
const COLUMN_LABEL: Record<Column, string> = {
  nagle: "Nagle (ovslb before 7aaadbe)",
  nodelay: "TCP_NODELAY",
  session: "ovslb's SshSession (now)",
};

const ROWS = ["login", "true", "version", "sequence", "parallel"] as const;
type Row = (typeof ROWS)[number];

/** One measurement: wall and this process's CPU (user + system), ms. */
interface Sample {
  wallMs: number;
  cpuMs: number;
}

/** A logged-in connection of one column. */
interface Conn {
  run(argv: readonly string[]): Promise<CommandResult>;
  /** Logs out and resolves once its socket is closed (or after 5 s, when `closed` stays false). */
  close(): Promise<void>;
  /** Source port of its TCP connection to the host. */
  port: number;
  closed: boolean;
}

// ---------------------------------------------------------------- this process's TCP connections to the host

/** A host's address and port as /proc/net/tcp (IPv4) or tcp6 (IPv6) write them: the address's 32-bit words each in this machine's (little-endian) byte order, then the port, in hex. */
function procTcpAddress(address: string, port: number): { table: string; remote: string } {
  const family = ipFamily(address);
  if (!family) throw new Error(`${address}: not an IP address`);
  const bytes = family === 4 ? Buffer.from(address.split(".").map(Number)) : Buffer.from(ipv6Number(address).toString(16).padStart(32, "0"), "hex");
  let words = "";
  for (let i = 0; i < bytes.length; i += 4) words += bytes.readUInt32LE(i).toString(16).toUpperCase().padStart(8, "0");
  return { table: family === 4 ? "/proc/self/net/tcp" : "/proc/self/net/tcp6", remote: `${words}:${port.toString(16).toUpperCase().padStart(4, "0")}` };
}

/** Source ports of the TCP connections to `host` (procTcpAddress) that this process holds a socket of. */
function openConnections(host: { table: string; remote: string }): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync("/proc/self/fd")) {
    let link: string;
    try {
      link = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // the directory's own fd, or one closed meanwhile
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]);
  }
  const ports = new Set<number>();
  for (const line of readFileSync(host.table, "utf8").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 10 && f[2] === host.remote && inodes.has(f[9])) ports.add(parseInt(f[1].split(":")[1], 16));
  }
  return ports;
}

async function waitFor(cond: () => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}

// ---------------------------------------------------------------- the raw ssh2 client (columns nagle and nodelay)

interface RawStats {
  /** hostVerifier calls, and how many of them accepted the key. */
  verified: number;
  accepted: number;
  /** "ready" events: logins. */
  ready: number;
  /** Clients made, and those that emitted "close". */
  clients: number;
  closed: number;
}

/** Logs in as ovslb's login() did before 7aaadbe (noDelay false) or does now (true): the same config, the host key checked the same way. */
async function rawLogin(h: LabHost, clientKeyPath: string, noDelay: boolean, stats: RawStats): Promise<Conn> {
  const keys = [parsePublicKey(h.hostKey)];
  const client = new Client();
  stats.clients++;
  const config: ConnectConfig = {
    host: h.address,
    port: h.sshPort,
    username: h.user,
    readyTimeout: 10_000,
    keepaliveInterval: 15_000,
    algorithms: { serverHostKey: hostKeyAlgorithmsFor(keys) as never },
    hostVerifier: (key: Buffer) => {
      stats.verified++;
      const ok = keyMatches(key, keys);
      if (ok) stats.accepted++;
      return ok;
    },
    // ovslb's login keeps sshd's key options from the server's debug messages; so does this one (the same work per message).
    debug: (line: string) => {
      if (!line.startsWith(SERVER_DEBUG)) return;
      try {
        JSON.parse(line.slice(SERVER_DEBUG.length));
      } catch {
        /* not JSON: ovslb ignores it too */
      }
    },
    privateKey: readFileSync(clientKeyPath),
  };
  const sock: Socket = noDelay ? createConnection({ host: h.address, port: h.sshPort, noDelay: true }) : createConnection({ host: h.address, port: h.sshPort });
  sock.on("error", () => undefined);
  config.sock = sock;
  let closed = false;
  const closing = new Promise<void>((resolve) =>
    client.once("close", () => {
      closed = true;
      stats.closed++;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    client.once("ready", () => {
      stats.ready++;
      resolve();
    });
    client.once("error", reject);
    client.connect(config);
  }).catch((e) => {
    client.destroy();
    throw e;
  });
  client.on("error", () => undefined);
  const conn: Conn = {
    port: sock.localPort ?? 0,
    closed: false,
    run: (argv) => rawRun(client, argv),
    async close() {
      client.end();
      const timer = new Promise<void>((r) => setTimeout(r, 5_000).unref());
      await Promise.race([closing, timer]);
      if (!closed) sock.destroy();
      conn.closed = closed;
    },
  };
  return conn;
}

/** Runs argv as ovslb's SshSession.run does: one exec channel, every element quoted for the remote shell, output kept, the exit status from the channel's close. */
function rawRun(client: Client, argv: readonly string[]): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    client.exec(quoteArgv(argv), (err: Error | undefined, channel: ClientChannel) => {
      if (err) return reject(new Error(`exec ${argv[0]} failed: ${err.message}`));
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      channel.on("data", (d: Buffer) => stdout.push(d));
      channel.stderr.on("data", (d: Buffer) => stderr.push(d));
      channel.on("error", (e: Error) => reject(new Error(`${argv[0]}: ${e.message}`)));
      // ssh2 passes an exec channel's exit status to "close", after the output.
      channel.on("close", (code?: number | null) =>
        resolve({ stdout: Buffer.concat(stdout).toString("utf8"), stderr: Buffer.concat(stderr).toString("utf8"), exitCode: code ?? -1 }),
      );
    });
  });
}

// ---------------------------------------------------------------- ovslb's SshSession (column session)

/** A session SshSession.connect gave; its connection's port is the one /proc shows that none of `others` has. */
function sessionConn(session: SshSession, remote: ReturnType<typeof procTcpAddress>, others: readonly number[]): Conn {
  const mine = [...openConnections(remote)].filter((p) => !others.includes(p));
  if (mine.length !== 1) {
    session.close();
    closeIdleSshConnections();
    throw new Error(`SshSession.connect: expected one new connection to ${session.hostName}, /proc shows ${mine.length} (${mine.join(", ")})`);
  }
  const conn: Conn = {
    port: mine[0],
    closed: false,
    run: (argv) => session.run(argv),
    async close() {
      session.close();
      closeIdleSshConnections();
      conn.closed = await waitFor(() => !openConnections(remote).has(conn.port), 5_000);
    },
  };
  return conn;
}

// ---------------------------------------------------------------- the run

interface Check {
  /** Commands that returned exit 0 with the output expected, per column and row. */
  ok: Record<Column, Record<Row, number>>;
  failures: string[];
}

async function checked(conn: Conn, argv: readonly string[], expect: RegExp, check: Check, column: Column, row: Row): Promise<void> {
  const r = await conn.run(argv);
  if (r.exitCode === 0 && expect.test(r.stdout)) check.ok[column][row]++;
  else if (check.failures.length < 20)
    check.failures.push(`${column} ${row} ${argv.join(" ")}: exit ${r.exitCode}, ${JSON.stringify((r.stdout + r.stderr).slice(0, 200))}`);
}

async function sample(fn: () => Promise<void>): Promise<Sample> {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await fn();
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = process.cpuUsage(cpu0);
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** The columns' order in round i: rotated, so none always goes first. */
const order = (i: number): Column[] => COLUMNS.map((_, k) => COLUMNS[(i + k) % COLUMNS.length]);

async function run(ctx: BenchContext): Promise<BenchReport> {
  const size = ctx.smoke ? SMOKE : FULL;
  const inv = loadInventory();
  const h = inv.hosts[HOST];
  if (!h?.ovsRundir || !h.segment) throw new Error(`lab host ${HOST}: no OVS run directory or segment bridge in the inventory`);
  const bridge = h.segment.bridge;
  const rundir = h.ovsRundir;
  const env = ["env", ...runDirEnv(h)];
  const remote = procTcpAddress(h.address, h.sshPort);
  const sshdLog = join(dirname(rundir), "sshd.log");
  const logMark = statSync(sshdLog).size;

  const stats: Record<"nagle" | "nodelay", RawStats> = {
    nagle: { verified: 0, accepted: 0, ready: 0, clients: 0, closed: 0 },
    nodelay: { verified: 0, accepted: 0, ready: 0, clients: 0, closed: 0 },
  };
  /** Every connection each column made (its source port), and those that did not close within 5 s. */
  const ports: Record<Column, number[]> = { nagle: [], nodelay: [], session: [] };
  const unclosed: string[] = [];
  const samples = Object.fromEntries(COLUMNS.map((c) => [c, Object.fromEntries(ROWS.map((r) => [r, [] as Sample[]]))])) as Record<
    Column,
    Record<Row, Sample[]>
  >;
  const check: Check = {
    ok: Object.fromEntries(COLUMNS.map((c) => [c, Object.fromEntries(ROWS.map((r) => [r, 0]))])) as Record<Column, Record<Row, number>>,
    failures: [],
  };
  /** The session column's connection ports seen during the command rows (one, if it logged in once). */
  const sessionPortsSeen = new Set<number>();
  const open: Partial<Record<Column, Conn>> = {};
  let machine: Record<string, string> = {};
  let left: number[] = [];

  /** Logs in; the login's wall and CPU go to `measured` (the session column's connection is found in /proc after). */
  const login = async (column: Column, measured?: Sample[]): Promise<Conn> => {
    let made: Conn | SshSession | undefined;
    const s = await sample(async () => {
      made = column === "session" ? await SshSession.connect(sshTo(inv, h)) : await rawLogin(h, inv.clientKeyPath, column === "nodelay", stats[column]);
    });
    measured?.push(s);
    const conn = made instanceof SshSession ? sessionConn(made, remote, [...ports.nagle, ...ports.nodelay]) : made!;
    ports[column].push(conn.port);
    return conn;
  };
  const close = async (column: Column, conn: Conn) => {
    await conn.close();
    if (!conn.closed) unclosed.push(`${column} port ${conn.port}`);
  };
  const teardown = async () => {
    const t = teardownSteps();
    for (const c of COLUMNS) {
      const conn = open[c];
      if (conn) await t.attempt(`${c}'s connection`, () => close(c, conn));
      delete open[c];
    }
    closeIdleSshConnections();
    return t.failed;
  };

  await labRun(ctx, { locks: [], interrupted: "closing the benchmark's SSH connections", teardown, close: closeIdleSshConnections }, async (interrupted) => {
    // Login: a fresh connection each time, closed (and waited for) before the next column's.
    ctx.log(`${HOST}: ${size.commands} logins per column`);
    for (let i = 0; i < size.commands && !interrupted(); i++) {
      for (const c of order(i)) {
        const conn = await login(c, samples[c].login);
        await checked(conn, ["true"], /^$/, check, c, "login");
        await close(c, conn);
      }
    }

    // The command rows: one connection per column, logged in once, for all of them.
    for (const c of COLUMNS) open[c] = await login(c);
    const conn = (c: Column) => open[c]!;
    machine = await machineNote({ hostName: HOST, run: (argv) => conn("session").run(argv) });
    for (const c of COLUMNS) await checked(conn(c), ["true"], /^$/, check, c, "true"); // warm: each connection's first channel
    const seeSession = () => {
      const raw = [conn("nagle").port, conn("nodelay").port];
      for (const p of openConnections(remote)) if (!raw.includes(p)) sessionPortsSeen.add(p);
    };

    const sequential = async (row: Row, what: string, argv: readonly string[][], expect: readonly RegExp[]) => {
      ctx.log(`${HOST}: ${what}, ${size.commands} per column`);
      for (let i = 0; i < size.commands && !interrupted(); i++) {
        for (const c of order(i)) {
          samples[c][row].push(
            await sample(async () => {
              for (let k = 0; k < argv.length; k++) await checked(conn(c), argv[k], expect[k], check, c, row);
            }),
          );
        }
        seeSession();
      }
    };
    await sequential("true", "`true` one at a time", [["true"]], [/^$/]);
    await sequential("version", "`ovs-ofctl --version` one at a time", [["ovs-ofctl", "--version"]], [/Open vSwitch/]);
    await sequential(
      "sequence",
      "4 dependent commands",
      [
        ["cat", join(rundir, "ovs-vswitchd.pid")],
        [...env, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", bridge],
        [...env, "ovs-ofctl", "-O", "OpenFlow15", "dump-groups", bridge],
        ["ovs-vsctl", "--version"],
      ],
      [/^\d+\n$/, /^OFPST_FLOW reply \(OF1\.5\)/, /^OFPST_GROUP_DESC reply \(OF1\.5\)/, /Open vSwitch/],
    );
    ctx.log(`${HOST}: ${size.commands} \`true\` at once, ${size.parallelRounds} rounds per column`);
    for (let i = 0; i < size.parallelRounds && !interrupted(); i++) {
      for (const c of order(i)) {
        samples[c].parallel.push(
          await sample(async () => {
            await Promise.all(Array.from({ length: size.commands }, () => checked(conn(c), ["true"], /^$/, check, c, "parallel")));
          }),
        );
      }
      seeSession();
    }
    for (const c of COLUMNS) {
      await close(c, conn(c));
      delete open[c];
    }
    closeIdleSshConnections();
    await waitFor(() => openConnections(remote).size === 0, 5_000);
    left = [...openConnections(remote)];
  });

  // ---------------------------------------------------------------- invariants
  const logins = countLogins(readFileSync(sshdLog).subarray(logMark).toString("utf8"));
  const want = {
    login: size.commands,
    true: size.commands + 1,
    version: size.commands,
    sequence: 4 * size.commands,
    parallel: size.commands * size.parallelRounds,
  } satisfies Record<Row, number>;
  const connections = size.commands + 1;
  const invariants: Invariant[] = [
    {
      name: `every command exited 0 with the output expected (\`true\`: none; \`ovs-ofctl\`/\`ovs-vsctl --version\`: "Open vSwitch"; the pid file: a number; the dumps: their OpenFlow 1.5 reply), ${Object.values(want).reduce((a, b) => a + b, 0)} per column`,
      ok: COLUMNS.every((c) => ROWS.every((r) => check.ok[c][r] === want[r])) && check.failures.length === 0,
      detail: [COLUMNS.map((c) => `${c} ${ROWS.map((r) => `${r} ${check.ok[c][r]}/${want[r]}`).join(", ")}`).join("; "), ...check.failures].join("; "),
    },
    {
      name: `each column made ${connections} connections (one per login measured, one for all the command rows), each logged in once: the host's sshd logged one login for each of their source ports`,
      ok: COLUMNS.every((c) => ports[c].length === connections && new Set(ports[c]).size === connections && ports[c].every((p) => logins.get(p) === 1)),
      detail: COLUMNS.map((c) => `${c}: ${ports[c].length} connections, ${ports[c].filter((p) => logins.get(p) === 1).length} logged in once by sshd`).join(
        "; ",
      ),
    },
    {
      name: "the command rows ran on one connection per column (the session column's: the one connection /proc showed throughout)",
      ok:
        sessionPortsSeen.size === 1 &&
        [...sessionPortsSeen][0] === ports.session.at(-1) &&
        (["nagle", "nodelay"] as const).every((c) => stats[c].ready === connections && stats[c].clients === connections),
      detail: `session ports seen: ${[...sessionPortsSeen].join(", ")}; raw clients ready: nagle ${stats.nagle.ready}, nodelay ${stats.nodelay.ready}`,
    },
    {
      name: "the raw clients verified the host key on every login: hostVerifier was called once per connection and accepted the pinned key",
      ok: (["nagle", "nodelay"] as const).every((c) => stats[c].verified === connections && stats[c].accepted === connections),
      detail: (["nagle", "nodelay"] as const)
        .map((c) => `${c}: ${stats[c].accepted} of ${stats[c].verified} calls accepted, ${connections} connections`)
        .join("; "),
    },
    {
      name: "nothing is left open: every raw client closed, every connection closed within 5 s of its logout, and this process holds no connection to the host at the end",
      ok: (["nagle", "nodelay"] as const).every((c) => stats[c].closed === stats[c].clients) && unclosed.length === 0 && left.length === 0,
      detail: `raw clients closed: nagle ${stats.nagle.closed}/${stats.nagle.clients}, nodelay ${stats.nodelay.closed}/${stats.nodelay.clients}${unclosed.length ? `; not closed: ${unclosed.join(", ")}` : ""}${left.length ? `; still open at the end: ports ${left.join(", ")}` : ""}`,
    },
  ];

  // ---------------------------------------------------------------- the report
  const wall = (c: Column, r: Row) => median(samples[c][r].map((s) => s.wallMs));
  const cpu = (c: Column, r: Row, per: number) => median(samples[c][r].map((s) => s.cpuMs / per));
  const row = (label: string, f: (c: Column) => string) => `| ${label} | ${COLUMNS.map(f).join(" | ")} |`;
  const n = size.commands;
  const lines = [
    `## ssh-commands: ${HOST}, ${n} per row and column`,
    "",
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs}, Node ${machine.node}; load average ${machine.load} as the command rows started; ${machine.date}.`,
    "",
    `One lab host (${HOST}, sshd on ${h.address}:${h.sshPort}, a network namespace on this machine) over three kinds of connection: **${COLUMN_LABEL.nagle}**, a raw ssh2 client over \`net.createConnection({host, port})\`, logging in as ovslb's login did (the same key, host key pinned and checked with known-hosts.ts, the same algorithms and debug hook); **${COLUMN_LABEL.nodelay}**, the same client over a socket made with \`noDelay: true\`; **${COLUMN_LABEL.session}**, \`SshSession.connect\` (provider/transport/ssh.ts), its pool and command path. Every command is an argv, quoted as ovslb quotes it, on its own exec channel. The columns alternate in every round (the first rotates); medians of ${n} (login, one at a time) and of ${size.parallelRounds} rounds (at once). A login is a fresh connection, from the socket's creation to "ready", closed before the next; the command rows use one connection per column. Client CPU is this process's (process.cpuUsage, user + system) per login or per command.`,
    "",
    `| ${"Median"} | ${COLUMNS.map((c) => COLUMN_LABEL[c]).join(" | ")} |`,
    "| --- | --- | --- | --- |",
    row("Login (connect to ready)", (c) => fmtMs(wall(c, "login"))),
    row("`true`, one at a time", (c) => fmtMs(wall(c, "true"))),
    row("`ovs-ofctl --version`, one at a time", (c) => fmtMs(wall(c, "version"))),
    row(`4 dependent commands (cat the pid file, dump-flows ${bridge}, dump-groups ${bridge}, ovs-vsctl --version)`, (c) => fmtMs(wall(c, "sequence"))),
    row(`${n} \`true\` at once, wall`, (c) => fmtMs(wall(c, "parallel"))),
    row("Client CPU per login", (c) => fmtMs(cpu(c, "login", 1))),
    row("Client CPU per command, `true` one at a time", (c) => fmtMs(cpu(c, "true", 1))),
    row("Client CPU per command, the 4 dependent commands", (c) => fmtMs(cpu(c, "sequence", 4))),
    row(`Client CPU per command, ${n} at once`, (c) => fmtMs(cpu(c, "parallel", n))),
  ];
  return {
    name: "ssh-commands",
    markdown: lines.join("\n"),
    invariants,
    data: { host: HOST, address: h.address, size, machine, columns: COLUMN_LABEL, samples, ports, sessionPortsSeen: [...sessionPortsSeen] },
  };
}

/** Logins in a piece of an sshd log, by source port (`Accepted publickey for USER from ADDR port P`). */
function countLogins(log: string): Map<number, number> {
  const counts = new Map<number, number>();
  for (const m of log.matchAll(/\bAccepted publickey for \S+ from \S+ port (\d+)\b/g)) counts.set(Number(m[1]), (counts.get(Number(m[1])) ?? 0) + 1);
  return counts;
}

export const sshCommandsBenchmark: Benchmark = {
  name: "ssh-commands",
  description: "one host's SSH login and commands with Nagle's algorithm (ovslb before 7aaadbe), with TCP_NODELAY, and through ovslb's SshSession",
  run,
};
