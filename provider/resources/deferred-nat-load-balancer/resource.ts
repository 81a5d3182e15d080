import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { DeferredNatLoadBalancerInputs } from "../../model/inputs.generated";
import type { BackendHealth, StaleBackend } from "./health";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type DeferredNatLoadBalancerArgs = { [K in keyof DeferredNatLoadBalancerInputs]: DeepInput<DeferredNatLoadBalancerInputs[K]> };

/**
 * The gateways of a deferred-NAT load balancer: on every gateway, one select
 * group per VIP (selection_method=hash, a stable id per VIP, one bucket per
 * backend and unit of weight, ids derived from the backend and kept for
 * life) and a flow sending the VIP's traffic to it, with no conntrack.
 * Backend changes are bucket inserts and removes. Pair it with
 * DsrHypervisorFlows on the hypervisors, which do the NAT.
 */
export class DeferredNatLoadBalancer extends pulumi.dynamic.Resource {
  declare readonly name: pulumi.Output<string>;
  /** VIP ("tcp:10.0.0.193:80") -> its group id on every gateway. */
  declare readonly groupIds: pulumi.Output<Record<string, number>>;
  /** VIP -> backend replica ("10.0.0.101:8080#0") -> bucket id. */
  declare readonly bucketIds: pulumi.Output<Record<string, Record<string, number>>>;
  declare readonly cookie: pulumi.Output<string>;
  declare readonly lastApply: pulumi.Output<Record<string, { messages: number; bytes: number; operations: Record<string, number> }>>;
  declare readonly drift: pulumi.Output<string[]>;
  /** secondChance: each VIP's slot table, kept for life (owners and previous owners). */
  declare readonly slotTables: pulumi.Output<Record<string, { size: number; backends: string[]; owner: string; previous: string }> | undefined>;
  /** secondChance: each VIP's share of slots per backend ("address:port" -> fraction). */
  declare readonly slotShares: pulumi.Output<Record<string, Record<string, number>> | undefined>;
  /** secondChance: per VIP, the slots the last change moved and the fewest it could have. */
  declare readonly slotMoves: pulumi.Output<Record<string, { moved: number; minimum: number }> | undefined>;
  /** healthCheck.bfd: the GRE key of the BFD sessions (the hypervisors' gre.bfd.peers[].key). */
  declare readonly bfdKey: pulumi.Output<number | undefined>;
  /** healthCheck: each backend as the southbound and every gateway's BFD see it, at the last apply or refresh. */
  declare readonly health: pulumi.Output<BackendHealth[] | undefined>;
  /** healthCheck: backends OVN reports online that cannot serve, with the reason. */
  declare readonly stale: pulumi.Output<StaleBackend[] | undefined>;
  /** Each gateway's OpenFlow port numbers the last apply planned with; while they hold, an update reads only the VIPs it changes. */
  declare readonly gatewayPorts: pulumi.Output<Record<string, { segmentOfport: number; tunnelOfports: Record<string, number>; bfdOfports: Record<string, number> }> | undefined>;
  /** How the last create or update read the gateways: "vips" (only the VIPs it changed, how many) or "all" (and why). */
  declare readonly lastRead: pulumi.Output<{ scope: "all" | "vips"; vips?: number; reason?: string } | undefined>;

  constructor(name: string, args: DeferredNatLoadBalancerArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      dynamicProvider("DeferredNatLoadBalancer"),
      name,
      { ...withSecretCredentials(args), groupIds: undefined, bucketIds: undefined, cookie: undefined, lastApply: undefined, drift: undefined, bfdKey: undefined, health: undefined, stale: undefined, slotTables: undefined, slotShares: undefined, slotMoves: undefined, gatewayPorts: undefined, lastRead: undefined },
      resourceOptions(opts),
      "ovslb",
      "DeferredNatLoadBalancer",
    );
  }
}
