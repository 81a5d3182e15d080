import type * as pulumi from "@pulumi/pulumi";
import { OvslbDynamicResource } from "../dynamic-resource";
import type { HealthCheckInputs } from "../../model/inputs.generated";
import { HEALTH_CHECK_OUTPUTS, outputPlaceholders, type HealthCheckOutputProperties } from "../../model/resource-outputs.generated";
import { resourceOptions, withSecretCredentials, type DeepInput } from "../resource-args";

export type HealthCheckArgs = { [K in keyof HealthCheckInputs]: DeepInput<HealthCheckInputs[K]> };

// Its outputs (drift, driftFindings, health, stale, bfdGateways), declared in schema/health-check.json ("x-outputs") and merged into the class.
export interface HealthCheck extends HealthCheckOutputProperties {}

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
export class HealthCheck extends OvslbDynamicResource {
  declare readonly loadBalancer: pulumi.Output<string>;

  constructor(name: string, args: HealthCheckArgs, opts?: pulumi.CustomResourceOptions) {
    super("HealthCheck", name, { ...withSecretCredentials(args), ...outputPlaceholders(HEALTH_CHECK_OUTPUTS) }, resourceOptions(opts));
  }
}
