import { flowPresent } from "../../engine/flows";
import type { BridgeIntent, ObservedBridge } from "../../engine/plan";
import { bfdColumn, type WantedTunnelPort } from "../../engine/gre-port";
import { PEER_KEY, ROLE_KEY } from "../../ovsdb";
import { MAX_CT_ZONE, bfdOfportRequest, derivedId, interfaceName, ownerCookie, tunnelOfportRequest } from "../../model/ids";
import type { DsrBackend, DsrHypervisorFlowsInputs, DsrVip } from "../../model/inputs.generated";
import { checkConnection, type CheckFailure } from "../../model/validate";
import type { Defaulted } from "../../model/defaulted";
import { bucketMac, flowKey, ipv4Number, type ConntrackFlush, type DumpedFlow, type Flow } from "../../openflow";

/**
 * DsrHypervisorFlows as pure data. On one bridge, with conntrack zone Z:
 *
 * table 0  request  proto,dl_dst=MAC,nw_dst=VIP,tp_dst=VPORT  -> ct(commit,table=D,zone=Z,nat(dst=B:P))
 * table D  deliver  ct_zone=Z,proto,nw_dst=B,tp_dst=P          -> eth_dst=MAC(B),output:OFPORT
 * table 0  reply    ct_state=-trk,proto,in_port=OFPORT,nw_src=B,tp_src=P -> ct(table=T,zone=Z,nat)
 * table T  forward  ct_zone=Z -> resubmit(,0)
 *
 * A request goes to the backend conntrack translated it to, which is the
 * flow's own unless the 5-tuple is a connection conntrack already holds: a
 * client port reused while the entry of a connection that broke elsewhere
 * lingers (a userspace entry lives a day). Sent to the flow's port with
 * another backend's address, it would be lost, and so would every retry.
 * A backend's entries are flushed when it leaves, so none pins a new
 * connection to a backend that is gone.
 *
 * The reply flow sends only the backend's service port through conntrack, so
 * connections the backend opens itself (ephemeral ports) never meet it. In
 * table T every packet of the zone goes back to table 0: `nat` has already
 * un-DNATed replies of VIP connections (source = VIP again) and left the rest
 * alone, and -trk keeps the reply flow from matching a second time. Table 0
 * then does whatever the bridge does with other traffic (its own NORMAL
 * flow), so ovslb never needs to know how the bridge forwards.
 */

type Protocol = NonNullable<DsrVip["protocol"]>;

/** A VIP with its protocol given and its backends' MACs in lower case (OVS prints them so). */
export type DefaultedDsrVip = Defaulted<DsrVip, "protocol">;
/** DsrHypervisorFlows inputs as withDefaults returns them: the only form the plans take. */
export type DsrDefaulted = Omit<Defaulted<DsrHypervisorFlowsInputs, "mode">, "vips" | "gre"> & {
  vips: DefaultedDsrVip[];
  gre?: Defaulted<NonNullable<DsrHypervisorFlowsInputs["gre"]>, "port">;
};
type Inputs = DsrDefaulted;

export const KIND = "DsrHypervisorFlows";
/** Above the bridge's own flows (its NORMAL is priority 0), below anything an operator pins at the top. */
export const REQUEST_PRIORITY = 1000;
export const REPLY_PRIORITY = 1000;
export const FORWARD_PRIORITY = 1000;
/** gre mode: below the request flows, so only what they do not take is dropped. */
export const GRE_DROP_PRIORITY = 900;
export const ENTRY_TABLE = 0;
/** Where replies come back after conntrack; away from the low tables other pipelines use. */
export const UNNAT_TABLE = 60;
/** Where requests come after conntrack's DNAT, to be delivered to the backend it chose. */
export const DELIVER_TABLE = 62;
export const DELIVER_PRIORITY = 1000;

/**
 * gre.secondChance, on the hypervisor (with zone Z, GRE port G):
 *
 * table 0   from a gateway: G,tun_src=GW,dl_dst=B,VIP          -> ct(table=61,zone=Z,nat)
 * table 0   handed on:      G,tun_src=PEER,VIP                  -> reg13=1, ct(table=61,zone=Z,nat)
 * table 61  nw_dst=B:BP (conntrack knows it and DNATed it)     -> eth_dst=B, output:B        (300)
 * table 61  reg13=1 (handed on, not established)                -> drop: never handed on again (250)
 * table 61  +new, SYN (or any UDP), dl_dst=B, VIP               -> ct(commit,nat(dst=B:BP)), output:B (200)
 * table 61  +new, tun_id=0 (no previous owner), dl_dst=B, VIP   -> the same commit (190)
 * table 61  +new, not a SYN, VIP                                -> tun_dst=tun_id, tun_id=0, back out G (180)
 *
 * A packet of a connection this hypervisor does not know, that is not a
 * SYN, goes uncommitted to the hypervisor the key names (the slot's previous
 * owner), which serves it from its own conntrack or drops it. Userspace
 * conntrack marks such a mid-stream packet +new, not +inv.
 *
 * A packet of a connection conntrack knows goes to its backend whatever its
 * state, +inv included, as it would reach a host with no load balancer in
 * front: the client's reset after a challenge ACK (a new connection from
 * the client port of one the backend still holds) is out of window for the
 * new entry, and dropping it would leave the stale socket, and every retry
 * of the new connection, stuck.
 */
export const SECOND_CHANCE_TABLE = 61;
export const HANDED_ON_PRIORITY = REQUEST_PRIORITY + 1;
export const KNOWN_PRIORITY = 300;
export const HANDED_DROP_PRIORITY = 250;
export const SYN_PRIORITY = 200;
export const NO_CHANCE_PRIORITY = 190;
export const HAND_ON_PRIORITY = 180;

/** The resource id: its identity (host, bridge, name). */
export const dsrId = (i: Pick<Inputs, "host" | "bridge" | "name">) => `dsr-hypervisor-flows/${i.host.connection.host}/${i.bridge}/${i.name}`;
export const cookieOf = (id: string) => ownerCookie(KIND, id);

/** The zone to use when none is given: derived from the resource id, past zones others use. */
export const derivedZone = (id: string, taken: ReadonlySet<number>) => derivedId([KIND, id], MAX_CT_ZONE, (z) => taken.has(z));

export const vipKey = (v: DefaultedDsrVip) => `${v.protocol}:${v.address}:${v.port}`;
const backendKey = (b: Pick<DsrBackend, "address" | "port">) => `${b.address}:${b.port}`;

/** The GRE port's name when gre.port is not given. */
export const DEFAULT_GRE_PORT = "ovslb-gre";

export function withDefaults(inputs: DsrHypervisorFlowsInputs): Inputs {
  const { gre, ...rest } = inputs;
  return {
    ...rest,
    mode: inputs.mode ?? "mac",
    ...(gre ? { gre: { ...gre, port: gre.port ?? DEFAULT_GRE_PORT } } : {}),
    // OVS prints MACs in lower case: so must the inputs, or a refresh shows a change.
    vips: inputs.vips.map((v) => ({
      ...v,
      protocol: v.protocol ?? "tcp",
      backends: v.backends.map((b) => ({ ...b, mac: b.mac.toLowerCase() })),
    })),
  };
}

/** Rules across VIPs and backends that the schema cannot say. */
export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [...checkConnection(inputs.host.connection, "host.connection"), ...checkGre(inputs)];
  const vips = new Map<string, number>();
  const vipAddresses = new Set(inputs.vips.map((v) => v.address));
  // One backend address is one VM: it has one MAC and one port on the bridge, whichever VIPs it serves.
  const byAddress = new Map<string, { mac: string; bridgePort: string; at: string }>();
  const byMac = new Map<string, { address: string; at: string }>();

  inputs.vips.forEach((vip, i) => {
    const at = `vips[${i}]`;
    const first = vips.get(vipKey(vip));
    if (first !== undefined) {
      failures.push({ property: at, reason: `duplicates vips[${first}]: the same address, port and protocol` });
    } else vips.set(vipKey(vip), i);

    const backends = new Map<string, number>();
    const macs = new Map<string, number>();
    vip.backends.forEach((b, k) => {
      const bat = `${at}.backends[${k}]`;
      const mac = b.mac;
      const same = backends.get(backendKey(b));
      if (same !== undefined) {
        failures.push({ property: bat, reason: `duplicates ${at}.backends[${same}]: the same address and port` });
        return;
      }
      backends.set(backendKey(b), k);
      const sameMac = macs.get(mac);
      if (sameMac !== undefined) {
        failures.push({
          property: `${bat}.mac`,
          reason: `is also the MAC of ${at}.backends[${sameMac}]: in mac mode a VIP's frames are told apart by MAC, so each backend of a VIP needs its own`,
        });
      } else macs.set(mac, k);
      if (b.address === vip.address) {
        failures.push({ property: `${bat}.address`, reason: "equals the VIP's address: a backend must not be its own VIP" });
      } else if (vipAddresses.has(b.address)) {
        failures.push({ property: `${bat}.address`, reason: "is the address of another VIP here: a backend must not be a VIP" });
      }
      const seen = byAddress.get(b.address);
      if (!seen) byAddress.set(b.address, { mac, bridgePort: b.bridgePort, at: bat });
      else if (seen.mac !== mac) {
        failures.push({ property: `${bat}.mac`, reason: `differs from the MAC given for the same address at ${seen.at}` });
      } else if (seen.bridgePort !== b.bridgePort) {
        failures.push({ property: `${bat}.bridgePort`, reason: `differs from the bridge port given for the same address at ${seen.at}` });
      }
      const owner = byMac.get(mac);
      if (!owner) byMac.set(mac, { address: b.address, at: bat });
      else if (owner.address !== b.address) {
        failures.push({ property: `${bat}.mac`, reason: `is also the MAC of another address at ${owner.at}` });
      }
    });
  });
  return failures;
}

/** The GRE port's interface options: it takes tunnels from any remote, with any key. */
export const GRE_OPTIONS: Readonly<Record<string, string>> = { remote_ip: "flow", key: "flow" };

/** The GRE port's ofport_request, derived from the resource. */
export const greOfportRequest = (id: string) => tunnelOfportRequest([KIND, id, "gre-port"]);

/** gre mode: the flow-based GRE port as engine/tunnel-ports.ts ensures it (no role: it is removed by name; its bfd column is not ours). */
export const grePort = (id: string, name: string): WantedTunnelPort => ({
  name,
  options: GRE_OPTIONS,
  bfd: "unmanaged",
  ofportRequest: greOfportRequest(id),
  externalIds: {},
  refusal: { property: "gre.port", hint: "a bridge has one flow-based GRE port: give the services of one bridge to one DsrHypervisorFlows" },
});

/** Port role of the BFD liveness ports (external_ids ovslb:role). */
export const BFD_PEER_ROLE = "bfd-peer";

/**
 * gre.bfd: one fixed GRE port per peer (a gateway of one load balancer),
 * remote_ip the gateway, key the load balancer's BFD key, BFD on. It carries
 * only BFD: data keeps its own key and arrives on the flow-based port.
 */
export function bfdPorts(id: string, inputs: Inputs): (WantedTunnelPort & { peer: string })[] {
  const bfd = inputs.gre?.bfd;
  if (!bfd) return [];
  return bfd.peers.map((p) => ({
    peer: `${p.address}/${p.key}`,
    name: interfaceName("bfd-", `${id}/${p.address}/${p.key}`),
    options: { remote_ip: p.address, key: String(p.key) },
    bfd: bfdColumn(bfd.timers),
    ofportRequest: bfdOfportRequest([KIND, id, "bfd", p.address, String(p.key)]),
    // Never on a wire: NORMAL floods nothing into it.
    tag: 4095,
    externalIds: { [ROLE_KEY]: BFD_PEER_ROLE, [PEER_KEY]: `${p.address}/${p.key}` },
  }));
}

/** gre settings belong to gre mode, and each allowed source is a prefix with no host bits set, given once. */
function checkGre(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  if (inputs.mode === "ipip") {
    failures.push({
      property: "mode",
      reason: "ipip cannot be received by OVS (it has no IPIP port type, and its decap action strips only Ethernet, NSH and MPLS); have the load balancer send GRE and use gre",
    });
  }
  if (inputs.mode === "gre" && !inputs.gre) {
    failures.push({ property: "gre", reason: "is required in gre mode: give gre.allowedSources, the load balancers whose GRE may be delivered" });
  }
  if (inputs.mode !== "gre" && inputs.gre) failures.push({ property: "gre", reason: "is only used in gre mode" });
  if (inputs.gre?.secondChance && inputs.gre.key !== undefined) {
    failures.push({ property: "gre.key", reason: "must not be set with gre.secondChance: the gateways' GRE key then carries the previous owner's hypervisor, not a fixed key" });
  }
  const handOn = new Map<string, number>();
  (inputs.gre?.secondChance?.peers ?? []).forEach((peer, i) => {
    if (handOn.has(peer)) failures.push({ property: `gre.secondChance.peers[${i}]`, reason: `is also gre.secondChance.peers[${handOn.get(peer)}]` });
    else handOn.set(peer, i);
  });
  const peers = new Map<string, number>();
  (inputs.gre?.bfd?.peers ?? []).forEach((p, i) => {
    const key = `${p.address}/${p.key}`;
    if (peers.has(key)) failures.push({ property: `gre.bfd.peers[${i}]`, reason: `is also gre.bfd.peers[${peers.get(key)}]: one session per gateway and key` });
    else peers.set(key, i);
    if (inputs.gre?.key !== undefined && p.key === inputs.gre.key) {
      failures.push({ property: `gre.bfd.peers[${i}].key`, reason: "equals gre.key: the BFD port would take the data the flow-based port must receive" });
    }
  });
  const seen = new Map<string, number>();
  (inputs.gre?.allowedSources ?? []).forEach((prefix, i) => {
    const at = `gre.allowedSources[${i}]`;
    const [address, length] = prefix.split("/");
    const bits = length === undefined ? 32 : Number(length);
    const host = bits === 32 ? 0 : ipv4Number(address) % 2 ** (32 - bits);
    if (bits === 0) failures.push({ property: at, reason: "is /0, every source: list the load balancers' own addresses or prefixes (GRE from anywhere else is dropped)" });
    else if (host !== 0) failures.push({ property: at, reason: `has host bits set: write the prefix as its network address (/${bits})` });
    const key = bits === 32 ? address : prefix;
    if (seen.has(key)) failures.push({ property: at, reason: `is also gre.allowedSources[${seen.get(key)}]` });
    else seen.set(key, i);
  });
  return failures;
}

/** What is fixed when flows are planned: the owner's cookie, the zone, and each bridge port's ofport on the host. */
export interface Placement {
  cookie: bigint;
  zone: number;
  ofports: ReadonlyMap<string, number>;
  /** gre mode: the GRE port's ofport. */
  greOfport?: number;
  /** gre.bfd: the BFD peer ports' ofports. */
  bfdOfports?: readonly number[];
}

function ofportOf(p: Placement, b: DsrBackend, at: string): number {
  const ofport = p.ofports.get(b.bridgePort);
  if (ofport === undefined) throw new Error(`${at}.bridgePort: port ${b.bridgePort} has no ofport on the bridge`);
  return ofport;
}

/** A request's DNAT: the connection is committed in the zone and translated to the backend (or kept on the one conntrack already holds it for), then delivered from DELIVER_TABLE. */
function commitTo(b: DsrBackend, p: Placement): Flow["actions"] {
  return [{ type: "ct", commit: true, table: DELIVER_TABLE, zone: p.zone, nat: { kind: "dst", ip: b.address, port: b.port } }];
}

/** A backend's delivery: whatever conntrack translated to it goes to its MAC and port. */
function deliverFlow(protocol: Protocol, b: DsrBackend, p: Placement, at: string): Flow {
  return {
    table: DELIVER_TABLE,
    priority: DELIVER_PRIORITY,
    cookie: p.cookie,
    match: { ct_zone: p.zone, protocol, nw_dst: b.address, tp_dst: b.port },
    actions: [
      { type: "set_field", field: "eth_dst", value: b.mac },
      { type: "output", port: ofportOf(p, b, at) },
    ],
  };
}

function requestFlow(vip: DefaultedDsrVip, b: DsrBackend, p: Placement): Flow {
  const protocol = vip.protocol;
  return {
    table: ENTRY_TABLE,
    priority: REQUEST_PRIORITY,
    cookie: p.cookie,
    match: { protocol, dl_dst: b.mac, nw_dst: vip.address, tp_dst: vip.port },
    actions: commitTo(b, p),
  };
}

/**
 * gre mode: a request decapsulated by the GRE port, from one allowed source
 * (and with the key, if one is given). A VIP with one backend here takes
 * whatever inner MAC the load balancer used; with several, the inner frame
 * names the backend by its MAC (as ovslb's gateways address it).
 */
function greRequestFlow(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, source: string, p: Placement): Flow {
  const protocol = vip.protocol;
  const key = inputs.gre?.key;
  return {
    table: ENTRY_TABLE,
    priority: REQUEST_PRIORITY,
    cookie: p.cookie,
    match: {
      protocol,
      in_port: greOfportOf(p),
      tun_src: source,
      ...(key === undefined ? {} : { tun_id: key }),
      ...(vip.backends.length > 1 ? { dl_dst: b.mac } : {}),
      nw_dst: vip.address,
      tp_dst: vip.port,
    },
    actions: commitTo(b, p),
  };
}

/** gre mode: whatever else comes out of the GRE port (another source, another inner destination) is dropped. */
function greDropFlow(p: Placement): Flow {
  return { table: ENTRY_TABLE, priority: GRE_DROP_PRIORITY, cookie: p.cookie, match: { in_port: greOfportOf(p) }, actions: [{ type: "drop" }] };
}

function greOfportOf(p: Placement): number {
  if (p.greOfport === undefined) {
    throw new Error("gre.port: OVS gave the GRE port no OpenFlow port number (a host's datapath takes one flow-based GRE port: is another bridge or owner holding one?)");
  }
  return p.greOfport;
}

function replyFlow(protocol: Protocol, b: DsrBackend, p: Placement, at: string): Flow {
  return {
    table: ENTRY_TABLE,
    priority: REPLY_PRIORITY,
    cookie: p.cookie,
    match: { ct_state: { trk: false }, protocol, in_port: ofportOf(p, b, at), nw_src: b.address, tp_src: b.port },
    actions: [{ type: "ct", table: UNNAT_TABLE, zone: p.zone, nat: { kind: "existing" } }],
  };
}

function forwardFlow(p: Placement): Flow {
  return {
    table: UNNAT_TABLE,
    priority: FORWARD_PRIORITY,
    cookie: p.cookie,
    match: { ct_zone: p.zone },
    actions: [{ type: "resubmit", table: ENTRY_TABLE }],
  };
}

/**
 * The flows the inputs amount to: one request flow per (VIP, backend), one
 * reply flow per distinct backend service (however many VIPs it serves: the
 * un-NAT is per connection), and the zone's forward flow.
 */
export function desiredFlows(inputs: Inputs, p: Placement): Flow[] {
  // Keyed: a VIP-wide flow or a backend's reply flow is wanted once, however many (VIP, backend)s need it.
  const requests = new Map<string, Flow>();
  const backendWide = new Map<string, Flow>();
  inputs.vips.forEach((vip, i) => {
    vip.backends.forEach((b, k) => {
      const flows = backendFlows(inputs, vip, b, p, `vips[${i}].backends[${k}]`);
      for (const f of flows.requests) requests.set(flowKey(f), f);
      for (const f of flows.backend) backendWide.set(flowKey(f), f);
    });
  });
  return [...requests.values(), ...backendWide.values(), ...zoneFlows(inputs, p), ...bfdDropFlows(p)];
}

/**
 * One (VIP, backend)'s request flows (one per allowed source in gre mode,
 * the second-chance pipeline with gre.secondChance), and its backend's own
 * flows, wanted once whichever VIPs it serves: the reply flow, and out of
 * second chance (whose table 61 delivers by conntrack itself) the delivery.
 */
function backendFlows(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, p: Placement, at: string) {
  const protocol = vip.protocol;
  const reply = replyFlow(protocol, b, p, at);
  if (inputs.gre?.secondChance) return { requests: secondChanceFlows(inputs, vip, b, p, at), backend: [reply] };
  const requests = inputs.mode === "gre" ? inputs.gre!.allowedSources.map((source) => greRequestFlow(inputs, vip, b, source, p)) : [requestFlow(vip, b, p)];
  return { requests, backend: [deliverFlow(protocol, b, p, at), reply] };
}

/** The flows the whole zone needs: the un-NAT forward flow, in gre mode the GRE port's drop flow, and with second chance the drop of handed-on packets nobody knows. */
function zoneFlows(inputs: Inputs, p: Placement): Flow[] {
  const handedDrop: Flow = { table: SECOND_CHANCE_TABLE, priority: HANDED_DROP_PRIORITY, cookie: p.cookie, match: { ct_zone: p.zone, reg13: 1 }, actions: [{ type: "drop" }] };
  return [forwardFlow(p), ...(inputs.mode === "gre" ? [greDropFlow(p)] : []), ...(inputs.gre?.secondChance ? [handedDrop] : [])];
}

/** The second-chance pipeline's flows for one (VIP, backend); the VIP-wide ones repeat for each backend and are kept once. */
function secondChanceFlows(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, p: Placement, at: string): Flow[] {
  const protocol = vip.protocol;
  const mac = b.mac;
  const vipMatch = { protocol, nw_dst: vip.address, tp_dst: vip.port };
  const lookup = { type: "ct", table: SECOND_CHANCE_TABLE, zone: p.zone, nat: { kind: "existing" } } as const;
  const commit = { type: "ct", commit: true, zone: p.zone, nat: { kind: "dst", ip: b.address, port: b.port } } as const;
  const deliverTo = { type: "output", port: ofportOf(p, b, at) } as const;
  const fresh = { trk: true, new: true };
  const flow = (table: number, priority: number, match: Flow["match"], actions: Flow["actions"]): Flow => ({ table, priority, cookie: p.cookie, match, actions });
  const flows: Flow[] = [
    ...inputs.gre!.allowedSources.map((source) => flow(ENTRY_TABLE, REQUEST_PRIORITY, { ...vipMatch, in_port: greOfportOf(p), tun_src: source, dl_dst: mac }, [lookup])),
    ...inputs.gre!.secondChance!.peers.map((peer) =>
      flow(ENTRY_TABLE, HANDED_ON_PRIORITY, { ...vipMatch, in_port: greOfportOf(p), tun_src: peer }, [{ type: "set_field", field: "reg13", value: 1 }, lookup]),
    ),
    flow(SECOND_CHANCE_TABLE, KNOWN_PRIORITY, { ct_state: { trk: true }, ct_zone: p.zone, protocol, nw_dst: b.address, tp_dst: b.port }, [
      { type: "set_field", field: "eth_dst", value: mac },
      deliverTo,
    ]),
    flow(SECOND_CHANCE_TABLE, SYN_PRIORITY, { ct_state: fresh, ct_zone: p.zone, ...vipMatch, dl_dst: mac, ...(protocol === "tcp" ? { tcp_flags: { syn: true, ack: false } } : {}) }, [commit, deliverTo]),
  ];
  if (protocol === "tcp") {
    flows.push(
      // Mid-stream with no previous owner to ask: commit, so the backend's reset leaves from the VIP.
      flow(SECOND_CHANCE_TABLE, NO_CHANCE_PRIORITY, { ct_state: fresh, ct_zone: p.zone, ...vipMatch, tun_id: 0, dl_dst: mac }, [commit, deliverTo]),
      flow(SECOND_CHANCE_TABLE, HAND_ON_PRIORITY, { ct_state: fresh, ct_zone: p.zone, ...vipMatch }, [
        { type: "move", src: "NXM_NX_TUN_ID", srcBits: [0, 31], dst: "NXM_NX_TUN_IPV4_DST" },
        { type: "set_field", field: "tun_id", value: 0 },
        { type: "set_field", field: "tun_src", value: "0.0.0.0" },
        { type: "in_port" },
      ]),
    );
  }
  return flows;
}

/**
 * gre.bfd: a BFD port carries only BFD. What else comes out of it (BFD of a
 * session whose BFD was turned off, which OVS then hands to the flow table)
 * is dropped, or NORMAL would flood it into the other BFD ports and upset
 * the gateways' sessions there.
 */
export function bfdDropFlows(p: Pick<Placement, "cookie" | "bfdOfports">): Flow[] {
  return (p.bfdOfports ?? []).map((ofport) => ({ table: ENTRY_TABLE, priority: GRE_DROP_PRIORITY, cookie: p.cookie, match: { in_port: ofport }, actions: [{ type: "drop" }] }));
}

/**
 * The inputs that the owned flows actually on the host amount to, so a
 * refresh shows drift. A (VIP, backend) counts only when every flow it needs
 * is there and right (its request flow, its backend's delivery and reply
 * flows, the zone's forward flow); a VIP with no backend left is missing.
 * Declared VIPs and backends keep their declared order; ones found but not
 * declared follow.
 */
export function actualInputs(inputs: Inputs, owned: readonly DumpedFlow[], p: Placement & { portNames: ReadonlyMap<number, string> }): Inputs {
  const present = flowPresent(owned);
  // gre mode with the GRE port gone: nothing can arrive, whatever flows are left.
  if (inputs.mode === "gre" && p.greOfport === undefined) return { ...inputs, vips: [] };
  const candidates = new Map<string, { vip: DefaultedDsrVip; backends: Map<string, DsrBackend> }>();
  // The flows that commit a backend's connections: the request flows, or with second chance the SYN flows (which deliver too).
  const sc = !!inputs.gre?.secondChance;
  const [commitTable, commitPriority] = sc ? [SECOND_CHANCE_TABLE, SYN_PRIORITY] : [ENTRY_TABLE, REQUEST_PRIORITY];
  const deliveries = new Map(owned.filter((f) => f.table === DELIVER_TABLE && f.match.ct_zone === p.zone).map((f) => [`${f.match.protocol}:${f.match.nw_dst}:${f.match.tp_dst}`, f]));
  for (const f of owned) {
    if (f.table !== commitTable || f.priority !== commitPriority) continue;
    const ct = f.actions.find((a) => a.type === "ct");
    const { protocol, nw_dst, tp_dst } = f.match;
    if (ct?.type !== "ct" || !ct.commit || ct.zone !== p.zone || ct.nat?.kind !== "dst" || ct.nat.port === undefined) continue;
    const delivery = sc ? f : deliveries.get(`${protocol}:${ct.nat.ip}:${ct.nat.port}`);
    const out = delivery?.actions.find((a) => a.type === "output");
    if (out?.type !== "output" || !nw_dst || tp_dst === undefined) continue;
    if (protocol !== "tcp" && protocol !== "udp" && protocol !== "sctp") continue;
    const bridgePort = p.portNames.get(out.port);
    if (bridgePort === undefined) continue; // delivers to a port that is gone: not a working backend
    const mac = f.match.dl_dst ?? bucketMac(delivery!.actions);
    if (!mac) continue;
    const vip: DefaultedDsrVip = { address: nw_dst, port: tp_dst, protocol, backends: [] };
    const backend: DsrBackend = { address: ct.nat.ip, port: ct.nat.port, mac, bridgePort };
    const entry = candidates.get(vipKey(vip)) ?? { vip, backends: new Map() };
    entry.backends.set(JSON.stringify(backend), backend);
    candidates.set(vipKey(vip), entry);
  }
  // A (VIP, backend) counts only when every flow it needs is there and right.
  const found: Array<{ vip: DefaultedDsrVip; backend: DsrBackend }> = [];
  for (const { vip, backends } of candidates.values()) {
    const whole = { ...vip, backends: [...backends.values()] };
    for (const backend of whole.backends) {
      const flows = backendFlows(inputs, whole, backend, p, "read");
      if ([...flows.requests, ...flows.backend, ...zoneFlows(inputs, p)].every(present)) found.push({ vip, backend });
    }
  }

  const vips = new Map<string, DefaultedDsrVip>();
  const declared = new Map<string, DsrBackend[]>(inputs.vips.map((v) => [vipKey(v), v.backends]));
  for (const v of inputs.vips) vips.set(vipKey(v), { ...v, backends: [] });
  for (const { vip } of found) {
    if (!vips.has(vipKey(vip))) vips.set(vipKey(vip), { ...vip, backends: [] });
  }
  const sameBackend = (a: DsrBackend, b: DsrBackend) =>
    a.address === b.address && a.port === b.port && a.mac === b.mac && a.bridgePort === b.bridgePort;
  for (const [key, vip] of vips) {
    const here = found.filter((f) => vipKey(f.vip) === key).map((f) => f.backend);
    const order = declared.get(key) ?? [];
    const known = order.filter((d) => here.some((h) => sameBackend(d, h)));
    const extra = here.filter((h) => !order.some((d) => sameBackend(d, h)));
    vip.backends = [...known, ...extra];
  }
  return { ...inputs, vips: [...vips.values()].filter((v) => v.backends.length > 0) };
}

/** Zones flows use, in a ct action (zone=N) or a match (ct_zone=N). */
export function zonesOf(flows: readonly Pick<Flow, "match" | "actions">[]): Set<number> {
  const zones = new Set<number>();
  for (const f of flows) {
    if (f.match.ct_zone !== undefined) zones.add(f.match.ct_zone);
    for (const a of f.actions) if (a.type === "ct" && a.zone !== undefined) zones.add(a.zone);
  }
  return zones;
}

/** The zone for this apply: the input's, else the recorded one, else derived past the zones others' flows use. */
export function chooseZone(id: string, inputs: Inputs, recorded: number | undefined, others: readonly DumpedFlow[]): number {
  const taken = zonesOf(others);
  if (inputs.zone !== undefined) {
    if (taken.has(inputs.zone)) throw new Error(`zone: conntrack zone ${inputs.zone} is already used by flows ovslb does not own on bridge ${inputs.bridge}`);
    return inputs.zone;
  }
  return recorded ?? derivedZone(id, taken);
}

/** Each backend's bridge port and its ofport on the bridge; refuses a port the bridge does not have. */
export function backendOfports(inputs: Inputs, ports: ReadonlyMap<string, number>): Map<string, number> {
  const ofports = new Map<string, number>();
  inputs.vips.forEach((v, i) =>
    v.backends.forEach((b, k) => {
      const ofport = ports.get(b.bridgePort);
      if (ofport === undefined) {
        throw new Error(`vips[${i}].backends[${k}].bridgePort: bridge ${inputs.bridge} has no port ${b.bridgePort} with an ofport`);
      }
      ofports.set(b.bridgePort, ofport);
    }),
  );
  return ofports;
}

/** What the resource wants on its bridge, with the zone and ofports it settled on. */
export function planIntent(id: string, inputs: Inputs, recordedZone: number | undefined, observed: ObservedBridge) {
  const cookie = cookieOf(id);
  const zone = chooseZone(id, inputs, recordedZone, observed.flows.filter((f) => f.cookie !== cookie));
  const ofports = backendOfports(inputs, observed.ports);
  const greOfport = inputs.gre?.port === undefined ? undefined : observed.ports.get(inputs.gre.port);
  const bfdOfports = bfdPorts(id, inputs).map((b) => observed.ports.get(b.name)).filter((o): o is number => o !== undefined);
  const flows = desiredFlows(inputs, { cookie, zone, ofports, bfdOfports, ...(greOfport === undefined ? {} : { greOfport }) });
  const intent: BridgeIntent = { cookie, flows, groups: [], owner: `DsrHypervisorFlows ${id}` };
  return { intent, zone, ofports, greOfport };
}

const IP_PROTO: Record<Protocol, number> = { tcp: 6, udp: 17, sctp: 132 };

/** The (VIP, backend)s whose connections the flows commit, by zone: what conntrack may hold entries for there. */
function committed(flows: readonly Pick<Flow, "match" | "actions">[]): Map<number, Map<string, ConntrackFlush>> {
  const byZone = new Map<number, Map<string, ConntrackFlush>>();
  for (const f of flows) {
    const { protocol, nw_dst, tp_dst } = f.match;
    for (const a of f.actions) {
      if (a.type !== "ct" || !a.commit || a.zone === undefined || a.nat?.kind !== "dst" || a.nat.port === undefined) continue;
      if (!protocol || !(protocol in IP_PROTO) || !nw_dst || tp_dst === undefined) continue;
      const proto = IP_PROTO[protocol as Protocol];
      const flush: ConntrackFlush = { zone: a.zone, orig: { proto, dst: nw_dst, dport: tp_dst }, reply: { proto, src: a.nat.ip, sport: a.nat.port } };
      const zone = byZone.get(a.zone) ?? new Map<string, ConntrackFlush>();
      zone.set(`${nw_dst}:${tp_dst}/${proto} ${a.nat.ip}:${a.nat.port}`, flush);
      byZone.set(a.zone, zone);
    }
  }
  return byZone;
}

/**
 * The conntrack flushes an apply owes once its flows are in: in each zone,
 * the entries of every (VIP, backend) the flows on the host committed
 * connections to (`before`) and the applied flows (`after`) no longer do.
 * Left, they would pin a new connection from a reused client port to a
 * backend that is gone (OVN's Load_Balancer `ct_flush` does the same). Each
 * flush gives partial tuples (the VIP's, the backend's), which OVS 3.1+
 * matches against every entry.
 */
export function conntrackFlushes(before: readonly Pick<Flow, "match" | "actions">[], after: readonly Pick<Flow, "match" | "actions">[]): ConntrackFlush[] {
  const kept = committed(after);
  const flushes: ConntrackFlush[] = [];
  for (const [zone, pairs] of committed(before)) {
    for (const [key, flush] of pairs) if (!kept.get(zone)?.has(key)) flushes.push(flush);
  }
  return flushes;
}
