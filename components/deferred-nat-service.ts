import * as pulumi from "@pulumi/pulumi";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, OvsHost } from "../provider/model/inputs.generated";
import { bfdKeyOf, greKeyOf } from "../provider/resources/deferred-nat-load-balancer/plan";
import { DeferredNatLoadBalancer } from "../provider/resources/deferred-nat-load-balancer/resource";
import { DsrHypervisorFlows } from "../provider/resources/dsr-hypervisor-flows/resource";
import { HealthCheck } from "../provider/resources/health-check/resource";
import { unknownHypervisors, vipsOn } from "./hypervisor-vips";

/** A hypervisor that hosts backends: where its NAT flows go. */
export interface DeferredNatServiceHypervisor {
  name: string;
  host: OvsHost;
  /** The bridge the backends' ports are on. */
  bridge: string;
  /** A fixed conntrack zone; derived from the service otherwise. */
  zone?: number;
  /** Its underlay address, where the gateways' tunnels end (gre delivery). */
  tunnelAddress?: string;
  /** How its backends are reached; default the service's delivery. */
  delivery?: "mac" | "gre";
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
  /** mac (backends on the gateways' L2 segment) or gre (tunnelled over the underlay to each backend's hypervisor); default mac. */
  delivery?: "mac" | "gre";
  ovn?: DeferredNatLoadBalancerInputs["ovn"];
  /**
   * The health check: OVN probes (probe, with ovn and ovn.healthCheckSourceIp:
   * a HealthCheck resource, child of the service), BFD liveness of every
   * hypervisor on every gateway (bfd: the load balancer's, and each gre
   * hypervisor's flows get the gateways as BFD peers), stale reporting
   * (southbound) and enforce (the HealthCheck's).
   */
  healthCheck?: DeferredNatLoadBalancerInputs["healthCheck"];
  /**
   * Connection-preserving selection (gre delivery): adding, draining and
   * removing backends breaks no established TCP connection. Every
   * hypervisor's flows take handed-on packets from the other hypervisors.
   */
  secondChance?: DeferredNatLoadBalancerInputs["secondChance"];
}

/** What makes the arguments unusable, in words that name them. */
function serviceProblems(args: DeferredNatServiceArgs, deliveryOf: (hv: DeferredNatServiceHypervisor) => "mac" | "gre"): string[] {
  const problems = unknownHypervisors(args.hypervisors, args.vips);
  // One conntrack zone per resource and host: two hypervisor entries on one bridge would be two resources fighting over it.
  const bridges = new Map<string, number>();
  args.hypervisors.forEach((h, i) => {
    const key = `${h.host.connection.host}/${h.bridge}`;
    const first = bridges.get(key);
    if (first !== undefined) problems.push(`hypervisors[${i}] is on the same host and bridge as hypervisors[${first}]: give each hypervisor once`);
    else bridges.set(key, i);
  });
  if (args.hypervisors.some((h) => deliveryOf(h) === "gre")) {
    const ends = [
      ...args.gateways.flatMap((g, i) => (g.tunnelAddress ? [] : [`gateways[${i}].tunnelAddress`])),
      ...args.hypervisors.flatMap((h, i) => (deliveryOf(h) === "gre" && !h.tunnelAddress ? [`hypervisors[${i}].tunnelAddress`] : [])),
    ];
    if (ends.length > 0) problems.push(`gre delivery needs ${ends.join(", ")}: the tunnels' two ends`);
  }
  if (args.secondChance) {
    args.hypervisors.forEach((h, i) => {
      if (deliveryOf(h) !== "gre") problems.push(`secondChance needs gre delivery: hypervisors[${i}] (${h.name}) is reached by mac`);
    });
  }
  if (args.healthCheck?.bfd) {
    args.hypervisors.forEach((h, i) => {
      if (deliveryOf(h) !== "gre")
        problems.push(`healthCheck.bfd needs gre delivery: hypervisors[${i}] (${h.name}) is reached by mac, with no tunnel to watch`);
    });
  }
  const hc = args.healthCheck;
  if (hc && (hc.probe || hc.southbound || hc.enforce) && !args.ovn?.healthCheckSourceIp) {
    problems.push(
      "healthCheck.probe, southbound and enforce need ovn with ovn.healthCheckSourceIp: the HealthCheck attaches to the load balancer's northbound rows and its probes need a source address",
    );
  }
  return problems;
}

/**
 * A whole deferred-NAT service from one backend list: the gateways' select
 * groups (DeferredNatLoadBalancer) and, on every hypervisor that hosts a
 * backend, the flows that NAT for it (DsrHypervisorFlows). The hypervisor
 * flows are applied first, so a gateway never sends to a backend whose
 * hypervisor cannot NAT yet. With gre delivery a hypervisor's flows take GRE
 * from exactly the gateways' tunnel addresses, with the service's own key;
 * the gateways' tunnel ports follow from the same hypervisor list. With
 * healthCheck.bfd both ends of every gateway-hypervisor BFD session follow
 * from the same lists too.
 */
export class DeferredNatService extends pulumi.ComponentResource {
  readonly loadBalancer: DeferredNatLoadBalancer;
  /** Hypervisor name -> its flows. */
  readonly hypervisorFlows: Record<string, DsrHypervisorFlows>;
  /** With healthCheck probe, southbound or enforce: the OVN health checks of the VIPs. */
  readonly healthCheck?: HealthCheck;

  constructor(name: string, args: DeferredNatServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    // Refusals come before anything is registered.
    const deliveryOf = (hv: DeferredNatServiceHypervisor) => hv.delivery ?? args.delivery ?? "mac";
    const problems = serviceProblems(args, deliveryOf);
    if (problems.length > 0) throw new Error(`DeferredNatService ${name}: ${problems.join("; ")}`);
    super("ovslb:index:DeferredNatService", name, {}, opts);
    const bfd = args.healthCheck?.bfd;
    const greSettings = (hv: DeferredNatServiceHypervisor) => ({
      allowedSources: args.gateways.map((g) => g.tunnelAddress!),
      // With second chance the key carries the previous owner's hypervisor; else it is the service's own.
      ...(args.secondChance
        ? { secondChance: { peers: args.hypervisors.filter((h) => h !== hv && h.tunnelAddress).map((h) => h.tunnelAddress!) } }
        : { key: greKeyOf({ name }) }),
      // Every gateway opens a BFD session to each hypervisor with the service's BFD key.
      ...(bfd ? { bfd: { peers: args.gateways.map((g) => ({ address: g.tunnelAddress!, key: bfdKeyOf({ name }) })), timers: bfd } } : {}),
    });

    this.hypervisorFlows = {};
    for (const hv of args.hypervisors) {
      const vips = vipsOn(hv.name, args.vips);
      if (vips.length === 0) continue;
      this.hypervisorFlows[hv.name] = new DsrHypervisorFlows(
        `${name}-${hv.name}`,
        {
          name,
          host: hv.host,
          bridge: hv.bridge,
          ...(deliveryOf(hv) === "gre" ? { mode: "gre", gre: greSettings(hv) } : { mode: "mac" }),
          vips,
          ...(hv.zone === undefined ? {} : { zone: hv.zone }),
        },
        { parent: this },
      );
    }

    this.loadBalancer = new DeferredNatLoadBalancer(
      name,
      {
        name,
        gateways: args.gateways,
        hypervisors: args.hypervisors.map((h) => ({
          name: h.name,
          ...(h.tunnelAddress ? { tunnelAddress: h.tunnelAddress } : {}),
          ...(h.delivery ? { delivery: h.delivery } : {}),
        })),
        ...(args.delivery ? { delivery: args.delivery } : {}),
        vips: args.vips.map((vip) => ({
          address: vip.address,
          port: vip.port,
          protocol: vip.protocol,
          backends: vip.backends.map(({ bridgePort: _onTheHypervisor, ...b }) => b),
        })),
        ...(args.selectionFields ? { selectionFields: args.selectionFields } : {}),
        ...(args.ovn ? { ovn: args.ovn } : {}),
        // The load balancer keeps only BFD (dataplane); probes, the southbound and enforce are the HealthCheck's.
        ...(bfd ? { healthCheck: { bfd } } : {}),
        ...(args.secondChance ? { secondChance: args.secondChance } : {}),
      },
      { parent: this, dependsOn: Object.values(this.hypervisorFlows) },
    );
    const hc = args.healthCheck;
    if (hc && (hc.probe || hc.southbound || hc.enforce)) {
      this.healthCheck = new HealthCheck(
        name,
        {
          loadBalancer: name,
          northbound: args.ovn!.northbound,
          ...(hc.southbound ? { southbound: hc.southbound } : {}),
          sourceIp: args.ovn!.healthCheckSourceIp!,
          vips: args.vips.map((vip) => ({
            address: vip.address,
            port: vip.port,
            protocol: vip.protocol,
            backends: vip.backends.map((b) => ({ address: b.address, port: b.port, logicalPort: b.logicalPort!, hypervisor: b.hypervisor })),
          })),
          ...(hc.probe ? { probe: hc.probe } : {}),
          ...(hc.enforce ? { enforce: hc.enforce } : {}),
          // With BFD, the gateways' sessions count toward stale (read, never changed).
          ...(bfd ? { gateways: args.gateways.map((g) => ({ name: g.name, host: g.host, bridge: g.bridge })) } : {}),
        },
        // It attaches to the load balancer's northbound rows.
        { parent: this, dependsOn: [this.loadBalancer] },
      );
    }
    const report = this.healthCheck ?? this.loadBalancer;
    this.registerOutputs({ groupIds: this.loadBalancer.groupIds, health: report.health, stale: report.stale });
  }
}
