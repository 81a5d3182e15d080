export {
  DeferredNatLoadBalancer,
  type DeferredNatLoadBalancerArgs,
} from "./provider/resources/deferred-nat-load-balancer/resource";
export { DsrHypervisorFlows, type DsrHypervisorFlowsArgs } from "./provider/resources/dsr-hypervisor-flows/resource";
export { OvsBridge, type OvsBridgeArgs } from "./provider/resources/ovs-bridge/resource";
export type { OvsBridgeInputs, OvsHost, SshConnection } from "./provider/model/inputs.generated";
