/* eslint-disable */
// Generated from schema/*.json by schema/generate-types.js. Do not edit.

export interface AllInputs {
  "deferred-nat-load-balancer"?: DeferredNatLoadBalancerInputs;
  "distributor-attachment"?: DistributorAttachmentInputs;
  "distributor-device"?: DistributorDeviceInputs;
  "dsr-hypervisor-flows"?: DsrHypervisorFlowsInputs;
  "health-check"?: HealthCheckInputs;
  "ovs-bridge"?: OvsBridgeInputs;
}
/**
 * A deferred-NAT load balancer: stateless gateways choose a backend per packet with a select group (selection_method=hash, stable bucket ids) and deliver the frame to the backend's MAC; the NAT happens on the backend's hypervisor (DsrHypervisorFlows).
 */
export interface DeferredNatLoadBalancerInputs {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  /**
   * the gateways; every one gets identical groups
   *
   * @minItems 1
   * @maxItems 64
   */
  gateways: DeferredNatGateway[];
  /**
   * the hypervisors that host backends
   *
   * @minItems 1
   * @maxItems 4096
   */
  hypervisors: DeferredNatHypervisor[];
  /**
   * @minItems 1
   * @maxItems 1024
   */
  vips: DeferredNatVip[];
  /**
   * how the gateways select; only hash is accepted
   */
  selectionMethod?: "hash" | "dp_hash";
  /**
   * the fields hashed to choose a backend; default ip_src, ip_dst, tp_src, tp_dst
   *
   * @maxItems 4
   */
  selectionFields?: ("ip_src" | "ip_dst" | "tp_src" | "tp_dst")[];
  /**
   * how a chosen backend is reached, unless its hypervisor says otherwise: mac (rewrite eth.dst onto the L2 segment) or gre (tunnel to the backend's hypervisor over the underlay, ip.dst still the VIP; the hypervisor needs a tunnelAddress and DsrHypervisorFlows in gre mode); default mac
   */
  delivery?: "mac" | "gre";
  ovn?: DeferredNatOvn;
  healthCheck?: DeferredNatHealthCheck;
  /**
   * path MTU discovery through DSR: each gateway sends an ICMP 'fragmentation needed' error (ICMPv6 'packet too big' for an IPv6 VIP) addressed to a VIP to every hypervisor that serves the VIP (one copy each), whose conntrack gives it to the backend whose connection it is about (DsrHypervisorFlows pathMtu). Without it such an error reaches one arbitrary hypervisor and a server whose replies cross a smaller MTU stalls. Default false
   */
  pathMtu?: boolean;
  secondChance?: DeferredNatSecondChance;
}
export interface DeferredNatGateway {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  host: OvsHost;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  bridge: string;
  /**
   * an OVS port name: 1-15 letters, digits, '-', '_' or '.', starting with a letter or digit
   */
  segmentPort: string;
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  mac: string;
  /**
   * the gateway's underlay address, the source of its GRE tunnels (gre delivery): IPv4 (gre ports) or IPv6 (ip6gre ports), one family for every tunnel address of the load balancer
   */
  tunnelAddress?: string;
}
/**
 * a host running Open vSwitch, reached over SSH; ovsRundir is where its sockets live (db.sock, BRIDGE.mgmt), default /var/run/openvswitch
 */
export interface OvsHost {
  connection: SshConnection;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  ovsRundir?: string;
}
/**
 * how to reach a host over SSH; its host key is always verified, against hostKey or knownHosts (one is required)
 */
export interface SshConnection {
  /**
   * a DNS name or an IPv4 address
   */
  host: string;
  /**
   * SSH port (default 22)
   */
  port?: number;
  /**
   * a login name (required, here or in the stack's ovslb:ssh)
   */
  user?: string;
  /**
   * a public host key as in known_hosts, e.g. "ssh-ed25519 AAAA..."
   */
  hostKey?: string;
  /**
   * OpenSSH known_hosts lines that name this host
   */
  knownHosts?: string;
  /**
   * an OpenSSH or PEM private key (kept secret)
   */
  privateKey?: string;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  privateKeyPath?: string;
  /**
   * the private key's passphrase (kept secret)
   */
  passphrase?: string;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  agent?: string;
  /**
   * milliseconds
   */
  connectTimeoutMs?: number;
  /**
   * milliseconds
   */
  commandTimeoutMs?: number;
  jumpHost?: SshConnection;
  /**
   * a profile name in the stack's ovslb:ssh.profiles (1-63 lowercase letters, digits and '-', starting with a letter): the login (user, key, port, timeouts, jump host) is that profile's instead of ovslb:ssh's, this connection's own settings still first; only the name is in the inputs, never the login
   */
  sshProfile?: string;
}
export interface DeferredNatHypervisor {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  /**
   * the hypervisor's underlay address, where gateways send its backends' GRE (gre delivery): IPv4 or IPv6, of the gateways' family
   */
  tunnelAddress?: string;
  /**
   * how this hypervisor's backends are reached; default the load balancer's delivery
   */
  delivery?: "mac" | "gre";
}
export interface DeferredNatVip {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * the L4 protocol
   */
  protocol: "tcp" | "udp" | "sctp";
  /**
   * udp only: keep each datagram's fragments together. The VIP then hashes on addresses only (ip_src, ip_dst: all of a client's datagrams go to one backend), and all its fragments, whose ports OVS does not read, follow the same group. At most one such VIP per address. Default false
   */
  fragments?: boolean;
  /**
   * @maxItems 4096
   */
  backends: DeferredNatBackend[];
}
export interface DeferredNatBackend {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  mac: string;
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  hypervisor: string;
  /**
   * a relative weight, 1-64 (that many buckets); default 1
   */
  weight?: number;
  /**
   * an OVN logical switch port name of 1-64 letters, digits and . _ -, starting with a letter or digit; no ':', which separates the port from the health checks' source address in OVN's ip_port_mappings value (LSP:SRC_IP)
   */
  logicalPort?: string;
  /**
   * active (default) or draining: with secondChance a draining backend gets no new connections and keeps its established ones (read its hypervisor's connections output to know when it is empty); refused without secondChance
   */
  state?: "active" | "draining";
}
/**
 * also write the OVN northbound Load_Balancer rows (options:deferred-nat=true, the health checks and ip_port_mappings), attached to router only with attach
 */
export interface DeferredNatOvn {
  northbound: OvnNorthbound;
  /**
   * the logical router the rows are for: it must exist; they are attached to it only with attach
   */
  router: string;
  /**
   * attach the rows to router (its load_balancer column). Default false: no OVN release (23.03 to 26.03) has the deferred-NAT series, and a stock OVN ignores options:deferred-nat and implements an attached row as its own stateful load balancer on the router (ct_lb_mark DNAT to the backends), beside ovslb's stateless gateways. Unattached, the rows still carry OVN's health checks: northd makes the Service_Monitor rows of every Load_Balancer and the backends' chassis probe them. Set true only for an OVN that implements options:deferred-nat, or to have OVN balance the VIP statefully on purpose
   */
  attach?: boolean;
  /**
   * the source address of OVN's probes of IPv4 backends (ip_port_mappings BACKEND_IP -> LSP:SOURCE_IP)
   */
  healthCheckSourceIp?: string;
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  healthCheckSourceIpv6?: string;
}
/**
 * the NB database: its unix socket on a host reached over SSH
 */
export interface OvnNorthbound {
  connection: SshConnection;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  socket: string;
}
/**
 * the health check of the load balancer's VIPs (the older form: new stacks give probe, southbound and enforce to a HealthCheck resource and keep only bfd here): OVN probes (probe, with ovn: a Load_Balancer_Health_Check per VIP, probed by the chassis each backend's logical port is bound to; needs ovn.healthCheckSourceIp for IPv4 VIPs, ovn.healthCheckSourceIpv6 for IPv6 VIPs, and every backend's logicalPort), BFD liveness of each hypervisor on every gateway (bfd, gre delivery), and what read reports and enforce does with the southbound's view
 */
export interface DeferredNatHealthCheck {
  probe?: OvnProbe;
  bfd?: BfdTimers;
  southbound?: OvsdbSocket;
  /**
   * create and update set stale Service_Monitor rows offline (and clear their chassis where the schema has that column); never online. Needs probe and southbound, and write access to the southbound; default false
   */
  enforce?: boolean;
}
/**
 * the probe settings of an OVN Load_Balancer_Health_Check (its options); unset ones are ovn-controller's defaults
 */
export interface OvnProbe {
  /**
   * seconds between probes; default 5 (ovn-controller's)
   */
  interval?: number;
  /**
   * seconds a probe may take; default 3 (ovn-controller's)
   */
  timeout?: number;
  /**
   * successful probes before a backend is online; default 1
   */
  successCount?: number;
  /**
   * failed probes before a backend is offline; default 1
   */
  failureCount?: number;
}
/**
 * BFD timers of a liveness session (RFC 5880). Detection takes about the peer's transmit interval times its multiplier: 100/100/3 detects in about 300 ms. decay_min_rx is always off, so an idle session keeps its rate.
 */
export interface BfdTimers {
  /**
   * the shortest receive interval offered, in ms (bfd:min_rx); default 100
   */
  minRx?: number;
  /**
   * the shortest transmit interval, in ms (bfd:min_tx); default 100
   */
  minTx?: number;
  /**
   * missed control messages before the session goes down (bfd:mult); default 3
   */
  multiplier?: number;
}
/**
 * an OVSDB database: its unix socket on a host reached over SSH
 */
export interface OvsdbSocket {
  connection: SshConnection;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  socket: string;
}
/**
 * connection-preserving selection (gre delivery): each VIP is a table of hash slots on every gateway (multipath into a register, one flow per slot) naming the slot's backend and the previous owner's hypervisor (in the GRE key); the new owner's hypervisor hands packets of connections it does not know to the previous owner, once. Adding, draining and removing backends then breaks no established TCP connection
 */
export interface DeferredNatSecondChance {
  /**
   * hash slots per VIP; default the smallest of these with at least 128 per unit of weight (shares within 1%); grows by doubling (no slot moves), never shrinks
   */
  slots?: 1024 | 2048 | 4096 | 8192 | 16384 | 32768 | 65536;
  /**
   * seconds, 0 to 604800 (a week), that a moved slot's previous owner keeps its second chance: the first update after that releases the history by itself; default 3600 (ten times the usual idle timeouts and deregistration delays, 60-350 s). While history is live a slot moves only back to its previous owner, and a share may be off its weight by up to 1/16
   */
  holdSeconds?: number;
  /**
   * let this update release the live history it needs to (only the slots a change refused without it needs; the connections that still depended on those previous owners break); default false
   */
  release?: boolean;
}
/**
 * One load balancer on one distributor device: a bridge and frontend port of its own, an ARP (IPv4) or ND (IPv6) responder for the VIP, and a select group with one bucket per active slot that rewrites L2 only and sends the frame back out its ingress port.
 */
export interface DistributorAttachmentInputs {
  host: OvsHost;
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  deviceId: string;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  uplinkBridge: string;
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  attachmentId: string;
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  vip: string;
  /**
   * the tenant network's VLAN on the uplink (1-4094); absent: the untagged network
   */
  vlan?: number;
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  frontendMac?: string;
  /**
   * what picks the amphora: the 5-tuple (default) or the source IP only
   */
  affinity?: "5-tuple" | "source-ip";
  /**
   * direct (default): replies bypass the distributor; hairpin: replies come back through it and leave for gatewayMac
   */
  returnPath?: "direct" | "hairpin";
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  gatewayMac?: string;
  /**
   * @minItems 1
   * @maxItems 65
   */
  amphorae: DistributorAmphora[];
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  loadBalancerId?: string;
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  nextHop?: string;
}
/**
 * an amphora (load-balancer VM) and its role in the cluster
 */
export interface DistributorAmphora {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  mac: string;
  /**
   * active: serves its slot; standby: takes over the slot of a failed active amphora, in place; failed: its slot is handed to the standby
   */
  role: "active" | "standby" | "failed";
  /**
   * the slot an active amphora serves, or a failed one served (1-64); each slot is one bucket whose id never changes
   */
  slot?: number;
  /**
   * an OpenFlow port number on the attachment's bridge whose liveness the slot's bucket follows (watch_port)
   */
  watchPort?: number;
}
/**
 * A distributor device (Octavia active/active): an OVS host with its own identity and an uplink bridge that carries the tenants' networks. One device serves many load balancers, each through its own DistributorAttachment.
 */
export interface DistributorDeviceInputs {
  host: OvsHost;
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  deviceId: string;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  uplinkBridge: string;
}
/**
 * The hypervisor side of a load balancer, where connection state lives next to the backend: on one bridge, the DNAT VIP:port -> backend:port of requests for local backends, with conntrack in a zone, and the un-DNAT of their replies, which leave straight toward the client. Flows are owned by cookie. In mode "mac" requests arrive addressed to the backend's MAC with the VIP still as destination; in mode "gre" they arrive GRE-encapsulated from an allowed load-balancer address, on a flow-based GRE port the resource owns (nothing is configured inside the servers).
 */
export interface DsrHypervisorFlowsInputs {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  host: OvsHost;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  bridge: string;
  /**
   * how requests reach this hypervisor: mac (frames addressed to the backend's MAC, ip.dst = VIP) or gre (GRE-encapsulated, VIP inside, from gre.allowedSources); default mac. ipip is refused: OVS has no IPIP port and its decap action cannot strip IPIP
   */
  mode?: "mac" | "gre" | "ipip";
  gre?: DsrGre;
  /**
   * the most conntrack entries the resource's zone may hold (ovs-vswitchd's dpctl/ct-set-limits): past it a new connection is not committed and its packets are dropped, so a flood at these VIPs cannot take conntrack from other zones. Read back as drift; removed with the resource. Default: none of its own (the datapath's limits only)
   */
  connectionLimit?: number;
  /**
   * accept ICMP 'fragmentation needed' (ICMPv6 'packet too big') errors addressed to the VIPs (as the load balancer's pathMtu fans them out) when conntrack relates them to a connection of the zone, translated to its backend; drop the rest. Default false
   */
  pathMtu?: boolean;
  /**
   * a conntrack zone in [1, 65535] (0 is the default zone, shared with everything); default derived from the resource and kept once given
   */
  zone?: number;
  /**
   * the VIPs with backends on this hypervisor
   *
   * @maxItems 1024
   */
  vips: DsrVip[];
}
/**
 * gre mode: the flow-based GRE port (remote_ip=flow, key=flow) this resource ensures and owns on the bridge, and who may send through it
 */
export interface DsrGre {
  /**
   * an OVS port name: 1-15 letters, digits, '-', '_' or '.', starting with a letter or digit
   */
  port?: string;
  /**
   * the load balancers' tunnel source addresses or prefixes whose GRE is decapsulated and delivered; GRE from any other source is dropped
   *
   * @minItems 1
   * @maxItems 64
   *
   * Items: an IPv4 or IPv6 address or prefix, e.g. 172.16.0.0/16, 172.16.5.2 or fd00:16::/32 (no host bits set)
   */
  allowedSources: string[];
  /**
   * a GRE key the requests must carry (32 bits); default any key
   */
  key?: number;
  bfd?: DsrBfd;
  secondChance?: DsrSecondChance;
}
/**
 * liveness sessions the load balancers' gateways open toward this hypervisor: one fixed GRE port per peer with BFD on it, carrying only BFD (its own key), so the gateways stop choosing this hypervisor's backends within the detection time when it dies
 */
export interface DsrBfd {
  /**
   * one per gateway and load balancer: the gateway's tunnel address and the load balancer's bfdKey output
   *
   * @minItems 1
   * @maxItems 64
   */
  peers: DsrBfdPeer[];
  timers?: BfdTimers;
}
export interface DsrBfdPeer {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * the GRE key of the session (the load balancer's bfdKey)
   */
  key: number;
}
/**
 * the hypervisor side of DeferredNatLoadBalancer secondChance: a request that is not a SYN and matches no connection here is handed, uncommitted, to the hypervisor the GRE key names (the slot's previous owner); what arrives handed on from a peer is served only from an existing connection, never handed on again
 */
export interface DsrSecondChance {
  /**
   * the other hypervisors' tunnel addresses (of the underlay's family): the only sources of handed-on packets, and where a packet is handed on to
   *
   * @minItems 1
   * @maxItems 4096
   *
   * Items: an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  peers: string[];
}
/**
 * a VIP (address, port, protocol) and its backends on this hypervisor
 */
export interface DsrVip {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * the VIP's transport protocol; default tcp
   */
  protocol?: "tcp" | "udp" | "sctp";
  /**
   * udp only: let the VIP's fragmented datagrams through (their fragments, whose ports OVS does not read, go into conntrack, which reassembles them for the NAT; the backend's fragmented replies likewise). Default false
   */
  fragments?: boolean;
  /**
   * the VIP's backends hosted on this hypervisor (at least one)
   *
   * @minItems 1
   * @maxItems 1024
   */
  backends: DsrBackend[];
}
/**
 * a backend hosted on this hypervisor: its address, port and MAC, and its port on the bridge
 */
export interface DsrBackend {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  mac: string;
  /**
   * an OVS port name: 1-15 letters, digits, '-', '_' or '.', starting with a letter or digit
   */
  bridgePort: string;
}
/**
 * OVN health checks of one DeferredNatLoadBalancer's VIPs, as a resource of their own: a Load_Balancer_Health_Check per VIP (referenced from the load balancer's northbound Load_Balancer rows) and the ip_port_mappings entries its probes need, written in one owned OVSDB transaction; the southbound's Service_Monitor and Port_Binding rows read back as each backend's health and the stale ones (online while they cannot serve); with enforce, stale monitors set offline. It never touches the gateways' flows or groups: changing or refreshing it sends no OpenFlow. BFD liveness stays with the load balancer (healthCheck.bfd: its tunnel ports and the buckets' watch_port); given the gateways, this resource reads the BFD status of those ports over OVSDB, so a backend whose hypervisor a majority of the gateways see down counts as stale; without them, stale is judged on the southbound's bindings alone. northbound is the load balancer's ovn.northbound; southbound (optional) is read for the backends' Service_Monitor and Port_Binding rows, and enforce writes Service_Monitor.status there.
 */
export interface HealthCheckInputs {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  loadBalancer: string;
  northbound: OvsdbSocket;
  southbound?: OvsdbSocket;
  /**
   * the source address of the probes of IPv4 backends (ip_port_mappings BACKEND_IP -> LSP:SOURCE_IP); required when a VIP is IPv4
   */
  sourceIp?: string;
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  sourceIpv6?: string;
  /**
   * the VIPs to probe: each must be one of the load balancer's
   *
   * @minItems 1
   * @maxItems 1024
   */
  vips: HealthCheckVip[];
  probe?: OvnProbe;
  /**
   * create and update set stale Service_Monitor rows offline (and clear their chassis where the schema has that column); never online. Needs southbound, and write access to it; default false
   */
  enforce?: boolean;
  /**
   * the load balancer's gateways, when it has healthCheck.bfd: their BFD sessions to each hypervisor (Interface.bfd_status of the load balancer's BFD ports, read over OVSDB, never changed) count toward stale: a backend online while a strict majority of the gateways peering with its hypervisor see the session down is stale
   *
   * @maxItems 64
   */
  gateways?: HealthCheckGateway[];
}
export interface HealthCheckVip {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * the L4 protocol
   */
  protocol: "tcp" | "udp" | "sctp";
  /**
   * @maxItems 4096
   */
  backends: HealthCheckBackend[];
}
export interface HealthCheckBackend {
  /**
   * an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)
   */
  address: string;
  /**
   * a TCP/UDP/SCTP port, 1-65535
   */
  port: number;
  /**
   * an OVN logical switch port name of 1-64 letters, digits and . _ -, starting with a letter or digit; no ':', which separates the port from the health checks' source address in OVN's ip_port_mappings value (LSP:SRC_IP)
   */
  logicalPort: string;
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  hypervisor?: string;
}
export interface HealthCheckGateway {
  /**
   * a name of 1-63 lowercase letters, digits and '-', starting with a letter
   */
  name: string;
  host: OvsHost;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  bridge: string;
}
/**
 * An OVS bridge ensured on one host through OVSDB, owned by ovslb through external_ids.
 */
export interface OvsBridgeInputs {
  host: OvsHost;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  name: string;
  /**
   * the datapath: netdev (userspace) or system (kernel); default netdev
   */
  datapathType?: "netdev" | "system";
  /**
   * what the bridge does with no controller; default secure
   */
  failMode?: "secure" | "standalone";
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  hwaddr?: string;
  /**
   * extra external_ids to set on the bridge
   */
  externalIds?: {
    [k: string]: string;
  };
}
