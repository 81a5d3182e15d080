import { describe, it, expect } from "vitest";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { withDefaults, type DeferredNatDefaulted as Inputs } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { handle } from "../../provider/handlers";
import {
  assessHealth,
  monitorsToMarkOffline,
  type BfdView,
  type BindingView,
  type HealthObservations,
  type MonitorView,
} from "../../provider/resources/deferred-nat-load-balancer/health";
import { desiredNbRows } from "../../provider/resources/deferred-nat-load-balancer/ovn";

/** The health check's check-time refusals (through the provider's check) and its pure assessment. */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const central = conn("172.30.0.10");
const ovn = { northbound: { connection: central, socket: "/run/ovn/ovnnb_db.sock" }, router: "lr0", healthCheckSourceIp: "10.0.0.254" };
const southbound = { connection: central, socket: "/run/ovn/ovnsb_db.sock" };

const backend = (i: number, hypervisor = "hv1", extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.0.0.${100 + i}`,
  port: 8080,
  mac: `02:00:0a:00:00:${(100 + i).toString(16)}`,
  hypervisor,
  logicalPort: `lsp-${i}`,
  ...extra,
});

function lb(extra: Partial<DeferredNatLoadBalancerInputs> = {}): Inputs {
  return withDefaults({
    name: "web",
    gateways: ["gw1", "gw2", "gw3"].map((name, i) => ({
      name,
      host: { connection: conn(`172.30.0.${11 + i}`) },
      bridge: "br-seg",
      segmentPort: "seg0",
      mac: `02:00:0a:00:00:${(11 + i).toString(16).padStart(2, "0")}`,
      tunnelAddress: `172.16.${11 + i}.2`,
    })),
    hypervisors: [{ name: "hv1" }, { name: "hv2" }],
    vips: [{ address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(1), backend(2, "hv2")] }],
    ovn,
    healthCheck: { probe: {}, southbound, enforce: true },
    ...extra,
  });
}

/** The failures the provider's check gives (schema, then the rules), as "property: reason". */
async function refusals(inputs: Inputs): Promise<string[]> {
  const r = (await handle("DeferredNatLoadBalancer", "check", [{}, inputs])) as { failures: { property: string; reason: string }[] };
  return r.failures.map((f) => `${f.property}: ${f.reason}`);
}

describe("health check refusals at check", () => {
  it("accepts a complete OVN health check with enforce (the baseline the refusals below break)", async () => {
    expect(await refusals(lb())).toEqual([]);
  });

  it("refuses a probe without ovn", async () => {
    const noPorts = lb({ ovn: undefined, vips: [{ ...lb().vips[0], backends: [backend(1, "hv1", { logicalPort: undefined })] }] });
    // Without ovn the backend's missing logicalPort is refused too (a probe needs it either way).
    expect(await refusals(noPorts)).toEqual([
      "healthCheck.probe: needs ovn: OVN's probes are Load_Balancer_Health_Check rows of the northbound load balancer",
      expect.stringMatching(/^vips\[0\]\.backends\[0\]\.logicalPort: is required by healthCheck\.probe: /),
    ]);
  });

  it("refuses a probe without ovn.healthCheckSourceIp, saying OVN would drop the backend", async () => {
    const failures = await refusals(lb({ ovn: { ...ovn, healthCheckSourceIp: undefined } }));
    expect(failures).toContainEqual(
      expect.stringMatching(/^ovn\.healthCheckSourceIp: is required by healthCheck\.probe with IPv4 VIPs: .*without a mapping OVN silently drops the backend$/),
    );
    // The backends' logical ports are refused for the same reason; nothing else is.
    expect(failures.filter((f) => !f.startsWith("ovn.healthCheckSourceIp:"))).toEqual([
      expect.stringMatching(/^vips\[0\]\.backends\[0\]\.logicalPort: needs ovn\.healthCheckSourceIp: /),
      expect.stringMatching(/^vips\[0\]\.backends\[1\]\.logicalPort: needs ovn\.healthCheckSourceIp: /),
    ]);
  });

  it("refuses, by index, a backend without logicalPort when probed", async () => {
    const vips = [
      lb().vips[0],
      { address: "10.0.0.194", port: 53, protocol: "udp" as const, backends: [backend(3), backend(4, "hv2", { logicalPort: undefined })] },
    ];
    expect(await refusals(lb({ vips }))).toEqual([
      "vips[1].backends[1].logicalPort: is required by healthCheck.probe: OVN probes a backend from the chassis its logical port is bound to, and silently drops a monitored VIP's backend that has no port mapping",
    ]);
    // The same backend is fine without a probe (no health check to drop it from).
    expect(await refusals(lb({ vips, healthCheck: {} }))).toEqual([]);
  });

  it("refuses bfd with a hypervisor reached by mac delivery, naming that hypervisor", async () => {
    const hypervisors = [
      { name: "hv1", tunnelAddress: "172.16.21.2" },
      { name: "hv2", delivery: "mac" as const },
    ];
    expect(await refusals(lb({ delivery: "gre", hypervisors, healthCheck: { bfd: {} } }))).toEqual([
      "hypervisors[1].delivery: must be gre with healthCheck.bfd: BFD runs on the gateways' tunnel to each hypervisor, and mac delivery has none to watch",
    ]);
    expect(
      await refusals(lb({ delivery: "gre", hypervisors: [hypervisors[0], { name: "hv2", tunnelAddress: "172.16.22.2" }], healthCheck: { bfd: {} } })),
    ).toEqual([]);
    // The default delivery is mac: every hypervisor is refused.
    expect((await refusals(lb({ healthCheck: { bfd: {} } }))).map((f) => f.split(":")[0])).toEqual(["hypervisors[0].delivery", "hypervisors[1].delivery"]);
  });

  it("refuses a southbound without probe", async () => {
    expect(await refusals(lb({ healthCheck: { southbound } }))).toEqual([
      "healthCheck.southbound: is only read with healthCheck.probe: the southbound's Service_Monitor rows exist only for probed VIPs",
    ]);
  });

  it("refuses enforce without southbound (and without probe)", async () => {
    const reason =
      "healthCheck.enforce: needs healthCheck.probe and healthCheck.southbound: enforcing sets stale Service_Monitor rows offline in the southbound";
    expect(await refusals(lb({ healthCheck: { probe: {}, enforce: true } }))).toEqual([reason]);
    expect(await refusals(lb({ healthCheck: { enforce: true } }))).toEqual([reason]);
    expect(await refusals(lb({ healthCheck: { probe: {}, enforce: false } }))).toEqual([]);
  });
});

describe("the northbound health checks the inputs want", () => {
  it("one per VIP, keyed exactly IP:PORT, with OVN's defaults for what is not given", () => {
    const vips = [lb().vips[0], { address: "10.0.0.193", port: 443, protocol: "tcp" as const, backends: [backend(1)] }];
    const [row] = desiredNbRows(lb({ vips, healthCheck: { probe: { interval: 2, failureCount: 1 } } }));
    expect(row.healthChecks).toEqual({
      "10.0.0.193:80": { interval: "2", timeout: "3", success_count: "1", failure_count: "1" },
      "10.0.0.193:443": { interval: "2", timeout: "3", success_count: "1", failure_count: "1" },
    });
    expect(desiredNbRows(lb({ healthCheck: { probe: {} } }))[0].healthChecks["10.0.0.193:80"]).toEqual({
      interval: "5",
      timeout: "3",
      success_count: "1",
      failure_count: "1",
    });
    expect(desiredNbRows(lb({ healthCheck: undefined }))[0].healthChecks).toEqual({});
  });

  it("an IPv6 VIP (OVN 23.03+): the health check keyed [IP]:PORT, each backend mapped [IP] -> LSP:[SOURCE] with the IPv6 source", async () => {
    const v6 = (i: number, hypervisor = "hv1") => backend(i, hypervisor, { address: `fd00:10::${100 + i}` });
    const vips = [lb().vips[0], { address: "fd00:20::193", port: 80, protocol: "tcp" as const, backends: [v6(1), v6(2, "hv2")] }];
    const dual = lb({ vips, ovn: { ...ovn, healthCheckSourceIpv6: "FD00:10::FE" } });
    expect(await refusals(dual)).toEqual([]);
    const [row] = desiredNbRows(dual);
    expect(Object.keys(row.healthChecks)).toEqual(["10.0.0.193:80", "[fd00:20::193]:80"]);
    expect(row.ipPortMappings).toEqual({
      "10.0.0.101": "lsp-1:10.0.0.254",
      "10.0.0.102": "lsp-2:10.0.0.254",
      "[fd00:10::101]": "lsp-1:[fd00:10::fe]",
      "[fd00:10::102]": "lsp-2:[fd00:10::fe]",
    });
    // Without the IPv6 source, the IPv6 VIP's probes and backends are refused by name; the IPv4 ones are not.
    expect(await refusals(lb({ vips }))).toEqual([
      "vips[1].backends[0].logicalPort: needs ovn.healthCheckSourceIpv6: OVN's ip_port_mappings pair a logical port with the health checks' source address of its family",
      "vips[1].backends[1].logicalPort: needs ovn.healthCheckSourceIpv6: OVN's ip_port_mappings pair a logical port with the health checks' source address of its family",
      expect.stringMatching(/^ovn\.healthCheckSourceIpv6: is required by healthCheck\.probe with IPv6 VIPs: /),
    ]);
    expect(await refusals(lb({ vips, ovn: { ...ovn, healthCheckSourceIpv6: "10.0.0.253" } }))).toEqual([
      "ovn.healthCheckSourceIpv6: is an IPv4 address: the IPv4 probes' source is ovn.healthCheckSourceIp",
    ]);
  });
});

describe("assessHealth", () => {
  const inputs = lb();
  const online = (i: number, status = "online"): MonitorView => ({ logicalPort: `lsp-${i}`, ip: `10.0.0.${100 + i}`, port: 8080, protocol: "tcp", status });
  const bound: BindingView = { chassis: "hv1", up: true };
  const fwd: BfdView = { state: "up", forwarding: true };
  const down: BfdView = { state: "down", forwarding: false };
  /** gateway -> its view of hv1 (hv2 always up). */
  const bfdOf = (views: Record<string, BfdView>) =>
    new Map(
      Object.entries(views).map(([gw, v]) => [
        gw,
        new Map([
          ["hv1", v],
          ["hv2", fwd],
        ]),
      ]),
    );
  const observe = (over: Partial<HealthObservations> = {}): HealthObservations => ({
    monitors: [online(1), online(2)],
    bindings: new Map([
      ["lsp-1", bound],
      ["lsp-2", { chassis: "hv2", up: true }],
    ]),
    bfd: new Map(),
    ...over,
  });

  it("reports a port bound to no chassis but still up, its monitor online, as stale with the reason", () => {
    const r = assessHealth(
      inputs,
      observe({
        bindings: new Map([
          ["lsp-1", { up: true }],
          ["lsp-2", { chassis: "hv2", up: true }],
        ]),
      }),
    );
    expect(r.stale).toEqual([
      {
        vip: "tcp:10.0.0.193:80",
        backend: "10.0.0.101:8080",
        logicalPort: "lsp-1",
        reason: "online while its logical port lsp-1 is bound to no chassis (and still marked up)",
      },
    ]);
    expect(r.backends[0]).toMatchObject({ monitor: "online", port: { name: "lsp-1", chassis: null, up: true } });
  });

  it("does not report a bound, online backend", () => {
    const r = assessHealth(inputs, observe());
    expect(r.stale).toEqual([]);
    expect(r.backends.map((b) => [b.backend, b.monitor, b.port?.chassis])).toEqual([
      ["10.0.0.101:8080", "online", "hv1"],
      ["10.0.0.102:8080", "online", "hv2"],
    ]);
  });

  it("reports an online backend stale when a strict majority of the gateways peering with its hypervisor see BFD down", () => {
    const twoOfThree = assessHealth(inputs, observe({ bfd: bfdOf({ gw1: down, gw2: down, gw3: fwd }) }));
    expect(twoOfThree.stale).toEqual([
      {
        vip: "tcp:10.0.0.193:80",
        backend: "10.0.0.101:8080",
        logicalPort: "lsp-1",
        reason: "online while 2 of the 3 gateways peering with hypervisor hv1 see its BFD session down",
      },
    ]);
    expect(twoOfThree.backends[0].bfd).toEqual({ gw1: "down", gw2: "down", gw3: "up" });
    expect(assessHealth(inputs, observe({ bfd: bfdOf({ gw1: down, gw2: down }) })).stale.map((s) => s.backend)).toEqual(["10.0.0.101:8080"]);
    // "up" but not forwarding counts as down.
    const notForwarding = { state: "up", forwarding: false };
    expect(assessHealth(inputs, observe({ bfd: bfdOf({ gw1: notForwarding, gw2: notForwarding, gw3: fwd }) })).stale).toHaveLength(1);
  });

  it("does not report a BFD flap on one gateway of two or of three (no majority)", () => {
    expect(assessHealth(inputs, observe({ bfd: bfdOf({ gw1: down, gw2: fwd }) })).stale).toEqual([]);
    expect(assessHealth(inputs, observe({ bfd: bfdOf({ gw1: down, gw2: fwd, gw3: fwd }) })).stale).toEqual([]);
    // Only the gateways that peer with the hypervisor count: gw3 has no session to hv1 here.
    const bfd = bfdOf({ gw1: down, gw2: fwd });
    bfd.set("gw3", new Map([["hv2", fwd]]));
    expect(assessHealth(inputs, observe({ bfd })).stale).toEqual([]);
  });

  it("never reports an offline (or unprobed) monitor, however dead its backend looks", () => {
    const dead = observe({
      monitors: [online(1, "offline"), { ...online(2), status: undefined }],
      bindings: new Map(),
      bfd: new Map(
        ["gw1", "gw2", "gw3"].map((gw) => [
          gw,
          new Map([
            ["hv1", down],
            ["hv2", down],
          ]),
        ]),
      ),
    });
    const r = assessHealth(inputs, dead);
    expect(r.stale).toEqual([]);
    expect(r.backends.map((b) => b.monitor)).toEqual(["offline", "unknown"]);
  });

  it("marks a backend shared by two VIPs offline once, and only monitors still online", () => {
    const shared = lb({
      vips: [
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(1), backend(2, "hv2")] },
        { address: "10.0.0.195", port: 80, protocol: "tcp", backends: [backend(1)] },
      ],
    });
    const monitors = [online(1), online(2)];
    const obs = observe({
      monitors,
      bindings: new Map([
        ["lsp-1", { up: true }],
        ["lsp-2", { up: false }],
      ]),
    });
    const report = assessHealth(shared, obs);
    expect(report.stale.map((s) => `${s.vip} ${s.backend}`)).toEqual([
      "tcp:10.0.0.193:80 10.0.0.101:8080",
      "tcp:10.0.0.193:80 10.0.0.102:8080",
      "tcp:10.0.0.195:80 10.0.0.101:8080",
    ]);
    expect(monitorsToMarkOffline(report, shared, monitors)).toEqual([online(1), online(2)]);
    // A monitor a probe has set offline since is not written again.
    expect(monitorsToMarkOffline(report, shared, [online(1), online(2, "offline")])).toEqual([online(1)]);
  });

  it("an IPv6 backend: its monitor found by address (the southbound's form or the inputs') and port, and set offline as the southbound wrote it", () => {
    const v6 = lb({
      ovn: { ...ovn, healthCheckSourceIpv6: "fd00:10::fe" },
      vips: [{ address: "fd00:20::193", port: 80, protocol: "tcp", backends: [backend(1, "hv1", { address: "fd00:10::101" })] }],
    });
    // As northd might print it: not in RFC 5952 form.
    const monitor: MonitorView = { logicalPort: "lsp-1", ip: "fd00:10:0:0:0:0:0:101", port: 8080, protocol: "tcp", status: "online" };
    const report = assessHealth(v6, observe({ monitors: [monitor], bindings: new Map([["lsp-1", { up: true }]]) }));
    expect(report.stale.map((x) => x.backend)).toEqual(["fd00:10::101:8080"]);
    expect(monitorsToMarkOffline(report, v6, [monitor])).toEqual([monitor]);
  });
});
