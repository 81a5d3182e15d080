import { join } from "node:path";
import { describe, it, expect } from "vitest";
import { parseArgs, UsageError } from "../../bench/cli";
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
