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
 */
export interface TrackedRoute {
  /** Each rewrite of the route: when, and the next hops it then had. */
  readonly changes: readonly { at: number; live: readonly string[] }[];
  close(): void;
}

export function trackNextHops6(ns: string, dev: string, destination: string, nextHops: readonly string[], probeMs = 200): TrackedRoute {
  const failed = new Set<string>();
  const changes: { at: number; live: string[] }[] = [];
  const write = () => {
    const live = nextHops.filter((h) => !failed.has(h));
    // With every next hop failed the route keeps them all: nothing better to send to.
    const hops = live.length > 0 ? live : [...nextHops];
    const via = hops.length === 1 ? ["via", hops[0], "dev", dev] : hops.flatMap((h) => ["nexthop", "via", h, "dev", dev]);
    inNamespace(ns, ["ip", "-6", "route", "replace", destination, ...via]);
    changes.push({ at: Date.now(), live: hops });
  };
  write();
  const monitor = spawnInNamespace(ns, ["ip", "-6", "monitor", "neigh", "dev", dev]);
  createInterface({ input: monitor.stdout! }).on("line", (line) => {
    // "fd00:10::41 lladdr 02:.. REACHABLE", "fd00:10::41  FAILED"; "Deleted ..." and "Miss ..." lines change nothing.
    const [address, ...rest] = line.trim().split(/\s+/);
    if (!nextHops.includes(address)) return;
    const state = rest.at(-1);
    if (state === "FAILED" && !failed.has(address)) {
      failed.add(address);
      write();
    } else if (state !== undefined && ["REACHABLE", "STALE", "DELAY", "PROBE"].includes(state) && rest.includes("lladdr") && failed.delete(address)) write();
  });
  const probe = setInterval(() => {
    for (const h of failed) {
      const ping = spawnInNamespace(ns, ["ping", "-6", "-c", "1", "-W", "1", "-I", dev, h]);
      ping.on("error", () => undefined);
    }
  }, probeMs);
  return {
    changes,
    close() {
      clearInterval(probe);
      monitor.kill();
      inNamespace(ns, ["ip", "-6", "route", "del", destination]);
    },
  };
}
