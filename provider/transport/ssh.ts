import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";
import type { Duplex } from "node:stream";
import { Client, type ClientChannel, type ConnectConfig } from "ssh2";
import { feedStdin, type CommandResult, type CommandRunner, type RunOptions } from "./exec";
import type { SshConnection } from "../model/inputs.generated";
import { hostKeyAlgorithmsFor, keyMatches, parsePublicKey, trustedKeysFor, type TrustedKey } from "./known-hosts";
import { withStackSsh } from "../stack-ssh";
import { unknownSshProfile } from "../model/validate";

export type { SshConnection };

export class SshError extends Error {
  constructor(
    readonly hostName: string,
    message: string,
  ) {
    super(`${hostName}: ${message}`);
    this.name = "SshError";
  }
}

export class HostKeyMismatchError extends SshError {
  constructor(hostName: string) {
    super(hostName, "host key verification failed: the key the host presented is not the pinned or known key; refusing to connect");
    this.name = "HostKeyMismatchError";
  }
}

/** The connection closed while a command ran: the command may have finished on the host or not. */
export class SshConnectionLostError extends SshError {
  constructor(
    hostName: string,
    readonly program: string,
  ) {
    super(hostName, `connection lost while ${program} ran: whether it finished on the host is unknown`);
    this.name = "SshConnectionLostError";
  }
}

/** The host offers none of the key types pinned or known for it: a server that offers only another (e.g. weaker) type is refused, never accepted on a key it cannot be checked against. */
export class HostKeyTypeError extends SshError {
  constructor(hostName: string, types: readonly string[]) {
    super(
      hostName,
      `host key verification failed: the host offers no key of the pinned or known types (${types.join(", ")}); refusing to connect (a server offering only another key type is not the pinned host, or a downgrade)`,
    );
    this.name = "HostKeyTypeError";
  }
}

/** user@host:port; host:port for a connection without a user (only one whose profile is missing, which check refuses). */
export const describeHost = (c: SshConnection) => `${c.user === undefined ? "" : `${c.user}@`}${c.host}:${c.port ?? 22}`;

/**
 * One word per argv element, single-quoted for the remote shell that sshd
 * always interposes: no element is ever interpreted by it.
 */
export function quoteArgv(argv: readonly string[]): string {
  return argv
    .map((word) => {
      if (word.includes("\0")) throw new Error("a command argument contains a NUL byte");
      return `'${word.replace(/'/g, `'\\''`)}'`;
    })
    .join(" ");
}

function trustedKeys(c: SshConnection): TrustedKey[] {
  const port = c.port ?? 22;
  const keys: TrustedKey[] = [];
  if (c.hostKey) keys.push(parsePublicKey(c.hostKey));
  if (c.knownHosts) {
    const { trusted, revoked } = trustedKeysFor(c.knownHosts, c.host, port);
    keys.push(...trusted.filter((k) => !keyMatches(k.blob, revoked)));
  }
  if (keys.length === 0) {
    throw new SshError(describeHost(c), "no host key to verify against: give hostKey or a knownHosts line for this host");
  }
  return keys;
}

/**
 * How long a shared connection stays open with no session on it: long
 * enough to carry one resource's operation to the next within a `pulumi up`
 * or refresh (the engine starts the next as one ends), short enough that a
 * process that is done does not wait long on its sockets.
 */
export const SSH_IDLE_MS = 2_000;

/**
 * Sessions one connection carries at once. OpenSSH allows 10 sessions per
 * connection by default (MaxSessions) and a session runs up to about three
 * commands at once (its reads), so a third concurrent session opens a
 * second connection.
 */
export const SESSIONS_PER_CONNECTION = 2;

/** A logged-in SSH client, the socket it runs on, and the jump host session that socket goes through. */
interface LoggedIn {
  client: Client;
  sock: Duplex;
  jump: SshSession | undefined;
  /** What the key's authorized_keys line allows, as sshd tells the client after the login; undefined: it said nothing. */
  keyOptions: KeyOptions;
}

/** The options OpenSSH's sshd reports for the key a login used ("key options: port-forwarding pty ...", auth_log_authopts in auth.c); undefined until it says. */
interface KeyOptions {
  allowed?: string[];
}

/** One logged-in SSH connection (and the jump host's it goes through), shared by the sessions on it. */
class SharedConnection {
  sessions = 0;
  gone = false;
  readonly client: Client;
  private readonly sock: Duplex;
  private readonly jump: SshSession | undefined;
  readonly keyOptions: KeyOptions;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    logged: LoggedIn,
    /** How long it stays open idle (0: it closes with its last session). */
    private readonly idleMs: number,
    private readonly onGone: (shared: SharedConnection) => void = () => undefined,
  ) {
    ({ client: this.client, sock: this.sock, jump: this.jump, keyOptions: this.keyOptions } = logged);
    const client = this.client;
    // The host ending its side (sshd gone) is enough: nothing more can be asked of it.
    client.on("end", () => this.forget());
    client.on("close", () => this.forget());
  }

  /**
   * Whether a new channel can be opened on it: not gone, and its socket as
   * ssh2 requires before any channel (writable, the host's end not read;
   * ssh2's own check, lib/utils.js isWritable, throws "Not connected"
   * otherwise). A host that ended the connection while it sat idle can have
   * its end read before the client's "end" event says so.
   */
  get usable(): boolean {
    const state = (this.sock as Duplex & { _readableState?: { ended?: boolean } })._readableState;
    return !this.gone && this.sock.writable && state?.ended !== true;
  }

  attach(): void {
    this.sessions++;
    clearTimeout(this.idle);
    this.idle = undefined;
  }

  detach(): void {
    if (--this.sessions > 0) return;
    // One the host ended may still hold its socket half open: drop it.
    if (this.gone) this.sock.destroy();
    else if (this.idleMs === 0) this.end();
    else this.idle = setTimeout(() => this.end(), this.idleMs).unref();
  }

  /** Logs out; a host that stopped answering never finishes the goodbye, so the socket is dropped after a second. */
  end(): void {
    this.client.end();
    setTimeout(() => this.sock.destroy(), 1_000).unref();
    this.forget();
  }

  /** Drops the connection at once (a hung host): every open channel fails. */
  destroy(): void {
    this.sock.destroy();
    this.forget();
  }

  /** Never handed out again: a connection that failed, closed or was given up on is not reused, nor its jump host's. */
  forget(): void {
    if (this.gone) return;
    this.gone = true;
    clearTimeout(this.idle);
    this.onGone(this);
    this.jump?.close();
  }
}

/**
 * The SSH connections of this process, shared across operations: a
 * `pulumi up` or refresh of many resources on the same hosts logs in to
 * each host once. Connections are keyed by everything that decides the
 * login (host, port, user, host-key pins, credentials, jump hosts,
 * timeouts), as resolved from the stack's `ovslb:ssh` or the profile a
 * connection names (so two hosts' profiles never share a login), hashed so
 * no key material is a map key.
 */
class SshConnectionPool {
  private readonly open = new Map<string, SharedConnection[]>();
  private readonly opening = new Map<string, Promise<void>>();

  async attach(c: SshConnection): Promise<SharedConnection> {
    const key = connectionKey(c);
    // A host that dropped a connection before this call came has said so (its FIN is in the socket): two
    // immediates put one whole poll phase of the event loop between, in which the client hears it, so a
    // connection already ended is not handed out (one immediate can run before the next poll).
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    for (;;) {
      for (const ended of this.open.get(key)?.filter((s) => !s.gone && !s.usable) ?? []) ended.forget();
      const free = this.open.get(key)?.find((s) => s.usable && s.sessions < SESSIONS_PER_CONNECTION);
      if (free) {
        free.attach();
        return free;
      }
      // One login at a time per key: sessions asked for meanwhile share it, and a refused login fails them all alike.
      const pending = this.opening.get(key);
      if (pending) {
        await pending;
        continue;
      }
      const opened = login(c).then((logged) => {
        const shared = new SharedConnection(logged, SSH_IDLE_MS, (gone) => this.remove(key, gone));
        this.open.set(key, [...(this.open.get(key) ?? []), shared]);
      });
      this.opening.set(key, opened);
      try {
        await opened;
      } finally {
        this.opening.delete(key);
      }
    }
  }

  /** Logs out of every connection no session uses (a provider's shutdown, a test that restarts hosts). */
  closeIdle(): void {
    for (const shared of [...this.open.values()].flat()) if (shared.sessions === 0) shared.end();
  }

  private remove(key: string, gone: SharedConnection): void {
    const left = (this.open.get(key) ?? []).filter((s) => s !== gone);
    if (left.length > 0) this.open.set(key, left);
    else this.open.delete(key);
  }
}

/** Everything of a connection that decides how it logs in, as one canonical string, hashed. */
function connectionKey(c: SshConnection): string {
  const canonical = (v: unknown): unknown =>
    v !== null && typeof v === "object" && !Buffer.isBuffer(v)
      ? Object.fromEntries(
          Object.entries(v)
            .filter(([, x]) => x !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([k, x]) => [k, canonical(x)]),
        )
      : Buffer.isBuffer(v)
        ? v.toString("base64")
        : v;
  return createHash("sha256")
    .update(JSON.stringify(canonical(c)))
    .digest("hex");
}

const pool = new SshConnectionPool();

/** Logs out of every shared SSH connection that no session uses. */
export const closeIdleSshConnections = () => pool.closeIdle();

/** How ssh2's debug hook prefixes a message the server sent (client.js), JSON-quoted after it. */
export const SERVER_DEBUG = "Debug output from server: ";

/** Logs in as `c` says (through its jump host, if any), verifying every host key on the way. */
async function login(c: SshConnection): Promise<LoggedIn> {
  const hostName = describeHost(c);
  // Check refuses it first; a refresh or destroy after the profile went from the stack's config comes here.
  const unknown = unknownSshProfile(c);
  if (unknown) throw new SshError(hostName, `${unknown}: no login to use`);
  const keys = trustedKeys(c);
  const jump = c.jumpHost ? await SshSession.fresh(c.jumpHost) : undefined;
  let sock: Duplex | undefined;
  try {
    const client = new Client();
    let keyRejected = false;
    const keyOptions: KeyOptions = {};
    const config: ConnectConfig = {
      host: c.host,
      port: c.port ?? 22,
      username: c.user,
      readyTimeout: c.connectTimeoutMs ?? 10_000,
      keepaliveInterval: 15_000,
      algorithms: { serverHostKey: hostKeyAlgorithmsFor(keys) as never },
      hostVerifier: (key: Buffer) => {
        const ok = keyMatches(key, keys);
        keyRejected = !ok;
        return ok;
      },
      // ssh2 hands the server's SSH_MSG_DEBUG messages only to its debug hook; only sshd's key options are kept.
      debug: (line: string) => {
        if (!line.startsWith(SERVER_DEBUG)) return;
        let text: unknown;
        try {
          text = JSON.parse(line.slice(SERVER_DEBUG.length));
        } catch {
          return;
        }
        const said = typeof text === "string" ? /key options:(.*)$/.exec(text) : null;
        if (said) keyOptions.allowed = said[1].split(" ").filter((o) => o !== "");
      },
    };
    if (c.privateKey) config.privateKey = c.privateKey;
    else if (c.privateKeyPath) config.privateKey = readFileSync(c.privateKeyPath);
    if (c.passphrase) config.passphrase = c.passphrase;
    if (c.agent) config.agent = c.agent;
    // The socket is ours, not ssh2's: once ssh2 has ended a connection its destroy() does nothing, and a host
    // that never answers the goodbye would hold the socket (and this process) for minutes. Made last, once
    // nothing before the connect can throw; its errors reach ssh2's listener and so the connect's.
    // TCP_NODELAY: each command is a few small packets each way (channel open, exec, exit status, close). With
    // Nagle's algorithm a small write waits for the ACK of the previous one, which the host delays (40 ms on
    // Linux), so every command and the login's round trips would pay that wait: 83 ms for `true` against 13 ms,
    // a login 223 ms against 58 ms, on the lab (bench/ssh-commands.ts).
    const socket = (sock = jump ? await jump.forwardTcp(c.host, c.port ?? 22) : createConnection({ host: c.host, port: c.port ?? 22, noDelay: true }));
    socket.on("error", () => undefined);
    config.sock = socket;
    await new Promise<void>((resolve, reject) => {
      client.once("ready", () => resolve());
      // `on`, not `once`: a connection given up on (readyTimeout) can still report its end later.
      client.on("error", (err: Error) => {
        // ssh2's own message is generic; say which host and why, never echoing key material.
        if (keyRejected) reject(new HostKeyMismatchError(hostName));
        // ssh2 tells a host key type mismatch from other failed key exchanges only in its message text (same level and reason).
        else if (/no matching host key format/.test(err.message)) reject(new HostKeyTypeError(hostName, [...new Set(keys.map((k) => k.type))]));
        else reject(new SshError(hostName, `connect failed: ${err.message}`));
      });
      try {
        client.connect(config);
      } catch (err) {
        // e.g. a key that cannot be parsed or needs a passphrase
        reject(new SshError(hostName, `connect failed: ${(err as Error).message}`));
      }
    }).catch((e) => {
      client.destroy();
      throw e;
    });
    // Later errors (e.g. a dropped connection) surface through the open channels.
    client.on("error", () => undefined);
    return { client, sock: socket, jump, keyOptions };
  } catch (e) {
    sock?.destroy();
    jump?.close();
    throw e;
  }
}

/**
 * A session on one host: what an operation uses for all its work there,
 * commands (exec channels) and stream-local channels (e.g. to OVSDB's
 * db.sock). It runs on a connection shared with this process's other
 * sessions to the same host as the same login; closing it hands the
 * connection back.
 */
export class SshSession implements CommandRunner {
  readonly hostName: string;
  private released = false;
  /** Settles once the connection for the session's first channel is known (ready). */
  private readying: Promise<void> | undefined;

  private constructor(
    private shared: SharedConnection,
    readonly connection: SshConnection,
    /** From the process's pool (connect), not a login of its own (fresh). */
    private readonly pooled: boolean,
  ) {
    this.hostName = describeHost(connection);
  }

  /** A session on the shared connection for `declared` with the stack's `ovslb:ssh` settings (or the profile it names) under it (provider/stack-ssh.ts); logs in if there is none. */
  static async connect(declared: SshConnection): Promise<SshSession> {
    const c = withStackSsh(declared);
    return new SshSession(await pool.attach(c), c, true);
  }

  /** A session on a connection of its own, logged in now and out when it closes (`c` already carries the stack's settings, its jump host too). */
  static async fresh(c: SshConnection): Promise<SshSession> {
    const shared = new SharedConnection(await login(c), 0);
    shared.attach();
    return new SshSession(shared, c, false);
  }

  /**
   * Before the session's first channel: a pooled connection the host ended
   * after it was handed out (its sshd restarted while it sat idle) is left
   * for a new one, once, through the pool: nothing was sent on it. Later,
   * a connection lost is the operation's to report.
   */
  private ready(): Promise<void> {
    this.readying ??= this.replaceIfEnded();
    return this.readying;
  }

  private async replaceIfEnded(): Promise<void> {
    if (!this.pooled || this.released || this.shared.usable) return;
    // Detached from the ended one first: a login that fails now leaves the session closed, not attached twice.
    this.released = true;
    this.shared.forget();
    this.shared.detach();
    this.shared = await pool.attach(this.connection);
    this.released = false;
  }

  private get client(): Client {
    return this.shared.client;
  }

  private get closed(): boolean {
    return this.released || this.shared.gone;
  }

  /** What sshd says the login's key line allows (`port-forwarding`, `pty`, ...); undefined when it did not say. */
  get keyOptions(): readonly string[] | undefined {
    return this.shared.keyOptions.allowed;
  }

  get commandTimeoutMs(): number {
    return this.connection.commandTimeoutMs ?? 60_000;
  }

  /** Runs argv on the host; every element reaches the program as one word. */
  async run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    const command = quoteArgv(argv);
    const timeoutMs = opts.timeoutMs ?? this.commandTimeoutMs;
    await this.ready();
    return new Promise((resolve, reject) => {
      if (this.closed || !this.shared.usable) return reject(new SshError(this.hostName, "connection is closed"));
      let channel: ClientChannel | undefined;
      // The bound covers opening the channel too: a host that stops answering before it opens would hold the caller forever.
      const timer = setTimeout(() => {
        // Abandoned: the process is killed on the host (OpenSSH delivers the signal) rather than left behind,
        // and a host that does not answer loses the whole connection, so no channel or socket lingers.
        try {
          channel?.signal("KILL");
          channel?.close();
        } catch {
          /* the channel is gone already */
        }
        this.abandon();
        reject(new SshError(this.hostName, `${argv[0]} timed out after ${timeoutMs} ms (commandTimeoutMs); abandoned`));
      }, timeoutMs);
      this.client.exec(command, (err: Error | undefined, opened: ClientChannel) => {
        if (err) {
          clearTimeout(timer);
          return reject(new SshError(this.hostName, `exec ${argv[0]} failed: ${err.message}`));
        }
        channel = opened;
        const stdout: Buffer[] = [];
        const stderr: Buffer[] = [];
        // onStdout: each chunk as it arrives, never kept (a throw there closes the channel and fails the run).
        let failed: Error | undefined;
        opened.on("data", (d: Buffer) => {
          if (!opts.onStdout) return void stdout.push(d);
          if (failed !== undefined) return;
          try {
            opts.onStdout(d);
          } catch (e) {
            failed = e instanceof Error ? e : new Error(String(e));
            opened.close();
          }
        });
        opened.stderr.on("data", (d: Buffer) => stderr.push(d));
        let exitCode = -1;
        let exited = false;
        // ssh2's channel "exit" carries the command's exit status; the run resolves on "close", after the output.
        // eslint-disable-next-line no-restricted-syntax
        opened.on("exit", (code: number | null) => {
          exited = true;
          exitCode = code ?? -1;
        });
        opened.on("error", (e: Error) => {
          clearTimeout(timer);
          reject(new SshError(this.hostName, `${argv[0]}: ${e.message}`));
        });
        opened.on("close", () => {
          clearTimeout(timer);
          if (failed !== undefined) return reject(failed);
          // No exit status: the connection died under the command (e.g. sshd killed), which may or may not have run to its end.
          if (!exited) return reject(new SshConnectionLostError(this.hostName, argv[0]));
          resolve({
            stdout: Buffer.concat(stdout).toString("utf8"),
            stderr: Buffer.concat(stderr).toString("utf8"),
            exitCode,
          });
        });
        feedStdin(opened, opts);
      });
    });
  }

  /** A channel to a unix socket on the host (OpenSSH streamlocal), e.g. OVSDB's db.sock. */
  openUnixStream(socketPath: string): Promise<Duplex> {
    return this.openChannel(
      `opening ${socketPath}`,
      (done) => this.client.openssh_forwardOutStreamLocal(socketPath, done),
      (err) => {
        // sshd says only "open failed" for every cause. ssh2 gives sshd's description only as message text (and a
        // bare reason number), so the hint keys on that text; a key line that forbids forwarding sshd told at login.
        if (!/open failed/.test(err.message)) return `cannot open ${socketPath}: ${err.message}`;
        const allowed = this.keyOptions;
        if (allowed && !allowed.includes("port-forwarding")) {
          return `cannot open ${socketPath}: ${err.message}: sshd refuses channels for this login's key: its authorized_keys line forbids forwarding (restrict or no-port-forwarding; sshd says "key options:${allowed.map((o) => ` ${o}`).join("")}"), not the socket's permissions; on that line write restrict,port-forwarding or drop no-port-forwarding (docs/hosts.md)`;
        }
        return `cannot open ${socketPath}: ${err.message} (the socket is missing, or the login user has no permission on it: it needs write access to the socket and search access to its directory, see README, Least privilege; or sshd forbids forwarding for this login: DisableForwarding, AllowStreamLocalForwarding, AllowTcpForwarding, see docs/hosts.md)`;
      },
    );
  }

  /** A TCP channel from the host to host:port (direct-tcpip): jump hosts and OVN NB over TCP. */
  forwardTcp(host: string, port: number): Promise<Duplex> {
    return this.openChannel(
      `reaching ${host}:${port}`,
      (done) => this.client.forwardOut("127.0.0.1", 0, host, port, done),
      (err) => `cannot reach ${host}:${port} through this host: ${err.message}`,
    );
  }

  /** Opens a channel within commandTimeoutMs; a host that does not answer in time loses the whole connection. */
  private async openChannel(
    what: string,
    open: (done: (err: Error | undefined, channel: ClientChannel) => void) => void,
    failure: (err: Error) => string,
  ): Promise<ClientChannel> {
    const timeoutMs = this.commandTimeoutMs;
    await this.ready();
    return new Promise((resolve, reject) => {
      if (this.closed || !this.shared.usable) return reject(new SshError(this.hostName, "connection is closed"));
      const timer = setTimeout(() => {
        this.abandon();
        reject(new SshError(this.hostName, `${what} timed out after ${timeoutMs} ms (commandTimeoutMs); abandoned`));
      }, timeoutMs);
      open((err, channel) => {
        clearTimeout(timer);
        if (err) reject(new SshError(this.hostName, failure(err)));
        else resolve(channel);
      });
    });
  }

  /** Ends the session; the connection stays for the process's next session to the host, until idle. */
  close(): void {
    if (this.released) return;
    this.released = true;
    this.shared.detach();
  }

  /** Drops the connection at once (a hung host): every channel on it fails, and it is never reused. */
  private abandon(): void {
    this.released = true;
    this.shared.destroy();
  }
}

/** Runs fn on each item with at most `limit` running at once; results keep the input order. */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  });
  await Promise.all(workers);
  return results;
}

/**
 * Opens one session per host (at most `parallelism` at a time), runs fn on
 * each, and always closes them. Fails with the first error after all settle,
 * so no host is left mid-change unobserved.
 */
export async function withSessions<R>(
  connections: readonly SshConnection[],
  fn: (session: SshSession, index: number) => Promise<R>,
  parallelism = 8,
): Promise<R[]> {
  const settled = await mapBounded(connections, parallelism, async (c, i) => {
    let session: SshSession | undefined;
    try {
      session = await SshSession.connect(c);
      return { ok: true as const, value: await fn(session, i) };
    } catch (error) {
      return { ok: false as const, error };
    } finally {
      session?.close();
    }
  });
  const failed = settled.find((s) => !s.ok);
  if (failed && !failed.ok) throw failed.error;
  return settled.map((s) => (s as { value: R }).value);
}

/**
 * Logs in to a host as `declared` says (the stack's `ovslb:ssh` under it,
 * through its jump hosts if any), verifying every host key on the way, and
 * logs out at once: no channel is opened, nothing is run or sent. It proves
 * a new way of reaching a host before anything records it. A refusal is an
 * SshError that starts with the host `declared` is for and says what was
 * refused, naming the jump host when it was that one; never a key.
 */
export async function verifyLogin(declared: SshConnection): Promise<void> {
  let session: SshSession;
  try {
    // A login of its own, never a shared connection: it is the login that is to be proven.
    session = await SshSession.fresh(withStackSsh(declared));
  } catch (e) {
    throw loginRefused(withStackSsh(declared), e);
  }
  session.close();
}

/** The error of a login verifyLogin tried: which hop refused (the host or a jump host) and what. */
function loginRefused(c: SshConnection, e: unknown): SshError {
  const target = describeHost(c);
  const hops: SshConnection[] = [];
  for (let hop: SshConnection | undefined = c; hop; hop = hop.jumpHost) hops.push(hop);
  const failed = e instanceof SshError ? hops.find((h) => describeHost(h) === e.hostName) : undefined;
  const message = e instanceof Error ? e.message : String(e);
  let why = failed && message.startsWith(`${describeHost(failed)}: `) ? message.slice(describeHost(failed).length + 2) : message;
  if (e instanceof HostKeyMismatchError || e instanceof HostKeyTypeError) {
    why = `host key refused: ${why}`;
  } else if (/All configured authentication methods failed/.test(why)) {
    // Reads ssh2's text: its key parser gives no code, and its auth failure's `level` is not kept by the SshError that wraps it.
    why = `authentication refused: the host did not accept the key for ${failed?.user ?? c.user} (${why.replace(/^connect failed: /, "")})`;
  } else if (/Cannot parse privateKey|does not contain a \(valid\) private key|passphrase/i.test(why)) {
    why = `the private key cannot be used: ${why.replace(/^connect failed: /, "")}`;
  }
  if (failed && failed !== c) return new SshError(target, `jump host ${describeHost(failed)}: ${why}`);
  return new SshError(target, why);
}
