import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DeferredNatService } from "../../components/deferred-nat-service";
import type { LabInventory } from "../../test/lab/topology";

/** The lab's inventory (`npm run lab -- up` writes it). */
export function labInventory(): LabInventory {
  return JSON.parse(readFileSync(join(process.env.OVSLB_LAB_DIR ?? "/run/ovslb-lab", "inventory.json"), "utf8"));
}

export const DEMO_VIP = "10.0.0.200";

/**
 * A deferred-NAT service on the lab: VIP 10.0.0.200:80 on both gateways,
 * served by two VMs on hv1 and one on hv2 (the client routes the VIP over
 * both gateways). With delivery "gre" (OVSLB_DEMO_DELIVERY=gre) the gateways
 * tunnel each request over the routed underlay to its backend's hypervisor.
 */
export function labService(inv = labInventory(), delivery = (process.env.OVSLB_DEMO_DELIVERY ?? "mac") as "mac" | "gre"): DeferredNatService {
  const host = (name: string) => {
    const h = inv.hosts[name];
    return {
      connection: { host: h.address, port: h.sshPort, user: h.user, hostKey: h.hostKey, privateKeyPath: inv.clientKeyPath },
      ovsRundir: h.ovsRundir,
    };
  };
  const backends = ["hv1-vm1", "hv1-vm2", "hv2-vm1"].map((name) => {
    const vm = inv.backends.find((b) => b.name === name)!;
    return { address: vm.address, port: inv.backendPort, mac: vm.mac, hypervisor: vm.hypervisor, bridgePort: vm.port };
  });
  const tunnel = (name: string) => (delivery === "gre" ? { tunnelAddress: inv.hosts[name].underlay!.address } : {});
  return new DeferredNatService("demo", {
    delivery,
    gateways: ["gw1", "gw2"].map((name) => ({
      name, host: host(name), bridge: "br-seg", segmentPort: "seg0", mac: inv.hosts[name].segment!.mac, ...tunnel(name),
    })),
    hypervisors: ["hv1", "hv2", "hv3"].map((name) => ({ name, host: host(name), bridge: "br-seg", ...tunnel(name) })),
    vips: [{ address: DEMO_VIP, port: 80, protocol: "tcp", backends }],
  });
}
