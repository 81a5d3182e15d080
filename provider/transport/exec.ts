import { execFile, spawn } from "node:child_process";
import { createConnection } from "node:net";
import type { Duplex, Readable } from "node:stream";

/** What a command printed and how it ended. */
export interface CommandResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface RunOptions {
  /** Fed to the command's standard input: where large or user-derived inputs go. */
  stdin?: string;
  /**
   * Standard input fed from a stream instead, as it is written, and closed
   * when it ends: for a command fed in steps (a staged bundle waits for its
   * commit line). Ignored when `stdin` is given.
   */
  stdinFrom?: Readable;
  timeoutMs?: number;
  /**
   * Standard output as it arrives, instead of in the result (whose stdout is
   * then ""): large dumps are parsed chunk by chunk and never held whole. A
   * throw stops the command and fails the run with that error.
   */
  onStdout?: (chunk: Buffer) => void;
}

/**
 * Runs a program on one host. argv[0] is the program; the other elements are
 * its arguments, each passed as one word: no user value is interpreted by a shell.
 */
export interface CommandRunner {
  /** A name for the host, used in error messages. */
  readonly hostName: string;
  /** How long a command may run (the connection's commandTimeoutMs), for programs that can also bound themselves. */
  readonly commandTimeoutMs?: number;
  run(argv: readonly string[], opts?: RunOptions): Promise<CommandResult>;
  /** A stream to a unix socket on the host (OVSDB's db.sock, a daemon's control socket), where the runner can open one. */
  openUnixStream?(socketPath: string): Promise<Duplex>;
}

/** Thrown when a command exits non-zero and the caller asked for success. */
export class CommandError extends Error {
  constructor(
    readonly hostName: string,
    readonly argv: readonly string[],
    readonly result: CommandResult,
  ) {
    super(`${hostName}: ${argv[0]} exited ${result.exitCode}: ${result.stderr.trim() || result.stdout.trim()}`);
    this.name = "CommandError";
  }
}

/** Runs the command and throws CommandError unless it exits 0. */
export async function runChecked(runner: CommandRunner, argv: readonly string[], opts?: RunOptions): Promise<string> {
  const result = await runner.run(argv, opts);
  if (result.exitCode !== 0) throw new CommandError(runner.hostName, argv, result);
  return result.stdout;
}

/** Gives a command its standard input as RunOptions say (a string, else a stream, else nothing). */
export function feedStdin(to: NodeJS.WritableStream, opts: RunOptions): void {
  if (opts.stdin === undefined && opts.stdinFrom) opts.stdinFrom.pipe(to);
  else to.end(opts.stdin ?? "");
}

/** Runs commands on this machine (execFile, no shell): for tests and a local host. */
export class LocalRunner implements CommandRunner {
  constructor(
    readonly hostName = "localhost",
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  openUnixStream(socketPath: string): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(socketPath);
      const refused = (err: Error) => reject(new Error(`${this.hostName}: cannot open ${socketPath}: ${err.message}`));
      socket.once("error", refused);
      socket.once("connect", () => {
        socket.off("error", refused);
        resolve(socket);
      });
    });
  }

  run(argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
    if (opts.onStdout) return this.stream(argv, opts, opts.onStdout);
    return new Promise((resolve, reject) => {
      const child = execFile(
        argv[0],
        argv.slice(1),
        { env: this.env, timeout: opts.timeoutMs ?? 30_000, maxBuffer: 256 * 1024 * 1024 },
        (err, stdout, stderr) => {
          if (err && typeof err.code !== "number") {
            if (err.killed) reject(new Error(`${this.hostName}: ${argv[0]} timed out`));
            else {
              const failure: Error = err;
              reject(failure);
            }
            return;
          }
          resolve({ stdout, stderr, exitCode: err ? (err.code as number) : 0 });
        },
      );
      // A command that exits without reading its input closes the pipe: EPIPE then says nothing the exit code does not.
      child.stdin?.on("error", () => undefined);
      if (child.stdin) feedStdin(child.stdin, opts);
    });
  }

  private stream(argv: readonly string[], opts: RunOptions, onStdout: (chunk: Buffer) => void): Promise<CommandResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(argv[0], argv.slice(1), { env: this.env, stdio: ["pipe", "pipe", "pipe"] });
      const stderr: Buffer[] = [];
      let failed: Error | undefined;
      const timer = setTimeout(() => {
        failed = new Error(`${this.hostName}: ${argv[0]} timed out`);
        child.kill();
      }, opts.timeoutMs ?? 30_000);
      child.stdout.on("data", (d: Buffer) => {
        if (failed !== undefined) return;
        try {
          onStdout(d);
        } catch (e) {
          failed = e instanceof Error ? e : new Error(String(e));
          child.kill();
        }
      });
      child.stderr.on("data", (d: Buffer) => stderr.push(d));
      child.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.on("close", (code) => {
        clearTimeout(timer);
        if (failed !== undefined) reject(failed);
        else resolve({ stdout: "", stderr: Buffer.concat(stderr).toString("utf8"), exitCode: code ?? -1 });
      });
      child.stdin.on("error", () => undefined);
      feedStdin(child.stdin, opts);
    });
  }
}
