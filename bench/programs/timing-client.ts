/**
 * Started by bench/second-chance.ts in the client's namespace. Request/echo
 * round trips, timed inside the namespace (no pipe in the measured path).
 * Reads one JSON command a line on stdin and answers each with one JSON line:
 * - { op: "open", host, port, count }: connects `count` times, one after
 *   another, and reports each local port, greeting and error;
 * - { op: "measure", ids }: sends one line at a time on the connections
 *   named, in that order, and times each echo with hrtime (µs; -1 for a
 *   connection that failed, which stays failed).
 * A command that throws is answered { failed }. Ends when stdin closes.
 */
import { connect, type NetConnectOpts, type Socket } from "node:net";
import { createInterface } from "node:readline";

interface Conn {
  sock: Socket;
  buf: string;
  lines: string[];
  waiter: ((line: string | undefined) => void) | undefined;
  failed: string;
}
interface OpenCommand {
  op: "open";
  host: string;
  port: number;
  count: number;
}
interface MeasureCommand {
  op: "measure";
  ids: number[];
}

const conns: Conn[] = [];

function connection(target: NetConnectOpts): Conn {
  const c: Conn = { sock: connect(target), buf: "", lines: [], waiter: undefined, failed: "" };
  c.sock.setNoDelay(true);
  c.sock.on("data", (d) => {
    c.buf += d.toString();
    let nl;
    while ((nl = c.buf.indexOf("\n")) >= 0) {
      const line = c.buf.slice(0, nl);
      c.buf = c.buf.slice(nl + 1);
      const w = c.waiter;
      c.waiter = undefined;
      if (w) w(line);
      else c.lines.push(line);
    }
  });
  const fail = (why: string) => {
    if (!c.failed) c.failed = why;
    const w = c.waiter;
    c.waiter = undefined;
    if (w) w(undefined);
  };
  c.sock.on("error", (e: NodeJS.ErrnoException) => fail("error:" + e.code));
  c.sock.on("close", () => fail("closed"));
  return c;
}

function readLine(c: Conn, ms: number): Promise<string | undefined> {
  if (c.lines.length) return Promise.resolve(c.lines.shift());
  if (c.failed) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      c.waiter = undefined;
      c.failed = "timeout";
      c.sock.destroy();
      resolve(undefined);
    }, ms);
    c.waiter = (l) => {
      clearTimeout(t);
      resolve(l);
    };
  });
}

async function open(cmd: OpenCommand) {
  const out = [];
  for (let i = 0; i < cmd.count; i++) {
    const c = connection({ host: cmd.host, port: cmd.port });
    conns.push(c);
    const g = await readLine(c, 3000);
    out.push({ localPort: c.sock.localPort, greeting: g ?? "", error: c.failed });
  }
  return { connections: out };
}

async function measure(cmd: MeasureCommand) {
  const us: number[] = [];
  for (const [k, id] of cmd.ids.entries()) {
    const c = conns[id];
    if (c.failed) {
      us.push(-1);
      continue;
    }
    c.lines.length = 0;
    const msg = "t" + k;
    const start = process.hrtime.bigint();
    const reply = readLine(c, 2000);
    c.sock.write(msg + "\n");
    const line = await reply;
    const end = process.hrtime.bigint();
    us.push(line !== undefined && line.endsWith(" " + msg) ? Number(end - start) / 1000 : -1);
  }
  return { us };
}

let queue = Promise.resolve();
createInterface({ input: process.stdin }).on("line", (line) => {
  queue = queue
    .then(async () => {
      const cmd = JSON.parse(line) as OpenCommand | MeasureCommand;
      console.log(JSON.stringify(cmd.op === "open" ? await open(cmd) : await measure(cmd)));
    })
    .catch((e: unknown) => console.log(JSON.stringify({ failed: String((e instanceof Error && e.stack) || e) })));
});
process.stdin.on(
  "end",
  () =>
    void queue.then(() => {
      conns.forEach((c) => c.sock.destroy());
      process.exit(0);
    }),
);
setTimeout(() => process.exit(0), 15 * 60 * 1000).unref();
