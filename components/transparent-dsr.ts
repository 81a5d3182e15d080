import * as pulumi from "@pulumi/pulumi";
import type { DsrGre, OvsHost } from "../provider/model/inputs.generated";
import { DsrHypervisorFlows } from "../provider/resources/dsr-hypervisor-flows/resource";
import { unknownHypervisors, vipsOn, type HypervisorBackend, type ServiceVip } from "./hypervisor-vips";

/** A hypervisor behind the load balancer: where its DSR flows and its GRE port go. */
export interface TransparentDsrHypervisor {
  name: string;
  host: OvsHost;
  /** The bridge the backends' ports are on. */
  bridge: string;
  /** A fixed conntrack zone; derived from the resource otherwise. */
  zone?: number;
}

export interface TransparentDsrArgs {
  /**
   * The external L3DSR load balancer's tunnel sources (addresses or
   * prefixes), the GRE key it sends if any, and the hypervisors' GRE port
   * name: what every hypervisor's gre mode takes.
   */
  loadBalancer: DsrGre;
  hypervisors: readonly TransparentDsrHypervisor[];
  vips: readonly ServiceVip<HypervisorBackend>[];
}

/**
 * Transparent L3 DSR behind an external load balancer that tunnels requests
 * in GRE to the hypervisors: on every hypervisor that hosts a backend, one
 * DsrHypervisorFlows in gre mode decapsulates, DNATs to the server and sends
 * the reply straight to the client from the VIP. Nothing is configured in the
 * servers. A VIP with several servers on one hypervisor needs the balancer to
 * address the inner frame to the server's MAC.
 */
export class TransparentDsr extends pulumi.ComponentResource {
  /** Hypervisor name -> its flows. */
  readonly hypervisorFlows: Record<string, DsrHypervisorFlows>;

  constructor(name: string, args: TransparentDsrArgs, opts?: pulumi.ComponentResourceOptions) {
    // Refusals come before anything is registered.
    const problems = unknownHypervisors(args.hypervisors, args.vips);
    if (problems.length > 0) throw new Error(`TransparentDsr ${name}: ${problems.join("; ")}`);
    super("ovslb:index:TransparentDsr", name, {}, opts);
    this.hypervisorFlows = {};
    for (const hv of args.hypervisors) {
      const vips = vipsOn(hv.name, args.vips);
      if (vips.length === 0) continue;
      this.hypervisorFlows[hv.name] = new DsrHypervisorFlows(
        `${name}-${hv.name}`,
        { name, host: hv.host, bridge: hv.bridge, mode: "gre", gre: args.loadBalancer, vips, ...(hv.zone === undefined ? {} : { zone: hv.zone }) },
        { parent: this },
      );
    }
    this.registerOutputs({ hypervisors: Object.keys(this.hypervisorFlows) });
  }
}
