// The quick start (the repository's root Pulumi.yaml): a deferred-NAT service.
// Two stateless gateways pick a backend per packet with a select group whose
// bucket ids are stable; the NAT and conntrack live on each backend's
// hypervisor, whose replies go straight to the client.
import * as pulumi from "@pulumi/pulumi";
import { DeferredNatService, stackHost, type DeferredNatServiceBackend } from "../../index"; // in your project: from "ovslb"

interface Gateway {
  name: string;
  mac: string;
  tunnelAddress?: string;
}
interface Hypervisor {
  name: string;
  tunnelAddress?: string;
}

// Hosts come from `ovslb:hosts`, logins from `ovslb:ssh`; the rest is this project's config.
const config = new pulumi.Config();
const delivery = config.get<"mac" | "gre">("delivery") ?? "mac";
const gre = <T extends { tunnelAddress?: string }>(x: T) => (delivery === "gre" ? { tunnelAddress: x.tunnelAddress } : {});

const service = new DeferredNatService("demo", {
  delivery,
  gateways: config.requireObject<Gateway[]>("gateways").map((g) => ({
    name: g.name,
    host: stackHost(g.name),
    bridge: "br-seg",
    segmentPort: "seg0",
    mac: g.mac,
    ...gre(g),
  })),
  hypervisors: config.requireObject<Hypervisor[]>("hypervisors").map((h) => ({ name: h.name, host: stackHost(h.name), bridge: "br-seg", ...gre(h) })),
  vips: [{ address: config.get("vip") ?? "10.0.0.200", port: 80, protocol: "tcp", backends: config.requireObject<DeferredNatServiceBackend[]>("backends") }],
});

export const groupIds = service.loadBalancer.groupIds;
export const bucketIds = service.loadBalancer.bucketIds;
