import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { DeferredNatLoadBalancerInputs } from "../../model/inputs.generated";
import { DEFERRED_NAT_LOAD_BALANCER_OUTPUTS, outputPlaceholders, type DeferredNatLoadBalancerOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DeferredNatLoadBalancerArgs = { [K in keyof DeferredNatLoadBalancerInputs]: DeepInput<DeferredNatLoadBalancerInputs[K]> };

// Its outputs (groupIds, bucketIds, cookie, lastApply, drift, greKey, bfdKey, health, ovsVersions, ...), declared in schema/deferred-nat-load-balancer.json ("x-outputs") and merged into the class.
export interface DeferredNatLoadBalancer extends DeferredNatLoadBalancerOutputProperties {}

/**
 * The gateways of a deferred-NAT load balancer: on every gateway, one select
 * group per VIP (selection_method=hash, a stable id per VIP, one bucket per
 * backend and unit of weight, ids derived from the backend and kept for
 * life) and a flow sending the VIP's traffic to it, with no conntrack.
 * Backend changes are bucket inserts and removes. Pair it with
 * DsrHypervisorFlows on the hypervisors, which do the NAT.
 */
export class DeferredNatLoadBalancer extends OvslbDynamicResource {
  declare readonly name: pulumi.Output<string>;

  constructor(name: string, args: DeferredNatLoadBalancerArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      "DeferredNatLoadBalancer",
      name,
      { ...withSecretCredentials(args), ...outputPlaceholders(DEFERRED_NAT_LOAD_BALANCER_OUTPUTS) },
      resourceOptions(opts),
    );
  }
}
