import { isDeepStrictEqual } from "node:util";
import { flowPresent } from "../../engine/flows";
import { bfdColumn, type WantedTunnelPort } from "../../engine/gre-port";
import { HYPERVISOR_KEY, ROLE_KEY } from "../../ovsdb";
import { checkSecondChance, slotFlows } from "./second-chance";
import type { SlotTable } from "./slots";
import { foreignGroupIds, planBridge, type BridgeIntent, type ObservedBridge } from "../../engine/plan";
import { MAX_BUCKET_ID, MAX_GROUP_ID, bfdOfportRequest, derivedId, interfaceName, ownerCookie, tunnelOfportRequest } from "../../model/ids";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DeferredNatVip } from "../../model/inputs.generated";
import type { Defaulted } from "../../model/defaulted";
import { checkConnection, type CheckFailure } from "../../model/validate";
import type { DriftFinding } from "../../model/drift";
import {
  bucketMac,
  sameBucket,
  toGroupEntry,
  type Action,
  type Flow,
  type Group,
  type HashField,
  type Modification,
  type SelectBucket,
} from "../../openflow";

/**
 * DeferredNatLoadBalancer as pure data: ids, the groups and flows every
 * gateway must hold, the modifications that take a gateway from what it has
 * to that, and the inputs a gateway's actual state amounts to.
 */

export const KIND = "DeferredNatLoadBalancer";
export const VIP_FLOW_PRIORITY = 100;
/** Above the bridge's NORMAL, below anything an operator pins. */
export const BFD_DROP_PRIORITY = 900;
/** Every bucket has the same weight: a backend's weight is its number of buckets (shares stay proportional). */
export const BUCKET_WEIGHT = 100;
export const DEFAULT_SELECTION_FIELDS = ["ip_src", "ip_dst", "tp_src", "tp_dst"] as const;
/**
 * Buckets one group may hold. OVS sends a group, and reports it back in
 * dump-groups, as one OpenFlow message of at most 65,535 bytes; each of
 * these buckets takes 64, so past about 1,020 a group can be neither
 * written whole nor read back (checked on OVS 3.1: a larger reply comes
 * back as a hex dump).
 */
export const MAX_BUCKETS_PER_GROUP = 1000;

export const lbId = (inputs: Pick<Inputs, "name">) => `deferred-nat/${inputs.name}`;
export const cookieOf = (inputs: Pick<Inputs, "name">) => ownerCookie(KIND, inputs.name);
export const vipKey = (v: Pick<DeferredNatVip, "protocol" | "address" | "port">) => `${v.protocol}:${v.address}:${v.port}`;
export const backendKey = (b: Pick<DeferredNatBackend, "address" | "port">) => `${b.address}:${b.port}`;
/** One bucket per unit of weight: "10.0.0.5:80#0", "10.0.0.5:80#1", ... */
export const replicaKey = (b: DeferredNatBackend, replica: number) => `${backendKey(b)}#${replica}`;

/** Ids given so far, recorded in the outputs and never re-derived (ids are sticky: a re-derived id would renumber a bucket and move its flows). */
export interface RecordedIds {
  /** vipKey -> group id */
  groupIds: Record<string, number>;
  /** vipKey -> replicaKey -> bucket id */
  bucketIds: Record<string, Record<string, number>>;
}

/** A backend with its weight given and its MAC in lower case (OVS prints MACs so). */
export type DefaultedBackend = Defaulted<DeferredNatBackend, "weight">;
export type DefaultedVip = Omit<DeferredNatVip, "backends"> & { backends: DefaultedBackend[] };
/** DeferredNatLoadBalancer inputs as withDefaults returns them: the only form the plans take. */
export type DeferredNatDefaulted = Omit<Defaulted<DeferredNatLoadBalancerInputs, "selectionMethod" | "selectionFields" | "delivery">, "vips"> & { vips: DefaultedVip[] };
type Inputs = DeferredNatDefaulted;

export function withDefaults(inputs: DeferredNatLoadBalancerInputs): Inputs {
  return {
    ...inputs,
    selectionMethod: inputs.selectionMethod ?? "hash",
    selectionFields: inputs.selectionFields ?? [...DEFAULT_SELECTION_FIELDS],
    delivery: inputs.delivery ?? "mac",
    // A VIP already defaulted (recorded inputs are) is kept as it is, not copied: 100,000 backends add up.
    vips: inputs.vips.map((v) => (isDefaultedVip(v) ? v : { ...v, backends: v.backends.map((b) => (isDefaulted(b) ? b : { ...b, weight: b.weight ?? 1, mac: b.mac.toLowerCase() })) })),
  };
}

// toLowerCase returns the very string when nothing changes: no copy for a MAC already in lower case.
const isDefaulted = (b: DeferredNatBackend): b is DefaultedBackend => b.weight !== undefined && b.mac === b.mac.toLowerCase();
const isDefaultedVip = (v: DeferredNatVip): v is DefaultedVip => v.backends.every(isDefaulted);

export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (inputs.selectionMethod === "dp_hash") {
    fail("selectionMethod", "dp_hash remaps most connections whenever the bucket count changes (and OVS 3.1 corrupts dp_hash groups on bucket insert/remove); use hash");
  }
  if (inputs.selectionFields && inputs.selectionFields.length === 0) {
    fail("selectionFields", "give at least one field: with none, every packet hashes alike and one backend takes all");
  }
  inputs.gateways.forEach((g, i) => failures.push(...checkConnection(g.host.connection, `gateways[${i}].host.connection`)));
  duplicates(inputs.gateways.map((g) => g.name)).forEach((i) => fail(`gateways[${i}].name`, "is used by another gateway"));
  duplicates(inputs.hypervisors.map((h) => h.name)).forEach((i) => fail(`hypervisors[${i}].name`, "is listed twice"));
  const hypervisors = new Set(inputs.hypervisors.map((h) => h.name));
  duplicates(inputs.vips.map(vipKey)).forEach((i) => fail(`vips[${i}]`, "is the same address, port and protocol as another VIP"));
  inputs.vips.forEach((vip, v) => {
    const buckets = vip.backends.reduce((n, b) => n + b.weight, 0);
    // secondChance has no group: its own limit is the slot table's (checkSecondChance).
    if (!inputs.secondChance && buckets > MAX_BUCKETS_PER_GROUP) {
      fail(`vips[${v}].backends`, `needs ${buckets} buckets (one per backend and unit of weight); a group holds at most ${MAX_BUCKETS_PER_GROUP}, the most OVS can send or report in one OpenFlow message`);
    }
    duplicates(vip.backends.map(backendKey)).forEach((b) => fail(`vips[${v}].backends[${b}]`, "is listed twice in this VIP"));
    vip.backends.forEach((b, i) => {
      const at = `vips[${v}].backends[${i}]`;
      if (b.address === vip.address) fail(`${at}.address`, "equals the VIP's address: a backend cannot be its own VIP");
      if (!hypervisors.has(b.hypervisor)) fail(`${at}.hypervisor`, `names a hypervisor the load balancer does not know (known: ${[...hypervisors].join(", ")})`);
      if (b.logicalPort && !inputs.ovn?.healthCheckSourceIp) {
        fail(`${at}.logicalPort`, "needs ovn.healthCheckSourceIp: OVN's ip_port_mappings pair a logical port with the health checks' source address");
      }
    });
  });
  const gre = inputs.hypervisors.filter((h) => deliveryOf(inputs, h.name) === "gre");
  inputs.hypervisors.forEach((h, i) => {
    if (deliveryOf(inputs, h.name) === "gre" && !h.tunnelAddress) {
      fail(`hypervisors[${i}].tunnelAddress`, "is required for gre delivery: the gateways' tunnels to this hypervisor end there");
    }
  });
  if (gre.length > 0) {
    inputs.gateways.forEach((g, i) => {
      if (!g.tunnelAddress) fail(`gateways[${i}].tunnelAddress`, "is required for gre delivery: the hypervisors accept GRE only from the gateways' tunnel addresses");
    });
  }
  duplicates(gre.flatMap((h) => (h.tunnelAddress ? [h.tunnelAddress] : []))).forEach((k) => {
    fail(`hypervisors[${inputs.hypervisors.indexOf(gre.filter((h) => h.tunnelAddress)[k])}].tunnelAddress`, "is another hypervisor's tunnel address");
  });
  if (inputs.ovn) failures.push(...checkConnection(inputs.ovn.northbound.connection, "ovn.northbound.connection"));
  failures.push(...checkHealthCheck(inputs), ...checkSecondChance(inputs));
  return failures;
}

/** What the health check needs of the rest of the inputs, each refusal naming the property that is missing. */
function checkHealthCheck(inputs: Inputs): CheckFailure[] {
  const hc = inputs.healthCheck;
  if (!hc) return [];
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (hc.probe) {
    if (!inputs.ovn) fail("healthCheck.probe", "needs ovn: OVN's probes are Load_Balancer_Health_Check rows of the northbound load balancer");
    else if (!inputs.ovn.healthCheckSourceIp) {
      fail("ovn.healthCheckSourceIp", "is required by healthCheck.probe: every VIP's probes need a source address (ip_port_mappings BACKEND_IP -> LSP:SRC_IP); without a mapping OVN silently drops the backend");
    }
    inputs.vips.forEach((vip, v) =>
      vip.backends.forEach((b, i) => {
        if (!b.logicalPort) {
          fail(`vips[${v}].backends[${i}].logicalPort`, "is required by healthCheck.probe: OVN probes a backend from the chassis its logical port is bound to, and silently drops a monitored VIP's backend that has no port mapping");
        }
      }),
    );
  }
  if (hc.bfd) {
    inputs.hypervisors.forEach((h, i) => {
      if (deliveryOf(inputs, h.name) !== "gre") {
        fail(`hypervisors[${i}].delivery`, "must be gre with healthCheck.bfd: BFD runs on the gateways' tunnel to each hypervisor, and mac delivery has none to watch");
      }
    });
  }
  if (hc.southbound) {
    if (!hc.probe) fail("healthCheck.southbound", "is only read with healthCheck.probe: the southbound's Service_Monitor rows exist only for probed VIPs");
    failures.push(...checkConnection(hc.southbound.connection, "healthCheck.southbound.connection"));
  }
  if (hc.enforce && !(hc.probe && hc.southbound)) {
    fail("healthCheck.enforce", "needs healthCheck.probe and healthCheck.southbound: enforcing sets stale Service_Monitor rows offline in the southbound");
  }
  return failures;
}

function duplicates(keys: readonly string[]): number[] {
  const seen = new Set<string>();
  return keys.flatMap((k, i) => (seen.has(k) ? [i] : (seen.add(k), [])));
}

/**
 * Gives every VIP a group id and every backend replica a bucket id: recorded
 * ids are kept; new ones are derived from the VIP (groups) or the backend
 * (buckets) and probed past ids in use. `foreignGroupIds` are ids taken on
 * any gateway by groups this load balancer does not own.
 */
export function assignIds(inputs: Inputs, recorded: RecordedIds, foreignGroupIds: ReadonlySet<number>): RecordedIds {
  const groupIds: Record<string, number> = {};
  const bucketIds: Record<string, Record<string, number>> = {};
  const usedGroups = new Set<number>(foreignGroupIds);
  // Recorded ids first, so a new VIP never takes an id a kept VIP holds.
  for (const vip of inputs.vips) {
    const id = recorded.groupIds[vipKey(vip)];
    if (id !== undefined) {
      if (foreignGroupIds.has(id)) {
        throw new Error(`group ${id} of VIP ${vipKey(vip)} is now held by a group this load balancer does not own; refusing to overwrite it`);
      }
      groupIds[vipKey(vip)] = id;
      usedGroups.add(id);
    }
  }
  for (const vip of inputs.vips) {
    const key = vipKey(vip);
    if (groupIds[key] === undefined) {
      groupIds[key] = derivedId([lbId(inputs), key], MAX_GROUP_ID, (id) => usedGroups.has(id));
      usedGroups.add(groupIds[key]);
    }
    const kept = recorded.bucketIds[key] ?? {};
    const ids: Record<string, number> = {};
    const used = new Set<number>();
    const fresh: string[] = [];
    for (const b of vip.backends) {
      for (let r = 0; r < b.weight; r++) {
        const rk = replicaKey(b, r);
        const id = kept[rk];
        if (id === undefined) fresh.push(rk);
        else {
          ids[rk] = id;
          used.add(id);
        }
      }
    }
    // New replicas after every kept one, in order, so a new id never takes a kept one's.
    for (const rk of fresh) {
      if (ids[rk] !== undefined) continue;
      ids[rk] = derivedId([rk], MAX_BUCKET_ID, (id) => used.has(id));
      used.add(ids[rk]);
    }
    bucketIds[key] = ids;
  }
  return { groupIds, bucketIds };
}

/** The OVS hash fields for the selection fields of a VIP's protocol. */
export function hashFields(fields: readonly string[], protocol: DeferredNatVip["protocol"]): HashField[] {
  return fields.map((f) => (f === "tp_src" ? `${protocol}_src` : f === "tp_dst" ? `${protocol}_dst` : f) as HashField);
}

function tunnelOfport(gw: GatewayPort, hypervisor: string): number {
  const ofport = gw.tunnelOfports?.get(hypervisor);
  if (ofport === undefined) throw new Error(`hypervisors: the gateway has no working tunnel port to hypervisor ${hypervisor}`);
  return ofport;
}

function bfdOfport(gw: GatewayPort, hypervisor: string): number {
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
export const deliveryOf = (inputs: Inputs, hypervisor: string) =>
  inputs.hypervisors.find((h) => h.name === hypervisor)?.delivery ?? inputs.delivery;

/** The GRE key of the load balancer's tunnels: derived from its name, so each load balancer's tunnels to one hypervisor are distinct ports. */
export const greKeyOf = (inputs: Pick<Inputs, "name">) => derivedId([KIND, inputs.name, "gre-key"], 0xfffffffe);

/**
 * The GRE key of the load balancer's BFD liveness ports: distinct from its
 * data key, so on the hypervisor BFD lands on a fixed port of its own while
 * data keeps arriving on the flow-based GRE port. In 240.0.0.0/4 read as an
 * address, so it never equals a data key that carries a hypervisor's address.
 */
export function bfdKeyOf(inputs: Pick<Inputs, "name">): number {
  const key = 0xf0000000 + derivedId([KIND, inputs.name, "bfd-key"], 0x0ffffffe);
  return key === greKeyOf(inputs) ? key + 1 : key;
}

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
      // secondChance: the key going out carries the previous owner's hypervisor, set per slot.
      const keys: Record<string, string> = inputs.secondChance ? { in_key: String(greKeyOf(inputs)), out_key: "flow" } : { key: String(greKeyOf(inputs)) };
      const data: TunnelPort = {
        hypervisor: h.name,
        name: interfaceName("gre-", `${lbId(inputs)}/${h.name}`),
        options: { ...ends, ...keys },
        ofportRequest: tunnelOfportRequest([KIND, inputs.name, "tunnel", h.name]),
        tag: TUNNEL_VLAN,
        externalIds: { [HYPERVISOR_KEY]: h.name, [ROLE_KEY]: TUNNEL_ROLE },
      };
      if (!bfd) return [data];
      const liveness: TunnelPort = {
        hypervisor: h.name,
        name: interfaceName("bfd-", `${lbId(inputs)}/${h.name}`),
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
  flow: Flow;
}

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
          actions: [
            ethSrc,
            { type: "set_field", field: "eth_dst", value: b.mac.toLowerCase() },
            out(b.hypervisor),
          ] as Action[],
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
        fields: hashFields(d.selectionFields!, vip.protocol),
        buckets,
      },
      flow: {
        table: 0,
        priority: VIP_FLOW_PRIORITY,
        cookie,
        match: { protocol: vip.protocol, in_port: gw.segmentOfport, nw_dst: vip.address, tp_dst: vip.port },
        actions: [{ type: "group", groupId }],
      },
    };
  });
}

/** The recorded ids as the engine's ownership marks: group id -> the bucket ids given in it. */
export function recordedGroups(ids: RecordedIds): Map<number, Set<number>> {
  return new Map(Object.entries(ids.groupIds).map(([key, id]) => [id, new Set(Object.values(ids.bucketIds[key] ?? {}))]));
}

/** Both id records in one: the ones kept and the ones just given. */
export const mergeIds = (a: RecordedIds, b: RecordedIds): RecordedIds => ({
  groupIds: { ...a.groupIds, ...b.groupIds },
  bucketIds: { ...a.bucketIds, ...b.bucketIds },
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
  const vipOfFlow = new Map(dataplane.map((d) => [d.flow, vipKey(d.vip)]));
  return {
    cookie: cookieOf(inputs),
    flows: [...dataplane.map((d) => d.flow), ...bfdDropFlows(inputs, gw)],
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

/** secondChance: each VIP's entry and slot flows, no groups (recorded groups of an earlier mode are owned, so they go). */
function slotIntent(inputs: Inputs, ids: RecordedIds, gw: GatewayPort, slots: Readonly<Record<string, SlotTable>>): BridgeIntent {
  const d = inputs;
  const cookie = cookieOf(d);
  const vipOf = new Map<Flow, string>();
  const flows = d.vips.flatMap((vip) => {
    const table = slots[vipKey(vip)];
    if (!table) throw new Error(`VIP ${vipKey(vip)}: no slot table was planned`);
    const mine = slotFlows(d, vip, table, { ...gw, tunnelOfports: gw.tunnelOfports ?? new Map() }, cookie);
    for (const f of mine) vipOf.set(f, vipKey(vip));
    return mine;
  });
  return {
    cookie,
    flows,
    groups: [],
    recordedGroups: recordedGroups(ids),
    owner: `load balancer ${inputs.name}`,
    purpose: (item) => ("flow" in item ? vipOf.get(item.flow) && `VIP ${vipOf.get(item.flow)}` : undefined),
  };
}

/** OVS hash field -> the selection field of the inputs it comes from. */
const SELECTION_FIELD_OF: Readonly<Record<string, string>> = {
  tcp_src: "tp_src", udp_src: "tp_src", sctp_src: "tp_src",
  tcp_dst: "tp_dst", udp_dst: "tp_dst", sctp_dst: "tp_dst",
};

/** What read found on one gateway that the inputs cannot say by themselves. */
export interface GatewayObservation {
  gateway: string;
  findings: DriftFinding[];
}

/**
 * The inputs the gateways' actual state amounts to. A VIP counts only if
 * its flow and group are right on every gateway; a backend's weight is the
 * number of its buckets present and right on every gateway; a bucket nobody
 * declared reads as a backend at 0.0.0.0 with the bucket's MAC, so it shows
 * in a diff.
 */
export function actualInputs(
  inputs: Inputs,
  ids: RecordedIds,
  perGateway: readonly { name: string; port: GatewayPort; observed: ObservedBridge }[],
  slots?: Readonly<Record<string, SlotTable>>,
): { inputs: Inputs; observations: GatewayObservation[] } {
  const d = inputs;
  if (d.secondChance) return actualSlotInputs(d, perGateway, slots ?? {});
  const observations = perGateway.map((g) => ({ gateway: g.name, findings: [] as DriftFinding[] }));
  const vips: DefaultedVip[] = [];
  let selectionFields = d.selectionFields!;
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const replicaOf = new Map(Object.entries(ids.bucketIds[key] ?? {}).map(([rk, id]) => [id, rk]));
    let present = true;
    // Replicas right on every gateway so far; strays: undeclared buckets by id -> MAC.
    let right: Set<string> | undefined;
    const strays = new Map<number, string>();
    perGateway.forEach((g, gi) => {
      const note = (kind: DriftFinding["kind"], object: string, detail?: string) =>
        observations[gi].findings.push({ host: g.name, kind, object, vip: key, ...(detail === undefined ? {} : { detail }) });
      // Backends behind a tunnel port that is gone or changed cannot be reached from this gateway.
      const noTunnel = (b: DeferredNatBackend) => deliveryOf(d, b.hypervisor) === "gre" && !g.port.tunnelOfports?.has(b.hypervisor);
      const bfdDropping = (hv: string) => bfdDropFlows(d, { ...g.port, bfdOfports: new Map([[hv, g.port.bfdOfports!.get(hv)!]]) }).every(flowPresent(g.observed.flows));
      const noBfd = (b: DeferredNatBackend) => !!d.healthCheck?.bfd && !(g.port.bfdOfports?.has(b.hypervisor) && bfdDropping(b.hypervisor));
      const cut = new Set(vip.backends.filter((b) => noTunnel(b) || noBfd(b)));
      for (const hv of new Set(vip.backends.filter(noTunnel).map((b) => b.hypervisor))) note("tunnel-port", `tunnel port to hypervisor ${hv}`);
      for (const hv of new Set(vip.backends.filter(noBfd).map((b) => b.hypervisor))) note("bfd-port", `BFD port to hypervisor ${hv}`);
      const want = desiredDataplane({ ...d, vips: [{ ...vip, backends: vip.backends.filter((b) => !cut.has(b)) }] }, ids, g.port)[0];
      const wantGroup = toGroupEntry(want.group);
      const group = g.observed.groups.find((x) => x.groupId === want.group.groupId);
      if (!flowPresent(g.observed.flows)(want.flow)) {
        note("flow-changed", "flow");
        present = false;
      }
      if (!group) {
        note("group-missing", `group ${want.group.groupId}`);
        present = false;
        return;
      }
      if (group.selectionMethod !== "hash" || !isDeepStrictEqual([...group.fields], [...wantGroup.fields])) {
        note("selection-changed", "selection", `${group.selectionMethod ?? "default"} on ${group.fields.join(",") || "no fields"}`);
        selectionFields = group.fields.map((f) => SELECTION_FIELD_OF[f] ?? f) as typeof selectionFields;
      }
      const have = new Map(group.buckets.map((b) => [b.bucketId, b]));
      const ok = new Set<string>();
      for (const wb of wantGroup.buckets) {
        const rk = replicaOf.get(wb.bucketId)!;
        const hb = have.get(wb.bucketId);
        if (hb && sameBucket(hb, wb)) ok.add(rk);
        else note(hb ? "bucket-changed" : "bucket-missing", `bucket ${wb.bucketId} (${rk})`);
      }
      right = right ? new Set([...right].filter((rk) => ok.has(rk))) : ok;
      for (const hb of group.buckets) {
        if (replicaOf.has(hb.bucketId)) continue;
        note("bucket-stray", `bucket ${hb.bucketId}`);
        strays.set(hb.bucketId, bucketMac(hb.actions) ?? "00:00:00:00:00:00");
      }
    });
    if (!present) continue;
    const backends: DefaultedBackend[] = [];
    for (const b of vip.backends) {
      const weight = Array.from({ length: b.weight }, (_, r) => replicaKey(b, r)).filter((rk) => right?.has(rk)).length;
      if (weight > 0) backends.push({ ...b, weight });
    }
    // An undeclared bucket reads as a backend nobody declared, so the diff shows it.
    for (const mac of strays.values()) backends.push({ address: "0.0.0.0", port: 1, mac, hypervisor: "undeclared", weight: 1 });
    vips.push({ ...vip, backends });
  }
  return { inputs: { ...d, selectionFields, vips }, observations };
}

/**
 * secondChance: the inputs the gateways' slot flows amount to. A VIP counts
 * when its entry flow is right on every gateway; an active backend when
 * every slot it owns is right on every gateway (a draining one owns none and
 * stays while its VIP does).
 */
function actualSlotInputs(
  d: Inputs,
  perGateway: readonly { name: string; port: GatewayPort; observed: ObservedBridge }[],
  slots: Readonly<Record<string, SlotTable>>,
): { inputs: Inputs; observations: GatewayObservation[] } {
  const observations = perGateway.map((g) => ({ gateway: g.name, findings: [] as DriftFinding[] }));
  const vips: DefaultedVip[] = [];
  for (const vip of d.vips) {
    const key = vipKey(vip);
    const table = slots[key];
    if (!table) continue;
    let present = true;
    const wrong = new Set<string>();
    perGateway.forEach((g, gi) => {
      const note = (kind: DriftFinding["kind"], object: string, detail?: string) =>
        observations[gi].findings.push({ host: g.name, kind, object, vip: key, ...(detail === undefined ? {} : { detail }) });
      const tunnels = g.port.tunnelOfports ?? new Map<string, number>();
      const cut = new Set(d.hypervisors.filter((h) => !tunnels.has(h.name)).map((h) => h.name));
      for (const hv of cut) note("tunnel-port", `tunnel port to hypervisor ${hv}`);
      // Plan as if the cut hypervisors' tunnels were there, to see which slots are wrong.
      const flows = slotFlows(d, vip, table, { ...g.port, tunnelOfports: new Map([...d.hypervisors.map((h) => [h.name, tunnels.get(h.name) ?? 0xfeff] as const)]) }, cookieOf(d));
      const present_ = flowPresent(g.observed.flows);
      const [entry, ...slotFlowsWanted] = flows;
      if (!present_(entry)) {
        note("flow-changed", "entry flow");
        present = false;
      }
      let missing = 0;
      const hypervisorOf = new Map(vip.backends.map((b) => [backendKey(b), b.hypervisor]));
      slotFlowsWanted.forEach((f) => {
        const owner = table.backends[table.owner[f.match.reg12!]];
        if (cut.has(hypervisorOf.get(owner)!) || !present_(f)) {
          missing++;
          wrong.add(owner);
        }
      });
      if (missing > 0) note("slot-flows-changed", `${missing} slot flows`);
    });
    if (!present) continue;
    vips.push({ ...vip, backends: vip.backends.filter((b) => !wrong.has(backendKey(b))) });
  }
  return { inputs: { ...d, vips }, observations };
}
