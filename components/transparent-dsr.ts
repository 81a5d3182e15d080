import * as pulumi from "@pulumi/pulumi";
import type { DsrGre, OvsHost } from "../provider/model/inputs.generated";
import { DsrHypervisorFlows, type DsrHypervisorFlowsArgs } from "../provider/resources/dsr-hypervisor-flows/resource";
import schemaFile from "../schema/components/transparent-dsr.json";
import { checkArgs, childInput, componentSchema, gated, type Leaves } from "./args";
import { placementProblems, sameBridgeTwice, vipsOn, type ServiceVip } from "./hypervisor-vips";

const schema = componentSchema(schemaFile);

/** A hypervisor behind the load balancer: where its DSR flows and its GRE port go. */
export interface TransparentDsrHypervisor {
  /**
   * The name backends are placed by (their `hypervisor`); it also names the
   * hypervisor's DsrHypervisorFlows (`<component>-<name>`). Plain (not an
   * Output): a resource's name must be known when it is registered.
   */
  name: string;
  /** How to reach the hypervisor's Open vSwitch over SSH. */
  host: Leaves<OvsHost>;
  /** The bridge the backends' ports are on. */
  bridge: pulumi.Input<string>;
  /** A fixed conntrack zone for the NAT; derived from the resource otherwise. */
  zone?: pulumi.Input<number>;
}

/**
 * The arguments of a TransparentDsr (validated against
 * schema/components/transparent-dsr.json: an unknown property is refused).
 * Every scalar may be an Output of another resource, except the
 * hypervisors' names and the backends' `hypervisor`, which decide which
 * DsrHypervisorFlows exist; the lists themselves are plain.
 */
export interface TransparentDsrArgs {
  /**
   * The external L3DSR load balancer as the hypervisors see it: its tunnel
   * sources (addresses or prefixes), the GRE key it sends if any, and the
   * hypervisors' GRE port name. Every hypervisor's gre mode takes it.
   */
  loadBalancer: Leaves<DsrGre>;
  /** The hypervisors backends may run on; one without a backend gets no flows. */
  hypervisors: readonly TransparentDsrHypervisor[];
  /** The VIPs the load balancer tunnels in, and the servers behind each. */
  vips: readonly ServiceVip[];
}

/**
 * Transparent L3 DSR behind an external load balancer that tunnels requests
 * in GRE to the hypervisors: on every hypervisor that hosts a backend, one
 * DsrHypervisorFlows in gre mode decapsulates, DNATs to the server and sends
 * the reply straight to the client from the VIP. Nothing is configured in the
 * servers. A VIP with several servers on one hypervisor needs the balancer to
 * address the inner frame to the server's MAC.
 *
 * Refusals name the property (`TransparentDsr "edge": args.vips[0].backends[0].hypervisor: ...`),
 * at construction for plain values, once they resolve for Outputs.
 */
export class TransparentDsr extends pulumi.ComponentResource {
  /** Hypervisor name -> its flows. */
  readonly hypervisorFlows: Record<string, DsrHypervisorFlows>;

  constructor(name: string, args: TransparentDsrArgs, opts?: pulumi.ComponentResourceOptions) {
    const gate = checkArgs(`TransparentDsr "${name}"`, schema, args, {
      structural: (a) => placementProblems(a.hypervisors, a.vips),
      resolved: (a) => sameBridgeTwice(a.hypervisors),
    });
    super("ovslb:index:TransparentDsr", name, {}, opts);
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
          mode: "gre",
          gre: args.loadBalancer,
          vips: childInput<DsrHypervisorFlowsArgs["vips"]>(gated(gate, vips)),
          ...(hv.zone === undefined ? {} : { zone: hv.zone }),
        },
        { parent: this },
      );
    }
    this.registerOutputs({ hypervisors: Object.keys(this.hypervisorFlows) });
  }
}
