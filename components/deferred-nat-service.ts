import * as pulumi from "@pulumi/pulumi";
import type {DeferredNatBackend, DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs, OvsHost,} from "../provider/model/inputs.generated";
import { DeferredNatLoadBalancer } from "../provider/resources/deferred-nat-load-balancer/resource";
import { DsrHypervisorFlows } from "../provider/resources/dsr-hypervisor-flows/resource";

/** A hypervisor that hosts backends: where its NAT flows go. */
export interface DeferredNatServiceHypervisor {
  name: string;
  host: OvsHost;
  /** The bridge the backends' ports are on. */
  bridge: string;
  /** A fixed conntrack zone; derived from the service otherwise. */
  zone?: number;
}

export interface DeferredNatServiceBackend extends DeferredNatBackend {
  /** The backend's port on its hypervisor's bridge. */
  bridgePort: string;
}

export interface DeferredNatServiceArgs {
  gateways: DeferredNatLoadBalancerInputs["gateways"];
  hypervisors: readonly DeferredNatServiceHypervisor[];
  vips: readonly {
    address: string;
    port: number;
    protocol: "tcp" | "udp" | "sctp";
    backends: readonly DeferredNatServiceBackend[];
  }[];
  selectionFields?: DeferredNatLoadBalancerInputs["selectionFields"];
  ovn?: DeferredNatLoadBalancerInputs["ovn"];
}

/**
 * A whole deferred-NAT service from one backend list: the gateways' select
 * groups (DeferredNatLoadBalancer) and, on every hypervisor that hosts a
 * backend, the flows that NAT for it (DsrHypervisorFlows). The hypervisor
 * flows are applied first, so a gateway never sends to a backend whose
 * hypervisor cannot NAT yet.
 */
export class DeferredNatService extends pulumi.ComponentResource {
  readonly loadBalancer: DeferredNatLoadBalancer;
  /** Hypervisor name -> its flows. */
  readonly hypervisorFlows: Record<string, DsrHypervisorFlows>;

  constructor(name: string, args: DeferredNatServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    super("ovslb:index:DeferredNatService", name, {}, opts);
    const known = new Set(args.hypervisors.map((h) => h.name));
    args.vips.forEach((vip, v) =>
      vip.backends.forEach((b, i) => {
        if (!known.has(b.hypervisor)) {
          throw new Error(`DeferredNatService ${name}: vips[${v}].backends[${i}].hypervisor "${b.hypervisor}" is not in hypervisors`);
        }
      }),
    );

    this.hypervisorFlows = {};
    for (const hv of args.hypervisors) {
      const vips: DsrHypervisorFlowsInputs["vips"] = args.vips
        .map((vip) => ({
          address: vip.address,
          port: vip.port,
          protocol: vip.protocol,
          backends: vip.backends
            .filter((b) => b.hypervisor === hv.name)
            .map((b) => ({ address: b.address, port: b.port, mac: b.mac, bridgePort: b.bridgePort })),
        }))
        .filter((vip) => vip.backends.length > 0);
      if (vips.length === 0) continue;
      this.hypervisorFlows[hv.name] = new DsrHypervisorFlows(
        `${name}-${hv.name}`,
        { name, host: hv.host, bridge: hv.bridge, mode: "mac", vips, ...(hv.zone === undefined ? {} : { zone: hv.zone }) },
        { parent: this },
      );
    }

    this.loadBalancer = new DeferredNatLoadBalancer(
      name,
      {
        name,
        gateways: args.gateways,
        hypervisors: args.hypervisors.map((h) => ({ name: h.name })),
        vips: args.vips.map((vip) => ({
          address: vip.address,
          port: vip.port,
          protocol: vip.protocol,
          backends: vip.backends.map(({ bridgePort: _onTheHypervisor, ...b }) => b),
        })),
        ...(args.selectionFields ? { selectionFields: args.selectionFields } : {}),
        ...(args.ovn ? { ovn: args.ovn } : {}),
      },
      { parent: this, dependsOn: Object.values(this.hypervisorFlows) },
    );
    this.registerOutputs({ groupIds: this.loadBalancer.groupIds });
  }
}
