/**
 * OpenFlow flows, groups and modifications as data. Nothing here is a string
 * for OVS yet: render.ts validates every value to its grammar and renders the
 * lines of an `ovs-ofctl bundle` file; parse.ts reads dumps back into the
 * *Entry types, the text form OVS prints, which is what desired state is
 * compared against.
 */

/** Protocol keywords that set the prerequisites (eth_type, ip_proto) of a match. */
export type Protocol = "ip" | "arp" | "tcp" | "udp" | "sctp" | "icmp" | "ipv6" | "tcp6" | "udp6" | "sctp6" | "icmp6";

/** Conntrack state bits, in the order OVS prints them. */
export const CT_STATE_FLAGS = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"] as const;
export type CtStateFlag = (typeof CT_STATE_FLAGS)[number];

/**
 * A flow match. Keys are the field names OVS prints in dump-flows; `protocol`
 * is the bare keyword (`tcp`, `arp`, ...). IPv4 values are an address or a
 * prefix (`10.0.0.0/24`); MACs are `xx:xx:xx:xx:xx:xx`.
 */
export interface Match {
  protocol?: Protocol;
  in_port?: number;
  dl_src?: string;
  dl_dst?: string;
  nw_src?: string;
  nw_dst?: string;
  /** Need an IPv6 protocol (ipv6, tcp6, ...); nw_src and nw_dst an IPv4 one. */
  ipv6_src?: string;
  ipv6_dst?: string;
  tp_src?: number;
  tp_dst?: number;
  /** IP fragments: `later` matches the fragments after the first (they carry no L4 header). */
  nw_frag?: "no" | "yes" | "first" | "later" | "not_later";
  /** ICMP type and code (`icmp_type=3,icmp_code=4`: fragmentation needed; icmp6 type 2 code 0: packet too big). Need protocol icmp or icmp6. */
  icmp_type?: number;
  icmp_code?: number;
  /** The address a neighbour solicitation (icmp6, icmp_type 135) asks for. */
  nd_target?: string;
  arp_op?: number;
  arp_spa?: string;
  arp_tpa?: string;
  arp_sha?: string;
  arp_tha?: string;
  tun_src?: string;
  tun_dst?: string;
  /** The tunnel's ends on an IPv6 underlay (ip6gre). */
  tun_ipv6_src?: string;
  tun_ipv6_dst?: string;
  /** The tunnel key (GRE key, VXLAN VNI), as OVS prints it in hex. */
  tun_id?: number;
  /** true for `+flag`, false for `-flag`. */
  ct_state?: Partial<Record<CtStateFlag, boolean>>;
  ct_zone?: number;
  ct_mark?: number;
  /** TCP flag bits: true for `+flag`, false for `-flag` (`tcp_flags=+syn-ack`). Needs protocol tcp. */
  tcp_flags?: Partial<Record<TcpFlag, boolean>>;
  /** Whole-register matches (`reg12=0x5`): ovslb's slot and hand-off registers. */
  reg12?: number;
  reg13?: number;
}

/** TCP flags in the order OVS prints them. */
export const TCP_FLAGS = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"] as const;
export type TcpFlag = (typeof TCP_FLAGS)[number];

/** nd_tll: the target link-layer address option of a neighbour advertisement (what an ND responder answers with). */
export type MacField = "eth_src" | "eth_dst" | "arp_sha" | "arp_tha" | "nd_tll";
export type Ipv4Field = "ip_src" | "ip_dst" | "arp_spa" | "arp_tpa" | "tun_src" | "tun_dst";
export type Ipv6Field = "ipv6_src" | "ipv6_dst" | "tun_ipv6_src" | "tun_ipv6_dst";
/** icmpv6_type, nd_reserved (the advertisement's R/S/O flags and reserved bits) and nd_options_type make an ND responder; OVS sets the last two only on the userspace datapath. */
export type IntField =
  "arp_op" | "tcp_src" | "tcp_dst" | "udp_src" | "udp_dst" | "tun_id" | "reg12" | "reg13" | "icmpv6_type" | "nd_reserved" | "nd_options_type";

/** Fields `move` may copy, whole: enough for an ARP or ND responder and address swaps. */
export type MoveField =
  | "NXM_OF_ETH_SRC"
  | "NXM_OF_ETH_DST"
  | "NXM_NX_ARP_SHA"
  | "NXM_NX_ARP_THA"
  | "NXM_OF_ARP_SPA"
  | "NXM_OF_ARP_TPA"
  | "NXM_OF_IP_SRC"
  | "NXM_OF_IP_DST"
  | "NXM_NX_IPV6_SRC"
  | "NXM_NX_IPV6_DST"
  | "NXM_NX_TUN_ID"
  | "NXM_NX_TUN_IPV4_DST";

/**
 * `ct(nat)`: `existing` re-applies the NAT recorded for the connection (the
 * un-DNAT of replies); `src`/`dst` set up a translation when committing.
 */
export type CtNat = { kind: "existing" } | { kind: "src" | "dst"; /** IPv4 or IPv6 */ ip: string; port?: number };

/**
 * The actions ovslb writes. `load` and `mod_dl_dst` are left out on purpose:
 * OVS prints them back as `set_field`, so a flow written with them would never
 * compare equal to its own dump.
 */
export type Action =
  | { type: "output"; port: number }
  /** Out the port the packet came in on (one-legged forwarding; `output:` to it is dropped). */
  | { type: "in_port" }
  | { type: "set_field"; field: MacField | Ipv4Field | Ipv6Field; value: string }
  | { type: "set_field"; field: IntField; value: number }
  /** Whole fields of one width, or `srcBits` [start, end] of src into the whole of dst. */
  | { type: "move"; src: MoveField; dst: MoveField; srcBits?: readonly [number, number] }
  /** A hash of `fields` (multipath's own field sets) modulo `links`, into bits [0, bits) of a register. */
  | { type: "multipath"; fields: MultipathFields; basis: number; links: number; dst: "NXM_NX_REG12"; bits: number }
  | { type: "ct"; commit?: boolean; table?: number; zone?: number; nat?: CtNat; mark?: number }
  | { type: "group"; groupId: number }
  | { type: "resubmit"; table: number }
  /** Must be the only action. */
  | { type: "drop" }
  /** Only in dumps: an action ovslb does not write, as OVS printed it. Never rendered. */
  | { type: "other"; text: string };

export interface Flow {
  table: number;
  priority: number;
  /** Names the owning resource: ovslb changes only flows carrying its owner's cookie. */
  cookie: bigint;
  match: Match;
  actions: readonly Action[];
}

/** The field sets multipath hashes (ovs-actions(7)). */
export type MultipathFields = "eth_src" | "symmetric_l4" | "symmetric_l3l4" | "symmetric_l3l4+udp" | "nw_src" | "nw_dst" | "symmetric_l3";

/** Fields a select group may hash, in the order OVS prints them. */
export const HASH_FIELDS = [
  "in_port",
  "eth_src",
  "eth_dst",
  "eth_type",
  "vlan_vid",
  "ip_src",
  "ip_dst",
  "ipv6_src",
  "ipv6_dst",
  "nw_proto",
  "tcp_src",
  "tcp_dst",
  "udp_src",
  "udp_dst",
  "sctp_src",
  "sctp_dst",
] as const;
export type HashField = (typeof HASH_FIELDS)[number];

export type GroupType = "select" | "all" | "indirect" | "ff";

export interface Bucket {
  bucketId: number;
  /** Liveness: the bucket is skipped while this port is down (ff groups require it or watchGroup). */
  watchPort?: number;
  /** Liveness: the bucket is skipped while this group has no live bucket. */
  watchGroup?: number;
  actions: readonly Action[];
}

/** Select buckets always carry a weight: inserted without one, a bucket gets 0 and is never chosen. */
export interface SelectBucket extends Bucket {
  weight: number;
}

/**
 * Select groups always use `selection_method=hash` with explicit fields: with
 * no method OVS picks dp_hash, which remaps most flows when buckets change.
 */
export type Group =
  | { groupId: number; type: "select"; selectionMethod: "hash"; fields: readonly HashField[]; buckets: readonly SelectBucket[] }
  | { groupId: number; type: "all" | "indirect" | "ff"; buckets: readonly Bucket[] };

/** A number N inserts just after bucket N (checked on OVS 3.1; its man page says before). */
export type InsertPosition = "first" | "last" | number;

/** One line of an OpenFlow bundle: a flow mod or a group mod. */
export type Modification =
  | { op: "add-flow"; flow: Flow }
  /** modify_strict, only if the flow carries flow.cookie; never creates a flow. */
  | { op: "modify-flow"; flow: Flow }
  /** delete_strict of the flow with exactly this table, priority and match, only if it carries `cookie`. */
  | { op: "delete-flow"; table: number; priority: number; match: Match; cookie: bigint }
  /** Non-strict delete of every flow whose cookie matches cookie/mask (optionally in one table). */
  | { op: "delete-flows"; cookie: bigint; mask: bigint; table?: number }
  | { op: "add-group"; group: Group }
  /** Replaces type, selection and all buckets. */
  | { op: "modify-group"; group: Group }
  /** Also deletes every flow that outputs to the group (OpenFlow semantics). */
  | { op: "delete-group"; groupId: number }
  /** Select groups: each bucket with its own id and an explicit weight. */
  | { op: "insert-buckets"; groupId: number; commandBucketId: InsertPosition; buckets: readonly SelectBucket[] }
  | { op: "remove-buckets"; groupId: number; commandBucketId: "all" | number };

/**
 * A match in OVS's text form: field name -> printed value, plus `protocol`
 * for the bare keyword. Only the rendered form of desired flows uses it.
 */
export type MatchText = Readonly<Record<string, string>>;

/** A flow in the text form OVS prints it (render.ts makes it from a Flow): what flows are compared by. */
export interface FlowEntry {
  cookie: bigint;
  table: number;
  priority: number;
  match: MatchText;
  /** Each action's text as OVS prints it. */
  actions: readonly string[];
}

/**
 * A flow as dump-flows prints it, parsed into the model render.ts renders.
 * Match fields and actions ovslb does not write keep their printed text
 * (`otherMatch`, actions of type "other"): they still identify the flow and
 * compare exactly, but can never be rendered.
 */
export interface DumpedFlow extends Flow {
  otherMatch: readonly string[];
  nPackets: bigint;
  nBytes: bigint;
}

export interface BucketEntry {
  bucketId: number;
  /** OVS omits the default (1 in select groups, 0 elsewhere); parse fills it in. */
  weight: number;
  watchPort?: number;
  watchGroup?: number;
  actions: readonly Action[];
}

/** A group as dump-groups prints it, parsed. Foreign groups may use methods and fields ovslb never writes. */
export interface GroupEntry {
  groupId: number;
  type: GroupType;
  selectionMethod?: string;
  selectionMethodParam?: bigint;
  /** Hash fields as printed, in OVS's order (`ip_src=255.255.255.0` for a masked one). */
  fields: readonly string[];
  buckets: readonly BucketEntry[];
}
