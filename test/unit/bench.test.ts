import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, expect } from "vitest";
import { parseArgs, UsageError } from "../../bench/cli";
import { benchProgram } from "../../bench/common";
import { FULL, SMOKE, acceptanceInvariants } from "../../bench/deferred-nat";
import { MAX_BUCKETS_PER_GROUP } from "../../provider/resources/deferred-nat-load-balancer/plan";

/**
 * The benchmarks' own contract, without the lab: a plain run writes
 * nothing, only --record writes the tracked results, a smoke run is never
 * recorded; and deferred-nat's sizes are inputs the provider's check accepts
 * (it once kept adding a 1,001st backend that check refuses).
 */

const RESULTS = "/repo/bench/results";
const KNOWN = ["deferred-nat"];

describe("bench command line", () => {
  it("writes nothing on a plain run, the tracked results only with --record", () => {
    expect(parseArgs([], RESULTS, KNOWN)).toEqual({ names: [], smoke: false, list: false, out: undefined });
    expect(parseArgs(["deferred-nat"], RESULTS, KNOWN).out).toBeUndefined();
    expect(parseArgs(["--smoke"], RESULTS, KNOWN)).toMatchObject({ smoke: true, out: undefined });
    expect(parseArgs(["deferred-nat", "--record"], RESULTS, KNOWN)).toMatchObject({ names: ["deferred-nat"], out: RESULTS });
    expect(parseArgs(["--out", "/tmp/b"], RESULTS, KNOWN).out).toBe(join("/tmp", "b"));
  });

  it("never records a smoke run, and refuses what it does not know", () => {
    expect(() => parseArgs(["--smoke", "--record"], RESULTS, KNOWN)).toThrow(UsageError);
    expect(() => parseArgs(["--record", "--out", "/tmp/b"], RESULTS, KNOWN)).toThrow(/not both/);
    expect(() => parseArgs(["--out"], RESULTS, KNOWN)).toThrow(/--out needs a directory/);
    expect(() => parseArgs(["--recrod"], RESULTS, KNOWN)).toThrow(/unknown option --recrod/);
    expect(() => parseArgs(["deferred-nta"], RESULTS, KNOWN)).toThrow(/unknown benchmark\(s\): deferred-nta/);
  });
});

describe("deferred-nat benchmark sizes", () => {
  const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
  const gateway = {
    name: "gw1",
    host: { connection: { host: "172.30.0.11", user: "root", hostKey: KEY, privateKeyPath: "/k" }, ovsRundir: "/run/ovslb-lab/hosts/gw1/run" },
    bridge: "br-seg",
    segmentPort: "seg0",
    mac: "02:00:0a:00:00:0b",
  };

  it("ends the full run's large VIP at the most backends check accepts", () => {
    expect(FULL.apply[1] + 1).toBe(MAX_BUCKETS_PER_GROUP);
    expect(SMOKE.apply[1]).toBeLessThan(FULL.apply[1]);
    expect(SMOKE.tuples).toBeLessThan(FULL.tuples);
  });

  it("measures only inputs check accepts, and check refuses the next size up", async () => {
    const invariants = await acceptanceInvariants(gateway);
    expect(invariants.filter((i) => !i.ok)).toEqual([]);
    expect(invariants.map((i) => i.name)).toContain(`check refuses a VIP of 1,001 backends for its bucket count (at most 1,000 per group)`);
  });
});

describe("bench programs", () => {
  const bench = join(__dirname, "..", "..", "bench");

  it("each program a benchmark starts is a file in bench/programs, and no benchmark embeds one as a string", () => {
    const sources = readdirSync(bench)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => readFileSync(join(bench, f), "utf8"));
    const named = sources.flatMap((s) => [...s.matchAll(/benchProgram\("([^"]+)"\)/g)].map((m) => m[1]));
    expect([...new Set(named)].sort()).toEqual([
      "edge-sniffer.pl",
      "http-server.ts",
      "load-driver.ts",
      "prober.ts",
      "tcp-checker.ts",
      "tcp-listener.ts",
      "timing-client.ts",
    ]);
    for (const name of named) expect(existsSync(join(bench, "programs", name)), name).toBe(true);
    for (const s of sources) expect(s).not.toMatch(/String\.raw`|execPath, "-e"/);
  });

  it("finds a compiled program beside the compiled benchmarks, and perl in the source tree", () => {
    expect(benchProgram("prober.ts")).toBe(join(bench, "programs", "prober.js"));
    expect(benchProgram("edge-sniffer.pl")).toBe(join(bench, "programs", "edge-sniffer.pl"));
  });
});
