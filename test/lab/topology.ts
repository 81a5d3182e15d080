import { distroRoot, type HostRoot, type Release, RELEASES } from "./root";

/**
 * The lab's topology as pure data: which emulated hosts exist, their
 * namespaces, addresses and MACs. lab.ts builds it; tests read the inventory.
 *
 * Labs of this topology can stand side by side (test lanes, one on each):
 * OVSLB_LAB_INSTANCE="" (or unset) is the main lab, "b" the second, and "c"
 * the lab of the newer versions, whose hosts run their daemons and sshd from
 * the Debian 13 root (Open vSwitch 3.5, OVN 25.03; test/lab/root.ts), or
 * with OVSLB_LAB_RELEASE=noble from Ubuntu 24.04's (3.3, the OVS LTS; 24.03).
 * They differ only in what the root namespace sees: namespace and root link
 * names, the management network and the lab directory; inside their
 * namespaces they are identical, so every test runs on any of them.
 *
 * Networks (lab-only ranges; this machine's own interface is in 192.0.2.0/24):
 * - management 172.30.0.0/24 (lab "b": 172.30.1.0/24, "c": 172.30.2.0/24): a Linux bridge in the root namespace; each
 *   host's sshd listens here, and so does OVN NB/SB over TCP.
 * - segment 10.0.0.0/24: one L2 segment (Linux bridge) joining gateways,
 *   hypervisors, the distributor and the client; each OVS host has it on
 *   its `br-seg` bridge, and the backend VMs hang off the hypervisors' br-seg.
 * - underlay 172.16.K.0/24 per host, routed by a router namespace: the
 *   tunnel endpoints (on each host's `br-phy`).
 * - the external L3DSR load balancer (L3DSR below): a plain namespace with a
 *   leg on the segment and one on its own underlay /24, no OVS.
 */

export type HostRole = "ovn-central" | "gateway" | "hypervisor" | "distributor";

export interface HostPlan {
  name: string;
  role: HostRole;
  /** Last octet on each network, and the underlay's third octet. */
  index: number;
  vms: VmPlan[];
}

export interface VmPlan {
  name: string;
  hypervisor: string;
  /** Port name on the hypervisor's br-seg (and the veth's name there). */
  port: string;
  address: string;
  mac: string;
}

/** Which lab this process builds or uses (see above). */
export const LAB_INSTANCE = labInstance(process.env.OVSLB_LAB_INSTANCE);

function labInstance(value: string | undefined): "" | "b" | "c" {
  if (value === undefined || value === "" || value === "b" || value === "c") return value ?? "";
  throw new Error(`OVSLB_LAB_INSTANCE=${JSON.stringify(value)}: the labs are "" (the main one), "b" and "c" (the newer versions)`);
}

/** The root this lab's hosts run from (lab "c": Debian 13's, or OVSLB_LAB_RELEASE's), or undefined for this machine's own Open vSwitch. */
export const LAB_ROOT: string | undefined = LAB_INSTANCE === "c" ? distroRoot(labRelease(process.env.OVSLB_LAB_RELEASE)) : undefined;

function labRelease(value: string | undefined): Release {
  if (value === undefined || value === "") return "trixie";
  if ((RELEASES as readonly string[]).includes(value)) return value as Release;
  throw new Error(`OVSLB_LAB_RELEASE=${JSON.stringify(value)}: lab "c" runs one of ${RELEASES.join(", ")} (tools/distro-root.sh)`);
}

export const LAB_PREFIX = `ovslb${LAB_INSTANCE}-`;
/** A namespace's leg on the management ("m") or segment ("s") bridge, as the root namespace names its peer: the cable a test cuts. */
export const rootLinkOf = (network: "m" | "s", name: string) => `${LAB_INSTANCE}${network}-${name}`;
export const MGMT_BRIDGE = `${LAB_PREFIX}mgmt`;
export const SEGMENT_BRIDGE = `${LAB_PREFIX}seg`;
export const ROUTER_NS = `${LAB_PREFIX}rtr`;
const MGMT_NET = `172.30.${["", "b", "c"].indexOf(LAB_INSTANCE)}`;
export const MGMT_CIDR = `${MGMT_NET}.0/24`;
export const MGMT_GATEWAY = `${MGMT_NET}.1`;
/** An address on the management network that no host has (a connection to it times out). */
export const MGMT_UNUSED = `${MGMT_NET}.250`;
/** Where the lab keeps its state, keys and daemons' run directories (OVSLB_LAB_DIR overrides it). */
export const DEFAULT_LAB_DIR = LAB_INSTANCE === "" ? "/run/ovslb-lab" : `/run/ovslb-lab-${LAB_INSTANCE}`;
/** The stack whose config `lab up` writes (Pulumi.STACK.yaml beside each project of the repo). */
export const LAB_STACK = LAB_INSTANCE === "" ? "lab" : `lab-${LAB_INSTANCE}`;
export const SEGMENT_CIDR = "10.0.0.0/24";
export const CLIENT = { namespace: `${LAB_PREFIX}client`, address: "10.0.0.2", mac: "02:00:0a:00:00:02" };
/**
 * A second tenant's client on the same segment, in its own VLAN: the
 * distributor's per-tenant isolation is tested with two tenants using one VIP.
 */
export const TENANT_CLIENT = { namespace: `${LAB_PREFIX}client2`, address: "10.0.0.3", mac: "02:00:0a:00:00:03", vlan: 102 };
/** VIPs in this range are routed by the client through both gateways (ECMP). */
export const GATEWAY_VIP_RANGE = "10.0.0.192/28";
/**
 * The segment is dual-stack: each address on it has an IPv6 twin in this
 * ULA prefix (10.0.0.101 -> fd00:10::101), and IPv6 VIPs in
 * GATEWAY_VIP_RANGE6 are routed by the client through both gateways (ECMP).
 */
export const SEGMENT6_CIDR = "fd00:10::/64";
export const GATEWAY_VIP_RANGE6 = "fd00:20::/64";
export const ipv6Twin = (segmentAddress: string) => `fd00:10::${segmentAddress.split(".")[3]}`;
/**
 * An external L3DSR load balancer: a plain Linux namespace (no OVS, no
 * ovslb) with a leg on the segment and a leg on the routed underlay
 * (172.16.41.0/24, through the router namespace like the OVS hosts'). The
 * client routes `vipRange` to its segment address; test/lab/l3dsr.ts makes
 * it encapsulate a VIP in GRE (Ethernet over GRE) toward a host's underlay
 * address. `disallowedAddress` is a second underlay address of its own: GRE
 * sent from it is what an allow list must refuse.
 */
/**
 * An upstream router on the segment (a forwarding namespace, no OVS): the
 * distributor tests route a VIP through it by ECMP over the devices' next
 * hops, with its neighbour tracking dropping a next hop that stops
 * answering. A router forwards per packet, unlike a TCP endpoint whose
 * sockets keep the next hop they started with.
 */
export const EDGE_ROUTER = { namespace: `${LAB_PREFIX}edge`, port: "eth0", address: "10.0.0.5", address6: "fd00:10::5", mac: "02:00:0a:00:00:05" };

/**
 * A client far away: behind the edge router, on its own network, whose link
 * has a smaller MTU at the router's end (`routerMtu`) than at the client's
 * (1500). The client advertises a full-size MSS, so segments toward it need
 * path MTU discovery: the edge router answers an oversized one with ICMP
 * "fragmentation needed", addressed to its source (the VIP, in DSR). Backend
 * VMs route `network` through the edge router. Dual stack: the same over
 * IPv6 (`address6` in `network6`), where the router answers with ICMPv6
 * "packet too big".
 */
export const FAR_CLIENT = {
  namespace: `${LAB_PREFIX}far`,
  port: "eth0",
  address: "10.0.3.2",
  address6: "fd00:13::2",
  mac: "02:00:0a:00:03:02",
  network: "10.0.3.0/24",
  network6: "fd00:13::/64",
  router: { port: "far0", address: "10.0.3.1", address6: "fd00:13::1", mtu: 1400 },
} as const;

export const L3DSR = {
  namespace: `${LAB_PREFIX}l3dsr`,
  segment: { port: "eth0", address: "10.0.0.4", address6: "fd00:10::4", mac: "02:00:0a:00:00:04" },
  underlay: { port: "ul0", address: "172.16.41.2", router: "172.16.41.1", disallowedAddress: "172.16.41.3", mtu: 1600 },
  /** Outside the gateways' GATEWAY_VIP_RANGE. */
  vipRange: "10.0.0.176/28",
  /** IPv6 VIPs the client routes to `segment.address6` (tunnelled over the IPv4 underlay all the same). */
  vipRange6: "fd00:22::/64",
} as const;
/** The TCP port every backend VM's server listens on. */
export const BACKEND_PORT = 8080;

const VMS_PER_HYPERVISOR = 4;

function macFor(address: string): string {
  const octets = address.split(".").map((o) => Number(o).toString(16).padStart(2, "0"));
  return `02:00:${octets.join(":")}`;
}

function host(name: string, role: HostRole, index: number): HostPlan {
  const vms: VmPlan[] = [];
  if (role === "hypervisor") {
    const hv = index - 20; // hv1 = 21
    for (let i = 1; i <= VMS_PER_HYPERVISOR; i++) {
      const address = `10.0.0.${100 + (hv - 1) * 10 + i}`;
      vms.push({ name: `${name}-vm${i}`, hypervisor: name, port: `vm${i}`, address, mac: macFor(address) });
    }
  }
  return { name, role, index, vms };
}

export const HOSTS: readonly HostPlan[] = [
  host("central", "ovn-central", 10),
  host("gw1", "gateway", 11),
  host("gw2", "gateway", 12),
  host("hv1", "hypervisor", 21),
  host("hv2", "hypervisor", 22),
  host("hv3", "hypervisor", 23),
  host("dist1", "distributor", 31),
  // A second device: one load balancer on both, with no single point of failure.
  host("dist2", "distributor", 32),
];

export const namespaceOf = (hostOrVm: string) => `${LAB_PREFIX}${hostOrVm}`;
export const mgmtAddressOf = (h: HostPlan) => `${MGMT_NET}.${h.index}`;
export const segmentAddressOf = (h: HostPlan) => `10.0.0.${h.index}`;
export const segmentMacOf = (h: HostPlan) => macFor(segmentAddressOf(h));
export const underlayAddressOf = (h: HostPlan) => `172.16.${h.index}.2`;
export const underlayRouterOf = (h: HostPlan) => `172.16.${h.index}.1`;
/** The underlay is dual-stack: fd00:16:K::/64 per host beside 172.16.K.0/24 (GRE over IPv6 is ip6gre). */
export const underlayAddress6Of = (h: HostPlan) => `fd00:16:${h.index}::2`;
export const underlayRouter6Of = (h: HostPlan) => `fd00:16:${h.index}::1`;
export const UNDERLAY6_CIDR = "fd00:16::/32";

/** What the lab writes for tests, examples and benchmarks (inventory.json). */
export interface LabInventory {
  version: 1;
  labDir: string;
  /** Seconds `up` took to build the lab. */
  upSeconds: number;
  /** The Open vSwitch and OVN the hosts run, and the Debian root they run from if not this machine's (absent in inventories written before lab "c"). */
  software?: { ovs: string; ovn: string; root?: string };
  clientKeyPath: string;
  clientPublicKey: string;
  knownHostsPath: string;
  mgmtCidr: string;
  segmentCidr: string;
  gatewayVipRange: string;
  /** The segment's IPv6 prefix and the client's IPv6 VIP range (absent in a lab built before the segment was dual-stack). */
  segment6Cidr?: string;
  gatewayVipRange6?: string;
  backendPort: number;
  client: { namespace: string; address: string; mac: string };
  /** Another tenant's client: an access port of VLAN `vlan` on dist1's br-seg (named client2 there). */
  tenantClient?: { namespace: string; address: string; mac: string; vlan: number };
  /** The upstream router for distributor failover (EDGE_ROUTER). */
  edgeRouter?: { namespace: string; port: string; address: string; address6?: string; mac: string };
  /** The client behind the edge router, across a smaller MTU (FAR_CLIENT; absent in inventories written before it; its IPv6 fields too). */
  farClient?: {
    namespace: string;
    port: string;
    address: string;
    address6?: string;
    mac: string;
    network: string;
    network6?: string;
    router: { port: string; address: string; address6?: string; mtu: number };
  };
  hosts: Record<string, LabHost>;
  backends: LabBackend[];
  /** The external L3DSR load balancer (absent in inventories written before it existed). */
  l3dsr?: LabL3dsr;
}

/** The external L3DSR load balancer: see L3DSR; test/lab/l3dsr.ts drives it. */
export interface LabL3dsr {
  namespace: string;
  /** Its leg on the segment: the client's next hop for vipRange (and, by address6, vipRange6). */
  segment: { port: string; address: string; address6?: string; mac: string };
  /** Its leg on the routed underlay: GRE leaves from `address` (allowed) or `disallowedAddress`. */
  underlay: { port: string; address: string; router: string; disallowedAddress: string; mtu: number };
  /** VIPs the client routes to `segment.address`. */
  vipRange: string;
  /** IPv6 VIPs the client routes to `segment.address6` (absent in inventories written before it). */
  vipRange6?: string;
}

export interface LabHost {
  name: string;
  role: HostRole;
  namespace: string;
  address: string;
  sshPort: number;
  user: string;
  /** "ssh-ed25519 AAAA...", the host key to pin. */
  hostKey: string;
  /** OVS_RUNDIR on the host: db.sock and BRIDGE.mgmt live here. */
  ovsRundir?: string;
  dbSock?: string;
  segment?: { bridge: string; port: string; address: string; mac: string };
  underlay?: { bridge: string; port: string; address: string; router: string; address6?: string; router6?: string };
  ovn?: { nbSock: string; sbSock: string; nbTcp: string; sbTcp: string; rundir: string };
  /** Set when the host's daemons run from another Debian root (lab "c"): a local command on the host runs through it (test/lab/root.ts). */
  root?: HostRoot;
}

export interface LabBackend {
  name: string;
  namespace: string;
  hypervisor: string;
  /** The VM's port on the hypervisor's br-seg. */
  port: string;
  address: string;
  mac: string;
}
