import type { Profiler } from "node:inspector";
import { Session } from "node:inspector/promises";

/**
 * A profile's CPU split by whose work it is, by the nearest frame of ssh2
 * or provider/ on each sample's stack: ssh2 or provider/transport is SSH's
 * (key exchange, channels, packet crypto, the OVSDB client's JSON); the rest
 * of provider/ is the provider's own (compare, plan, parse, state); none of
 * them is node's socket I/O and events; GC apart.
 */
export interface CpuSplit {
  sampledMs: number;
  providerMs: number;
  sshMs: number;
  ioMs: number;
  gcMs: number;
}

export function splitProfile(profile: Profiler.Profile): CpuSplit {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const kindOf = new Map<number, keyof Omit<CpuSplit, "sampledMs"> | "idle">();
  const classify = (id: number) => {
    const top = byId.get(id)!.callFrame.functionName;
    if (top === "(idle)") return "idle";
    if (top === "(garbage collector)") return "gcMs";
    // The nearest frame of ssh2 or provider/ says whose work it is (node's crypto under ssh2 is SSH's, a dump parsed in a data callback the provider's).
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at)!.callFrame.url;
      if (url.includes("/node_modules/ssh2/") || url.includes("/provider/transport/")) return "sshMs";
      if (url.includes("/provider/")) return "providerMs";
    }
    return "ioMs";
  };
  const split: CpuSplit = { sampledMs: 0, providerMs: 0, sshMs: 0, ioMs: 0, gcMs: 0 };
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, i) => {
    if (!kindOf.has(id)) kindOf.set(id, classify(id));
    const kind = kindOf.get(id)!;
    // A sample stands for the time until the next one.
    const ms = (deltas[i + 1] ?? 0) / 1000;
    if (kind === "idle") return;
    split[kind] += ms;
    split.sampledMs += ms;
  });
  return split;
}

/** `fn` under V8's sampling profiler (every 200 µs), its CPU split by splitProfile. */
export async function profiled<T>(fn: () => Promise<T>): Promise<{ value: T; split: CpuSplit }> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  const value = await fn();
  const { profile } = await session.post("Profiler.stop");
  session.disconnect();
  return { value, split: splitProfile(profile) };
}
