import { describe, expect, it } from "vitest";
import { countLogins, cpuOfStat, overlap } from "../../bench/fleet-preview";
import { fleetService } from "../../bench/fleet/services";

/** bench/fleet-preview.ts's pure figures and the fleet program's services, without the lab. */

describe("fleet-preview's figures", () => {
  it("counts each accepted login in a piece of sshd's log, and nothing else", () => {
    const log = [
      "Server listening on 172.30.0.171 port 22.",
      "Accepted publickey for root from 172.30.0.1 port 40112 ssh2: ED25519 SHA256:abc",
      "Received disconnect from 172.30.0.1 port 40112:11: disconnected by user",
      "Failed publickey for root from 172.30.0.1 port 40113 ssh2: ED25519 SHA256:def",
      "Accepted publickey for ovslb from 172.30.0.1 port 40114 ssh2: ED25519 SHA256:abc",
    ].join("\n");
    expect(countLogins(log)).toBe(2);
    expect(countLogins("")).toBe(0);
  });

  it("finds the most calls at once and the time some call was in flight; back-to-back calls are not at once", () => {
    expect(overlap([])).toEqual({ maxInFlight: 0, busyMs: 0 });
    expect(
      overlap([
        { start: 0, end: 10 },
        { start: 10, end: 20 },
      ]),
    ).toEqual({ maxInFlight: 1, busyMs: 20 });
    expect(
      overlap([
        { start: 0, end: 10 },
        { start: 2, end: 5 },
        { start: 4, end: 6 },
        { start: 30, end: 40 },
      ]),
    ).toEqual({ maxInFlight: 3, busyMs: 20 });
  });

  it("reads a process's CPU and its reaped children's from /proc/PID/stat (a command with spaces and parentheses)", () => {
    const fields = ["S", ...Array.from({ length: 10 }, () => "0"), "150", "50", "300", "100", "20", "0"];
    expect(cpuOfStat(`1234 (node (x) y) ${fields.join(" ")}`)).toEqual({ own: 2, children: 4 });
  });
});

describe("the fleet program's services", () => {
  it("spreads consecutive services over the hosts, each with its own name, VIP, backend and MAC", () => {
    const hosts = Array.from({ length: 16 }, (_, i) => `fleet${i + 1}`);
    const all = Array.from({ length: 1000 }, (_, i) => fleetService(i, hosts));
    for (const key of ["name", "vip"] as const) expect(new Set(all.map((s) => s[key])).size).toBe(1000);
    expect(new Set(all.map((s) => s.backend.mac)).size).toBe(1000);
    expect(all.slice(0, 16).map((s) => s.hypervisor)).toEqual(hosts);
    expect(all.filter((s) => s.hypervisor === "fleet1")).toHaveLength(63);
    expect(fleetService(255, hosts).vip).toBe("10.64.1.0");
  });

  it("the moved service differs only in its backend's port", () => {
    const [was, moved] = [fleetService(5, ["a"]), fleetService(5, ["a"], true)];
    expect({ ...moved, backend: { ...moved.backend, port: was.backend.port } }).toEqual(was);
    expect(moved.backend.port).not.toBe(was.backend.port);
  });
});
