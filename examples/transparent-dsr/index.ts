// Hypervisor flows behind an external L3DSR load balancer: it tunnels each
// request in GRE to the server's hypervisor, which decapsulates, DNATs to the
// server, and sends the reply straight to the client from the VIP.
import * as pulumi from "@pulumi/pulumi";
import { TransparentDsr, stackHost } from "../../index"; // in your project: from "ovslb"

interface Server {
  address: string;
  port: number;
  mac: string;
  hypervisor: string;
  bridgePort: string;
}

const config = new pulumi.Config();
const servers = config.requireObject<Server[]>("servers");
const vip = config.get("vip") ?? "10.0.0.185";
const hypervisors = [...new Set(servers.map((s) => s.hypervisor))];

const dsr = new TransparentDsr("web-dsr", {
  // Only the load balancer's tunnel sources may send GRE to the hypervisors, with its key.
  loadBalancer: { allowedSources: config.requireObject<string[]>("loadBalancerSources"), key: 48 },
  hypervisors: hypervisors.map((name) => ({ name, host: stackHost(name), bridge: "br-seg" })),
  vips: [{ address: vip, port: 80, protocol: "tcp", backends: servers }],
});

export const vipAddress = vip;
export const cookies = Object.fromEntries(Object.entries(dsr.hypervisorFlows).map(([hv, f]) => [hv, f.cookie]));
