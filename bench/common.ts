import * as os from "node:os";
import { basename, dirname, join } from "node:path";
import type { CommandResult, CommandRunner, RunOptions } from "../provider/transport/exec";
import type { Duplex } from "node:stream";
import { lockLab } from "../test/support/lab";

/**
 * What every benchmark shares: the shape run.ts drives, timing, a note of
 * the machine, an OpenFlow wire tap (strace on the host) and a unixctl
 * client for ovs-vswitchd.
 */

export interface BenchContext {
  /** Progress lines go here (stderr), results go in the report. */
  log(line: string): void;
  /**
   * Run small (seconds, for CI): the same steps and the same invariants on
   * small sizes. Whatever a full run would send is still checked for
   * acceptance (e.g. through the provider's check) without being sent.
   */
  smoke: boolean;
}

/** Something a benchmark relies on or shows, checked by every run (smoke or full). */
export interface Invariant {
  name: string;
  ok: boolean;
  detail?: string;
}

export interface BenchReport {
  name: string;
  /** Markdown: the tables and notes, ready for bench/README.md. */
  markdown: string;
  /** Every number behind the tables. */
  data: unknown;
  /** What this run checked; one that does not hold fails the run and nothing is written. */
  invariants: Invariant[];
}

export interface Benchmark {
  name: string;
  description: string;
  run(ctx: BenchContext): Promise<BenchReport>;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of nothing");
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Runs fn and returns its result with the wall-clock milliseconds it took. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

/** A measuring child process's end: its figures as one JSON line on stdout, or the error on stderr and exit 1. */
export function childResult<T>(run: Promise<T>): void {
  run.then(
    (f) => {
      process.stdout.write(`${JSON.stringify(f)}\n`);
      process.exit(0);
    },
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}

/**
 * The path of a program in bench/programs, for a benchmark to start inside a
 * namespace: NAME.ts as compiled beside this file (dist/bench/programs/NAME.js,
 * built with the benchmarks), any other file (perl) from the source tree.
 */
export function benchProgram(name: string): string {
  if (name.endsWith(".ts")) return join(__dirname, "programs", `${name.slice(0, -3)}.js`);
  const root = basename(dirname(__dirname)) === "dist" ? dirname(dirname(__dirname)) : dirname(__dirname);
  return join(root, "bench", "programs", name);
}

export const fmtInt = (n: number) => n.toLocaleString("en-US");
export const fmtPct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1)}%`;
export const fmtMs = (ms: number) => (ms >= 100 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`);

/** The machine the numbers were taken on: this one (the lab's hosts are its namespaces) and the host's OVS. */
export async function machineNote(host: CommandRunner): Promise<Record<string, string>> {
  const ovs = await host.run(["ovs-vswitchd", "--version"]);
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    cpu: `${cpus[0]?.model ?? "unknown"} x${cpus.length}`,
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    ovs: ovs.stdout.split("\n")[0]?.trim() || "unknown",
    /** 1, 5 and 15 minute load averages as the run started: the lab shares this machine, so times depend on it. */
    load: os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" "),
  };
}

/**
 * Runs every command under `env OVS_RUNDIR=DIR`, so the host's own tools
 * (ovs-vsctl, ovs-appctl) find its daemons: a host's sshd sets no
 * environment, and the provider names the run directory itself too.
 */
export class RundirRunner implements CommandRunner {
  constructor(
    private readonly inner: CommandRunner,
    private readonly rundir: string,
  ) {
    if (!/^\/[A-Za-z0-9._/-]{0,200}$/.test(rundir)) throw new Error(`not a run directory: ${JSON.stringify(rundir)}`);
  }

  get hostName() {
    return this.inner.hostName;
  }

  run(argv: readonly string[], opts?: RunOptions): Promise<CommandResult> {
    return this.inner.run(["env", `OVS_RUNDIR=${this.rundir}`, ...argv], opts);
  }

  openUnixStream(socketPath: string): Promise<Duplex> {
    if (!this.inner.openUnixStream) throw new Error(`${this.hostName}: the runner opens no unix sockets`);
    return this.inner.openUnixStream(socketPath);
  }
}

/** One OpenFlow message as ovs-ofctl wrote it to ovs-vswitchd's socket. */
export interface WireMessage {
  /** OpenFlow message type (OF1.5 numbering: 34 = OFPT_BUNDLE_ADD_MESSAGE). */
  type: number;
  /** Bytes actually written for it (not the 16-bit length field, which can wrap). */
  bytes: number;
}

export const OFPT_BUNDLE_ADD_MESSAGE = 34;

/**
 * A CommandRunner that runs ovs-ofctl under `strace -e trace=sendto` and
 * records the OpenFlow messages it sent (type from the header, size from
 * what was written), so a benchmark reports bytes on the wire, not an
 * estimate. strace's lines are taken out of stderr before the caller sees it.
 */
export class WireTapRunner implements CommandRunner {
  last: WireMessage[] = [];

  constructor(private readonly inner: CommandRunner) {}

  get hostName() {
    return this.inner.hostName;
  }

  static async available(runner: CommandRunner): Promise<boolean> {
    const r = await runner.run(["strace", "-V"]).catch(() => undefined);
    return r?.exitCode === 0;
  }

  async run(argv: readonly string[], opts?: RunOptions): Promise<CommandResult> {
    // ovs-ofctl itself, or the provider's bundle script that stages the bundle and then runs it (`sh -c ... ovs-ofctl ...`).
    if (!argv.includes("ovs-ofctl")) return this.inner.run(argv, opts);
    const traced = ["strace", "-f", "-qq", "-e", "trace=sendto", "-e", "signal=none", "-xx", "-s", "8", "--", ...argv];
    const result = await this.inner.run(traced, opts);
    const kept: string[] = [];
    const sends: Array<{ head: Buffer; bytes: number }> = [];
    for (const raw of result.stderr.split("\n")) {
      const line = raw.replace(/^\[pid\s+\d+\] /, "");
      const m = /^sendto\((\d+), "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, \d+, .*\) = (-?\d+)/.exec(line);
      if (m) {
        const bytes = Number(m[3]);
        if (Number(m[1]) > 2 && bytes > 0) sends.push({ head: Buffer.from(m[2].replace(/\\x/g, ""), "hex"), bytes });
      } else if (!/^sendto\(/.test(line)) {
        kept.push(raw);
      }
    }
    this.last = messagesOf(sends);
    return { ...result, stderr: kept.join("\n") };
  }
}

/** Cuts a sequence of socket writes into OpenFlow messages (a large one may take several writes). */
function messagesOf(sends: ReadonlyArray<{ head: Buffer; bytes: number }>): WireMessage[] {
  const messages: WireMessage[] = [];
  let remaining = 0;
  for (const s of sends) {
    if (remaining > 0) {
      messages[messages.length - 1].bytes += s.bytes;
      remaining -= s.bytes;
      continue;
    }
    if (s.head.length < 4) throw new Error("strace: an OpenFlow write without a header");
    const type = s.head[1];
    const length = s.head.readUInt16BE(2);
    messages.push({ type, bytes: s.bytes });
    // A header length above what was written means the rest follows in the next writes.
    remaining = Math.max(0, length - s.bytes);
  }
  return messages;
}

export interface LabRunOptions {
  /** Lab locks held for the whole run, taken in this order. */
  locks: readonly string[];
  lockTimeoutMs?: number;
  /** Said when a signal interrupts the run. */
  interrupted: string;
  /** Undoes what the run made; returns what it could not undo. Runs on every exit, and on SIGINT/SIGTERM. */
  teardown: () => Promise<string[]>;
  /** Closes the run's connections, after a normal teardown. */
  close: () => void;
}

/**
 * A benchmark's run on the lab: takes its locks, runs `body`, and always
 * tears down what it made; on SIGINT or SIGTERM it tears down, releases the
 * locks and exits 130. `body` sees whether it has been interrupted.
 */
export async function labRun<T>(ctx: BenchContext, opts: LabRunOptions, body: (interrupted: () => boolean) => Promise<T>): Promise<T> {
  const unlocks: (() => void)[] = [];
  const release = () => {
    for (const u of unlocks.splice(0).reverse()) u();
  };
  let aborting = false;
  const onSignal = () => {
    if (aborting) return;
    aborting = true;
    ctx.log(`interrupted: ${opts.interrupted}`);
    void opts.teardown().finally(() => {
      release();
      process.exit(130);
    });
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    for (const lock of opts.locks) {
      ctx.log(`waiting for the lab's ${lock} lock`);
      unlocks.push(await lockLab(lock, opts.lockTimeoutMs));
    }
    return await body(() => aborting);
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    if (aborting) {
      // The signal's teardown is under way (it exits when done): a step that failed because of it waits for it too.
      await opts.teardown();
    } else {
      try {
        const failed = await opts.teardown();
        if (failed.length > 0) ctx.log(`teardown: ${failed.join("; ")}`);
      } finally {
        opts.close();
        release();
      }
    }
  }
}

/** The steps of a teardown, which go on after a failure: each failure is kept as "what: reason". */
export function teardownSteps(): { failed: string[]; attempt: (what: string, fn: () => unknown) => Promise<void> } {
  const failed: string[] = [];
  return {
    failed,
    async attempt(what, fn) {
      try {
        await fn();
      } catch (e) {
        failed.push(`${what}: ${(e as Error).message.slice(0, 200)}`);
      }
    },
  };
}
