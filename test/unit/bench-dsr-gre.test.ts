import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, expect } from "vitest";
import { FULL, PORTS, SMOKE, VIPS, hvInputs, lbInputs, percentile } from "../../bench/dsr-gre";
import { check } from "../../provider/handlers";
import type { LabInventory } from "../lab/topology";

/**
 * The dsr-gre benchmark's contract, without the lab: its sizes stay bounded
 * (the smoke run short enough for CI), every resource it creates is one the
 * provider's check accepts, its VIPs and ports are its own, and its
 * percentiles are nearest-rank.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const host = (name: string, i: number, underlay: number) => ({
  name,
  address: `172.30.0.${i}`,
  sshPort: 22,
  user: "root",
  hostKey: KEY,
  ovsRundir: `/run/ovslb-lab/hosts/${name}/run`,
  segment: { bridge: "br-seg", port: "seg0", address: `10.0.0.${i}`, mac: `02:00:0a:00:00:${i.toString(16).padStart(2, "0")}` },
  underlay: { bridge: "br-phy", port: "ul0", address: `172.16.${underlay}.2`, router: `172.16.${underlay}.1` },
});
const vm = (hv: string, n: number, address: string) => ({
  name: `${hv}-vm${n}`,
  namespace: `ovslb-${hv}-vm${n}`,
  hypervisor: hv,
  port: `vm${n}`,
  address,
  mac: `02:00:0a:00:00:${Number(address.split(".")[3]).toString(16)}`,
});
const inv = {
  clientKeyPath: "/run/ovslb-lab/client_ed25519",
  backendPort: 8080,
  client: { namespace: "ovslb-client", address: "10.0.0.2", mac: "02:00:0a:00:00:02" },
  l3dsr: { namespace: "ovslb-l3dsr", underlay: { address: "172.16.41.2", disallowedAddress: "172.16.41.3" }, vipRange: "10.0.0.176/28" },
  hosts: { gw1: host("gw1", 11, 11), gw2: host("gw2", 12, 12), hv1: host("hv1", 21, 21), hv2: host("hv2", 22, 22), hv3: host("hv3", 23, 23) },
  backends: [vm("hv1", 1, "10.0.0.101"), vm("hv1", 2, "10.0.0.102"), vm("hv2", 1, "10.0.0.111"), vm("hv2", 2, "10.0.0.112")],
} as unknown as LabInventory;

async function refusals(kind: string, inputs: object): Promise<string[]> {
  const { failures } = await check(kind, {}, inputs as Record<string, unknown>);
  return failures.map((f) => `${f.property} ${f.reason}`);
}

describe("dsr-gre benchmark", () => {
  it("keeps its runs bounded: the smoke run a few seconds per path, the full one 10 s, connections capped", () => {
    expect(SMOKE.rounds * (SMOKE.seconds + SMOKE.warmupSeconds)).toBeLessThanOrEqual(4);
    expect(FULL.rounds * FULL.seconds).toBe(10);
    for (const s of [FULL, SMOKE]) expect(s.connections).toBeLessThanOrEqual(64);
  });

  it("creates only resources the provider's check accepts", async () => {
    for (const d of ["mac", "gre"] as const) expect(await refusals("DeferredNatLoadBalancer", lbInputs(inv, d))).toEqual([]);
    for (const h of ["hv1", "hv2"] as const) {
      for (const m of ["mac", "gre"] as const) expect(await refusals("DsrHypervisorFlows", hvInputs(inv, h, m))).toEqual([]);
    }
    // hv1's one flow-based GRE port takes the gateways' VIP and the external L3DSR's, from their sources only.
    const hv1 = hvInputs(inv, "hv1", "gre");
    expect(hv1.gre?.allowedSources.sort()).toEqual(["172.16.11.2", "172.16.12.2", "172.16.41.2"]);
    expect(hv1.vips.map((v) => v.address).sort()).toEqual([VIPS.l3dsr, VIPS.gre, VIPS.gre6].sort());
    expect(hvInputs(inv, "hv2", "gre").gre?.allowedSources).not.toContain("172.16.41.2");
  });

  it("gives the mac and gre resources of one hypervisor different server ports (replies are un-NATed by source port), none the lab's 8080", () => {
    expect(new Set(Object.values(PORTS)).size).toBe(3);
    expect(Object.values(PORTS)).not.toContain(8080);
    const replyPorts = (m: "mac" | "gre") => new Set(hvInputs(inv, "hv1", m).vips.flatMap((v) => v.backends.map((b) => b.port)));
    expect([...replyPorts("mac")]).toEqual([PORTS.mac]);
    expect([...replyPorts("gre")]).toEqual([PORTS.gre]);
  });

  it("uses VIPs in the lab's ranges that no lab test uses", () => {
    const inRange = (ip: string, lo: number, hi: number) => ip.startsWith("10.0.0.") && Number(ip.split(".")[3]) >= lo && Number(ip.split(".")[3]) <= hi;
    expect(inRange(VIPS.mac, 192, 207) && inRange(VIPS.gre, 192, 207)).toBe(true);
    expect(inRange(VIPS.l3dsr, 176, 191)).toBe(true);
    expect(VIPS.gre6.startsWith("fd00:20::")).toBe(true);
    const dirs = [join(__dirname, "..", "integration"), join(__dirname, "..", "..", "bench"), join(__dirname, "..", "..", "examples")];
    for (const dir of dirs) {
      for (const f of readdirSync(dir, { recursive: true, withFileTypes: true })) {
        if (!f.isFile() || !/\.(ts|js)$/.test(f.name) || f.name === "dsr-gre.ts") continue;
        const text = readFileSync(join(f.parentPath ?? f.path, f.name), "utf8");
        for (const vip of Object.values(VIPS)) expect(new RegExp(`\\b${vip.replace(/\./g, "\\.")}\\b`).test(text), `${f.name} uses ${vip}`).toBe(false);
      }
    }
  });

  it("takes nearest-rank percentiles", () => {
    const v = Array.from({ length: 200 }, (_, i) => i + 1);
    expect(percentile(v, 50)).toBe(100);
    expect(percentile(v, 99)).toBe(198);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
});
