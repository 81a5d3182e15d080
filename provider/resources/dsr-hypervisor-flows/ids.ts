import { bfdColumn, tunnelTypeOf, type TunnelType, type WantedTunnelPort } from "../../engine/gre-port";
import { PEER_KEY, ROLE_KEY } from "../../ovsdb";
import { bfdOfportRequest, derivedId, interfaceName, MAX_CT_ZONE, ownerCookie, tunnelOfportRequest } from "../../model/ids";
import type { DsrBackend, DsrHypervisorFlowsInputs, DsrVip } from "../../model/inputs.generated";
import type { Defaulted } from "../../model/defaulted";
import type { DumpedFlow, Flow } from "../../openflow";

/** DsrHypervisorFlows: its kind, tables and priorities, ids, zones, and the ports it owns (pure). */

export type Protocol = NonNullable<DsrVip["protocol"]>;

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
 * pathMtu: where an ICMP "fragmentation needed" error for a VIP comes after
 * conntrack (`ct(zone=Z,nat)`): related to a connection of the zone (+rel),
 * translated to its backend (outer destination and the inner header both),
 * it is delivered to that backend; anything else is dropped (and counted).
 */
export const PATH_MTU_TABLE = 63;
export const PATH_MTU_DROP_PRIORITY = 100;

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
export const backendKey = (b: Pick<DsrBackend, "address" | "port">) => `${b.address}:${b.port}`;

/** The flow-based GRE port's type: that of the sources it takes (check makes them one family). */
export const greTypeOf = (inputs: Pick<Inputs, "gre">): TunnelType => tunnelTypeOf(inputs.gre?.allowedSources[0] ?? "");

/** The GRE port's interface options: it takes tunnels from any remote, with any key. */
export const GRE_OPTIONS: Readonly<Record<string, string>> = { remote_ip: "flow", key: "flow" };

/** The GRE port's ofport_request, derived from the resource. */
export const greOfportRequest = (id: string) => tunnelOfportRequest([KIND, id, "gre-port"]);

/** gre mode: the flow-based GRE port as engine/tunnel-ports.ts ensures it (no role: it is removed by name; its bfd column is not ours). */
export const grePort = (id: string, name: string, type: TunnelType = "gre"): WantedTunnelPort => ({
  name,
  // ip6gre for an IPv6 underlay (the allowed sources'): one family per port, as per tunnel.
  ...(type === "gre" ? {} : { type }),
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
    ...(tunnelTypeOf(p.address) === "gre" ? {} : { type: tunnelTypeOf(p.address) }),
    options: { remote_ip: p.address, key: String(p.key) },
    bfd: bfdColumn(bfd.timers),
    ofportRequest: bfdOfportRequest([KIND, id, "bfd", p.address, String(p.key)]),
    // Never on a wire: NORMAL floods nothing into it.
    tag: 4095,
    externalIds: { [ROLE_KEY]: BFD_PEER_ROLE, [PEER_KEY]: `${p.address}/${p.key}` },
  }));
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
