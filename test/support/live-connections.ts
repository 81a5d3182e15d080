import { createInterface } from "node:readline";
import { spawnInNamespace } from "./lab";

/**
 * Long-lived TCP connections from a lab namespace, each exchanging a line
 * with its backend on every round. A connection that misses one answer (or
 * is reset) counts as broken from then on. Each reports its local port, so a
 * test can trace its 5-tuple.
 */

const PROGRAM = String.raw`
const net = require("node:net");
const readline = require("node:readline");
const [host, port, count] = process.argv.slice(1);
const conns = [];
function answer(c, timeoutMs) {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve("timeout"), timeoutMs);
    c.waiter = (line) => { clearTimeout(t); resolve(line); };
  });
}
function open() {
  return new Promise((resolve) => {
    const c = { sock: net.connect({ host, port: Number(port) }), buf: "", broken: "", backend: "" };
    c.sock.setNoDelay(true);
    c.sock.on("data", (d) => {
      c.buf += d;
      let nl;
      while ((nl = c.buf.indexOf("\n")) >= 0) {
        const line = c.buf.slice(0, nl);
        c.buf = c.buf.slice(nl + 1);
        if (c.waiter) { const w = c.waiter; c.waiter = undefined; w(line); }
      }
    });
    const fail = (why) => { if (!c.broken) c.broken = why; if (c.waiter) { const w = c.waiter; c.waiter = undefined; w(why); } };
    c.sock.on("error", (e) => fail("error:" + e.code));
    c.sock.on("close", () => fail("closed"));
    answer(c, 3000).then((greeting) => {
      c.backend = greeting.split(" ")[0];
      c.port = c.sock.localPort;
      if (!c.backend || greeting === "timeout") c.broken = "no greeting";
      resolve(c);
    });
  });
}
const report = () => conns.map((c) => ({ port: c.port, backend: c.backend, broken: c.broken }));
(async () => {
  for (let i = 0; i < Number(count); i++) conns.push(await open());
  console.log(JSON.stringify(report()));
  let round = 0;
  readline.createInterface({ input: process.stdin }).on("line", async () => {
    round++;
    await Promise.all(conns.map(async (c, i) => {
      if (c.broken) return;
      const reply = answer(c, 2000);
      c.sock.write("round " + round + " conn " + i + "\n");
      const line = await reply;
      if (line !== c.backend + " round " + round + " conn " + i) { c.broken = line; c.sock.destroy(); }
    }));
    console.log(JSON.stringify(report()));
  });
})();
`;

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
  close(): void;
}

export async function openLiveConnections(namespace: string, host: string, port: number, count: number): Promise<LiveConnections> {
  const child = spawnInNamespace(namespace, [process.execPath, "-e", PROGRAM, host, String(port), String(count)]);
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: child.stdout! });
  const queue: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  lines.on("line", (line) => (waiters.length ? waiters.shift()!(line) : queue.push(line)));
  const next = (timeoutMs: number) =>
    new Promise<LiveConnection[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`live connections: no report in ${timeoutMs} ms ${stderr}`)), timeoutMs);
      const take = (line: string) => {
        clearTimeout(timer);
        resolve(JSON.parse(line));
      };
      if (queue.length) take(queue.shift()!);
      else waiters.push(take);
    });
  const initial = await next(60_000);
  return {
    initial,
    async round() {
      child.stdin!.write("round\n");
      return next(10_000);
    },
    close() {
      child.kill();
    },
  };
}
