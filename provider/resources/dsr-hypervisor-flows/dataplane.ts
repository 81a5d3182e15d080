import type { BridgeIntent, ObservedBridge } from "../../engine/plan";
import type { DsrBackend } from "../../model/inputs.generated";
import { handOnKey } from "../../model/ids";
import { dstAddressOf, flowKey, ipMatch, l4Of, pathMtuErrorMatch, type ConntrackFlush, type Flow } from "../../openflow";
import {
  bfdPorts,
  chooseZone,
  cookieOf,
  type DefaultedDsrVip,
  DELIVER_PRIORITY,
  DELIVER_TABLE,
  ENTRY_TABLE,
  FORWARD_PRIORITY,
  GRE_DROP_PRIORITY,
  HAND_ON_PRIORITY,
  HANDED_DROP_PRIORITY,
  HANDED_ON_PRIORITY,
  KNOWN_PRIORITY,
  NO_CHANCE_PRIORITY,
  PATH_MTU_DROP_PRIORITY,
  PATH_MTU_TABLE,
  type Protocol,
  REPLY_PRIORITY,
  REQUEST_PRIORITY,
  SECOND_CHANCE_TABLE,
  SYN_PRIORITY,
  UNNAT_TABLE,
  type DsrDefaulted,
} from "./ids";

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

type Inputs = DsrDefaulted;

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
    match: { ct_zone: p.zone, ...ipMatch(protocol, "dst", b.address), tp_dst: b.port },
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
    match: { dl_dst: b.mac, ...ipMatch(protocol, "dst", vip.address), tp_dst: vip.port },
    actions: commitTo(b, p),
  };
}

/**
 * gre mode: a request decapsulated by the GRE port, from one allowed source
 * (and with the key, if one is given). A VIP with one backend here takes
 * whatever inner MAC the load balancer used; with several, the inner frame
 * names the backend by its MAC (as ovslb's gateways address it).
 */
/** A tunnel's source in the field of its family: tun_src over an IPv4 underlay, tun_ipv6_src over an IPv6 one. */
const tunnelSource = (source: string) => (source.includes(":") ? { tun_ipv6_src: source } : { tun_src: source });

function greRequestFlow(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, source: string, p: Placement): Flow {
  const protocol = vip.protocol;
  const key = inputs.gre?.key;
  return {
    table: ENTRY_TABLE,
    priority: REQUEST_PRIORITY,
    cookie: p.cookie,
    match: {
      in_port: greOfportOf(p),
      ...tunnelSource(source),
      ...(key === undefined ? {} : { tun_id: key }),
      ...(vip.backends.length > 1 ? { dl_dst: b.mac } : {}),
      ...ipMatch(protocol, "dst", vip.address),
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
    throw new Error(
      "gre.port: OVS gave the GRE port no OpenFlow port number (a host's datapath takes one flow-based GRE port: is another bridge or owner holding one?)",
    );
  }
  return p.greOfport;
}

function replyFlow(protocol: Protocol, b: DsrBackend, p: Placement, at: string): Flow {
  return {
    table: ENTRY_TABLE,
    priority: REPLY_PRIORITY,
    cookie: p.cookie,
    match: { ct_state: { trk: false }, ...ipMatch(protocol, "src", b.address), in_port: ofportOf(p, b, at), tp_src: b.port },
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
export function backendFlows(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, p: Placement, at: string) {
  const protocol = vip.protocol;
  const reply = replyFlow(protocol, b, p, at);
  const pathMtu = inputs.pathMtu ? pathMtuFlows(inputs, vip, b, p, at) : { requests: [], backend: [] };
  if (inputs.gre?.secondChance) return { requests: [...secondChanceFlows(inputs, vip, b, p, at), ...pathMtu.requests], backend: [reply, ...pathMtu.backend] };
  const requests = inputs.mode === "gre" ? inputs.gre!.allowedSources.map((source) => greRequestFlow(inputs, vip, b, source, p)) : [requestFlow(vip, b, p)];
  const delivery = deliverFlow(protocol, b, p, at);
  // fragments: each flow again for the fragments, whose ports OVS reads as 0 (the first's too); conntrack reassembles them.
  // An IPv6 fragment after the first shows OVS no transport protocol (nw_proto is the fragment header's, 44): match ipv6.
  const fragment = (f: Flow): Flow => {
    const { tp_dst: _d, tp_src: _s, ...match } = f.match;
    const v6 = match.ipv6_dst !== undefined || match.ipv6_src !== undefined;
    return { ...f, match: { ...match, ...(v6 ? { protocol: "ipv6" as const } : {}), nw_frag: "yes" } };
  };
  const fragments = vip.fragments ? { requests: requests.map(fragment), backend: [fragment(delivery), fragment(reply)] } : { requests: [], backend: [] };
  return {
    requests: [...requests, ...fragments.requests, ...pathMtu.requests],
    backend: [delivery, reply, ...fragments.backend, ...pathMtu.backend],
  };
}

/**
 * pathMtu, for one (VIP, backend): the VIP address's ICMP "fragmentation
 * needed" errors, as the gateways fan them out (gre: from an allowed source;
 * mac: to a backend's MAC), go through conntrack; the backend's delivery of
 * what conntrack relates to one of its connections (and translated to it).
 */
function pathMtuFlows(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, p: Placement, at: string) {
  const lookup: Flow["actions"] = [{ type: "ct", table: PATH_MTU_TABLE, zone: p.zone, nat: { kind: "existing" } }];
  const match = pathMtuErrorMatch(vip.address);
  const key = inputs.gre?.secondChance ? undefined : inputs.gre?.key;
  const requests: Flow[] =
    inputs.mode === "gre"
      ? inputs.gre!.allowedSources.map((source) => ({
          table: ENTRY_TABLE,
          priority: REQUEST_PRIORITY,
          cookie: p.cookie,
          match: { ...match, in_port: greOfportOf(p), ...tunnelSource(source), ...(key === undefined ? {} : { tun_id: key }) },
          actions: lookup,
        }))
      : [{ table: ENTRY_TABLE, priority: REQUEST_PRIORITY, cookie: p.cookie, match: { ...match, dl_dst: b.mac }, actions: lookup }];
  const deliver: Flow = {
    table: PATH_MTU_TABLE,
    priority: DELIVER_PRIORITY,
    cookie: p.cookie,
    match: { ct_state: { trk: true, rel: true }, ct_zone: p.zone, ...ipMatch("icmp", "dst", b.address) },
    actions: [
      { type: "set_field", field: "eth_dst", value: b.mac },
      { type: "output", port: ofportOf(p, b, at) },
    ],
  };
  return { requests, backend: [deliver] };
}

/** The flows the whole zone needs: the un-NAT forward flow, in gre mode the GRE port's drop flow, and with second chance the drop of handed-on packets nobody knows. */
export function zoneFlows(inputs: Inputs, p: Placement): Flow[] {
  const handedDrop: Flow = {
    table: SECOND_CHANCE_TABLE,
    priority: HANDED_DROP_PRIORITY,
    cookie: p.cookie,
    match: { ct_zone: p.zone, reg13: 1 },
    actions: [{ type: "drop" }],
  };
  // pathMtu: an error conntrack relates to no connection of the zone is dropped here, counted.
  const unrelated: Flow = {
    table: PATH_MTU_TABLE,
    priority: PATH_MTU_DROP_PRIORITY,
    cookie: p.cookie,
    match: { ct_zone: p.zone },
    actions: [{ type: "drop" }],
  };
  return [
    forwardFlow(p),
    ...(inputs.mode === "gre" ? [greDropFlow(p)] : []),
    ...(inputs.gre?.secondChance ? [handedDrop] : []),
    ...(inputs.pathMtu ? [unrelated] : []),
  ];
}

/** The second-chance pipeline's flows for one (VIP, backend); the VIP-wide ones repeat for each backend and are kept once. */
function secondChanceFlows(inputs: Inputs, vip: DefaultedDsrVip, b: DsrBackend, p: Placement, at: string): Flow[] {
  const protocol = vip.protocol;
  const mac = b.mac;
  const vipMatch = { ...ipMatch(protocol, "dst", vip.address), tp_dst: vip.port };
  const lookup = { type: "ct", table: SECOND_CHANCE_TABLE, zone: p.zone, nat: { kind: "existing" } } as const;
  const commit = { type: "ct", commit: true, zone: p.zone, nat: { kind: "dst", ip: b.address, port: b.port } } as const;
  const deliverTo = { type: "output", port: ofportOf(p, b, at) } as const;
  const fresh = { trk: true, new: true };
  const flow = (table: number, priority: number, match: Flow["match"], actions: Flow["actions"]): Flow => ({
    table,
    priority,
    cookie: p.cookie,
    match,
    actions,
  });
  const flows: Flow[] = [
    ...inputs.gre!.allowedSources.map((source) =>
      flow(ENTRY_TABLE, REQUEST_PRIORITY, { ...vipMatch, in_port: greOfportOf(p), ...tunnelSource(source), dl_dst: mac }, [lookup]),
    ),
    ...inputs.gre!.secondChance!.peers.map((peer) =>
      flow(ENTRY_TABLE, HANDED_ON_PRIORITY, { ...vipMatch, in_port: greOfportOf(p), ...tunnelSource(peer) }, [
        { type: "set_field", field: "reg13", value: 1 },
        lookup,
      ]),
    ),
    flow(SECOND_CHANCE_TABLE, KNOWN_PRIORITY, { ct_state: { trk: true }, ct_zone: p.zone, ...ipMatch(protocol, "dst", b.address), tp_dst: b.port }, [
      { type: "set_field", field: "eth_dst", value: mac },
      deliverTo,
    ]),
    flow(
      SECOND_CHANCE_TABLE,
      SYN_PRIORITY,
      { ct_state: fresh, ct_zone: p.zone, ...vipMatch, dl_dst: mac, ...(protocol === "tcp" ? { tcp_flags: { syn: true, ack: false } } : {}) },
      [commit, deliverTo],
    ),
  ];
  if (protocol === "tcp") {
    flows.push(
      // Mid-stream with no previous owner to ask: commit, so the backend's reset leaves from the VIP.
      flow(SECOND_CHANCE_TABLE, NO_CHANCE_PRIORITY, { ct_state: fresh, ct_zone: p.zone, ...vipMatch, tun_id: 0, dl_dst: mac }, [commit, deliverTo]),
      ...handOnFlows(inputs.gre!.secondChance!.peers, (match, actions) =>
        flow(SECOND_CHANCE_TABLE, HAND_ON_PRIORITY, { ct_state: fresh, ct_zone: p.zone, ...vipMatch, ...match }, actions),
      ),
    );
  }
  return flows;
}

/**
 * Handing a packet on to the hypervisor the GRE key names (handOnKey), back
 * out the flow-based GRE port with the key cleared and the source left to
 * the route: over IPv4 the key is the address, moved into tun_dst by one
 * flow; over IPv6 one flow per peer matches its key and sets tun_ipv6_dst (a
 * key of no peer is dropped by the table's miss).
 */
function handOnFlows(peers: readonly string[], flow: (match: Flow["match"], actions: Flow["actions"]) => Flow): Flow[] {
  const send: Flow["actions"] = [{ type: "set_field", field: "tun_id", value: 0 }];
  if (!peers.some((peer) => peer.includes(":"))) {
    return [
      flow({}, [
        { type: "move", src: "NXM_NX_TUN_ID", srcBits: [0, 31], dst: "NXM_NX_TUN_IPV4_DST" },
        ...send,
        { type: "set_field", field: "tun_src", value: "0.0.0.0" },
        { type: "in_port" },
      ]),
    ];
  }
  return peers.map((peer) =>
    flow({ tun_id: handOnKey(peer) }, [
      { type: "set_field", field: "tun_ipv6_dst", value: peer },
      ...send,
      { type: "set_field", field: "tun_ipv6_src", value: "::" },
      { type: "in_port" },
    ]),
  );
}

/**
 * gre.bfd: a BFD port carries only BFD. What else comes out of it (BFD of a
 * session whose BFD was turned off, which OVS then hands to the flow table)
 * is dropped, or NORMAL would flood it into the other BFD ports and upset
 * the gateways' sessions there.
 */
export function bfdDropFlows(p: Pick<Placement, "cookie" | "bfdOfports">): Flow[] {
  return (p.bfdOfports ?? []).map((ofport) => ({
    table: ENTRY_TABLE,
    priority: GRE_DROP_PRIORITY,
    cookie: p.cookie,
    match: { in_port: ofport },
    actions: [{ type: "drop" }],
  }));
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
  const zone = chooseZone(
    id,
    inputs,
    recordedZone,
    observed.flows.filter((f) => f.cookie !== cookie),
  );
  const ofports = backendOfports(inputs, observed.ports);
  const greOfport = inputs.gre?.port === undefined ? undefined : observed.ports.get(inputs.gre.port);
  const bfdOfports = bfdPorts(id, inputs)
    .map((b) => observed.ports.get(b.name))
    .filter((o): o is number => o !== undefined);
  const flows = desiredFlows(inputs, { cookie, zone, ofports, bfdOfports, ...(greOfport === undefined ? {} : { greOfport }) });
  const intent: BridgeIntent = { cookie, flows, groups: [], owner: `DsrHypervisorFlows ${id}` };
  return { intent, zone, ofports, greOfport };
}

const IP_PROTO: Record<Protocol, number> = { tcp: 6, udp: 17, sctp: 132 };

/** The (VIP, backend)s whose connections the flows commit, by zone: what conntrack may hold entries for there. */
function committed(flows: readonly Pick<Flow, "match" | "actions">[]): Map<number, Map<string, ConntrackFlush>> {
  const byZone = new Map<number, Map<string, ConntrackFlush>>();
  for (const f of flows) {
    const { tp_dst } = f.match;
    const protocol = l4Of(f.match.protocol);
    const nw_dst = dstAddressOf(f.match);
    for (const a of f.actions) {
      if (a.type !== "ct" || !a.commit || a.zone === undefined || a.nat?.kind !== "dst" || a.nat.port === undefined) continue;
      if (!protocol || !nw_dst || tp_dst === undefined) continue;
      const proto = IP_PROTO[protocol];
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
