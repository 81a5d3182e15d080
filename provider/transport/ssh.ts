import { readFileSync } from "node:fs";
import type { Duplex } from "node:stream";
import { Client, type ClientChannel, type ConnectConfig } from "ssh2";
import type { CommandResult, CommandRunner, RunOptions } from "./exec";
import type { SshConnection } from "../model/inputs.generated";
import { hostKeyAlgorithmsFor, keyMatches, parsePublicKey, trustedKeysFor, type TrustedKey } from "./known-hosts";
import { withStackSsh } from "../stack-ssh";

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

export const describeHost = (c: SshConnection) => `${c.user}@${c.host}:${c.port ?? 22}`;

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
 * One SSH connection to one host, reused for all the work on that host
 * within an operation: commands (exec channels) and stream-local channels
 * (e.g. to OVSDB's db.sock).
 */
export class SshSession implements CommandRunner {
  readonly hostName: string;
  private closed = false;

  private constructor(
    private readonly client: Client,
    private readonly jump: SshSession | undefined,
    readonly connection: SshConnection,
  ) {
    this.hostName = describeHost(connection);
    client.on("close", () => (this.closed = true));
  }

  /** Connects with the stack's `ovslb:ssh` settings under the declared ones (provider/stack-ssh.ts). */
  static connect(declared: SshConnection): Promise<SshSession> {
    return SshSession.open(withStackSsh(declared));
  }

  /** `c` already carries the stack's settings, its jump host too. */
  private static async open(c: SshConnection): Promise<SshSession> {
    const hostName = describeHost(c);
    const keys = trustedKeys(c);
    const jump = c.jumpHost ? await SshSession.open(c.jumpHost) : undefined;
    try {
      const sock = jump ? await jump.forwardTcp(c.host, c.port ?? 22) : undefined;
      const client = new Client();
      let keyRejected = false;
      const config: ConnectConfig = {
        host: c.host,
        port: c.port ?? 22,
        username: c.user,
        sock,
        readyTimeout: c.connectTimeoutMs ?? 10_000,
        keepaliveInterval: 15_000,
        algorithms: { serverHostKey: hostKeyAlgorithmsFor(keys) as never },
        hostVerifier: (key: Buffer) => {
          const ok = keyMatches(key, keys);
          keyRejected = !ok;
          return ok;
        },
      };
      if (c.privateKey) config.privateKey = c.privateKey;
      else if (c.privateKeyPath) config.privateKey = readFileSync(c.privateKeyPath);
      if (c.passphrase) config.passphrase = c.passphrase;
      if (c.agent) config.agent = c.agent;
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
      return new SshSession(client, jump, c);
    } catch (e) {
      jump?.close();
      throw e;
    }
  }

  get commandTimeoutMs(): number {
    return this.connection.commandTimeoutMs ?? 60_000;
  }

  /** Runs argv on the host; every element reaches the program as one word. */
  run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    const command = quoteArgv(argv);
    const timeoutMs = opts.timeoutMs ?? this.commandTimeoutMs;
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new SshError(this.hostName, "connection is closed"));
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
        opened.end(opts.stdin ?? "");
      });
    });
  }

  /** A channel to a unix socket on the host (OpenSSH streamlocal), e.g. OVSDB's db.sock. */
  openUnixStream(socketPath: string): Promise<Duplex> {
    return this.openChannel(
      `opening ${socketPath}`,
      (done) => this.client.openssh_forwardOutStreamLocal(socketPath, done),
      (err) => {
        // sshd says only "open failed": name the two causes (it connects as the login user). ssh2 gives sshd's
        // description only as message text (and a bare reason number), so the hint keys on that text.
        const why = /open failed/.test(err.message)
          ? " (the socket is missing, or the login user has no permission on it: it needs write access to the socket and search access to its directory; see README, Least privilege)"
          : "";
        return `cannot open ${socketPath}: ${err.message}${why}`;
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
  private openChannel(
    what: string,
    open: (done: (err: Error | undefined, channel: ClientChannel) => void) => void,
    failure: (err: Error) => string,
  ): Promise<ClientChannel> {
    const timeoutMs = this.commandTimeoutMs;
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new SshError(this.hostName, "connection is closed"));
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

  close(): void {
    this.client.end();
    // A host that stopped answering never finishes the goodbye: drop the socket rather than keep it half-open.
    if (!this.closed) setTimeout(() => this.client.destroy(), 1_000).unref();
    this.jump?.close();
  }

  /** Drops the connection at once (a hung host): every open channel fails. */
  private abandon(): void {
    this.closed = true;
    this.client.destroy();
    this.jump?.close();
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
    session = await SshSession.connect(declared);
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
