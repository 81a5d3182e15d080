/**
 * Started by bench/liveness.ts in a namespace, with one argument: the JSON of
 * CheckerConfig. keepalived's TCP_CHECK, reduced: per target, a connect every
 * interval (from the start of the last one), failing after the timeout; down
 * after `fall` failures in a row, up after one success. Prints a JSON line on
 * each change ({ target, state, at, checkStartedAt }, epoch ms as
 * performance.timeOrigin + performance.now(), the clock the bench uses) and
 * ends when stdin closes.
 */
import { connect } from "node:net";
import { performance } from "node:perf_hooks";

export interface CheckerConfig {
  targets: { name: string; host: string; port: number }[];
  intervalMs: number;
  timeoutMs: number;
  fall: number;
}

const cfg = JSON.parse(process.argv[2]) as CheckerConfig;
const now = () => performance.timeOrigin + performance.now();

for (const t of cfg.targets) {
  let state = "unknown";
  let fails = 0;
  const check = () => {
    const started = now();
    const s = connect({ host: t.host, port: t.port });
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      fails = ok ? 0 : fails + 1;
      const next = ok ? "up" : fails >= cfg.fall ? "down" : state;
      if (next !== state) {
        state = next;
        console.log(JSON.stringify({ target: t.name, state, at: now(), checkStartedAt: started }));
      }
      setTimeout(check, Math.max(0, started + cfg.intervalMs - now()));
    };
    const timer = setTimeout(() => finish(false), cfg.timeoutMs);
    s.on("connect", () => finish(true));
    s.on("error", () => finish(false));
  };
  check();
}
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
setTimeout(() => process.exit(0), 30 * 60 * 1000).unref();
