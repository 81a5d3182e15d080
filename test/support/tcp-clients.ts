import { createInterface } from "node:readline";
import type { ChildProcess } from "node:child_process";
import { inNamespace, spawnInNamespace } from "./lab";

/**
 * The one TCP client of the tests: real connections from inside a lab
 * namespace (the client, a tenant's client or a VM: none is a managed host).
 *
 * A small node program (CLIENT, below) runs in the namespace and takes one
 * JSON command per line on stdin, answering each with one JSON line:
 * - open: connect to each target (`concurrency` at a time) and read its
 *   greeting line, within `timeoutMs`;
 * - send: write a line on the given connections and read one line back from
 *   each, within `timeoutMs`;
 * - drop: close the given connections.
 * It ends, closing every connection, when its stdin does. Every lab backend
 * greets a connection with "NAME PEER LOCAL" and answers a line L with
 * "NAME L" (test/lab/backend-server.js).
 *
 * A connection that fails (reset, closed, or silent past a timeout) stays
 * failed: every later read on it answers the first reason ("error:CODE",
 * "closed", "timeout"), and a silent one is closed, so a late answer is never
 * taken for the next one.
 */

const CLIENT = String.raw`
const net = require("node:net");
const readline = require("node:readline");
const conns = [];
function connection(target) {
  const c = { sock: net.connect(target), buf: "", lines: [], waiter: undefined, failed: "", port: undefined };
  c.sock.setNoDelay(true);
  const wake = (v) => { const w = c.waiter; c.waiter = undefined; if (w) w(v); return !!w; };
  c.sock.on("data", (d) => {
    c.buf += d;
    let nl;
    while ((nl = c.buf.indexOf("\n")) >= 0) {
      const line = c.buf.slice(0, nl);
      c.buf = c.buf.slice(nl + 1);
      if (!wake({ line })) c.lines.push(line);
    }
  });
  const fail = (why) => { if (!c.failed) c.failed = why; wake({ failed: c.failed }); };
  c.sock.on("error", (e) => fail("error:" + e.code));
  c.sock.on("close", () => fail("closed"));
  return c;
}
/** The next line, or why none will come: { line } or { failed }. */
function readLine(c, timeoutMs) {
  if (c.lines.length) return Promise.resolve({ line: c.lines.shift() });
  if (c.failed) return Promise.resolve({ failed: c.failed });
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      c.waiter = undefined;
      c.failed = "timeout";
      // Bound while the SYN is out; kept, as a destroyed socket no longer says.
      c.port = c.sock.localPort;
      c.sock.destroy();
      resolve({ failed: "timeout" });
    }, timeoutMs);
    c.waiter = (r) => { clearTimeout(timer); resolve(r); };
  });
}
async function open(cmd) {
  const out = [];
  for (let i = 0; i < cmd.targets.length; i += cmd.concurrency) {
    const batch = cmd.targets.slice(i, i + cmd.concurrency).map(async (target) => {
      const c = connection(target);
      conns.push(c);
      const r = await readLine(c, cmd.timeoutMs);
      return {
        greeting: r.line ?? "",
        error: r.failed,
        localPort: c.sock.localPort ?? c.port,
        remote: c.sock.remoteAddress === undefined ? "" : c.sock.remoteAddress + ":" + c.sock.remotePort,
      };
    });
    out.push(...(await Promise.all(batch)));
  }
  return { connections: out };
}
async function send(cmd) {
  const replies = await Promise.all(cmd.lines.map(async ([id, line]) => {
    const c = conns[id];
    if (c.failed) return c.failed;
    c.lines.length = 0; // nothing asked for it: not an answer
    const reply = readLine(c, cmd.timeoutMs);
    c.sock.write(line + "\n");
    const r = await reply;
    return r.line ?? r.failed;
  }));
  return { replies };
}
function drop(cmd) {
  for (const id of cmd.ids) { const c = conns[id]; if (!c.failed) c.failed = "closed"; c.sock.destroy(); }
  return {};
}
const ops = { open, send, drop };
let queue = Promise.resolve();
const input = readline.createInterface({ input: process.stdin });
input.on("line", (line) => {
  queue = queue
    .then(async () => {
      const cmd = JSON.parse(line);
      console.log(JSON.stringify(await ops[cmd.op](cmd)));
    })
    .catch((e) => console.log(JSON.stringify({ failed: String(e && e.stack || e) })));
});
input.on("close", () => queue.then(() => { conns.forEach((c) => c.sock.destroy()); process.exit(0); }));
`;

export interface TcpTarget {
  host: string;
  port: number;
}

export interface TcpConnection {
  /** The server's greeting line ("" if none came). */
  greeting: string;
  /** Its first word: the backend's name ("" if no greeting came). */
  backend: string;
  /** Why no greeting came: "timeout", "closed" or "error:CODE". */
  error?: string;
  /** The client's local port: the 5-tuple is (client address, localPort, remote). */
  localPort: number;
  /** "ADDRESS:PORT" the socket is connected to: the address every reply it accepted came from. */
  remote: string;
}

export interface OpenOptions {
  /** Connections opened at a time (default 20; 1 opens them one after another). */
  concurrency?: number;
  /** How long each greeting may take (default 3 s). */
  greetingTimeoutMs?: number;
}

const target = (t: string | TcpTarget): TcpTarget => {
  if (typeof t !== "string") return t;
  const at = t.lastIndexOf(":");
  return { host: t.slice(0, at), port: Number(t.slice(at + 1)) };
};
const openCommand = (targets: readonly (string | TcpTarget)[], opts: OpenOptions) =>
  JSON.stringify({ op: "open", targets: targets.map(target), concurrency: opts.concurrency ?? 20, timeoutMs: opts.greetingTimeoutMs ?? 3000 });
const toConnection = (c: Omit<TcpConnection, "backend">): TcpConnection => ({ ...c, backend: c.greeting.split(" ")[0] });

/** `count` copies of host:port, as targets. */
export const times = (host: string, port: number, count: number): TcpTarget[] => Array.from({ length: count }, () => ({ host, port }));

/**
 * Connects to each target from `namespace`, reads each greeting, and closes
 * them all again: one synchronous run of the client.
 */
export function connectAndClose(namespace: string, targets: readonly (string | TcpTarget)[], opts: OpenOptions = {}): TcpConnection[] {
  const out = JSON.parse(
    inNamespace(namespace, [process.execPath, "-e", CLIENT], `${openCommand(targets, opts)}\n`)
      .trim()
      .split("\n")[0],
  );
  if (out.failed) throw new Error(`tcp client in ${namespace}: ${out.failed}`);
  return (out.connections as Omit<TcpConnection, "backend">[]).map(toConnection);
}

/** Connections held open from a namespace until close(). */
export class TcpClients {
  private readonly lines: string[] = [];
  private readonly waiters: { resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  private exited: Error | undefined;
  private stderr = "";

  private constructor(
    private readonly child: ChildProcess,
    readonly namespace: string,
  ) {
    child.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const w = this.waiters.shift();
      if (w) w.resolve(line);
      else this.lines.push(line);
    });
    child.once("close", (code, signal) => {
      this.exited = new Error(`tcp client in ${namespace} exited (${signal ?? code}) ${this.stderr.trim()}`);
      for (const w of this.waiters.splice(0)) w.reject(this.exited);
    });
  }

  /** Every connection opened so far, in order; an index here names a connection in exchange() and drop(). */
  readonly connections: TcpConnection[] = [];

  /** Starts a client in `namespace` and opens connections to `targets` (see open()). */
  static async open(namespace: string, targets: readonly (string | TcpTarget)[], opts: OpenOptions = {}): Promise<TcpClients> {
    const clients = new TcpClients(spawnInNamespace(namespace, [process.execPath, "-e", CLIENT]), namespace);
    try {
      await clients.open(targets, opts);
    } catch (e) {
      clients.close();
      throw e;
    }
    return clients;
  }

  /** Opens more connections, reading each one's greeting; returns the new ones. */
  async open(targets: readonly (string | TcpTarget)[], opts: OpenOptions = {}): Promise<TcpConnection[]> {
    const budget = (opts.greetingTimeoutMs ?? 3000) * Math.ceil(targets.length / (opts.concurrency ?? 20)) + 10_000;
    const r = JSON.parse(await this.call(openCommand(targets, opts), budget));
    const opened = (r.connections as Omit<TcpConnection, "backend">[]).map(toConnection);
    this.connections.push(...opened);
    return opened;
  }

  /**
   * Sends `line(i)` on every connection i for which it gives a line, and reads
   * one line back from each within `timeoutMs` (default 3 s). The answer at i
   * is the reply, or why none came ("timeout", "closed", "error:CODE");
   * undefined where nothing was sent.
   */
  async exchange(line: (index: number) => string | undefined, timeoutMs = 3000): Promise<(string | undefined)[]> {
    const sends = this.connections.flatMap((_, i) => {
      const l = line(i);
      return l === undefined ? [] : [[i, l] as const];
    });
    const r = JSON.parse(await this.call(JSON.stringify({ op: "send", lines: sends, timeoutMs }), timeoutMs + 10_000));
    const answers: (string | undefined)[] = this.connections.map(() => undefined);
    sends.forEach(([i], k) => (answers[i] = r.replies[k]));
    return answers;
  }

  /** Closes these connections (the others stay open). */
  async drop(indexes: readonly number[]): Promise<void> {
    if (indexes.length > 0) await this.call(JSON.stringify({ op: "drop", ids: indexes }), 10_000);
  }

  /** Closes every connection and ends the client. */
  close(): void {
    this.child.stdin!.end();
    // It exits once its stdin ends; make sure of it.
    setTimeout(() => this.child.kill(), 2000).unref();
  }

  private call(command: string, timeoutMs: number): Promise<string> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`tcp client in ${this.namespace}: no answer in ${timeoutMs} ms ${this.stderr.trim()}`)), timeoutMs);
      this.waiters.push({
        resolve: (l) => {
          clearTimeout(timer);
          const failed = (JSON.parse(l) as { failed?: string }).failed;
          if (failed) reject(new Error(`tcp client in ${this.namespace}: ${failed}`));
          else resolve(l);
        },
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.child.stdin!.write(`${command}\n`);
    });
  }
}

/**
 * One connection from the namespace's local port `localPort`: its greeting's
 * backend name, "timeout" after 8 s, or "error:CODE". It ends with a reset
 * ("reset": SO_LINGER 0) or a FIN ("close").
 */
export function connectFromPort(namespace: string, host: string, port: number, localPort: number, end: "reset" | "close"): string {
  const script = String.raw`
    const net = require("node:net");
    const [host, port, localPort, end] = process.argv.slice(1);
    const s = net.connect({ host, port: Number(port), localPort: Number(localPort) });
    const done = (what) => { console.log(what); setTimeout(() => process.exit(0), 200); };
    const timer = setTimeout(() => { s.destroy(); done("timeout"); }, 8000);
    s.on("error", (e) => { clearTimeout(timer); done("error:" + e.code); });
    s.once("data", (d) => {
      clearTimeout(timer);
      if (end === "reset") s.resetAndDestroy(); else s.end();
      done(String(d).split(" ")[0]);
    });`;
  return inNamespace(namespace, ["node", "-e", script, host, String(port), String(localPort), end]).trim();
}

/** Opens `count` connections (20 at a time) and closes them; returns each greeting's backend name ("timeout", "error:..." otherwise). */
export function greetings(namespace: string, host: string, port: number, count: number): string[] {
  return connectAndClose(namespace, times(host, port, count)).map((c) => c.error ?? c.backend);
}

/** Connections held open: `names` from the greetings, and `probe` sends one line on every connection and returns each reply. */
export interface HeldConnections {
  names: string[];
  /** Sends "TEXT-i" on connection i and returns each reply ("NAME TEXT-i" from a working one). */
  probe(text: string): Promise<string[]>;
  close(): void;
}

export async function holdConnections(namespace: string, host: string, port: number, count: number): Promise<HeldConnections> {
  const clients = await TcpClients.open(namespace, times(host, port, count));
  return {
    names: clients.connections.map((c) => c.error ?? c.backend),
    async probe(text) {
      return (await clients.exchange((i) => `${text}-${i}`)) as string[];
    },
    close: () => clients.close(),
  };
}

export interface LiveConnection {
  /** The client's local port: the 5-tuple is (client, port, VIP, VIP port). */
  port: number;
  /** The backend's name from its greeting. */
  backend: string;
  /** Why it broke; empty while it works. */
  broken: string;
}

export interface LiveConnections {
  readonly initial: LiveConnection[];
  /** One round: every working connection sends a line and must get its echo within 2 s. */
  round(): Promise<LiveConnection[]>;
  /** Closes (FIN) the working connections to these backends; they count as closed, not broken. */
  closeTo(backends: readonly string[]): Promise<number>;
  close(): void;
}

/**
 * Long-lived connections (opened one after another), each exchanging a line
 * with its backend on every round. A connection that misses one answer (or
 * is reset) counts as broken from then on, and is closed.
 */
export async function openLiveConnections(namespace: string, host: string, port: number, count: number): Promise<LiveConnections> {
  // A set up to be watched, not a measurement: a greeting may take a retransmitted SYN or two on a loaded machine.
  const clients = await TcpClients.open(namespace, times(host, port, count), { concurrency: 1, greetingTimeoutMs: 6000 });
  const state: LiveConnection[] = clients.connections.map((c) => ({
    port: c.localPort,
    backend: c.backend,
    broken: c.error ? `no greeting: ${c.error}` : c.backend ? "" : "no greeting",
  }));
  const report = () => state.map((c) => ({ ...c }));
  let round = 0;
  return {
    initial: report(),
    async round() {
      round++;
      const expected = (i: number) => `round ${round} conn ${i}`;
      const replies = await clients.exchange((i) => (state[i].broken ? undefined : expected(i)), 2000);
      const broke: number[] = [];
      replies.forEach((reply, i) => {
        if (reply !== undefined && reply !== `${state[i].backend} ${expected(i)}`) {
          state[i].broken = reply;
          broke.push(i);
        }
      });
      await clients.drop(broke);
      return report();
    },
    async closeTo(backends) {
      const ids = state.flatMap((c, i) => (!c.broken && backends.includes(c.backend) ? [i] : []));
      await clients.drop(ids);
      for (const i of ids) state[i].broken = "closed";
      return ids.length;
    },
    close: () => clients.close(),
  };
}
