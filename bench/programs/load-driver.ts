/**
 * Started by bench/dsr-gre.ts in the client's namespace, with one argument:
 * the JSON of LoadConfig. Runs autocannon (its API, for every response's
 * latency at full precision: its own summary rounds to whole milliseconds):
 * a warm-up, then the measured run; prints one JSON line ({ warmup, run,
 * latencies }, or { error }).
 */
import type { EventEmitter } from "node:events";

export interface LoadConfig {
  url: string;
  connections: number;
  seconds: number;
  warmup: number;
  timeout: number;
}

/** The part of autocannon's result this reads (autocannon ships no types). */
interface Result {
  "2xx": number;
  non2xx: number;
  errors: number;
  timeouts: number;
  resets: number;
  mismatches: number;
  duration: number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p99: number; max: number };
  requests: { average: number };
}
type Autocannon = (opts: Record<string, unknown>, done: (err: Error | null, res: Result) => void) => EventEmitter;

const autocannon = require("autocannon") as Autocannon;

const cfg = JSON.parse(process.argv[2]) as LoadConfig;

function run(opts: Record<string, unknown>, keep: boolean): Promise<{ res: Result; latencies: number[] }> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    const inst = autocannon(opts, (err, res) => (err ? reject(err) : resolve({ res, latencies })));
    if (keep) {
      inst.on("response", (_client: unknown, code: number, _bytes: number, ms: number) => {
        if (code >= 200 && code < 300) latencies.push(Math.round(ms * 1000) / 1000);
      });
    }
  });
}

const pick = (r: Result) => ({
  ok: r["2xx"],
  non2xx: r.non2xx,
  errors: r.errors,
  timeouts: r.timeouts,
  resets: r.resets,
  mismatches: r.mismatches,
  duration: r.duration,
  statusCodeStats: r.statusCodeStats,
});

(async () => {
  const base = { url: cfg.url, connections: cfg.connections, pipelining: 1, timeout: cfg.timeout };
  const warm = await run({ ...base, duration: cfg.warmup }, false);
  const { res, latencies } = await run({ ...base, duration: cfg.seconds }, true);
  const measured = {
    ...pick(res),
    autocannonLatency: { p50: res.latency.p50, p99: res.latency.p99, max: res.latency.max },
    requestsAverage: res.requests.average,
  };
  console.log(JSON.stringify({ warmup: pick(warm.res), run: measured, latencies }));
})().catch((e: unknown) => {
  console.log(JSON.stringify({ error: String((e instanceof Error && e.stack) || e) }));
  process.exit(1);
});
