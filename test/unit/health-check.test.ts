import { describe, it, expect } from "vitest";
import { handle } from "../../provider/handlers";
import type { HealthCheckInputs as Inputs } from "../../provider/model/inputs.generated";
import { Uuid } from "../../provider/ovsdb";
import { renderFinding } from "../../provider/model/drift";
import { LOAD_BALANCER_KEY, MAPPINGS_KEY } from "../../provider/ovsdb";
import { desiredRows, nbFindings, planRows, type HealthCheckRow, type ObservedRow } from "../../provider/resources/health-check/plan";

/** HealthCheck: check-time refusals (through the provider's check), the rows planned from inputs, and what a plan refuses or changes given the northbound. */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const db = (sock: string) => ({ connection: conn("172.30.0.10"), socket: sock });
const be = (i: number, extra: object = {}) => ({ address: `10.0.0.${100 + i}`, port: 8080, logicalPort: `lsp-${i}`, ...extra });

function hc(extra: Partial<Inputs> = {}): Inputs {
  return {
    loadBalancer: "web",
    northbound: db("/run/ovn/ovnnb_db.sock"),
    southbound: db("/run/ovn/ovnsb_db.sock"),
    sourceIp: "10.0.0.254",
    vips: [
      { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [be(1), be(2)] },
      { address: "10.0.0.194", port: 80, protocol: "tcp", backends: [be(1)] },
      { address: "10.0.0.193", port: 53, protocol: "udp", backends: [be(3)] },
    ],
    probe: { interval: 7 },
    enforce: true,
    ...extra,
  };
}

async function refusals(inputs: object): Promise<string[]> {
  const r = (await handle("HealthCheck", "check", [{}, inputs])) as { failures: { property: string; reason: string }[] };
  return r.failures.map((f) => `${f.property}: ${f.reason}`);
}

let n = 0;
const uuid = () => new Uuid(`00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`);
const LB = "deferred-nat/web";
const ME = "health-check/web";
const hcRow = (vip: string, owner: string | undefined, options: Record<string, string>, ids: Record<string, string> = {}): HealthCheckRow => ({
  _uuid: uuid(),
  vip,
  options: new Map(Object.entries(options)),
  external_ids: new Map(Object.entries({ ...ids, ...(owner ? { "ovslb:owner": owner } : {}) })),
});
const lbRow = (name: string, vips: string[], mappings: Record<string, string> = {}, checks: HealthCheckRow[] = [], owner = LB): ObservedRow => ({
  _uuid: uuid(),
  name,
  vips: new Map(vips.map((v) => [v, "10.0.0.101:8080"])),
  ip_port_mappings: new Map(Object.entries(mappings)),
  health_check: checks.map((c) => c._uuid),
  external_ids: new Map([["ovslb:owner", owner]]),
  healthCheckRows: checks,
});
const OPTIONS = { interval: "7", timeout: "3", success_count: "1", failure_count: "1" };
const observed = (tcp?: ObservedRow, udp?: ObservedRow) =>
  new Map<string, ObservedRow | undefined>([
    ["tcp", tcp],
    ["udp", udp],
    ["sctp", undefined],
  ]);
const freshTcp = () => lbRow("ovslb-web-tcp", ["10.0.0.193:80", "10.0.0.194:80"]);
const freshUdp = () => lbRow("ovslb-web-udp", ["10.0.0.193:53"]);

describe("HealthCheck at check", () => {
  it("accepts complete inputs (the baseline the refusals below break)", async () => {
    expect(await refusals(hc())).toEqual([]);
  });

  it("refuses a backend without a logical port, no source IP, a backend twice in a VIP, a VIP twice, and enforce without the southbound, each by its property", async () => {
    const { sourceIp: _s, southbound: _sb, ...rest } = hc();
    const bad = {
      ...rest,
      vips: [
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080 }, be(2), be(2)] },
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [be(1)] },
      ],
    };
    expect(await refusals(bad)).toEqual(["vips[0].backends[0].logicalPort: is required"]);
    // The source address is of the VIPs' family: an IPv4 VIP needs sourceIp.
    expect(await refusals({ ...rest, southbound: hc().southbound })).toEqual([
      "sourceIp: is required: a VIP is IPv4, and its probes need a source address of that family",
    ]);
    const fixed = { ...hc({ southbound: undefined }), vips: [bad.vips[1], { ...bad.vips[0], backends: [be(1), be(2), be(2)] }, bad.vips[1]] };
    delete (fixed as Partial<Inputs>).southbound;
    expect(await refusals(fixed)).toEqual([
      "enforce: needs southbound: enforcing sets stale Service_Monitor rows offline in the southbound",
      "vips[1]: is the same address, port and protocol as another VIP: one health check per VIP",
      "vips[2]: is the same address, port and protocol as another VIP: one health check per VIP",
      "vips[1].backends[2]: is listed twice in this VIP",
    ]);
  });

  it("refuses one backend address given two logical ports in one protocol, the source IP as a backend, and gateways without hypervisors", async () => {
    const inputs = hc({
      vips: [
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [be(1), be(9, { address: "10.0.0.254" })] },
        { address: "10.0.0.194", port: 80, protocol: "tcp", backends: [be(1, { logicalPort: "lsp-other" })] },
        { address: "10.0.0.193", port: 53, protocol: "udp", backends: [be(1, { logicalPort: "lsp-other", hypervisor: "hv1" })] },
      ],
      gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg" }],
    });
    expect(await refusals(inputs)).toEqual([
      "vips[0].backends[0].hypervisor: is required with gateways: the gateways' BFD sessions are toward hypervisors, by the load balancer's names for them",
      "vips[0].backends[1].address: equals sourceIp: the probes' source address cannot be a backend's",
      "vips[0].backends[1].hypervisor: is required with gateways: the gateways' BFD sessions are toward hypervisors, by the load balancer's names for them",
      "vips[1].backends[0].logicalPort: differs from vips[0].backends[0].logicalPort for the same address: OVN's ip_port_mappings hold one logical port per backend address",
      "vips[1].backends[0].hypervisor: is required with gateways: the gateways' BFD sessions are toward hypervisors, by the load balancer's names for them",
    ]);
  });
});

describe("HealthCheck's northbound rows", () => {
  it("plans one health check per VIP keyed by the full vips key, on the load balancer's row of its protocol, and one mapping per backend address", () => {
    const rows = desiredRows(hc());
    expect([...rows.keys()]).toEqual(["tcp", "udp"]);
    expect(rows.get("tcp")!.name).toBe("ovslb-web-tcp");
    expect(Object.fromEntries(Object.entries(rows.get("tcp")!.checks).map(([k, v]) => [k, v.options]))).toEqual({
      "10.0.0.193:80": OPTIONS,
      "10.0.0.194:80": OPTIONS,
    });
    expect(rows.get("tcp")!.mappings).toEqual({ "10.0.0.101": "lsp-1:10.0.0.254", "10.0.0.102": "lsp-2:10.0.0.254" });
    expect(rows.get("udp")!.mappings).toEqual({ "10.0.0.103": "lsp-3:10.0.0.254" });
    // Without probe settings: ovn-controller's defaults, written out.
    expect(desiredRows(hc({ probe: undefined })).get("udp")!.checks["10.0.0.193:53"].options).toEqual({
      interval: "5",
      timeout: "3",
      success_count: "1",
      failure_count: "1",
    });
  });

  it("on a load balancer with none: inserts every health check, naming the load balancer and the mappings it inserted, and the mappings", () => {
    const { changes, refusals } = planRows(hc(), observed(freshTcp(), freshUdp()));
    expect(refusals).toEqual([]);
    const tcp = changes.find((c) => c.row.name === "ovslb-web-tcp")!;
    expect(tcp.insert).toEqual([
      { vip: "10.0.0.193:80", options: OPTIONS, externalIds: { [LOAD_BALANCER_KEY]: LB, [MAPPINGS_KEY]: "10.0.0.101,10.0.0.102" } },
      { vip: "10.0.0.194:80", options: OPTIONS, externalIds: { [LOAD_BALANCER_KEY]: LB, [MAPPINGS_KEY]: "10.0.0.101" } },
    ]);
    expect([tcp.update, tcp.detach, tcp.deleteMappings]).toEqual([[], [], []]);
    expect(tcp.insertMappings).toEqual({ "10.0.0.101": "lsp-1:10.0.0.254", "10.0.0.102": "lsp-2:10.0.0.254" });
  });

  it("uses a mapping the load balancer already wrote with the same value without claiming it, and refuses one it wrote otherwise", () => {
    const same = lbRow("ovslb-web-udp", ["10.0.0.193:53"], { "10.0.0.103": "lsp-3:10.0.0.254" });
    const { changes } = planRows(hc(), observed(freshTcp(), same));
    const udp = changes.find((c) => c.row.name === "ovslb-web-udp")!;
    expect(udp.insertMappings).toEqual({});
    expect(udp.insert).toEqual([{ vip: "10.0.0.193:53", options: OPTIONS, externalIds: { [LOAD_BALANCER_KEY]: LB } }]);

    const other = lbRow("ovslb-web-udp", ["10.0.0.193:53"], { "10.0.0.103": "lsp-3:10.0.0.9" });
    expect(planRows(hc(), observed(freshTcp(), other)).refusals).toEqual([
      "vips[2].backends: OVN Load_Balancer ovslb-web-udp maps backend address 10.0.0.103 to lsp-3:10.0.0.9, not lsp-3:10.0.0.254 (written by another owner: the load balancer's ovn.healthCheckSourceIp or by hand); refusing to overwrite it",
    ]);
  });

  it("an interval change updates only the health-check rows; nothing else on the load balancer's row", () => {
    const mine = (vip: string, claims: string) => hcRow(vip, ME, OPTIONS, { [LOAD_BALANCER_KEY]: LB, [MAPPINGS_KEY]: claims });
    const tcp = lbRow("ovslb-web-tcp", ["10.0.0.193:80", "10.0.0.194:80"], { "10.0.0.101": "lsp-1:10.0.0.254", "10.0.0.102": "lsp-2:10.0.0.254" }, [
      mine("10.0.0.193:80", "10.0.0.101,10.0.0.102"),
      mine("10.0.0.194:80", "10.0.0.101"),
    ]);
    const udp = lbRow("ovslb-web-udp", ["10.0.0.193:53"], { "10.0.0.103": "lsp-3:10.0.0.254" }, [mine("10.0.0.193:53", "10.0.0.103")]);
    expect(planRows(hc(), observed(tcp, udp))).toEqual({ changes: [], refusals: [] });
    const { changes } = planRows(hc({ probe: { interval: 9 } }), observed(tcp, udp));
    expect(
      changes.map((c) => [c.row.name, c.insert.length, c.detach.length, c.deleteMappings, c.insertMappings, c.update.map((u) => u.options.interval)]),
    ).toEqual([
      ["ovslb-web-tcp", 0, 0, [], {}, ["9", "9"]],
      ["ovslb-web-udp", 0, 0, [], {}, ["9"]],
    ]);
    expect(nbFindings(hc({ probe: { interval: 9 } }), observed(tcp, udp)).findings.map(renderFinding)).toEqual([
      "OVN Load_Balancer ovslb-web-tcp: health check of VIP 10.0.0.193:80 differs",
      "OVN Load_Balancer ovslb-web-tcp: health check of VIP 10.0.0.194:80 differs",
      "OVN Load_Balancer ovslb-web-udp: health check of VIP 10.0.0.193:53 differs",
    ]);
    // Delete: every own row detached and the claimed mappings removed; nothing refused.
    const gone = planRows({ ...hc(), vips: [] }, observed(tcp, udp));
    expect(gone.refusals).toEqual([]);
    expect(gone.changes.map((c) => [c.row.name, c.detach.map((d) => d.vip), c.deleteMappings.sort()])).toEqual([
      ["ovslb-web-tcp", ["10.0.0.193:80", "10.0.0.194:80"], ["10.0.0.101", "10.0.0.102"]],
      ["ovslb-web-udp", ["10.0.0.193:53"], ["10.0.0.103"]],
    ]);
  });

  it("refuses, naming the property and the owner: VIPs whose probe the load balancer's own healthCheck.probe holds, a row that is missing or not the load balancer's, and a VIP not on the row", () => {
    const dnatOwned = lbRow("ovslb-web-tcp", ["10.0.0.193:80", "10.0.0.194:80"], {}, [
      hcRow("10.0.0.193:80", LB, OPTIONS),
      hcRow("10.0.0.194:80", undefined, {}),
    ]);
    expect(planRows(hc(), observed(dnatOwned, freshUdp())).refusals).toEqual([
      "vips[0]: the health check of tcp VIP 10.0.0.193:80 on OVN Load_Balancer ovslb-web-tcp is DeferredNatLoadBalancer web's own healthCheck.probe (owned by deferred-nat/web): remove healthCheck.probe from the load balancer first; refusing to take it over",
      "vips[1]: the health check of tcp VIP 10.0.0.194:80 on OVN Load_Balancer ovslb-web-tcp is not owned by ovslb; refusing to take it over",
    ]);
    expect(planRows(hc(), observed(undefined, lbRow("ovslb-web-udp", ["10.0.0.193:53"], {}, [], "someone"))).refusals).toEqual([
      "loadBalancer: OVN Load_Balancer ovslb-web-tcp does not exist: a HealthCheck attaches to the rows of DeferredNatLoadBalancer web (with ovn), which must exist first",
      "loadBalancer: OVN Load_Balancer ovslb-web-udp is owned by someone, not deferred-nat/web; refusing to attach to it",
    ]);
    expect(planRows(hc(), observed(lbRow("ovslb-web-tcp", ["10.0.0.193:80"]), freshUdp())).refusals).toEqual([
      "vips[1]: tcp VIP 10.0.0.194:80 is not one of load balancer web's (OVN Load_Balancer ovslb-web-tcp has 10.0.0.193:80)",
    ]);
  });
});

describe("HealthCheck of IPv6 VIPs", () => {
  const be6 = (i: number, extra: object = {}) => ({ address: `fd00:10::${100 + i}`, port: 8080, logicalPort: `lsp-${i}`, ...extra });
  /** A dual-stack service: the IPv4 VIP of hc() and an IPv6 VIP of the same backends' other addresses. */
  const dual = (extra: Partial<Inputs> = {}) =>
    hc({ sourceIpv6: "FD00:10:0::FE", vips: [...hc().vips, { address: "FD00:20::193", port: 80, protocol: "tcp", backends: [be6(1), be6(2)] }], ...extra });

  it("maps each backend with the source of its family, in OVN's bracketed form, and keys the VIP [IP]:PORT, addresses canonical", async () => {
    expect(await refusals(dual())).toEqual([]);
    const { withDefaults } = await import("../../provider/resources/health-check/plan");
    const tcp = desiredRows(withDefaults(dual())).get("tcp")!;
    expect(Object.keys(tcp.checks)).toEqual(["10.0.0.193:80", "10.0.0.194:80", "[fd00:20::193]:80"]);
    expect(tcp.checks["[fd00:20::193]:80"].addresses).toEqual(["[fd00:10::101]", "[fd00:10::102]"]);
    expect(tcp.mappings).toEqual({
      "10.0.0.101": "lsp-1:10.0.0.254",
      "10.0.0.102": "lsp-2:10.0.0.254",
      "[fd00:10::101]": "lsp-1:[fd00:10::fe]",
      "[fd00:10::102]": "lsp-2:[fd00:10::fe]",
    });
  });

  it("refuses an IPv6 VIP without sourceIpv6, an IPv4 sourceIpv6, a backend of the other family and the source as a backend, each by its property", async () => {
    const { sourceIpv6: _s, ...noSource } = dual();
    expect(await refusals(noSource)).toEqual(["sourceIpv6: is required: a VIP is IPv6, and its probes need a source address of that family"]);
    expect(await refusals(dual({ sourceIpv6: "10.0.0.253" }))).toEqual(["sourceIpv6: is an IPv4 address: the IPv4 probes' source is sourceIp"]);
    const mixed = dual();
    mixed.vips[3] = { ...mixed.vips[3], backends: [be6(1), be(2), be6(9, { address: "fd00:10::fe" })] };
    expect(await refusals(mixed)).toEqual([
      "vips[3].backends[1].address: is IPv4 in an IPv6 VIP: a VIP's backends are of its family (a dual-stack service is two VIPs, one of each family)",
      "vips[3].backends[2].address: equals sourceIpv6: the probes' source address cannot be a backend's",
    ]);
    // Only IPv6 VIPs: no IPv4 source is needed.
    const { sourceIp: _v4, ...v6only } = dual({ vips: [dual().vips[3]] });
    expect(await refusals(v6only)).toEqual([]);
  });

  it("plans the IPv6 mappings and health check on the row, and a read of exactly those finds no drift", () => {
    const inputs = { ...dual(), sourceIpv6: "fd00:10::fe", vips: [{ address: "fd00:20::193", port: 80, protocol: "tcp" as const, backends: [be6(1)] }] };
    const row = lbRow("ovslb-web-tcp", ["[fd00:20::193]:80"]);
    const { changes, refusals: refused } = planRows(inputs, observed(row));
    expect(refused).toEqual([]);
    expect(changes[0].insertMappings).toEqual({ "[fd00:10::101]": "lsp-1:[fd00:10::fe]" });
    expect(changes[0].insert).toEqual([
      { vip: "[fd00:20::193]:80", options: OPTIONS, externalIds: { [LOAD_BALANCER_KEY]: LB, [MAPPINGS_KEY]: "[fd00:10::101]" } },
    ]);
    const applied = lbRow("ovslb-web-tcp", ["[fd00:20::193]:80"], { "[fd00:10::101]": "lsp-1:[fd00:10::fe]" }, [
      hcRow("[fd00:20::193]:80", ME, OPTIONS, { [LOAD_BALANCER_KEY]: LB, [MAPPINGS_KEY]: "[fd00:10::101]" }),
    ]);
    expect(nbFindings(inputs, observed(applied)).findings).toEqual([]);
    expect(planRows(inputs, observed(applied)).changes).toEqual([]);
  });
});
