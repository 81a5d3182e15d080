import { describe, it, expect, beforeEach } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import type { DeferredNatServiceArgs } from "../../components/deferred-nat-service";
import { mockResources, type Registered } from "../support/mocks";

let registered: Registered[] = [];

beforeEach(async () => {
  registered = await mockResources(true);
});

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const host = (address: string) => ({ connection: { host: address, user: "root", hostKey: KEY, privateKeyPath: "/k" } });
const backend = (n: number, hypervisor: string) => ({
  address: `10.0.0.${100 + n}`,
  port: 8080,
  mac: `02:00:0a:00:00:${(100 + n).toString(16)}`,
  hypervisor,
  bridgePort: `vm${n}`,
});
const args = (): DeferredNatServiceArgs => ({
  gateways: [{ name: "gw1", host: host("172.30.0.11"), bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
  hypervisors: [
    { name: "hv1", host: host("172.30.0.21"), bridge: "br-seg" },
    { name: "hv2", host: host("172.30.0.22"), bridge: "br-seg" },
    { name: "hv3", host: host("172.30.0.23"), bridge: "br-seg" },
  ],
  vips: [
    { address: "10.0.0.200", port: 80, protocol: "tcp", backends: [backend(1, "hv1"), backend(2, "hv1"), backend(11, "hv2")] },
    { address: "10.0.0.201", port: 80, protocol: "tcp", backends: [backend(1, "hv1")] },
  ],
});

/**
 * Until every registration the program started has been answered: the
 * runtime's own queue of outstanding RPCs drains (the language host waits
 * for the same before it exits). It disconnects the mock monitor, so each
 * test sets the mocks up again.
 */
const programDone = () => pulumi.runtime.disconnect();

describe("DeferredNatService", () => {
  it("puts each backend's NAT on its own hypervisor and every backend in the gateways' groups", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const service = new DeferredNatService("web", args());
    await programDone();
    expect(Object.keys(service.hypervisorFlows)).toEqual(["hv1", "hv2"]);
    const flows = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows");
    const hv1 = flows.find((f) => f.name === "web-hv1")!.inputs;
    expect(hv1.vips.map((v: any) => [v.address, v.backends.map((b: any) => b.bridgePort)])).toEqual([
      ["10.0.0.200", ["vm1", "vm2"]],
      ["10.0.0.201", ["vm1"]],
    ]);
    expect(flows.find((f) => f.name === "web-hv2")!.inputs.vips).toHaveLength(1);
    const lb = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")!.inputs;
    expect(lb.hypervisors).toEqual([{ name: "hv1" }, { name: "hv2" }, { name: "hv3" }]);
    expect(lb.vips[0].backends).toHaveLength(3);
    expect(lb.vips[0].backends[0]).not.toHaveProperty("bridgePort");
  });

  it("refuses a backend on a hypervisor it was not given, naming it", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const bad = args();
    bad.vips[0].backends[0].hypervisor = "hv9";
    expect(() => new DeferredNatService("bad", bad)).toThrow(
      'DeferredNatService "bad": args.vips[0].backends[0].hypervisor: "hv9" is not the name of one of hypervisors (hv1, hv2, hv3)',
    );
  });

  it("with gre delivery, every hypervisor that hosts a backend takes GRE from exactly the gateways' tunnel addresses, with the service's key; a mac hypervisor stays mac", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const { greKeyOf } = await import("../../provider/resources/deferred-nat-load-balancer/plan");
    const gre = args();
    gre.delivery = "gre";
    gre.gateways = [
      { ...gre.gateways[0], tunnelAddress: "172.16.11.2" },
      { ...gre.gateways[0], name: "gw2", mac: "02:00:0a:00:00:0c", tunnelAddress: "172.16.12.2" },
    ];
    gre.hypervisors = [
      { ...gre.hypervisors[0], tunnelAddress: "172.16.21.2" },
      { ...gre.hypervisors[1], delivery: "mac" },
      { ...gre.hypervisors[2], tunnelAddress: "172.16.23.2" },
    ];
    new DeferredNatService("web", gre);
    await programDone();
    const flows = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows");
    expect(flows.find((f) => f.name === "web-hv1")!.inputs).toMatchObject({
      mode: "gre",
      gre: { allowedSources: ["172.16.11.2", "172.16.12.2"], key: greKeyOf({ name: "web" }) },
    });
    expect(flows.find((f) => f.name === "web-hv2")!.inputs.mode).toBe("mac");
    const lb = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")!.inputs;
    expect(lb.delivery).toBe("gre");
    expect(lb.hypervisors).toEqual([
      { name: "hv1", tunnelAddress: "172.16.21.2" },
      { name: "hv2", delivery: "mac" },
      { name: "hv3", tunnelAddress: "172.16.23.2" },
    ]);

    const missing = args();
    missing.delivery = "gre";
    expect(() => new DeferredNatService("bad", missing)).toThrow(
      'DeferredNatService "bad": ' +
        ["gateways[0]", "hypervisors[0]", "hypervisors[1]", "hypervisors[2]"]
          .map((at) => `args.${at}.tunnelAddress: is required with gre delivery: it is one end of the gateways' tunnels`)
          .join("; "),
    );
  });

  it("with healthCheck.bfd, every gre hypervisor's flows take each gateway as a BFD peer with the service's BFD key and timers, and the load balancer gets the health check; a mac hypervisor is refused", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const { bfdKeyOf } = await import("../../provider/resources/deferred-nat-load-balancer/plan");
    const timers = { minRx: 100, minTx: 100, multiplier: 3 };
    const gre = args();
    gre.delivery = "gre";
    gre.healthCheck = { bfd: timers };
    gre.gateways = [
      { ...gre.gateways[0], tunnelAddress: "172.16.11.2" },
      { ...gre.gateways[0], name: "gw2", mac: "02:00:0a:00:00:0c", tunnelAddress: "172.16.12.2" },
    ];
    gre.hypervisors = gre.hypervisors.map((h, i) => ({ ...h, tunnelAddress: `172.16.2${i + 1}.2` }));
    new DeferredNatService("web", gre);
    await programDone();
    const flows = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows");
    expect(flows.length).toBeGreaterThan(0);
    for (const f of flows) {
      expect(f.inputs.gre.bfd).toEqual({
        peers: [
          { address: "172.16.11.2", key: bfdKeyOf({ name: "web" }) },
          { address: "172.16.12.2", key: bfdKeyOf({ name: "web" }) },
        ],
        timers,
      });
    }
    const lb = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")!.inputs;
    expect(lb.healthCheck).toEqual({ bfd: timers });

    const mixed = { ...gre, hypervisors: [gre.hypervisors[0], { ...gre.hypervisors[1], delivery: "mac" as const }, gre.hypervisors[2]] };
    expect(() => new DeferredNatService("bad", mixed)).toThrow(
      'DeferredNatService "bad": args.healthCheck.bfd: needs gre delivery: hypervisors[1] (hv2) is reached by mac, with no tunnel to watch',
    );
  });

  it("with healthCheck probe, southbound and enforce, a HealthCheck child owns them and the load balancer keeps only bfd; probes without ovn.healthCheckSourceIp are refused", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const timers = { minRx: 100, minTx: 100, multiplier: 3 };
    const nb = { connection: host("172.30.0.10").connection, socket: "/run/ovn/ovnnb_db.sock" };
    const sb = { connection: host("172.30.0.10").connection, socket: "/run/ovn/ovnsb_db.sock" };
    const hc = args();
    hc.delivery = "gre";
    hc.gateways = [{ ...hc.gateways[0], tunnelAddress: "172.16.11.2" }];
    hc.hypervisors = hc.hypervisors.map((h, i) => ({ ...h, tunnelAddress: `172.16.2${i + 1}.2` }));
    hc.vips = hc.vips.map((v) => ({ ...v, backends: v.backends.map((b) => ({ ...b, logicalPort: `lsp-${b.bridgePort as string}` })) }));
    hc.ovn = { northbound: nb, router: "lr0", healthCheckSourceIp: "10.0.0.254" };
    hc.healthCheck = { probe: { interval: 7 }, southbound: sb, enforce: true, bfd: timers };
    const service = new DeferredNatService("web", hc);
    await programDone();
    expect(service.healthCheck).toBeDefined();
    const lb = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")!.inputs;
    expect(lb.healthCheck).toEqual({ bfd: timers });
    const check = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:HealthCheck")!.inputs;
    expect(check.loadBalancer).toBe("web");
    expect([check.northbound.socket, check.southbound.socket, check.sourceIp, check.enforce, check.probe]).toEqual([
      nb.socket,
      sb.socket,
      "10.0.0.254",
      true,
      { interval: 7 },
    ]);
    expect(check.vips[0].backends.map((b: any) => [b.address, b.port, b.logicalPort, b.hypervisor])).toEqual([
      ["10.0.0.101", 8080, "lsp-vm1", "hv1"],
      ["10.0.0.102", 8080, "lsp-vm2", "hv1"],
      ["10.0.0.111", 8080, "lsp-vm11", "hv2"],
    ]);
    expect(check.gateways.map((g: any) => [g.name, g.bridge])).toEqual([["gw1", "br-seg"]]);

    const noSource = { ...hc, ovn: { northbound: nb, router: "lr0" } };
    expect(() => new DeferredNatService("bad", noSource)).toThrow(
      /^DeferredNatService "bad": args\.ovn\.healthCheckSourceIp: is required with healthCheck\.probe, southbound or enforce/,
    );
  });

  it("with only healthCheck.bfd, no HealthCheck is made", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const gre = args();
    gre.delivery = "gre";
    gre.healthCheck = { bfd: {} };
    gre.gateways = [{ ...gre.gateways[0], tunnelAddress: "172.16.11.2" }];
    gre.hypervisors = gre.hypervisors.map((h, i) => ({ ...h, tunnelAddress: `172.16.2${i + 1}.2` }));
    expect(new DeferredNatService("web", gre).healthCheck).toBeUndefined();
    await programDone();
    expect(registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:HealthCheck")).toEqual([]);
  });

  it("with secondChance, every hypervisor takes handed-on packets from exactly the other hypervisors and no fixed key; the load balancer gets secondChance; a mac hypervisor is refused", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const sc = args();
    sc.delivery = "gre";
    sc.secondChance = {};
    sc.gateways = [{ ...sc.gateways[0], tunnelAddress: "172.16.11.2" }];
    sc.hypervisors = sc.hypervisors.map((h, i) => ({ ...h, tunnelAddress: `172.16.2${i + 1}.2` }));
    new DeferredNatService("web", sc);
    await programDone();
    const flows = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows");
    expect(flows.length).toBeGreaterThan(0);
    for (const f of flows) {
      const own = sc.hypervisors.find((h) => `web-${h.name}` === f.name)!.tunnelAddress;
      expect(f.inputs.gre.key).toBeUndefined();
      expect(f.inputs.gre.secondChance.peers).toEqual(sc.hypervisors.map((h) => h.tunnelAddress).filter((a) => a !== own));
    }
    expect(registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")!.inputs.secondChance).toEqual({});
    const mixed = { ...sc, hypervisors: [sc.hypervisors[0], { ...sc.hypervisors[1], delivery: "mac" as const }, sc.hypervisors[2]] };
    expect(() => new DeferredNatService("bad", mixed)).toThrow(
      'DeferredNatService "bad": args.secondChance: needs gre delivery: hypervisors[1] (hv2) is reached by mac',
    );
  });

  it("refuses two hypervisor entries on one host and bridge (their flows would share one zone and one GRE port) before registering anything", async () => {
    const { DeferredNatService } = await import("../../components/deferred-nat-service");
    const twice = args();
    twice.hypervisors = [...twice.hypervisors, { ...twice.hypervisors[0], name: "hv1-again", zone: 7 }];
    const before = registered.length;
    expect(() => new DeferredNatService("twice", twice)).toThrow(
      'DeferredNatService "twice": args.hypervisors[3]: is on the same host and bridge as hypervisors[0]: give each hypervisor once',
    );
    expect(registered.length).toBe(before);
  });
});

describe("TransparentDsr", () => {
  it("puts gre-mode flows on each hypervisor that hosts a backend, taking GRE from the load balancer's sources only; refuses an unknown hypervisor before registering anything", async () => {
    const { TransparentDsr } = await import("../../index");
    const a = args();
    new TransparentDsr("edge", { loadBalancer: { allowedSources: ["172.16.41.2"], key: 47 }, hypervisors: a.hypervisors, vips: a.vips });
    await programDone();
    const flows = registered.filter((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows");
    expect(flows.map((f) => f.name).sort()).toEqual(["edge-hv1", "edge-hv2"]);
    expect(flows.every((f) => f.inputs.mode === "gre" && f.inputs.gre.allowedSources[0] === "172.16.41.2" && f.inputs.gre.key === 47)).toBe(true);
    expect(registered.some((r) => r.type === "ovslb:index:TransparentDsr")).toBe(true);
    expect(registered.some((r) => r.type.endsWith("DeferredNatLoadBalancer"))).toBe(false);

    const bad = args();
    bad.vips[0].backends[0].hypervisor = "hv9";
    const before = registered.length;
    expect(() => new TransparentDsr("bad", { loadBalancer: { allowedSources: ["172.16.41.2"] }, hypervisors: bad.hypervisors, vips: bad.vips })).toThrow(
      'TransparentDsr "bad": args.vips[0].backends[0].hypervisor: "hv9" is not the name of one of hypervisors (hv1, hv2, hv3)',
    );
    expect(registered.length).toBe(before);
  });
});
