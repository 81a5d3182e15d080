/**
 * Type-level test (compiled by `npx tsc -p tsconfig.test.json --noEmit`,
 * never run): the components take Outputs wherever a value may come from
 * another resource, and still refuse wrong types.
 */
import * as pulumi from "@pulumi/pulumi";
import type {
  ActiveActiveLoadBalancerArgs,
  DeferredNatServiceArgs,
  DistributorDevice,
  DsrHypervisorFlowsArgs,
  HealthCheckArgs,
  TransparentDsrArgs,
} from "../../index";

declare const privateIp: pulumi.Output<string>;
declare const port: pulumi.Output<number>;
declare const delivery: pulumi.Output<"mac" | "gre">;
declare const protocol: pulumi.Output<"tcp" | "udp" | "sctp">;
declare const enforce: pulumi.Output<boolean>;
declare const device: DistributorDevice;

const host = { connection: { host: privateIp, privateKey: pulumi.secret("key") } };

export const service: DeferredNatServiceArgs = {
  gateways: [{ name: "gw1", host, bridge: "br-seg", segmentPort: "seg0", mac: privateIp, tunnelAddress: privateIp }],
  hypervisors: [{ name: "hv1", host, bridge: pulumi.output("br-seg"), tunnelAddress: privateIp, delivery, zone: port }],
  vips: [
    { address: privateIp, port, protocol, backends: [{ address: privateIp, port, mac: privateIp, hypervisor: "hv1", bridgePort: privateIp, weight: port }] },
  ],
  delivery,
  healthCheck: { enforce, bfd: { minRx: port } },
  secondChance: { release: enforce },
};

export const tdsr: TransparentDsrArgs = {
  loadBalancer: { allowedSources: [privateIp], key: port },
  hypervisors: [{ name: "hv1", host, bridge: "br-phy" }],
  vips: [
    { address: privateIp, port: 80, protocol: "tcp", backends: [{ address: privateIp, port, mac: "02:00:00:00:00:01", hypervisor: "hv1", bridgePort: "vm1" }] },
  ],
};

export const activeActive: ActiveActiveLoadBalancerArgs = {
  devices: [{ device, nextHop: "10.0.0.41" }],
  loadBalancerId: privateIp,
  vip: privateIp,
  vlan: port,
  amphorae: [{ name: privateIp, mac: privateIp, role: pulumi.output("active" as const), hypervisor: privateIp }],
};

export const wrong: DeferredNatServiceArgs = {
  ...service,
  vips: [
    {
      address: privateIp,
      // @ts-expect-error a port is a number, not a string Output
      port: privateIp,
      protocol: "tcp",
      backends: [],
    },
  ],
};

export const plainName: TransparentDsrArgs = {
  ...tdsr,
  // @ts-expect-error a hypervisor's name names its DsrHypervisorFlows: it must be plain
  hypervisors: [{ name: privateIp, host, bridge: "br-phy" }],
};

export const badProtocol: TransparentDsrArgs = {
  ...tdsr,
  // @ts-expect-error not a protocol
  vips: [{ address: privateIp, port: 80, protocol: "icmp", backends: [] }],
};

export const unknownProperty: TransparentDsrArgs = {
  ...tdsr,
  // @ts-expect-error an unknown property (refused at run time too, for JavaScript programs)
  vipz: [],
};

// The raw resources take an Output of a scalar union (DeepInput keeps the union whole).
declare const protocolOut: pulumi.Output<"tcp" | "udp">;
declare const enforceOut: pulumi.Output<boolean>;
export const rawProtocol: DsrHypervisorFlowsArgs["vips"] = [{ address: "10.0.0.1", port: 80, protocol: protocolOut, backends: [] }];
export const rawEnforce: HealthCheckArgs["enforce"] = enforceOut;
