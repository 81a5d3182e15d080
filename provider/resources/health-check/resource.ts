import * as pulumi from "@pulumi/pulumi";
import { dynamicProvider } from "../../dynamic";
import type { BackendHealth, StaleBackend } from "../../engine/health";
import type { HealthCheckInputs } from "../../model/inputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type HealthCheckArgs = { [K in keyof HealthCheckInputs]: DeepInput<HealthCheckInputs[K]> };

/**
 * OVN health checks of one DeferredNatLoadBalancer's VIPs: a
 * Load_Balancer_Health_Check per VIP on the load balancer's northbound rows
 * and the ip_port_mappings its probes need, in one owned OVSDB transaction;
 * each backend's health and the stale ones, read from the southbound on
 * every create, update and refresh; with enforce, stale monitors set
 * offline. It sends no OpenFlow: changing it leaves the gateways' flows and
 * groups as they are. Give it `dependsOn` the load balancer, whose rows it
 * attaches to.
 */
export class HealthCheck extends pulumi.dynamic.Resource {
  declare readonly loadBalancer: pulumi.Output<string>;
  /** Where the northbound differed from the inputs at the last refresh. */
  declare readonly drift: pulumi.Output<string[]>;
  /** Each backend as the southbound (and the gateways' BFD) see it, at the last apply or refresh; undefined without southbound. */
  declare readonly health: pulumi.Output<BackendHealth[] | undefined>;
  /** Backends OVN reports online that cannot serve, with the reason; undefined without southbound. */
  declare readonly stale: pulumi.Output<StaleBackend[] | undefined>;
  /** The gateways whose BFD sessions counted toward stale. */
  declare readonly bfdGateways: pulumi.Output<string[]>;

  constructor(name: string, args: HealthCheckArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      dynamicProvider("HealthCheck"),
      name,
      { ...withSecretCredentials(args), drift: undefined, health: undefined, stale: undefined, bfdGateways: undefined },
      resourceOptions(opts),
      "ovslb",
      "HealthCheck",
    );
  }
}
