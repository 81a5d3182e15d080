import { beforeAll, describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { labStackConfig } from "../lab/stack-config";
import type { LabInventory } from "../lab/topology";
import { cliJson, doctor, DOCTOR_BIN, row, type Doctor } from "../support/doctor";
import { loadInventory, lockLabAll } from "../support/lab";

/**
 * `ovslb doctor` (issue 19) on the healthy lab, as a user runs it: the
 * package's bin, the stack config piped in as `pulumi config --json
 * --show-secrets` prints it. Every check is green and it exits 0. It runs
 * in the main lab's lane, whose files run one after another, so no other
 * test changes the hosts while it reads them (doctor.test.ts has the
 * faulty hosts).
 */

let inv: LabInventory;

beforeAll(() => {
  inv = loadInventory();
});

describe("ovslb doctor on the healthy lab", () => {
  it("reports every check green and exits 0, the stack config piped in as the Pulumi CLI prints it", async () => {
    // Tests that change the shared hosts (conntrack floods, MTUs, distributor restarts) hold these; in this lane
    // they run one after another, so only a test run from another checkout can make this wait.
    const unlock = await lockLabAll(["hv1-gre", "distributor"]);
    let d: Doctor;
    try {
      d = doctor(cliJson(labStackConfig(inv, ".")));
    } finally {
      unlock();
    }
    expect(d.stderr).toBe("");
    expect(d.checks.filter((c) => c.status !== "ok" && c.status !== "skip")).toEqual([]);
    expect(d.status).toBe(0);
    const hosts = Object.values(inv.hosts).filter((h) => h.ovsRundir);
    for (const h of hosts) {
      for (const check of [
        "reachable",
        "host key",
        "login",
        "ovsdb channel",
        "socket ovs-vswitchd",
        "ovs version",
        "bridge br-seg",
        "socket br-seg.mgmt",
        "datapath br-seg",
        "conntrack",
      ]) {
        expect(row(d, h.name, check)?.status, `${h.name} ${check}`).toBe("ok");
      }
    }
    // gre delivery's hosts (the config's tunnelAddress) have the lab's 1600-byte underlay; the rest use none.
    expect(row(d, "gw1", "underlay mtu")?.detail).toBe("br-phy (172.16.11.2) MTU 1600 >= 1542 (segment 1500 + 42)");
    expect(row(d, "dist1", "underlay mtu")?.status).toBe("skip");
    expect(row(d, "hv1", "ovs version")?.detail).toMatch(/^Open vSwitch 3\.1\.0; known defects: dp-hash-buckets/);
  });

  it("the table is one line per check with a summary, and fails when OVS is too old for a feature in use (dp_hash on 3.1.0)", () => {
    const gw1 = inv.hosts.gw1;
    const r = spawnSync(
      process.execPath,
      [
        DOCTOR_BIN,
        "doctor",
        "--host",
        `root@${gw1.address}`,
        "--host-key",
        gw1.hostKey,
        "--key",
        inv.clientKeyPath,
        "--rundir",
        gw1.ovsRundir!,
        "--uses",
        "dp_hash",
      ],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(r.status).toBe(1);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^HOST\s+CHECK\s+STATUS\s+DETAIL$/);
    const version = lines.find((l) => / ovs version /.test(l))!;
    expect(version).toMatch(/FAIL\s+Open vSwitch 3\.1\.0: inserting or removing buckets of a dp_hash select group corrupts/);
    expect(version).toContain("-- fix: upgrade to a release with the fix (3.2.6, 3.3.5, 3.4.3, 3.5.1, 3.6.0), or use selectionMethod hash");
    expect(lines.at(-1)).toMatch(/^\d+ checks: \d+ ok, 1 FAIL, 0 warn, 1 skipped$/);
  });
});
