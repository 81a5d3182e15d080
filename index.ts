export { DeferredNatLoadBalancer, type DeferredNatLoadBalancerArgs } from "./provider/resources/deferred-nat-load-balancer/resource";
export { DistributorAttachment, type DistributorAttachmentArgs, type DistributorSlot } from "./provider/resources/distributor-attachment/resource";
export { DistributorDevice, type DistributorDeviceArgs } from "./provider/resources/distributor-device/resource";
export {
  DeferredNatService,
  type DeferredNatServiceArgs,
  type DeferredNatServiceBackend,
  type DeferredNatServiceGateway,
  type DeferredNatServiceHypervisor,
} from "./components/deferred-nat-service";
export {
  ActiveActiveLoadBalancer,
  type ActiveActiveAmphora,
  type ActiveActiveDevice,
  type ActiveActiveLoadBalancerArgs,
} from "./components/active-active-load-balancer";
export type { HypervisorBackend, ServiceVip } from "./components/hypervisor-vips";
export { ComponentArgsError, type Leaves } from "./components/args";
export { TransparentDsr, type TransparentDsrArgs, type TransparentDsrHypervisor } from "./components/transparent-dsr";
export { DsrHypervisorFlows, type DsrHypervisorFlowsArgs } from "./provider/resources/dsr-hypervisor-flows/resource";
export { HealthCheck, type HealthCheckArgs } from "./provider/resources/health-check/resource";
export { OvsBridge, type OvsBridgeArgs } from "./provider/resources/ovs-bridge/resource";
// Every input type, generated from schema/ (the one source of truth for inputs), for the API reference and for typed programs.
export type * from "./provider/model/inputs.generated";
// Every output type (what each resource records besides its inputs), generated from the schemas' "x-outputs".
export type * from "./provider/model/outputs.generated";
export { stackHost, stackNorthbound, StackConfigError } from "./provider/resources/stack-config";
