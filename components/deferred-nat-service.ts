import * as pulumi from "@pulumi/pulumi";
import type { DeferredNatLoadBalancerInputs, OvsHost } from "../provider/model/inputs.generated";
import type { CheckFailure } from "../provider/model/validate";
import { bfdKeyOf, greKeyOf } from "../provider/resources/deferred-nat-load-balancer/plan";
import { DeferredNatLoadBalancer } from "../provider/resources/deferred-nat-load-balancer/resource";
import { DsrHypervisorFlows, type DsrHypervisorFlowsArgs } from "../provider/resources/dsr-hypervisor-flows/resource";
import { HealthCheck, type HealthCheckArgs } from "../provider/resources/health-check/resource";
import schemaFile from "../schema/components/deferred-nat-service.json";
import { checkArgs, childInput, componentSchema, derive, gated, type Leaves } from "./args";
import { placementProblems, sameBridgeTwice, vipsOn, type HypervisorBackend, type ServiceVip } from "./hypervisor-vips";

const schema = componentSchema(schemaFile);

/** A gateway: a host whose select groups choose a backend for each packet of a VIP and send it on. */
export interface DeferredNatServiceGateway {
  /** The gateway's name in the load balancer (its groups, tunnel ports and state are recorded by it). */
  name: pulumi.Input<string>;
  /** How to reach the gateway's Open vSwitch over SSH. */
  host: Leaves<OvsHost>;
  /** The bridge the gateway's groups and flows go on. */
  bridge: pulumi.Input<string>;
  /** The bridge's port onto the backends' L2 segment (mac delivery sends out of it). */
  segmentPort: pulumi.Input<string>;
  /** The gateway's MAC on that segment, the source of what it delivers. */
  mac: pulumi.Input<string>;
  /** Its underlay address: the source of its GRE tunnels to the hypervisors (gre delivery). */
  tunnelAddress?: pulumi.Input<string>;
}

/** A hypervisor that may host backends: where their NAT flows go. */
export interface DeferredNatServiceHypervisor {
  /**
   * The name backends are placed by (their `hypervisor`); it also names the
   * hypervisor's DsrHypervisorFlows (`<service>-<name>`). Plain (not an
   * Output): a resource's name must be known when it is registered.
   */
  name: string;
  /** How to reach the hypervisor's Open vSwitch over SSH. */
  host: Leaves<OvsHost>;
  /** The bridge the backends' ports are on. */
  bridge: pulumi.Input<string>;
  /** A fixed conntrack zone for the NAT; derived from the service otherwise. */
  zone?: pulumi.Input<number>;
  /** Its underlay address, where the gateways' tunnels end (gre delivery). */
  tunnelAddress?: pulumi.Input<string>;
  /** How its backends are reached; default the service's delivery. */
  delivery?: pulumi.Input<"mac" | "gre">;
}

/** A server behind a VIP: where it runs, how the gateways reach it and how much of the traffic it takes. */
export interface DeferredNatServiceBackend extends HypervisorBackend {
  /** Its share of new connections relative to the others (1-64, that many buckets); default 1. */
  weight?: pulumi.Input<number>;
  /** Its OVN logical switch port: what the OVN health check probes (healthCheck.probe). */
  logicalPort?: pulumi.Input<string>;
  /** active (default) or draining: with secondChance a draining backend gets no new connections and keeps its established ones. */
  state?: pulumi.Input<"active" | "draining">;
}

/**
 * The arguments of a DeferredNatService (validated against
 * schema/components/deferred-nat-service.json: an unknown property is
 * refused). Every scalar may be an Output of another resource, except the
 * hypervisors' names and the backends' `hypervisor`, which decide which
 * DsrHypervisorFlows exist; the lists themselves are plain.
 */
export interface DeferredNatServiceArgs {
  /** The gateways: every one holds identical select groups for the VIPs. */
  gateways: readonly DeferredNatServiceGateway[];
  /** The hypervisors backends may run on; one without a backend gets no flows. */
  hypervisors: readonly DeferredNatServiceHypervisor[];
  /** The VIPs the service answers and the backends behind each. */
  vips: readonly ServiceVip<DeferredNatServiceBackend>[];
  /** The packet fields hashed to choose a backend; default ip_src, ip_dst, tp_src, tp_dst. */
  selectionFields?: Leaves<NonNullable<DeferredNatLoadBalancerInputs["selectionFields"]>>;
  /** mac (backends on the gateways' L2 segment) or gre (tunnelled over the underlay to each backend's hypervisor); default mac. */
  delivery?: pulumi.Input<"mac" | "gre">;
  /** Also write the OVN northbound Load_Balancer row and attach it to a logical router. */
  ovn?: Leaves<NonNullable<DeferredNatLoadBalancerInputs["ovn"]>>;
  /**
   * The health check: OVN probes (probe, with ovn and ovn.healthCheckSourceIp, or ovn.healthCheckSourceIpv6 for IPv6 VIPs:
   * a HealthCheck resource, child of the service), BFD liveness of every
   * hypervisor on every gateway (bfd: the load balancer's, and each gre
   * hypervisor's flows get the gateways as BFD peers), stale reporting
   * (southbound) and enforce (the HealthCheck's). The HealthCheck exists
   * when probe or southbound is given, or enforce is given and not `false`.
   */
  healthCheck?: Leaves<NonNullable<DeferredNatLoadBalancerInputs["healthCheck"]>>;
  /**
   * Connection-preserving selection (gre delivery): adding, draining and
   * removing backends breaks no established TCP connection. Every
   * hypervisor's flows take handed-on packets from the other hypervisors.
   */
  secondChance?: Leaves<NonNullable<DeferredNatLoadBalancerInputs["secondChance"]>>;
  /**
   * Path MTU discovery through DSR: the gateways send each ICMP
   * "fragmentation needed" error for a VIP to every hypervisor serving it,
   * and each hypervisor's conntrack hands it to the backend whose connection
   * it is about. Default false.
   */
  pathMtu?: pulumi.Input<boolean>;
  /**
   * The most conntrack entries the service's zone may hold on each
   * hypervisor (DsrHypervisorFlows connectionLimit): a flood at this
   * service's VIPs cannot take conntrack from the other services there.
   */
  connectionLimit?: pulumi.Input<number>;
}

type Resolved = pulumi.Unwrap<DeferredNatServiceArgs>;

/** Whether the service has a HealthCheck child: decided at construction, so from what is given, not what it resolves to. */
function needsHealthCheck(hc: DeferredNatServiceArgs["healthCheck"]): boolean {
  return hc !== undefined && (hc.probe !== undefined || hc.southbound !== undefined || (hc.enforce !== undefined && hc.enforce !== false));
}

/** The service's rules on resolved values, each naming the property. */
function serviceProblems(args: Resolved, withHealthCheck: boolean): CheckFailure[] {
  const deliveryOf = (h: Resolved["hypervisors"][number]) => h.delivery ?? args.delivery ?? "mac";
  const problems = sameBridgeTwice(args.hypervisors);
  if (args.hypervisors.some((h) => deliveryOf(h) === "gre")) {
    const end = "is required with gre delivery: it is one end of the gateways' tunnels";
    args.gateways.forEach((g, i) => g.tunnelAddress === undefined && problems.push({ property: `gateways[${i}].tunnelAddress`, reason: end }));
    args.hypervisors.forEach(
      (h, i) => deliveryOf(h) === "gre" && h.tunnelAddress === undefined && problems.push({ property: `hypervisors[${i}].tunnelAddress`, reason: end }),
    );
  }
  const byMac = (what: string, tail = "") =>
    args.hypervisors.forEach(
      (h, i) =>
        deliveryOf(h) !== "gre" && problems.push({ property: what, reason: `needs gre delivery: hypervisors[${i}] (${h.name}) is reached by mac${tail}` }),
    );
  if (args.secondChance) byMac("secondChance");
  if (args.healthCheck?.bfd) byMac("healthCheck.bfd", ", with no tunnel to watch");
  if (withHealthCheck && !args.ovn?.healthCheckSourceIp && !args.ovn?.healthCheckSourceIpv6) {
    problems.push({
      property: "ovn.healthCheckSourceIp",
      reason:
        "is required with healthCheck.probe, southbound or enforce (and so is ovn): the HealthCheck attaches to the load balancer's northbound rows and its probes need a source address (ovn.healthCheckSourceIpv6 for IPv6 VIPs)",
    });
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
 *
 * Refusals (a ComponentArgsError naming each property, e.g.
 * `DeferredNatService "web": args.vips[0].backends[2].hypervisor: ...`) come
 * at construction, before anything is registered, for what is plain; for
 * what comes from Outputs, once they resolve: the children's inputs then
 * fail with the same error, and so does the program.
 */
export class DeferredNatService extends pulumi.ComponentResource {
  readonly loadBalancer: DeferredNatLoadBalancer;
  /** Hypervisor name -> its flows. */
  readonly hypervisorFlows: Record<string, DsrHypervisorFlows>;
  /** With healthCheck probe, southbound or enforce: the OVN health checks of the VIPs. */
  readonly healthCheck?: HealthCheck;

  constructor(name: string, args: DeferredNatServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    const withHealthCheck = needsHealthCheck(args.healthCheck);
    const gate = checkArgs(`DeferredNatService "${name}"`, schema, args, {
      structural: (a) => placementProblems(a.hypervisors, a.vips),
      resolved: (a) => serviceProblems(a, withHealthCheck),
    });
    super("ovslb:index:DeferredNatService", name, {}, opts);
    const bfd = args.healthCheck?.bfd;
    // mode and gre follow from the resolved delivery and tunnel addresses.
    const dataplane = (hv: DeferredNatServiceHypervisor) =>
      derive(
        {
          delivery: hv.delivery ?? args.delivery,
          sources: args.gateways.map((g) => g.tunnelAddress),
          peers: args.hypervisors.filter((h) => h !== hv && h.tunnelAddress !== undefined).map((h) => h.tunnelAddress),
          bfd,
        },
        (r) => {
          if ((r.delivery ?? "mac") !== "gre") return { mode: "mac" as const };
          return {
            mode: "gre" as const,
            gre: {
              allowedSources: r.sources.map((s) => s!),
              // With second chance the key carries the previous owner's hypervisor; else it is the service's own.
              ...(args.secondChance ? { secondChance: { peers: r.peers.map((p) => p!) } } : { key: greKeyOf({ name }) }),
              // Every gateway opens a BFD session to each hypervisor with the service's BFD key.
              ...(r.bfd ? { bfd: { peers: r.sources.map((s) => ({ address: s!, key: bfdKeyOf({ name }) })), timers: r.bfd } } : {}),
            },
          };
        },
      );

    this.hypervisorFlows = {};
    for (const hv of args.hypervisors) {
      const vips = vipsOn(hv.name, args.vips);
      if (vips.length === 0) continue;
      const d = dataplane(hv);
      const modeAndGre = pulumi.Output.isInstance(d) ? { mode: d.apply((x) => x.mode), gre: d.apply((x) => ("gre" in x ? x.gre : undefined)) } : d;
      this.hypervisorFlows[hv.name] = new DsrHypervisorFlows(
        `${name}-${hv.name}`,
        {
          name,
          host: hv.host,
          bridge: hv.bridge,
          ...(modeAndGre as Pick<DsrHypervisorFlowsArgs, "mode" | "gre">),
          vips: childInput<DsrHypervisorFlowsArgs["vips"]>(gated(gate, vips)),
          ...(hv.zone === undefined ? {} : { zone: hv.zone }),
          ...(args.pathMtu === undefined ? {} : { pathMtu: args.pathMtu }),
          ...(args.connectionLimit === undefined ? {} : { connectionLimit: args.connectionLimit }),
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
          ...(h.tunnelAddress !== undefined ? { tunnelAddress: h.tunnelAddress } : {}),
          ...(h.delivery !== undefined ? { delivery: h.delivery } : {}),
        })),
        ...(args.delivery !== undefined ? { delivery: args.delivery } : {}),
        vips: gated(
          gate,
          args.vips.map((vip) => ({
            address: vip.address,
            port: vip.port,
            protocol: vip.protocol,
            backends: vip.backends.map(({ bridgePort: _onTheHypervisor, ...b }) => b),
          })),
        ),
        ...(args.selectionFields ? { selectionFields: args.selectionFields } : {}),
        ...(args.ovn ? { ovn: args.ovn } : {}),
        // The load balancer keeps only BFD (dataplane); probes, the southbound and enforce are the HealthCheck's.
        ...(bfd ? { healthCheck: { bfd } } : {}),
        ...(args.secondChance ? { secondChance: args.secondChance } : {}),
        ...(args.pathMtu === undefined ? {} : { pathMtu: args.pathMtu }),
      },
      { parent: this, dependsOn: Object.values(this.hypervisorFlows) },
    );
    const hc = args.healthCheck;
    if (hc && withHealthCheck) {
      this.healthCheck = new HealthCheck(
        name,
        {
          loadBalancer: name,
          northbound: args.ovn!.northbound,
          ...(hc.southbound ? { southbound: hc.southbound } : {}),
          ...(args.ovn!.healthCheckSourceIp ? { sourceIp: args.ovn!.healthCheckSourceIp } : {}),
          ...(args.ovn!.healthCheckSourceIpv6 ? { sourceIpv6: args.ovn!.healthCheckSourceIpv6 } : {}),
          vips: childInput<HealthCheckArgs["vips"]>(
            gated(
              gate,
              args.vips.map((vip) => ({
                address: vip.address,
                port: vip.port,
                protocol: vip.protocol,
                backends: vip.backends.map((b) => ({ address: b.address, port: b.port, logicalPort: b.logicalPort!, hypervisor: b.hypervisor })),
              })),
            ),
          ),
          ...(hc.probe ? { probe: hc.probe } : {}),
          ...(hc.enforce !== undefined && hc.enforce !== false ? { enforce: childInput<HealthCheckArgs["enforce"]>(hc.enforce) } : {}),
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
