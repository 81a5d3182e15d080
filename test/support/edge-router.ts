import { execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { inNamespace, spawnInNamespace } from "./lab";

/**
 * IPv6 next-hop tracking for the lab's edge router. Linux drops an IPv4 ECMP
 * next hop whose neighbour entry failed (fib_multipath_use_neigh), but for
 * IPv6 it checks neighbour state only while forwarding is off
 * (net/ipv6/route.c, rt6_score_route with RT6_LOOKUP_F_REACHABLE), so a
 * forwarding router keeps hashing flows to a dead next hop. Routers track
 * next hops by BFD or neighbour unreachability detection; this does the
 * latter for one route: it watches the router's neighbour table (ip monitor)
 * and rewrites the route without a next hop whose entry FAILED, and probes
 * a removed one (a neighbour solicitation, by a ping) every `probeMs` until
 * it answers again, as a router's own NUD would once traffic resumed.
 *
 * The tracker runs as a process of its own in the router's namespace, so a
 * test that blocks its event loop (a synchronous client) never delays it.
 */
export interface TrackedRoute {
  /** Each rewrite of the route: when (the tracker's clock), and the next hops it then had. */
  readonly changes: readonly { at: number; live: readonly string[] }[];
  /**
   * The first rewrite since `since` that left `hop` out, once the tracker has
   * reported it (its reports come through a pipe, read only when the caller's
   * event loop is free); undefined if there is none within `timeoutMs`.
   */
  dropped(hop: string, since: number, timeoutMs?: number): Promise<{ at: number; live: readonly string[] } | undefined>;
  close(): void;
}

/** The tracker itself, a program for node in the router's namespace (plain JavaScript: vitest's modules are TypeScript): prints each rewrite as a JSON line. */
const TRACKER = String.raw`
const { execFileSync, spawn } = require("node:child_process");
const { createInterface } = require("node:readline");
const { dev, destination, nextHops, probeMs } = JSON.parse(process.argv[1]);
const failed = new Set();
const write = () => {
  const live = nextHops.filter((h) => !failed.has(h));
  // With every next hop failed the route keeps them all: nothing better to send to.
  const hops = live.length > 0 ? live : [...nextHops];
  const via = hops.length === 1 ? ["via", hops[0], "dev", dev] : hops.flatMap((h) => ["nexthop", "via", h, "dev", dev]);
  execFileSync("ip", ["-6", "route", "replace", destination, ...via]);
  process.stdout.write(JSON.stringify({ at: Date.now(), live: hops }) + "\n");
};
write();
const monitor = spawn("ip", ["-6", "monitor", "neigh", "dev", dev], { stdio: ["ignore", "pipe", "ignore"] });
createInterface({ input: monitor.stdout }).on("line", (line) => {
  // "fd00:10::41 lladdr 02:.. REACHABLE", "fd00:10::41  FAILED"; "Deleted ..." and "Miss ..." lines change nothing.
  const [address, ...rest] = line.trim().split(/\s+/);
  if (!nextHops.includes(address)) return;
  const state = rest.at(-1);
  if (state === "FAILED" && !failed.has(address)) {
    failed.add(address);
    write();
  } else if (["REACHABLE", "STALE", "DELAY", "PROBE"].includes(state) && rest.includes("lladdr") && failed.delete(address)) write();
});
setInterval(() => {
  for (const h of failed) spawn("ping", ["-6", "-c", "1", "-W", "1", "-I", dev, h], { stdio: "ignore" }).on("error", () => undefined);
}, probeMs);
const stop = () => { monitor.kill(); process.exit(0); };
process.stdin.on("close", stop);
process.on("SIGTERM", stop);
`;

export function trackNextHops6(ns: string, dev: string, destination: string, nextHops: readonly string[], probeMs = 200): TrackedRoute {
  const args = { dev, destination, nextHops: [...nextHops], probeMs };
  const changes: { at: number; live: string[] }[] = [];
  const child = spawnInNamespace(ns, [process.execPath, "-e", TRACKER, JSON.stringify(args)]);
  createInterface({ input: child.stdout! }).on("line", (line) => changes.push(JSON.parse(line) as { at: number; live: string[] }));
  // The first rewrite is made before this returns, so the route exists for the caller.
  const deadline = Date.now() + 5_000;
  while (!routeExists(ns, destination)) {
    if (Date.now() > deadline) throw new Error(`the next-hop tracker in ${ns} did not write ${destination}`);
    execFileSync("sleep", ["0.02"]);
  }
  return {
    changes,
    async dropped(hop, since, timeoutMs = 2_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const change = changes.find((c) => c.at >= since && !c.live.includes(hop));
        if (change || Date.now() > deadline) return change;
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    close() {
      child.kill();
      inNamespace(ns, ["ip", "-6", "route", "del", destination]);
    },
  };
}

const routeExists = (ns: string, destination: string) => inNamespace(ns, ["ip", "-6", "route", "show", destination]).trim() !== "";
