// A deferred-NAT service whose gateways watch every backend's hypervisor with BFD.
import * as pulumi from "@pulumi/pulumi";
import { DeferredNatService, stackHost, type DeferredNatServiceBackend } from "../../index"; // in your project: from "ovslb"

interface Gateway {
  name: string;
  mac: string;
  tunnelAddress: string;
}
interface Hypervisor {
  name: string;
  tunnelAddress: string;
}

// Hosts come from `ovslb:hosts`, logins from `ovslb:ssh`; the rest is this project's config.
const config = new pulumi.Config();
const gateways = config.requireObject<Gateway[]>("gateways");
const hypervisors = config.requireObject<Hypervisor[]>("hypervisors");
const backends = config.requireObject<DeferredNatServiceBackend[]>("backends");
const vip = config.get("vip") ?? "10.0.0.202";

const service = new DeferredNatService("web-health", {
  delivery: "gre",
  gateways: gateways.map((g) => ({ name: g.name, host: stackHost(g.name), bridge: "br-seg", segmentPort: "seg0", mac: g.mac, tunnelAddress: g.tunnelAddress })),
  hypervisors: hypervisors.map((h) => ({ name: h.name, host: stackHost(h.name), bridge: "br-seg", tunnelAddress: h.tunnelAddress })),
  vips: [{ address: vip, port: 80, protocol: "tcp", backends }],
  // About 300 ms from a hypervisor's death to its backends not being chosen, on every gateway, with no controller.
  healthCheck: { bfd: { minRx: 100, minTx: 100, multiplier: 3 } },
});

export const vipAddress = vip;
export const groupIds = service.loadBalancer.groupIds;
/** Per backend: each gateway's BFD view of its hypervisor. */
export const health = service.loadBalancer.health;
/** Backends reported online that a majority of their gateways see down. */
export const stale = service.loadBalancer.stale;
