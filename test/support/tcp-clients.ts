import { once } from "node:events";
import { createInterface } from "node:readline";
import { inNamespace, spawnInNamespace } from "./lab";

/**
 * Real TCP clients inside a lab namespace (the client is not a managed host).
 * A small node program opens connections to host:port and reports, for each,
 * the first word of the server's greeting: the backend's name.
 */

const PROGRAM = String.raw`
const net = require("node:net");
const readline = require("node:readline");
const [host, port, count, hold] = process.argv.slice(1);
const conns = [];
function lineOf(sock) {
  return new Promise((resolve) => {
    let buf = "";
    const done = (v) => { sock.removeAllListeners("data"); resolve(v); };
    sock.on("data", (d) => { buf += d; const nl = buf.indexOf("\n"); if (nl >= 0) done(buf.slice(0, nl)); });
    sock.once("error", (e) => done("error:" + e.code));
    sock.once("close", () => done("closed"));
    setTimeout(() => done("timeout"), 3000);
  });
}
async function open(i) {
  const sock = net.connect({ host, port: Number(port) });
  sock.setNoDelay(true);
  const greeting = await lineOf(sock);
  conns[i] = sock;
  return greeting.split(" ")[0];
}
(async () => {
  const names = [];
  for (let i = 0; i < Number(count); i += 20) {
    const batch = [];
    for (let j = i; j < Math.min(i + 20, Number(count)); j++) batch.push(open(j));
    names.push(...(await Promise.all(batch)));
  }
  console.log(JSON.stringify(names));
  if (hold !== "hold") { conns.forEach((c) => c && c.destroy()); return; }
  readline.createInterface({ input: process.stdin }).on("line", async (line) => {
    const replies = await Promise.all(conns.map(async (c, i) => {
      if (!c || c.destroyed) return "closed";
      const reply = lineOf(c);
      c.write(line + "-" + i + "\n");
      return reply;
    }));
    console.log(JSON.stringify(replies));
  });
})();
`;

/** Opens `count` connections (20 at a time) and closes them; returns each greeting's backend name ("timeout", "error:..." otherwise). */
export function greetings(namespace: string, host: string, port: number, count: number): string[] {
  return JSON.parse(inNamespace(namespace, [process.execPath, "-e", PROGRAM, host, String(port), String(count)]));
}

/** Connections held open: `names` from the greetings, and `probe` sends one line on every connection and returns each reply. */
export interface HeldConnections {
  names: string[];
  probe(text: string): Promise<string[]>;
  close(): void;
}

export async function holdConnections(namespace: string, host: string, port: number, count: number): Promise<HeldConnections> {
  const child = spawnInNamespace(namespace, [process.execPath, "-e", PROGRAM, host, String(port), String(count), "hold"]);
  const lines = createInterface({ input: child.stdout! });
  const queue: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  lines.on("line", (line) => (waiters.length ? waiters.shift()!(line) : queue.push(line)));
  const next = () => new Promise<string>((resolve, reject) => {
    if (queue.length) return resolve(queue.shift()!);
    waiters.push(resolve);
    setTimeout(() => reject(new Error("tcp client: no answer in 20 s")), 20_000);
  });
  const exited = once(child, "exit").then(() => { throw new Error("tcp client exited"); });
  exited.catch(() => undefined);
  const names: string[] = JSON.parse(await Promise.race([next(), exited]));
  return {
    names,
    async probe(text) {
      child.stdin!.write(`${text}\n`);
      return JSON.parse(await next());
    },
    close() {
      child.kill();
    },
  };
}
