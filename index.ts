export { OvsBridge, type OvsBridgeArgs } from "./provider/resources/ovs-bridge/resource";
export type { OvsBridgeInputs, OvsHost, SshConnection } from "./provider/model/inputs.generated";
