/* eslint-disable */
// Generated from schema/*.json by schema/generate-types.js. Do not edit.

export interface AllOutputs {
  "deferred-nat-load-balancer"?: DeferredNatLoadBalancerOutputs;
  "distributor-attachment"?: DistributorAttachmentOutputs;
  "distributor-device"?: DistributorDeviceOutputs;
  "dsr-hypervisor-flows"?: DsrHypervisorFlowsOutputs;
  "health-check"?: HealthCheckOutputs;
  "ovs-bridge"?: OvsBridgeOutputs;
}
/**
 * What DeferredNatLoadBalancer records besides its inputs.
 */
export interface DeferredNatLoadBalancerOutputs {
  /**
   * VIP ("tcp:10.0.0.193:80") -> its group id on every gateway
   */
  groupIds: {
    [k: string]: number;
  };
  /**
   * VIP -> backend replica ("10.0.0.101:8080#0") -> its bucket id
   */
  bucketIds: {
    [k: string]: {
      [k: string]: number;
    };
  };
  /**
   * secondChance: VIP -> backend ("10.0.0.101:8080") -> the group its slot flows point to on every gateway (fast failover to the VIP's select group with healthCheck.bfd); absent in state recorded before these groups
   */
  ownerGroupIds?: {
    [k: string]: {
      [k: string]: number;
    };
  };
  /**
   * the cookie on every flow it owns, as hex
   */
  cookie: string;
  /**
   * what the last create or update sent to each gateway, by gateway name: OpenFlow messages, bytes and operations by kind
   */
  lastApply: {
    [k: string]: ApplySummary;
  };
  /**
   * where the hosts differed from the inputs at the last read (empty when in sync): driftFindings, one sentence each
   */
  drift: string[];
  /**
   * drift as data, one finding per sentence of drift (absent in state recorded before ovslb recorded it)
   */
  driftFindings?: DriftFinding[];
  ovsVersions?: OvsVersions;
  /**
   * gre delivery: the GRE key of the gateways' tunnel ports (their key, or in_key with secondChance), derived from the name: the hypervisors' DsrHypervisorFlows gre.key
   */
  greKey?: number;
  /**
   * secondChance: each VIP's slot table (owners and previous owners), kept for life so a change moves only the slots it must
   */
  slotTables?: {
    [k: string]: RecordedSlotTable;
  };
  /**
   * secondChance: each VIP's share of slots per backend ("address:port" -> fraction)
   */
  slotShares?: {
    [k: string]: {
      [k: string]: number;
    };
  };
  /**
   * secondChance: each VIP's backends whose share of slots is not their weighted share ("address:port" -> share minus weighted share, as a fraction of all slots; none when the shares are exact): slots that cannot move while their history is live, within the bound (1/16 of each weighted share), until the history expires
   */
  slotDeviation?: {
    [k: string]: {
      [k: string]: number;
    };
  };
  /**
   * secondChance: per VIP, the slots whose previous owner may still hold connections, and when the last of that history expires
   */
  slotHistory?: {
    [k: string]: SlotHistory;
  };
  /**
   * secondChance: per VIP, the slots the last change moved and the fewest it could have
   */
  slotMoves?: {
    [k: string]: SlotMoves;
  };
  /**
   * healthCheck.bfd: the GRE key of the BFD sessions, for the hypervisors' DsrHypervisorFlows gre.bfd.peers[].key
   */
  bfdKey?: number;
  /**
   * healthCheck: each backend as the southbound and every gateway's BFD see it, at the last create, update or read
   */
  health?: BackendHealth[];
  /**
   * healthCheck: backends OVN reports online that cannot serve (port unbound, or their hypervisor's BFD down on a majority of gateways), with the reason
   */
  stale?: StaleBackend[];
  traffic?: GatewayTraffic;
  /**
   * each gateway's OpenFlow port numbers (segment, tunnels, BFD) the last create or update planned with, by gateway name: while they are the same, an update reads and plans only the VIPs it changes
   */
  gatewayPorts?: {
    [k: string]: RecordedPorts;
  };
  /**
   * how many flows of this load balancer each gateway held after the last create or update, by gateway name: a scoped update counts them again and reads everything when a gateway holds another number (ovs-vswitchd restarted, bridge re-created, flows or groups deleted by hand)
   */
  gatewayFlows?: {
    [k: string]: number;
  };
  /**
   * how the last create or update read the gateways: every group and flow, or only those of the VIPs it changed (and why not, when all)
   */
  lastRead?: LastRead;
}
/**
 * what one apply sent to a bridge: OpenFlow messages, bytes and modifications by kind
 */
export interface ApplySummary {
  /**
   * OpenFlow messages sent
   */
  messages: number;
  /**
   * bytes sent
   */
  bytes: number;
  /**
   * modifications by kind (add-flow, add-group, insert-buckets, ...); insert-buckets counts buckets
   */
  operations: {
    [k: string]: number;
  };
}
/**
 * one place where the hosts differ from the inputs, or a host a change did not (or may not have) reach; its sentence in `drift` is rendered from it (provider/model/drift.ts)
 */
export interface DriftFinding {
  /**
   * the gateway or host as the resource names it ("gw1", "root@172.30.0.11:22 (gw1)"), the resource for a failure after every host changed, "northbound" for OVN rows
   */
  host: string;
  /**
   * what differs
   */
  kind:
    | "flow-changed"
    | "group-missing"
    | "selection-changed"
    | "bucket-missing"
    | "bucket-changed"
    | "bucket-stray"
    | "slot-flows-changed"
    | "tunnel-port"
    | "bfd-port"
    | "northbound-row"
    | "northbound-column"
    | "not-applied"
    | "may-be-applied"
    | "failed-after-apply"
    | "gateway-removal-failed";
  /**
   * what differs ("flow", "bucket 123 (10.0.3.53:8080#0)", "tunnel port to hypervisor hv1", "OVN Load_Balancer lb-tcp", "this change")
   */
  object: string;
  /**
   * the VIP ("tcp:10.0.0.193:80") when the finding is under one VIP
   */
  vip?: string;
  /**
   * the rest: a selection as found, a northbound column, the error a host answered
   */
  detail?: string;
}
/**
 * by host (as its connection names it): the host's Open vSwitch version and the known issues it has, at the last create, update or read
 */
export interface OvsVersions {
  [k: string]: HostOvsVersion;
}
/**
 * one host's Open vSwitch version and the known issues it has (provider/model/ovs-versions.ts)
 */
export interface HostOvsVersion {
  /**
   * the version ovs-vswitchd reports, e.g. 3.1.0; absent when the host does not tell
   */
  version?: string;
  /**
   * the known issues this version has, by id (dp-hash-buckets, group-modify-race)
   */
  knownIssues: string[];
}
/**
 * secondChance: a VIP's slot table as recorded: owners and previous owners packed as base64 of 16-bit indexes into backends (0xffff for none)
 */
export interface RecordedSlotTable {
  /**
   * the number of slots
   */
  size: number;
  /**
   * the backends ("address:port") the indexes name, in index order
   */
  backends: string[];
  /**
   * each slot's owner
   */
  owner: string;
  /**
   * each slot's previous owner
   */
  previous: string;
  /**
   * the times (Unix seconds) of the moves whose history is live, in the order movedAt's indexes name them (absent in state recorded before ovslb recorded times: its previous owners count as moved at the first update that sees them)
   */
  moveTimes?: number[];
  /**
   * each slot's move time, packed like owner as an index into moveTimes (0xffff where the slot has no previous owner)
   */
  movedAt?: string;
}
/**
 * secondChance: a VIP's live history
 */
export interface SlotHistory {
  /**
   * slots whose previous owner may still hold connections (moved within secondChance.holdSeconds)
   */
  slots: number;
  /**
   * when the last of that history expires (ISO 8601, UTC); absent when there is none
   */
  expires?: string;
  /**
   * slots whose live previous owner the last change released (secondChance.release, or a drained slot whose previous owner drains too): their connections on that owner had no second chance
   */
  released: number;
}
/**
 * secondChance: the slots a VIP's last change moved and the fewest it could have
 */
export interface SlotMoves {
  /**
   * slots moved
   */
  moved: number;
  /**
   * the fewest slots the change could have moved
   */
  minimum: number;
}
/**
 * one backend of one VIP, as the southbound and every gateway's BFD see it (provider/engine/health.ts)
 */
export interface BackendHealth {
  /**
   * the VIP ("tcp:10.0.0.193:80")
   */
  vip: string;
  /**
   * the backend ("address:port")
   */
  backend: string;
  /**
   * the backend's hypervisor, when the inputs name it
   */
  hypervisor?: string;
  /**
   * its Service_Monitor status: online, offline, error, unknown (not probed yet) or absent (no row); only with probe and southbound
   */
  monitor?: string;
  port?: BackendPortBinding;
  /**
   * gateway -> the BFD state of its session to the backend's hypervisor ("up" only when forwarding)
   */
  bfd: {
    [k: string]: string;
  };
}
/**
 * its logical port's binding in the southbound
 */
export interface BackendPortBinding {
  /**
   * the logical port
   */
  name: string;
  /**
   * the chassis it is bound to; null when bound to none
   */
  chassis: string | null;
  /**
   * whether the binding is up
   */
  up: boolean;
}
/**
 * a backend OVN reports online that cannot serve: why, and the monitor to set offline
 */
export interface StaleBackend {
  /**
   * the VIP ("tcp:10.0.0.193:80")
   */
  vip: string;
  /**
   * the backend ("address:port")
   */
  backend: string;
  /**
   * the backend's logical port, whose monitor it is
   */
  logicalPort: string;
  /**
   * why it cannot serve
   */
  reason: string;
}
/**
 * what the gateways' owned flows and buckets counted, at the last read (observations, not drift: a refresh that only sees them move changes no input)
 */
export interface GatewayTraffic {
  /**
   * VIP ("tcp:10.0.0.200:80") -> the packets its flows took on all gateways, per gateway, and per backend ("address:port"; its buckets, or with secondChance its slots)
   */
  vips: {
    [k: string]: {
      packets: number;
      bytes: number;
      gateways: {
        [k: string]: TrafficCounter;
      };
      backends: {
        [k: string]: TrafficCounter;
      };
      /**
       * secondChance with healthCheck.bfd: per backend, the packets of its slots its owner group sent to the VIP's live backends while its hypervisor's BFD was down
       */
      failedOver?: {
        [k: string]: TrafficCounter;
      };
    };
  };
  /**
   * pathMtu: per VIP address, the ICMP errors the gateways fanned out and the copies they sent (one per hypervisor serving the address)
   */
  pathMtu?: {
    [k: string]: {
      errors: TrafficCounter;
      copies: number;
    };
  };
}
/**
 * packets and bytes a datapath counted (an observation at the last read, never drift: OVS counts from when the flow or bucket was added)
 */
export interface TrafficCounter {
  packets: number;
  bytes: number;
}
/**
 * one gateway's OpenFlow port numbers an apply planned with
 */
export interface RecordedPorts {
  /**
   * the segment port's
   */
  segmentOfport: number;
  /**
   * gre delivery: each hypervisor's tunnel port's, by hypervisor name
   */
  tunnelOfports: {
    [k: string]: number;
  };
  /**
   * healthCheck.bfd: each hypervisor's BFD port's, by hypervisor name
   */
  bfdOfports: {
    [k: string]: number;
  };
}
/**
 * how a create or update read the gateways
 */
export interface LastRead {
  /**
   * all: every group and flow; vips: only those of the VIPs it changed
   */
  scope: "all" | "vips";
  /**
   * vips: how many VIPs it read
   */
  vips?: number;
  /**
   * all: why not only the VIPs it changed
   */
  reason?: string;
}
/**
 * What DistributorAttachment records besides its inputs: names and ids on the device, sticky across updates.
 */
export interface DistributorAttachmentOutputs {
  /**
   * the attachment's own bridge on the device
   */
  bridge: string;
  /**
   * its Bridge row's uuid
   */
  bridgeUuid: string;
  /**
   * the frontend patch port, on the attachment's bridge
   */
  frontendPort: string;
  /**
   * the frontend's peer patch port, on the uplink bridge
   */
  uplinkPort: string;
  /**
   * the frontend port's OpenFlow port number on the attachment's bridge
   */
  frontendOfport: number;
  /**
   * the owner cookie on every flow, as hex
   */
  cookie: string;
  /**
   * the id of the attachment's select group
   */
  groupId: number;
  /**
   * who serves each slot, and the slot's bucket id, by slot
   */
  slots: DistributorSlot[];
  /**
   * failed slots no standby could take: they have no bucket
   */
  vacantSlots: number[];
  /**
   * what the last create or update sent to the attachment's bridge
   */
  lastApply?: ApplySummary;
  /**
   * slot -> its bucket's liveness at the last create, update or read: false while its watchPort is not LIVE
   */
  slotLiveness?: {
    [k: string]: boolean;
  };
  ovsVersions?: OvsVersions;
}
/**
 * one slot as served on the device: its bucket (whose id never changes while the slot exists) and the amphora it sends to
 */
export interface DistributorSlot {
  /**
   * the slot, 1-64
   */
  slot: number;
  /**
   * the slot's bucket id in the attachment's group
   */
  bucketId: number;
  /**
   * the amphora serving the slot
   */
  amphora: string;
  /**
   * the MAC the slot's bucket sends to (the amphora's)
   */
  mac: string;
  /**
   * the failed amphora whose slot the standby took over: the standby keeps that slot on later updates while it is listed as a standby
   */
  takenOver?: string;
}
/**
 * What DistributorDevice observes on every create, update and read.
 */
export interface DistributorDeviceOutputs {
  /**
   * whether the device answered over SSH at the last create, update or read
   */
  reachable: boolean;
  /**
   * the device's Open vSwitch version, e.g. 3.1.0 (absent when the host does not tell)
   */
  ovsVersion?: string;
  ovsVersions?: OvsVersions;
  /**
   * whether the uplink bridge speaks OpenFlow 1.5 (bucket ids, selection methods)
   */
  openflow15: boolean;
  /**
   * the attachment ids found on the device, sorted
   */
  attachments: string[];
  /**
   * per attachment found: its patch ports present, and how many of its own flows its bridge carries (0: not programmed)
   */
  attachmentHealth?: {
    [k: string]: AttachmentHealth;
  };
}
/**
 * an attachment found on the device: whether its bridge holds its frontend and uplink patch ports, and how many of its own flows it carries
 */
export interface AttachmentHealth {
  /**
   * both patch ports (frontend on its bridge, uplink on the uplink bridge) are present
   */
  ports: boolean;
  /**
   * the flows with the attachment's cookie on its bridge (0: not programmed)
   */
  flows: number;
}
/**
 * What DsrHypervisorFlows records besides its inputs.
 */
export interface DsrHypervisorFlowsOutputs {
  /**
   * the owner cookie on every flow, as hex ("0x0b5e...")
   */
  cookie: string;
  /**
   * the conntrack zone in use: derived once and kept (sticky), unless the zone input overrides it
   */
  ctZone: number;
  /**
   * each backend's bridge port and the ofport its flows deliver to, looked up at apply time
   */
  ofports: {
    [k: string]: number;
  };
  /**
   * what the last create or update sent to the bridge
   */
  lastApply: ApplySummary;
  /**
   * gre.bfd: each peer's ("address/key") BFD session state at the last create, update or read ("absent" when its port is missing)
   */
  bfd?: {
    [k: string]: string;
  };
  /**
   * gre.secondChance: live conntrack entries per backend ("address:port") in the zone, at the last create, update or read: a drain is over when its backend reads 0
   */
  connections?: {
    [k: string]: number;
  };
  ovsVersions?: OvsVersions;
  traffic?: HypervisorTraffic;
}
/**
 * what the owned flows counted, at the last read (observations, not drift: a refresh that only sees them move changes no input)
 */
export interface HypervisorTraffic {
  /**
   * VIP ("tcp:10.0.0.200:80") -> the requests its request flows took, in all and per backend ("address:port")
   */
  vips: {
    [k: string]: {
      packets: number;
      bytes: number;
      backends: {
        [k: string]: TrafficCounter;
      };
    };
  };
  /**
   * gre: what came out of the GRE port for no declared VIP, backend or source, dropped
   */
  dropped?: TrafficCounter;
  /**
   * gre.secondChance: packets handed on to a previous owner, received handed on from a peer, and received handed on for no connection of the zone (dropped)
   */
  secondChance?: {
    handedOn: TrafficCounter;
    received: TrafficCounter;
    dropped: TrafficCounter;
  };
  /**
   * pathMtu: ICMP errors for the VIPs delivered to a backend (related to one of its connections) and dropped (related to none)
   */
  pathMtu?: {
    accepted: TrafficCounter;
    dropped: TrafficCounter;
  };
}
/**
 * What HealthCheck records besides its inputs.
 */
export interface HealthCheckOutputs {
  /**
   * where the northbound differed from the inputs at the last read (empty when in sync): driftFindings, one sentence each
   */
  drift: string[];
  /**
   * drift as data, one finding per sentence of drift (absent in state recorded before ovslb recorded it)
   */
  driftFindings?: DriftFinding[];
  /**
   * each backend as the southbound (and the gateways' BFD, given gateways) see it, at the last create, update or read; absent without southbound
   */
  health?: BackendHealth[];
  /**
   * backends OVN reports online that cannot serve, with the reason; absent without southbound
   */
  stale?: StaleBackend[];
  /**
   * the gateways whose BFD sessions counted toward stale, sorted (none without gateways: stale is then judged on the southbound's bindings alone)
   */
  bfdGateways: string[];
}
/**
 * What OvsBridge records besides its inputs.
 */
export interface OvsBridgeOutputs {
  /**
   * the Bridge row's uuid
   */
  uuid: string;
  /**
   * the bridge's OpenFlow management socket on the host (unix:...mgmt)
   */
  managementSocket: string;
  ovsVersions?: OvsVersions;
}
