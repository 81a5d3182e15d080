import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { LabInventory } from "../lab/topology";
import { OvnChassis, OVN_CHASSIS, type OvnInventory, type OvnVm } from "../lab/ovn-chassis";
import { loadInventory, lockLab } from "../support/lab";
import { connectAndClose } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * The lab's OVN chassis (test/lab/ovn-chassis.ts, `npm run lab -- ovn-up`):
 * a real ovn-controller on every gateway and hypervisor, each with its own
 * br-int on the userspace datapath and Geneve over its underlay address;
 * OVN VMs bound on their hypervisors; a gateway router on gw1 toward the OVN
 * client. What the other OVN tests build on.
 */

let inv: LabInventory;
let chassis: OvnChassis;
let ovn: OvnInventory;
let unlock: (() => void) | undefined;

beforeAll(async () => {
  inv = loadInventory();
  // The northbound and southbound are shared by every OVN test of this lab: one at a time.
  unlock = await lockLab("ovn-central");
  chassis = new OvnChassis(inv);
  ovn = chassis.up();
});

afterAll(() => {
  // The layer goes with the file (its ovn-controllers, br-ints and OVN's conntrack zones): the next file finds the hosts
  // as the lab made them.
  try {
    chassis?.down();
  } finally {
    unlock?.();
  }
});

/** The Geneve port on `from`'s br-int toward `to`'s underlay address, whatever ovn-controller named it. */
const tunnelPort = (from: string, to: string) =>
  chassis
    .onLabHost(from, ["ovs-vsctl", "--bare", "--columns=name", "find", "interface", "type=geneve", `options:remote_ip=${inv.hosts[to].underlay!.address}`])
    .trim();
/** Packets br-int on `host` took in from a tunnel port: the n_packets of its table-0 flows for that port (userspace tunnels count no interface statistics). */
function tunnelPackets(host: string, port: string): number {
  const ofport = chassis.onLabHost(host, ["ovs-vsctl", "get", "interface", port, "ofport"]).trim();
  const flows = chassis.onLabHost(host, ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", `table=0,in_port=${ofport}`]);
  return [...flows.matchAll(/n_packets=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

describe("OVN chassis in the lab", () => {
  it("every gateway and hypervisor is a chassis: registered in the southbound with a Geneve encap on its underlay address, its br-int on the userspace datapath", () => {
    expect(ovn.chassis.map((c) => c.name)).toEqual([...OVN_CHASSIS]);
    for (const name of OVN_CHASSIS) {
      const encap = chassis.sbctl("--bare", "--columns=type,ip", "find", "encap", `chassis_name=${name}`).split(/\s+/);
      expect(encap, name).toEqual(["geneve", inv.hosts[name].underlay!.address]);
      expect(chassis.onLabHost(name, ["ovs-vsctl", "get", "bridge", "br-int", "datapath_type"]).trim(), name).toBe("netdev");
      // A Geneve port toward every other chassis, created by ovn-controller.
      for (const other of OVN_CHASSIS.filter((o) => o !== name)) {
        expect(chassis.onLabHost(name, ["ovs-vsctl", "get", "interface", tunnelPort(name, other), "type"]).trim(), `${name} -> ${other}`).toBe("geneve");
      }
    }
  });

  it("each OVN VM's logical port is bound to its own hypervisor's chassis, and the router's ports to the gateway chassis", () => {
    for (const vm of ovn.vms) {
      const bound = chassis.sbctl("--bare", "--columns=chassis", "find", "port_binding", `logical_port=${vm.name}`);
      expect(chassis.sbctl("--bare", "--columns=name", "list", "chassis", bound), vm.name).toBe(vm.hypervisor);
    }
    for (const sw of [ovn.switch, ovn.external]) {
      const bound = chassis.sbctl("--bare", "--columns=chassis", "find", "port_binding", `logical_port=${sw}-lr`);
      expect(chassis.sbctl("--bare", "--columns=name", "list", "chassis", bound), `${sw}-lr`).toBe(ovn.gatewayChassis);
    }
  });

  it.each([
    ["IPv4", (vm: OvnVm) => vm.address, () => ovn.client.address],
    ["IPv6", (vm: OvnVm) => vm.address6, () => ovn.client.address6],
  ] as const)(
    "%s: TCP from the OVN client reaches every VM through the gateway router, over Geneve from gw1, with no NAT",
    async (_family, addressOf, client) => {
      const ports = Object.fromEntries(ovn.vms.map((vm) => [vm.hypervisor, tunnelPort(vm.hypervisor, ovn.gatewayChassis)]));
      const before = Object.fromEntries(Object.entries(ports).map(([hv, port]) => [hv, tunnelPackets(hv, port)]));
      const conns = connectAndClose(
        ovn.client.namespace,
        ovn.vms.map((vm) => ({ host: addressOf(vm), port: ovn.backendPort })),
      );
      expect(conns.map((c) => c.error ?? "")).toEqual(ovn.vms.map(() => ""));
      // Each greets as itself and sees the client's own address: routed, not translated.
      conns.forEach((c, i) => {
        const [name, peer, local] = c.greeting.split(" ");
        expect([name, peer.slice(0, peer.lastIndexOf(":")), local]).toEqual([ovn.vms[i].name, client(), `${addressOf(ovn.vms[i])}:${ovn.backendPort}`]);
      });
      // The packets reached each hypervisor through its Geneve port from the gateway chassis. A flow's counters move when
      // ovs-vswitchd's revalidators next pull the datapath's statistics (every 500 ms at most), not at once.
      await waitUntil(() => Object.entries(ports).every(([hv, port]) => tunnelPackets(hv, port) > before[hv]), {
        what: "packets counted on each hypervisor's Geneve port from the gateway chassis",
        timeoutMs: 5_000,
        intervalMs: 100,
      });
    },
  );

  it("ovn-up is idempotent: called again it finds the layer up and leaves it as it is", () => {
    const pids = OVN_CHASSIS.map((name) => chassis.onLabHost(name, ["cat", `${inv.hosts[name].ovsRundir}/ovn-controller.pid`]).trim());
    const again = chassis.up();
    expect(again.upSeconds).toBe(0);
    expect(OVN_CHASSIS.map((name) => chassis.onLabHost(name, ["cat", `${inv.hosts[name].ovsRundir}/ovn-controller.pid`]).trim())).toEqual(pids);
    expect(chassis.status()).toEqual({ up: true, problems: [] });
  });
});
