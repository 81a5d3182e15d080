/**
 * Started by bench/distributor-failover.ts in the client's namespace, with
 * one argument: the JSON of ProberConfig. Every intervalMs (from its start,
 * not from the last round) it opens one connection from each of the round's
 * source ports to the VIP and waits up to timeoutMs for the amphora's
 * greeting; a greeting is a success. Prints one JSON line per probe ({ r, p,
 * s, e, ok, why, b }, times as performance.timeOrigin + performance.now(),
 * the bench's clock), "started" once, and ends when stdin closes, after its
 * last probe. Ports are never reused, so no 5-tuple meets an earlier one's state.
 */
import { connect } from "node:net";
import { performance } from "node:perf_hooks";

export interface ProberConfig {
  host: string;
  port: number;
  src: string;
  intervalMs: number;
  timeoutMs: number;
  /** The source ports of each round. */
  rounds: number[][];
}

const cfg = JSON.parse(process.argv[2]) as ProberConfig;
const now = () => performance.timeOrigin + performance.now();
let round = 0;
let stopping = false;
let pending = 0;
const t0 = now();
const out = (o: object) => process.stdout.write(JSON.stringify(o) + "\n");
const end = () => {
  if (stopping && pending === 0) {
    out({ done: true, rounds: round });
    process.exit(0);
  }
};

function probe(r: number, p: number) {
  pending++;
  const s = now();
  const sock = connect({ host: cfg.host, port: cfg.port, localAddress: cfg.src, localPort: p });
  let done = false;
  let buf = "";
  const finish = (ok: boolean, why?: string, b?: string) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    const e = now();
    sock.destroy();
    pending--;
    out({ r, p, s, e, ok, why, b });
    end();
  };
  const timer = setTimeout(() => finish(false, "timeout"), cfg.timeoutMs);
  sock.on("data", (d) => {
    buf += d.toString();
    const nl = buf.indexOf("\n");
    if (nl >= 0) finish(true, undefined, buf.slice(0, nl).split(" ")[0]);
  });
  sock.on("error", (e: NodeJS.ErrnoException) => finish(false, "error:" + e.code));
  sock.on("close", () => finish(false, "closed"));
}

function tick() {
  if (stopping) return;
  const ports = cfg.rounds[round];
  if (!ports) {
    stopping = true;
    end();
    return;
  }
  const r = round++;
  for (const p of ports) probe(r, p);
  setTimeout(tick, Math.max(0, t0 + round * cfg.intervalMs - now()));
}

out({ started: t0 });
tick();
process.stdin.resume();
process.stdin.on("end", () => {
  stopping = true;
  end();
});
setTimeout(() => process.exit(1), 120000).unref();
