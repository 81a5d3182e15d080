import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { ipv6Twin, type LabInventory } from "../lab/topology";
import { OvnChassis, ovnTwin6, type OvnInventory } from "../lab/ovn-chassis";
import { ProviderDriver, labLoadBalancer } from "../support/deferred-nat";
import { loadInventory, lockLab, sshTo } from "../support/lab";
import { connectAndClose, times } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * What a stock OVN (the main lab's: ovn-central and ovn-host 23.03; lab c's:
 * 25.03 or 24.03, `npm run test:newer`; each with real
 * ovn-controllers on every gateway and hypervisor: test/lab/ovn-chassis.ts)
 * does with the northbound rows DeferredNatLoadBalancer's `ovn` writes. No
 * OVN release has the deferred-NAT series: options:deferred-nat is read by
 * nothing, so a row attached to a router is OVN's own stateful load
 * balancer there, beside ovslb's gateways. The default (ovn.attach unset)
 * writes the rows unattached: OVN then neither balances the VIP nor drops its
 * health checks.
 *
 * The load balancer's backends are the OVN VMs (logical ports bound on hv1
 * and hv2); the OVN client reaches the VIP through the gateway router on gw1.
 * Each case holds for an IPv4 VIP and an IPv6 VIP of the same rows.
 */

const VIP = "10.0.0.226";
const VIP6 = ipv6Twin(VIP);
const NAME = "ovnstock";
const ROW = `ovslb-${NAME}-tcp`;
/** The probes' source: an unused address of the VMs' switch. */
const SRC_IP = "10.10.0.254";

let inv: LabInventory;
let chassis: OvnChassis;
let ovn: OvnInventory;
let unlock: (() => void) | undefined;
const lb = new ProviderDriver("DeferredNatLoadBalancer");

function inputs(attach: boolean | undefined) {
  return labLoadBalancer(
    inv,
    NAME,
    FAMILIES.map((f) => ({
      address: f.vip,
      port: 80,
      protocol: "tcp" as const,
      backends: ovn.vms.map((vm) => ({ address: f.backend(vm), port: ovn.backendPort, mac: vm.mac, hypervisor: vm.hypervisor, logicalPort: vm.name })),
    })),
    {
      ovn: {
        northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock },
        router: ovn.router,
        healthCheckSourceIp: SRC_IP,
        healthCheckSourceIpv6: ovnTwin6(SRC_IP),
        ...(attach === undefined ? {} : { attach }),
      },
      healthCheck: { probe: { interval: 1 } },
    },
  );
}

type Vm = OvnInventory["vms"][number];
/** Each family's VIP, its backends' addresses, and how OVN's logical flows, ovs-ofctl and conntrack write them. */
const FAMILIES = [
  { name: "IPv4", vip: VIP, backend: (vm: Vm) => vm.address, lflow: `ip4.dst == ${VIP}`, ofMatch: `nw_dst=${VIP}`, hostPort: (a: string) => a },
  { name: "IPv6", vip: VIP6, backend: (vm: Vm) => vm.address6, lflow: `ip6.dst == ${VIP6}`, ofMatch: `ipv6_dst=${VIP6}`, hostPort: (a: string) => `[${a}]` },
] as const;
type Family = (typeof FAMILIES)[number];

const nbctl = (...args: string[]) => chassis.nbctl(...args);
const sbctl = (...args: string[]) => chassis.sbctl(...args);
/** Every chassis has caught up with the northbound as it is now (hv_cfg). */
const syncedToChassis = () => nbctl("--wait=hv", "--timeout=30", "sync");
const routerLbs = () => nbctl("get", "logical_router", ovn.router, "load_balancer");
const rowUuid = () => nbctl("--bare", "--columns=_uuid", "find", "load_balancer", `name=${ROW}`);
/** northd's logical flows of the router that match the family's VIP. */
const vipLflows = (f: Family) =>
  sbctl("lflow-list", ovn.router)
    .split("\n")
    .filter((l) => l.includes(f.lflow));
/** What gw1's ovn-controller put on its br-int for the family's VIP: flows matching it and groups translating to its backends. */
const gwOpenFlow = (f: Family) => ({
  flows: chassis
    .onLabHost(ovn.gatewayChassis, ["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "br-int"])
    .split("\n")
    .filter((l) => l.includes(f.ofMatch)),
  groups: chassis
    .onLabHost(ovn.gatewayChassis, ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-int"])
    .split("\n")
    .filter((l) => ovn.vms.some((vm) => l.includes(`nat(dst=${f.hostPort(f.backend(vm))}:${ovn.backendPort})`))),
});
/** gw1's conntrack entries of connections to the family's VIP. */
const gwConntrack = (f: Family) =>
  chassis
    .onLabHost(ovn.gatewayChassis, ["ovs-appctl", "dpctl/dump-conntrack"])
    .split("\n")
    .filter((l) => l.includes(`dst=${f.vip},`));
const gwSegFlows = () => chassis.onLabHost("gw1", ["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "br-seg"]);

beforeAll(async () => {
  inv = loadInventory();
  unlock = await lockLab("ovn-central");
  chassis = new OvnChassis(inv);
  ovn = chassis.up();
  await lb.purge(inputs(true)).catch(() => undefined);
  chassis.onLabHost(ovn.gatewayChassis, ["ovs-appctl", "dpctl/flush-conntrack"]);
});

afterAll(async () => {
  if (lb.id) await lb.delete().catch(() => undefined);
  // The layer goes with the file (its ovn-controllers, br-ints and OVN's conntrack zones): the next file finds the hosts
  // as the lab made them.
  try {
    chassis?.down();
  } finally {
    unlock?.();
  }
});

/** The central's OVN release ("23.03", "24.03", "25.03"), as its ovn-northd reports it. */
const ovnRelease = () => /(\d+\.\d+)\.\d+/.exec(chassis.onLabHost("central", ["ovn-northd", "--version"]))![1];

describe("the ovn rows on a stock OVN with real chassis", () => {
  it("by default the rows are written but attached to no router: OVN makes no flow for the VIP and traffic to it through the OVN router gets nowhere", async () => {
    await lb.create(inputs(undefined));
    expect(nbctl("get", "load_balancer", ROW, "options")).toBe('{deferred-nat="true"}');
    expect(routerLbs()).toBe("[]");
    syncedToChassis();
    // 23.03's northd writes a southbound Load_Balancer only for a row on a logical switch.
    expect(sbctl("--bare", "--columns=name", "find", "load_balancer", `name=${ROW}`)).toBe("");
    for (const f of FAMILIES) {
      expect(vipLflows(f), f.name).toEqual([]);
      expect(gwOpenFlow(f), f.name).toEqual({ flows: [], groups: [] });
      const conns = connectAndClose(ovn.client.namespace, times(f.vip, 80, 4), { greetingTimeoutMs: 2000 });
      expect(conns.map((c) => c.backend)).toEqual(["", "", "", ""]);
      expect(conns.every((c) => c.error !== undefined)).toBe(true);
      expect(gwConntrack(f), f.name).toEqual([]);
    }
  });

  it("unattached, the rows still carry OVN's health checks: the real ovn-controllers of hv1 and hv2 probe each backend and report it online", async () => {
    const monitors = () =>
      sbctl("--format=csv", "--data=bare", "--no-headings", "--columns=logical_port,ip,status", "list", "service_monitor")
        .split("\n")
        .filter((l) => ovn.vms.some((vm) => l.startsWith(`${vm.name},`)))
        .sort();
    const expected = FAMILIES.flatMap((f) => ovn.vms.map((vm) => `${vm.name},${f.backend(vm)},online`)).sort();
    await waitUntil(() => monitors().length === expected.length && monitors().every((l) => l.endsWith(",online")), {
      what: "every backend's Service_Monitor of each family online, written by its chassis",
      timeoutMs: 20_000,
    }).catch((e: Error) => {
      throw new Error(`${e.message}; monitors: ${monitors().join(" | ")}`);
    });
    expect(monitors()).toEqual(expected);
  });

  it("with attach: true (before ovn.attach existed, always), a stock OVN ignores options:deferred-nat and balances the VIP itself, statefully, on the gateway router", async () => {
    await lb.update(inputs(true));
    expect(routerLbs()).toBe(`[${rowUuid()}]`);
    syncedToChassis();
    // The option goes nowhere: nothing in northd, lib or controller of any release (23.03 to 26.03) reads deferred-nat. 23.03's northd
    // writes a southbound Load_Balancer (options copied) only for a row on a logical switch; 24.03 and later for a router's too (seen on
    // lab c's 24.03.8 and 25.03.0), the option copied into it and read by no one.
    const sbRow = sbctl("--bare", "--columns=options", "find", "load_balancer", `name=${ROW}`);
    if (Number(ovnRelease()) >= 24.03) expect(sbRow.split(" ")).toContain("deferred-nat=true");
    else expect(sbRow).toBe("");
    for (const f of FAMILIES) {
      // northd: ct_lb_mark DNAT to the backends in the router's lr_in_dnat, for new connections.
      const dnat = vipLflows(f).filter((l) => l.includes("lr_in_dnat") && l.includes("ct.new"));
      expect(dnat.length, f.name).toBe(1);
      expect(dnat[0]).toMatch(/ct_lb(_mark)?\(backends=/);
      for (const vm of ovn.vms) expect(dnat[0]).toContain(`${f.hostPort(f.backend(vm))}:${ovn.backendPort}`);
      expect(vipLflows(f).some((l) => l.includes("deferred"))).toBe(false);
      // gw1's ovn-controller turned it into OpenFlow: flows for the VIP and a select group of conntrack NAT buckets.
      const of = gwOpenFlow(f);
      expect(of.flows.length, f.name).toBeGreaterThan(0);
      expect(of.groups.length, f.name).toBe(1);
      for (const vm of ovn.vms) expect(of.groups[0]).toContain(`nat(dst=${f.hostPort(f.backend(vm))}:${ovn.backendPort})`);

      // Real traffic: every connection to the VIP is answered by an OVN VM that sees its own address as the
      // destination (OVN translated it: not ovslb's DSR, where a backend answers as the VIP) ...
      const client = f.name === "IPv4" ? ovn.client.address : ovn.client.address6;
      const conns = connectAndClose(ovn.client.namespace, times(f.vip, 80, 12));
      expect(conns.map((c) => c.error)).toEqual(conns.map(() => undefined));
      const served = new Set<string>();
      for (const c of conns) {
        const [name, peer, local] = c.greeting.split(" ");
        const vm = ovn.vms.find((v) => v.name === name);
        expect(vm, c.greeting).toBeDefined();
        expect([peer.slice(0, peer.lastIndexOf(":")), local]).toEqual([client, `${f.backend(vm!)}:${ovn.backendPort}`]);
        expect(c.remote).toBe(`${f.vip}:80`);
        served.add(name);
      }
      expect(served.size, f.name).toBeGreaterThan(1);
      // ... and the state of it lives in gw1's conntrack: OVN's stateful load balancer, behind the gateways' back.
      expect(gwConntrack(f).length, f.name).toBeGreaterThanOrEqual(conns.length);
    }
  });

  it("a stack recorded before ovn.attach (its inputs have none) on a row it attached: refresh reports it, update detaches it, the gateways' flows are untouched and OVN stops balancing the VIP", async () => {
    const read = await lb.read();
    // The outputs as if recorded by the ovslb that attached it: the same inputs, without attach.
    lb.outputs = { ...read.props, ovn: inputs(undefined).ovn };
    const again = await lb.read();
    expect(again.props.drift).toEqual([
      `OVN Load_Balancer ${ROW} attached to router ${ovn.router} while ovn.attach is not true (a stock OVN balances an attached row's VIPs itself)`,
    ]);
    expect((await lb.diff(inputs(undefined), again.props)).changes).toBe(true);
    lb.outputs = again.props;
    const segBefore = gwSegFlows();
    await lb.update(inputs(undefined));
    expect(routerLbs()).toBe("[]");
    expect((await lb.read()).props.drift).toEqual([]);
    expect(gwSegFlows()).toBe(segBefore);
    syncedToChassis();
    chassis.onLabHost(ovn.gatewayChassis, ["ovs-appctl", "dpctl/flush-conntrack"]);
    for (const f of FAMILIES) {
      expect(vipLflows(f), f.name).toEqual([]);
      expect(gwOpenFlow(f), f.name).toEqual({ flows: [], groups: [] });
      const conns = connectAndClose(ovn.client.namespace, times(f.vip, 80, 4), { greetingTimeoutMs: 2000 });
      expect(conns.map((c) => c.backend)).toEqual(["", "", "", ""]);
    }
  });

  it("delete removes the rows and northd the monitors", async () => {
    await lb.delete();
    lb.id = "";
    expect(rowUuid()).toBe("");
    syncedToChassis();
    expect(sbctl("--bare", "--columns=logical_port", "find", "service_monitor", `ip=${ovn.vms[0].address}`)).toBe("");
  });
});
