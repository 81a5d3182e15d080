import { bfdColumn, tunnelTypeOf, type WantedTunnelPort } from "../../engine/gre-port";
import { HYPERVISOR_KEY, ROLE_KEY } from "../../ovsdb";
import { foreignGroupIds, planBridge, type BridgeIntent, type ObservedBridge } from "../../engine/plan";
import { bfdOfportRequest, interfaceName, tunnelOfportRequest } from "../../model/ids";
import type { DeferredNatVip } from "../../model/inputs.generated";
import type { Action, Flow, Group, HashField, Modification, SelectBucket } from "../../openflow";
import { familyHashField, ipMatch, pathMtuErrorMatch } from "../../openflow";
import {
  backendKey,
  BFD_DROP_PRIORITY,
  bfdKeyOf,
  BUCKET_WEIGHT,
  cookieOf,
  FALLBACK_BUCKET,
  greKeyOf,
  KIND,
  lbId,
  OWNER_BUCKET,
  recordedGroups,
  type RecordedIds,
  replicaKey,
  VIP_FLOW_PRIORITY,
  vipKey,
} from "./ids";
import { slotFlows, toOwnerGroup } from "./second-chance";
import type { SlotTable } from "./slots";
import type { DeferredNatDefaulted } from "./check";

/** DeferredNatLoadBalancer on a gateway: the tunnel and BFD ports, the groups and flows every gateway must hold, and the bundle that takes a gateway there (pure). */

type Inputs = DeferredNatDefaulted;

/** The OVS hash fields for the selection fields of a VIP's protocol and family. */
export function hashFields(fields: readonly string[], protocol: DeferredNatVip["protocol"], address = ""): HashField[] {
  return fields.map((f) => familyHashField((f === "tp_src" ? `${protocol}_src` : f === "tp_dst" ? `${protocol}_dst` : f) as HashField, address));
}

export function tunnelOfport(gw: GatewayPort, hypervisor: string): number {
  const ofport = gw.tunnelOfports?.get(hypervisor);
  if (ofport === undefined) throw new Error(`hypervisors: the gateway has no working tunnel port to hypervisor ${hypervisor}`);
  return ofport;
}

export function bfdOfport(gw: GatewayPort, hypervisor: string): number {
  const ofport = gw.bfdOfports?.get(hypervisor);
  if (ofport === undefined) throw new Error(`healthCheck.bfd: the gateway has no working BFD port to hypervisor ${hypervisor}`);
  return ofport;
}

/** What one gateway needs that the others do not: its segment port and MAC. */
export interface GatewayPort {
  segmentOfport: number;
  mac: string;
  /** gre delivery: the ofport of this gateway's tunnel port to each hypervisor, by hypervisor name. */
  tunnelOfports?: ReadonlyMap<string, number>;
  /** healthCheck.bfd: the ofport of its BFD port to each hypervisor (the buckets' watch_port). */
  bfdOfports?: ReadonlyMap<string, number>;
}

/** How a hypervisor's backends are reached: its own delivery, else the load balancer's. */
export const deliveryOf = (inputs: Inputs, hypervisor: string) => inputs.hypervisors.find((h) => h.name === hypervisor)?.delivery ?? inputs.delivery;

/** Port roles on a gateway (external_ids ovslb:role). */
export const TUNNEL_ROLE = "tunnel";

export const BFD_ROLE = "bfd";

/** 802.1Q reserves VLAN 4095: no frame on the segment carries it, so NORMAL floods nothing into a tunnel. */
export const TUNNEL_VLAN = 4095;

/** A gateway port toward one hypervisor: its data tunnel, or its BFD liveness port (the buckets' watch_port). */
export interface TunnelPort extends WantedTunnelPort {
  hypervisor: string;
}

/**
 * The ports a gateway needs toward each hypervisor reached by gre: the data
 * tunnel (fixed remote_ip and key), and with healthCheck.bfd a BFD port
 * beside it (same ends, the BFD key), whose liveness the buckets watch.
 */
export function tunnelPorts(inputs: Inputs, gateway: Inputs["gateways"][number]): TunnelPort[] {
  const bfd = inputs.healthCheck?.bfd;
  return inputs.hypervisors
    .filter((h) => deliveryOf(inputs, h.name) === "gre")
    .flatMap((h) => {
      const ends = { remote_ip: h.tunnelAddress!, local_ip: gateway.tunnelAddress! };
      // The underlay's family (check makes every tunnel address of a load balancer one family): ip6gre over IPv6.
      const type = tunnelTypeOf(h.tunnelAddress!) === "ip6gre" ? { type: "ip6gre" as const } : {};
      // secondChance: the key going out carries the previous owner's hypervisor, set per slot.
      const keys: Record<string, string> = inputs.secondChance ? { in_key: String(greKeyOf(inputs)), out_key: "flow" } : { key: String(greKeyOf(inputs)) };
      const data: TunnelPort = {
        hypervisor: h.name,
        name: interfaceName("gre-", `${lbId(inputs)}/${h.name}`),
        ...type,
        options: { ...ends, ...keys },
        ofportRequest: tunnelOfportRequest([KIND, inputs.name, "tunnel", h.name]),
        tag: TUNNEL_VLAN,
        externalIds: { [HYPERVISOR_KEY]: h.name, [ROLE_KEY]: TUNNEL_ROLE },
      };
      if (!bfd) return [data];
      const liveness: TunnelPort = {
        hypervisor: h.name,
        name: interfaceName("bfd-", `${lbId(inputs)}/${h.name}`),
        ...type,
        options: { ...ends, key: String(bfdKeyOf(inputs)) },
        bfd: bfdColumn(bfd),
        ofportRequest: bfdOfportRequest([KIND, inputs.name, "bfd", h.name]),
        tag: TUNNEL_VLAN,
        externalIds: { [HYPERVISOR_KEY]: h.name, [ROLE_KEY]: BFD_ROLE },
      };
      return [data, liveness];
    });
}

/** Ports of a role; tunnel ports made before roles were recorded carry only ovslb:hypervisor. */
export const hasRole = (role: string) => (ids: ReadonlyMap<string, string>) =>
  ids.get(ROLE_KEY) === role || (role === TUNNEL_ROLE && !ids.has(ROLE_KEY) && ids.has(HYPERVISOR_KEY));

export interface VipDataplane {
  vip: DeferredNatVip;
  group: Group;
  /** The VIP's flow, and with `fragments` the one for its fragments. */
  flows: Flow[];
}

/** A VIP's hash fields: a fragmented VIP's on addresses only, as only the first fragment of a datagram carries the ports. */
export const FRAGMENT_FIELDS = ["ip_src", "ip_dst"] as const;

/**
 * The group and flow of each VIP on one gateway. The flow matches VIP
 * traffic arriving on the segment port, with no conntrack; each bucket
 * rewrites the MACs only (ip.dst stays the VIP) and sends the frame back out
 * the port it came in on.
 */
export function desiredDataplane(inputs: Inputs, ids: RecordedIds, gw: GatewayPort): VipDataplane[] {
  const d = inputs;
  const cookie = cookieOf(d);
  const bfd = !!d.healthCheck?.bfd;
  // Actions are never modified in place: the gateway's own are shared by all its buckets.
  const ethSrc: Action = { type: "set_field", field: "eth_src", value: gw.mac.toLowerCase() };
  // Per hypervisor, once: how its backends are reached (a plan makes 100,000 buckets).
  const outOf = new Map<string, Action>();
  const out = (hv: string): Action => {
    let a = outOf.get(hv);
    if (!a) outOf.set(hv, (a = deliveryOf(d, hv) === "gre" ? { type: "output", port: tunnelOfport(gw, hv) } : { type: "in_port" }));
    return a;
  };
  return d.vips.map((vip) => {
    const key = vipKey(vip);
    const groupId = ids.groupIds[key];
    const bucketIds = ids.bucketIds[key];
    const buckets: SelectBucket[] = [];
    for (const b of vip.backends) {
      for (let r = 0; r < b.weight; r++) {
        const bucket: SelectBucket = {
          bucketId: bucketIds[replicaKey(b, r)],
          weight: BUCKET_WEIGHT,
          // ip.dst stays the VIP: back out onto the segment by MAC, or into the tunnel to the backend's hypervisor.
          actions: [ethSrc, { type: "set_field", field: "eth_dst", value: b.mac.toLowerCase() }, out(b.hypervisor)] as Action[],
        };
        // Live only while the gateway's BFD session to the backend's hypervisor forwards.
        if (bfd) bucket.watchPort = bfdOfport(gw, b.hypervisor);
        buckets.push(bucket);
      }
    }
    return {
      vip,
      group: {
        groupId,
        type: "select",
        selectionMethod: "hash",
        fields: hashFields(vip.fragments ? FRAGMENT_FIELDS : d.selectionFields, vip.protocol, vip.address),
        buckets,
      },
      flows: [
        { table: 0, priority: VIP_FLOW_PRIORITY, cookie, match: vipFlowMatch(vip, gw), actions: [{ type: "group", groupId }] },
        ...(vip.fragments
          ? [{ table: 0, priority: VIP_FLOW_PRIORITY, cookie, match: fragmentsMatch(vip, gw), actions: [{ type: "group", groupId }] } as Flow]
          : []),
      ],
    };
  });
}

/**
 * pathMtu: per VIP address, a flow that sends each ICMP "fragmentation
 * needed" (ICMPv6 "packet too big") error addressed to it to every hypervisor serving one of its VIPs,
 * one copy each (to one of its backends' MACs: in mac delivery back onto the
 * segment, in gre into the tunnel, key 0). OpenFlow cannot read the ports
 * inside the error, so it cannot be hashed like its connection; the
 * hypervisors' conntrack finds the one it is about (DsrHypervisorFlows
 * pathMtu) and the others drop their copy.
 */
export function pathMtuFlows(inputs: Inputs, gw: GatewayPort): Flow[] {
  if (!inputs.pathMtu) return [];
  const byAddress = new Map<string, Map<string, string>>();
  for (const vip of inputs.vips) {
    const hvs = byAddress.get(vip.address) ?? byAddress.set(vip.address, new Map()).get(vip.address)!;
    // One backend's MAC per hypervisor: the copy only has to reach the hypervisor's bridge.
    for (const b of [...vip.backends].sort((x, y) => (backendKey(x) < backendKey(y) ? -1 : 1)))
      if (!hvs.has(b.hypervisor)) hvs.set(b.hypervisor, b.mac.toLowerCase());
  }
  const keyed = !!inputs.secondChance;
  return [...byAddress].map(([address, hvs]) => ({
    table: 0,
    priority: VIP_FLOW_PRIORITY,
    cookie: cookieOf(inputs),
    match: { ...pathMtuErrorMatch(address), in_port: gw.segmentOfport },
    actions: [
      { type: "set_field", field: "eth_src", value: gw.mac.toLowerCase() },
      // secondChance tunnels send the key from the flow: 0, no previous owner to ask.
      ...(keyed ? [{ type: "set_field", field: "tun_id", value: 0 } as const] : []),
      ...[...hvs]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .flatMap(([hv, mac]): Action[] => [
          { type: "set_field", field: "eth_dst", value: mac },
          deliveryOf(inputs, hv) === "gre" ? { type: "output", port: tunnelOfport(gw, hv) } : { type: "in_port" },
        ]),
    ],
  }));
}

/** The flow of a VIP on one gateway: its traffic arriving on the segment. */
export const vipFlowMatch = (vip: Pick<DeferredNatVip, "protocol" | "address" | "port">, gw: Pick<GatewayPort, "segmentOfport">): Flow["match"] => ({
  ...ipMatch(vip.protocol, "dst", vip.address),
  in_port: gw.segmentOfport,
  tp_dst: vip.port,
});

/**
 * `fragments`: every fragment to the VIP's address and protocol. OVS's
 * default fragment handling ("normal") reads the ports of every fragment,
 * the first too, as 0, so none matches the VIP's own flow.
 */
export const fragmentsMatch = (vip: Pick<DeferredNatVip, "protocol" | "address">, gw: Pick<GatewayPort, "segmentOfport">): Flow["match"] => ({
  // An IPv6 fragment after the first shows OVS no transport protocol (nw_proto 44, the fragment header's): every IPv6 fragment to the address.
  ...ipMatch(vip.address.includes(":") ? "ip" : vip.protocol, "dst", vip.address),
  in_port: gw.segmentOfport,
  nw_frag: "yes",
});

/** Group ids a gateway holds that are not this load balancer's (new ids are probed past them). */
export function foreignGroupsOn(inputs: Inputs, observed: ObservedBridge, recorded: RecordedIds): Set<number> {
  return foreignGroupIds(observed, { cookie: cookieOf(inputs), recordedGroups: recordedGroups(recorded) });
}

/**
 * healthCheck.bfd: a BFD port carries only BFD; anything else out of it
 * (a session whose peer turned BFD off hands its packets to the flow table)
 * is dropped rather than left to NORMAL.
 */
export function bfdDropFlows(inputs: Inputs, gw: GatewayPort): Flow[] {
  if (!inputs.healthCheck?.bfd) return [];
  return [...(gw.bfdOfports?.values() ?? [])].map((ofport) => ({
    table: 0,
    priority: BFD_DROP_PRIORITY,
    cookie: cookieOf(inputs),
    match: { in_port: ofport },
    actions: [{ type: "drop" }],
  }));
}

/**
 * What the load balancer wants on one gateway: each VIP's group and flow.
 * Ownership: its cookie, and the group and bucket ids it recorded.
 */
export function gatewayIntent(inputs: Inputs, ids: RecordedIds, gw: GatewayPort, slots?: Readonly<Record<string, SlotTable>>): BridgeIntent {
  if (inputs.secondChance) return slotIntent(inputs, ids, gw, slots ?? {});
  const dataplane = desiredDataplane(inputs, ids, gw);
  const vipOfGroup = new Map(dataplane.map((d) => [d.group.groupId, vipKey(d.vip)]));
  const vipOfFlow = new Map(dataplane.flatMap((d) => d.flows.map((f) => [f, vipKey(d.vip)] as const)));
  return {
    cookie: cookieOf(inputs),
    flows: [...dataplane.flatMap((d) => d.flows), ...bfdDropFlows(inputs, gw), ...pathMtuFlows(inputs, gw)],
    groups: dataplane.map((d) => d.group),
    recordedGroups: recordedGroups(ids),
    owner: `load balancer ${inputs.name}`,
    purpose: (item) => {
      const key = "flow" in item ? vipOfFlow.get(item.flow) : vipOfGroup.get(item.group.groupId);
      return key && `VIP ${key}`;
    },
  };
}

/**
 * The one bundle that takes a gateway to the inputs: existing groups change
 * only by bucket (remove/insert by id), so no other connection moves; only a
 * change of selection fields rebuilds a group (that re-hashes every
 * connection anyway). With no VIPs it removes everything the load balancer owns.
 */
export function planGateway(
  where: string,
  inputs: Inputs,
  ids: RecordedIds,
  gw: GatewayPort,
  observed: ObservedBridge,
  slots?: Readonly<Record<string, SlotTable>>,
): Modification[] {
  return planBridge(where, gatewayIntent(inputs, ids, gw, slots), observed);
}

/**
 * secondChance: one VIP's groups on one gateway. Each active backend's owner
 * group, which its slot flows point to; with healthCheck.bfd a fast-failover
 * one whose second bucket (key 0) is the VIP's select group over the active
 * backends, listed first so it exists before the owner groups that use it.
 */
export function slotGroups(inputs: Inputs, vip: Inputs["vips"][number], ids: RecordedIds, gw: GatewayPort): Group[] {
  const key = vipKey(vip);
  const active = vip.backends.filter((b) => b.state !== "draining");
  const bfd = !!inputs.healthCheck?.bfd;
  const select = bfd ? desiredDataplane({ ...inputs, vips: [{ ...vip, backends: active }] }, ids, gw)[0].group : undefined;
  const ethSrc: Action = { type: "set_field", field: "eth_src", value: gw.mac.toLowerCase() };
  const owners: Group[] = active.map((b) => {
    const groupId = ids.ownerGroupIds?.[key]?.[backendKey(b)];
    if (groupId === undefined) throw new Error(`VIP ${key}: backend ${backendKey(b)} has no owner group id`);
    const toOwner = {
      bucketId: OWNER_BUCKET,
      actions: [
        ethSrc,
        { type: "set_field", field: "eth_dst", value: b.mac.toLowerCase() },
        { type: "output", port: tunnelOfport(gw, b.hypervisor) },
      ] as Action[],
    };
    if (!select) return { groupId, type: "indirect", buckets: [toOwner] };
    return {
      groupId,
      type: "ff",
      buckets: [
        { ...toOwner, watchPort: bfdOfport(gw, b.hypervisor) },
        {
          bucketId: FALLBACK_BUCKET,
          watchGroup: select.groupId,
          // The owner's hypervisor is down: its connections are lost, and no hypervisor is to be asked for them.
          actions: [
            { type: "set_field", field: "tun_id", value: 0 },
            { type: "group", groupId: select.groupId },
          ],
        },
      ],
    };
  });
  return select ? [select, ...owners] : owners;
}

/** secondChance: each VIP's entry and slot flows and its groups (recorded groups of an earlier mode are owned, so they go). */
export function slotIntent(inputs: Inputs, ids: RecordedIds, gw: GatewayPort, slots: Readonly<Record<string, SlotTable>>): BridgeIntent {
  const d = inputs;
  const cookie = cookieOf(d);
  const vipOf = new Map<Flow | Group, string>();
  const groups: Group[] = [];
  const flows = d.vips.flatMap((vip) => {
    const key = vipKey(vip);
    const table = slots[key];
    if (!table) throw new Error(`VIP ${key}: no slot table was planned`);
    const mine = slotGroups(d, vip, ids, gw);
    const flows = slotFlows(d, vip, table, toOwnerGroup(vip, ids.ownerGroupIds?.[key] ?? {}), gw.segmentOfport, cookie);
    for (const x of [...mine, ...flows]) vipOf.set(x, key);
    groups.push(...mine);
    return flows;
  });
  return {
    cookie,
    flows: [...flows, ...bfdDropFlows(d, gw), ...pathMtuFlows(d, gw)],
    groups,
    recordedGroups: recordedGroups(ids),
    owner: `load balancer ${inputs.name}`,
    purpose: (item) => {
      const key = vipOf.get("flow" in item ? item.flow : item.group);
      return key && `VIP ${key}`;
    },
  };
}
