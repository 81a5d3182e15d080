/* eslint-disable */
// Generated from schema/*.json by schema/generate-types.js. Do not edit.

import type * as pulumi from "@pulumi/pulumi";
import type { DeferredNatLoadBalancerOutputs, DistributorAttachmentOutputs, DistributorDeviceOutputs, DsrHypervisorFlowsOutputs, HealthCheckOutputs, OvsBridgeOutputs } from "./outputs.generated";

/**
 * `{ name: undefined, ... }` for each output name: what a resource class passes its constructor beside the inputs, so that Pulumi exposes each output.
 */
export function outputPlaceholders<N extends string>(names: readonly N[]): Record<N, undefined> {
  return Object.fromEntries(names.map((n) => [n, undefined])) as Record<N, undefined>;
}

/**
 * The outputs of a DeferredNatLoadBalancer resource, as Pulumi outputs (schema/deferred-nat-load-balancer.json, "x-outputs"). What DeferredNatLoadBalancer records besides its inputs.
 */
export interface DeferredNatLoadBalancerOutputProperties {
  /**
   * VIP ("tcp:10.0.0.193:80") -> its group id on every gateway
   */
  readonly groupIds: pulumi.Output<DeferredNatLoadBalancerOutputs["groupIds"]>;
  /**
   * VIP -> backend replica ("10.0.0.101:8080#0") -> its bucket id
   */
  readonly bucketIds: pulumi.Output<DeferredNatLoadBalancerOutputs["bucketIds"]>;
  /**
   * secondChance: VIP -> backend ("10.0.0.101:8080") -> the group its slot flows point to on every gateway (fast failover to the VIP's select group with healthCheck.bfd); absent in state recorded before these groups
   */
  readonly ownerGroupIds: pulumi.Output<DeferredNatLoadBalancerOutputs["ownerGroupIds"]>;
  /**
   * the cookie on every flow it owns, as hex
   */
  readonly cookie: pulumi.Output<DeferredNatLoadBalancerOutputs["cookie"]>;
  /**
   * what the last create or update sent to each gateway, by gateway name: OpenFlow messages, bytes and operations by kind
   */
  readonly lastApply: pulumi.Output<DeferredNatLoadBalancerOutputs["lastApply"]>;
  /**
   * where the hosts differed from the inputs at the last read (empty when in sync): driftFindings, one sentence each
   */
  readonly drift: pulumi.Output<DeferredNatLoadBalancerOutputs["drift"]>;
  /**
   * drift as data, one finding per sentence of drift (absent in state recorded before ovslb recorded it)
   */
  readonly driftFindings: pulumi.Output<DeferredNatLoadBalancerOutputs["driftFindings"]>;
  /**
   * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
   */
  readonly ovsVersions: pulumi.Output<DeferredNatLoadBalancerOutputs["ovsVersions"]>;
  /**
   * gre delivery: the GRE key of the gateways' tunnel ports (their key, or in_key with secondChance), derived from the name: the hypervisors' DsrHypervisorFlows gre.key
   */
  readonly greKey: pulumi.Output<DeferredNatLoadBalancerOutputs["greKey"]>;
  /**
   * secondChance: each VIP's slot table (owners and previous owners), kept for life so a change moves only the slots it must
   */
  readonly slotTables: pulumi.Output<DeferredNatLoadBalancerOutputs["slotTables"]>;
  /**
   * secondChance: each VIP's share of slots per backend ("address:port" -> fraction)
   */
  readonly slotShares: pulumi.Output<DeferredNatLoadBalancerOutputs["slotShares"]>;
  /**
   * secondChance: each VIP's backends whose share of slots is not their weighted share ("address:port" -> share minus weighted share, as a fraction of all slots; none when the shares are exact): slots that cannot move while their history is live, within the bound (1/16 of each weighted share), until the history expires
   */
  readonly slotDeviation: pulumi.Output<DeferredNatLoadBalancerOutputs["slotDeviation"]>;
  /**
   * secondChance: per VIP, the slots whose previous owner may still hold connections, and when the last of that history expires
   */
  readonly slotHistory: pulumi.Output<DeferredNatLoadBalancerOutputs["slotHistory"]>;
  /**
   * secondChance: per VIP, the slots the last change moved and the fewest it could have
   */
  readonly slotMoves: pulumi.Output<DeferredNatLoadBalancerOutputs["slotMoves"]>;
  /**
   * healthCheck.bfd: the GRE key of the BFD sessions, for the hypervisors' DsrHypervisorFlows gre.bfd.peers[].key
   */
  readonly bfdKey: pulumi.Output<DeferredNatLoadBalancerOutputs["bfdKey"]>;
  /**
   * healthCheck: each backend as the southbound and every gateway's BFD see it, at the last create, update or read
   */
  readonly health: pulumi.Output<DeferredNatLoadBalancerOutputs["health"]>;
  /**
   * healthCheck: backends OVN reports online that cannot serve (port unbound, or their hypervisor's BFD down on a majority of gateways), with the reason
   */
  readonly stale: pulumi.Output<DeferredNatLoadBalancerOutputs["stale"]>;
  /**
   * what the gateways' owned flows and buckets counted, at the last read (observations, not drift: a refresh that only sees them move changes no input)
   */
  readonly traffic: pulumi.Output<DeferredNatLoadBalancerOutputs["traffic"]>;
  /**
   * each gateway's OpenFlow port numbers (segment, tunnels, BFD) the last create or update planned with, by gateway name: while they are the same, an update reads and plans only the VIPs it changes
   */
  readonly gatewayPorts: pulumi.Output<DeferredNatLoadBalancerOutputs["gatewayPorts"]>;
  /**
   * how many flows of this load balancer each gateway held after the last create or update, by gateway name: a scoped update counts them again and reads everything when a gateway holds another number (ovs-vswitchd restarted, bridge re-created, flows or groups deleted by hand)
   */
  readonly gatewayFlows: pulumi.Output<DeferredNatLoadBalancerOutputs["gatewayFlows"]>;
  /**
   * how the last create or update read the gateways: every group and flow, or only those of the VIPs it changed (and why not, when all)
   */
  readonly lastRead: pulumi.Output<DeferredNatLoadBalancerOutputs["lastRead"]>;
}
/**
 * The names of DeferredNatLoadBalancer's outputs, as declared in schema/deferred-nat-load-balancer.json.
 */
export const DEFERRED_NAT_LOAD_BALANCER_OUTPUTS = ["groupIds", "bucketIds", "ownerGroupIds", "cookie", "lastApply", "drift", "driftFindings", "ovsVersions", "greKey", "slotTables", "slotShares", "slotDeviation", "slotHistory", "slotMoves", "bfdKey", "health", "stale", "traffic", "gatewayPorts", "gatewayFlows", "lastRead"] as const;

/**
 * The outputs of a DistributorAttachment resource, as Pulumi outputs (schema/distributor-attachment.json, "x-outputs"). What DistributorAttachment records besides its inputs: names and ids on the device, sticky across updates.
 */
export interface DistributorAttachmentOutputProperties {
  /**
   * the attachment's own bridge on the device
   */
  readonly bridge: pulumi.Output<DistributorAttachmentOutputs["bridge"]>;
  /**
   * its Bridge row's uuid
   */
  readonly bridgeUuid: pulumi.Output<DistributorAttachmentOutputs["bridgeUuid"]>;
  /**
   * the frontend patch port, on the attachment's bridge
   */
  readonly frontendPort: pulumi.Output<DistributorAttachmentOutputs["frontendPort"]>;
  /**
   * the frontend's peer patch port, on the uplink bridge
   */
  readonly uplinkPort: pulumi.Output<DistributorAttachmentOutputs["uplinkPort"]>;
  /**
   * the frontend port's OpenFlow port number on the attachment's bridge
   */
  readonly frontendOfport: pulumi.Output<DistributorAttachmentOutputs["frontendOfport"]>;
  /**
   * the owner cookie on every flow, as hex
   */
  readonly cookie: pulumi.Output<DistributorAttachmentOutputs["cookie"]>;
  /**
   * the id of the attachment's select group
   */
  readonly groupId: pulumi.Output<DistributorAttachmentOutputs["groupId"]>;
  /**
   * who serves each slot, and the slot's bucket id, by slot
   */
  readonly slots: pulumi.Output<DistributorAttachmentOutputs["slots"]>;
  /**
   * failed slots no standby could take: they have no bucket
   */
  readonly vacantSlots: pulumi.Output<DistributorAttachmentOutputs["vacantSlots"]>;
  /**
   * what the last create or update sent to the attachment's bridge
   */
  readonly lastApply: pulumi.Output<DistributorAttachmentOutputs["lastApply"]>;
  /**
   * slot -> its bucket's liveness at the last create, update or read: false while its watchPort is not LIVE
   */
  readonly slotLiveness: pulumi.Output<DistributorAttachmentOutputs["slotLiveness"]>;
  /**
   * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
   */
  readonly ovsVersions: pulumi.Output<DistributorAttachmentOutputs["ovsVersions"]>;
}
/**
 * The names of DistributorAttachment's outputs, as declared in schema/distributor-attachment.json.
 */
export const DISTRIBUTOR_ATTACHMENT_OUTPUTS = ["bridge", "bridgeUuid", "frontendPort", "uplinkPort", "frontendOfport", "cookie", "groupId", "slots", "vacantSlots", "lastApply", "slotLiveness", "ovsVersions"] as const;

/**
 * The outputs of a DistributorDevice resource, as Pulumi outputs (schema/distributor-device.json, "x-outputs"). What DistributorDevice observes on every create, update and read.
 */
export interface DistributorDeviceOutputProperties {
  /**
   * whether the device answered over SSH at the last create, update or read
   */
  readonly reachable: pulumi.Output<DistributorDeviceOutputs["reachable"]>;
  /**
   * the device's Open vSwitch version, e.g. 3.1.0 (absent when the host does not tell)
   */
  readonly ovsVersion: pulumi.Output<DistributorDeviceOutputs["ovsVersion"]>;
  /**
   * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
   */
  readonly ovsVersions: pulumi.Output<DistributorDeviceOutputs["ovsVersions"]>;
  /**
   * whether the uplink bridge speaks OpenFlow 1.5 (bucket ids, selection methods)
   */
  readonly openflow15: pulumi.Output<DistributorDeviceOutputs["openflow15"]>;
  /**
   * the attachment ids found on the device, sorted
   */
  readonly attachments: pulumi.Output<DistributorDeviceOutputs["attachments"]>;
  /**
   * per attachment found: its patch ports present, and how many of its own flows its bridge carries (0: not programmed)
   */
  readonly attachmentHealth: pulumi.Output<DistributorDeviceOutputs["attachmentHealth"]>;
}
/**
 * The names of DistributorDevice's outputs, as declared in schema/distributor-device.json.
 */
export const DISTRIBUTOR_DEVICE_OUTPUTS = ["reachable", "ovsVersion", "ovsVersions", "openflow15", "attachments", "attachmentHealth"] as const;

/**
 * The outputs of a DsrHypervisorFlows resource, as Pulumi outputs (schema/dsr-hypervisor-flows.json, "x-outputs"). What DsrHypervisorFlows records besides its inputs.
 */
export interface DsrHypervisorFlowsOutputProperties {
  /**
   * the owner cookie on every flow, as hex ("0x0b5e...")
   */
  readonly cookie: pulumi.Output<DsrHypervisorFlowsOutputs["cookie"]>;
  /**
   * the conntrack zone in use: derived once and kept (sticky), unless the zone input overrides it
   */
  readonly ctZone: pulumi.Output<DsrHypervisorFlowsOutputs["ctZone"]>;
  /**
   * each backend's bridge port and the ofport its flows deliver to, looked up at apply time
   */
  readonly ofports: pulumi.Output<DsrHypervisorFlowsOutputs["ofports"]>;
  /**
   * what the last create or update sent to the bridge
   */
  readonly lastApply: pulumi.Output<DsrHypervisorFlowsOutputs["lastApply"]>;
  /**
   * gre.bfd: each peer's ("address/key") BFD session state at the last create, update or read ("absent" when its port is missing)
   */
  readonly bfd: pulumi.Output<DsrHypervisorFlowsOutputs["bfd"]>;
  /**
   * gre.secondChance: live conntrack entries per backend ("address:port") in the zone, at the last create, update or read: a drain is over when its backend reads 0
   */
  readonly connections: pulumi.Output<DsrHypervisorFlowsOutputs["connections"]>;
  /**
   * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
   */
  readonly ovsVersions: pulumi.Output<DsrHypervisorFlowsOutputs["ovsVersions"]>;
  /**
   * what the owned flows counted, at the last read (observations, not drift: a refresh that only sees them move changes no input)
   */
  readonly traffic: pulumi.Output<DsrHypervisorFlowsOutputs["traffic"]>;
}
/**
 * The names of DsrHypervisorFlows's outputs, as declared in schema/dsr-hypervisor-flows.json.
 */
export const DSR_HYPERVISOR_FLOWS_OUTPUTS = ["cookie", "ctZone", "ofports", "lastApply", "bfd", "connections", "ovsVersions", "traffic"] as const;

/**
 * The outputs of a HealthCheck resource, as Pulumi outputs (schema/health-check.json, "x-outputs"). What HealthCheck records besides its inputs.
 */
export interface HealthCheckOutputProperties {
  /**
   * where the northbound differed from the inputs at the last read (empty when in sync): driftFindings, one sentence each
   */
  readonly drift: pulumi.Output<HealthCheckOutputs["drift"]>;
  /**
   * drift as data, one finding per sentence of drift (absent in state recorded before ovslb recorded it)
   */
  readonly driftFindings: pulumi.Output<HealthCheckOutputs["driftFindings"]>;
  /**
   * each backend as the southbound (and the gateways' BFD, given gateways) see it, at the last create, update or read; absent without southbound
   */
  readonly health: pulumi.Output<HealthCheckOutputs["health"]>;
  /**
   * backends OVN reports online that cannot serve, with the reason; absent without southbound
   */
  readonly stale: pulumi.Output<HealthCheckOutputs["stale"]>;
  /**
   * the gateways whose BFD sessions counted toward stale, sorted (none without gateways: stale is then judged on the southbound's bindings alone)
   */
  readonly bfdGateways: pulumi.Output<HealthCheckOutputs["bfdGateways"]>;
}
/**
 * The names of HealthCheck's outputs, as declared in schema/health-check.json.
 */
export const HEALTH_CHECK_OUTPUTS = ["drift", "driftFindings", "health", "stale", "bfdGateways"] as const;

/**
 * The outputs of a OvsBridge resource, as Pulumi outputs (schema/ovs-bridge.json, "x-outputs"). What OvsBridge records besides its inputs.
 */
export interface OvsBridgeOutputProperties {
  /**
   * the Bridge row's uuid
   */
  readonly uuid: pulumi.Output<OvsBridgeOutputs["uuid"]>;
  /**
   * the bridge's OpenFlow management socket on the host (unix:...mgmt)
   */
  readonly managementSocket: pulumi.Output<OvsBridgeOutputs["managementSocket"]>;
  /**
   * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
   */
  readonly ovsVersions: pulumi.Output<OvsBridgeOutputs["ovsVersions"]>;
}
/**
 * The names of OvsBridge's outputs, as declared in schema/ovs-bridge.json.
 */
export const OVS_BRIDGE_OUTPUTS = ["uuid", "managementSocket", "ovsVersions"] as const;
