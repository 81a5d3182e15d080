import type { DeferredNatDefaulted as Inputs } from "./plan";
import type { DeferredNatVip } from "../../model/inputs.generated";
import type { CheckFailure } from "../../model/validate";
import { ipMatch, type Flow, type MultipathFields } from "../../openflow";
import { handOnKey } from "../../model/ids";
import {
  DEFAULT_HOLD_SECONDS,
  DEVIATION_DIVISOR,
  MAX_SLOTS,
  NONE,
  planSlots,
  readSlots,
  recordSlots,
  slotCount,
  type RecordedSlotTable,
  type SlotPlan,
  type SlotTable,
} from "./slots";
import { backendKey, vipKey } from "./ids";

/**
 * secondChance on the gateways, as pure data. Per VIP, on every gateway:
 *
 * table 0   proto,in_port=SEG,nw_dst=VIP,tp_dst=P -> multipath(FIELDS,0,modulo_n,S,0,reg12[0..k-1]), resubmit(,70)
 * table 70  proto,nw_dst=VIP,tp_dst=P,reg12=s     -> tun_id=PREVIOUS_HV, group:OWNER
 * group OWNER (one per active backend)             -> eth_src=GW, eth_dst=OWNER, output:TUNNEL(OWNER's hv)
 *
 * The key carries the tunnel address of the hypervisor of the slot's
 * previous owner (0: none, or the same hypervisor, whose conntrack already
 * knows the connection). The gateways stay stateless: no conntrack, no
 * learned flows; every gateway holds the same table, so a 5-tuple gets the
 * same owner and previous owner on each.
 *
 * With healthCheck.bfd an owner group is fast failover: while the gateway's
 * BFD session to the owner's hypervisor is down, its slots' packets go
 * (key 0) to the VIP's select group instead, whose buckets watch the same
 * sessions, so a dead hypervisor's slots spread over the live backends by
 * weight and no other slot moves. OVS does this in the datapath within the
 * BFD detection time, with no one rewriting a flow.
 */

export const SLOT_TABLE = 70;
export const SLOT_PRIORITY = 100;
/** The most slot flows one load balancer may hold on a gateway. */
export const MAX_SLOT_FLOWS = 262_144;
/** Below this many slots per unit of weight a share is off by more than about 6%: refused. */
export const MIN_SLOTS_PER_WEIGHT = 16;

type Protocol = DeferredNatVip["protocol"];

/** The multipath field set for the selection fields, or undefined when multipath has none that hashes exactly those. */
export function multipathFields(fields: readonly string[], protocol: Protocol): MultipathFields | undefined {
  const set = [...new Set(fields)].sort().join(",");
  if (set === "ip_dst,ip_src,tp_dst,tp_src") return protocol === "udp" ? "symmetric_l3l4+udp" : "symmetric_l3l4";
  if (set === "ip_dst,ip_src") return "symmetric_l3";
  if (set === "ip_src") return "nw_src";
  if (set === "ip_dst") return "nw_dst";
  return undefined;
}

/** Refusals of what secondChance cannot carry. */
export function checkSecondChance(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (!inputs.secondChance) {
    inputs.vips.forEach((vip, v) =>
      vip.backends.forEach((b, i) => {
        if (b.state === "draining") {
          fail(
            `vips[${v}].backends[${i}].state`,
            "draining needs secondChance: a select group cannot keep a backend's established connections while giving it no new ones",
          );
        }
      }),
    );
    return failures;
  }
  inputs.hypervisors.forEach((h, i) => {
    if ((h.delivery ?? inputs.delivery) !== "gre") {
      fail(`hypervisors[${i}].delivery`, "must be gre with secondChance: the previous owner's hypervisor travels in the GRE key");
    }
  });
  const fields = inputs.selectionFields ?? ["ip_src", "ip_dst", "tp_src", "tp_dst"];
  if (!multipathFields(fields, "tcp")) {
    fail("selectionFields", "with secondChance must be all four fields, ip_src and ip_dst, ip_src, or ip_dst: the field sets multipath can hash");
  }
  let flows = 0;
  inputs.vips.forEach((vip, v) => {
    const weight = vip.backends.filter((b) => b.state !== "draining").reduce((n, b) => n + b.weight, 0);
    if (vip.backends.length > 0 && weight === 0) fail(`vips[${v}].backends`, "are all draining: a VIP needs an active backend to take new connections");
    const size = inputs.secondChance!.slots ?? slotCount(vip.backends.map((b) => ({ key: "", weight: b.weight, state: "active" })));
    if (weight * MIN_SLOTS_PER_WEIGHT > size) {
      fail(
        `vips[${v}].backends`,
        `weigh ${weight} in all: ${size} slots give under ${MIN_SLOTS_PER_WEIGHT} per unit of weight, too few to keep the shares (at most ${size / MIN_SLOTS_PER_WEIGHT} units; give secondChance.slots up to ${MAX_SLOTS})`,
      );
    }
    flows += size;
  });
  if (flows > MAX_SLOT_FLOWS) fail("vips", `need ${flows} slot flows on every gateway; one load balancer holds at most ${MAX_SLOT_FLOWS}`);
  return failures;
}

/** What planning every VIP's table found: the tables, the moves, the deviation and history, and changes that would need history released. */
export interface SlotPlans {
  tables: Record<string, SlotTable>;
  moves: Record<string, { moved: number; minimum: number }>;
  /** Per VIP, backend key -> slots over (+) or under (-) its quota, where not 0. */
  deviation: Record<string, Map<string, number>>;
  history: Record<string, SlotPlan["history"] & { released: number }>;
  unsafe: { vip: string; slots: number; expires?: number }[];
}

/** Every VIP's table, planned at `now` (Unix seconds). */
export function planAllSlots(
  inputs: Inputs,
  recorded: Readonly<Record<string, RecordedSlotTable>> | undefined,
  now = Math.floor(Date.now() / 1000),
): SlotPlans {
  const plans: SlotPlans = { tables: {}, moves: {}, deviation: {}, history: {}, unsafe: [] };
  const sc = inputs.secondChance;
  for (const vip of inputs.vips) {
    const key = vipKey(vip);
    const before = recorded?.[key] ? readSlots(recorded[key]) : undefined;
    const backends = vip.backends.map((b) => ({ key: backendKey(b), weight: b.weight, state: b.state ?? ("active" as const) }));
    const plan = planSlots(key, backends, before, {
      ...(sc?.slots ? { size: sc.slots } : {}),
      release: sc?.release ?? false,
      holdSeconds: sc?.holdSeconds ?? DEFAULT_HOLD_SECONDS,
      now,
    });
    plans.tables[key] = plan.table;
    plans.moves[key] = { moved: plan.moved, minimum: plan.minimum };
    plans.deviation[key] = plan.deviation;
    plans.history[key] = { ...plan.history, released: plan.released };
    if (plan.unsafe > 0) plans.unsafe.push({ vip: key, slots: plan.unsafe, ...(plan.history.expires !== undefined ? { expires: plan.history.expires } : {}) });
  }
  return plans;
}

export const recordAllSlots = (tables: Readonly<Record<string, SlotTable>>) => Object.fromEntries(Object.entries(tables).map(([k, t]) => [k, recordSlots(t)]));

/** The refusal for a change whose shares would be off by more than the bound while history is live, naming the ways out. */
export function unsafeMovesError(unsafe: SlotPlans["unsafe"]): Error {
  const list = unsafe
    .map((u) => `${u.vip} (${u.slots} slots${u.expires !== undefined ? `, history live until ${new Date(u.expires * 1000).toISOString()}` : ""})`)
    .join(", ");
  return new Error(
    `secondChance: this change would leave shares off their weights by more than 1/${DEVIATION_DIVISOR} of a share, or move slots whose previous owners may still hold connections to a third backend: ${list}. ` +
      "Apply it once that history has expired (secondChance.holdSeconds after the moves), or with secondChance.release: true to release the history of just those slots (the connections that depended on it break)",
  );
}

/** Where a slot flow sends its packets, given the slot's owner (backend key) and key. */
export type SlotTarget = (owner: string, key: number) => Flow["actions"];

/** The slot flows' actions: the key, then the owner's group (`ownerGroups`: backend key -> group id). */
export function toOwnerGroup(vip: DeferredNatVip, ownerGroups: Readonly<Record<string, number>>): SlotTarget {
  return (owner, key) => {
    const groupId = ownerGroups[owner];
    if (groupId === undefined) throw new Error(`VIP ${vipKey(vip)}: backend ${owner} owns slots but has no owner group`);
    return [
      { type: "set_field", field: "tun_id", value: key },
      { type: "group", groupId },
    ];
  };
}

/**
 * The slot flows' actions as ovslb 0.2.0 wrote them (the owner's MACs and
 * tunnel port in each flow): read back from state recorded before owner
 * groups, so a refresh of such a stack finds no drift where nothing changed.
 */
export function toOwnerDirectly(vip: DeferredNatVip, gw: { mac: string; tunnelOfports: ReadonlyMap<string, number> }): SlotTarget {
  const byKey = new Map(vip.backends.map((b) => [backendKey(b), b]));
  return (owner, key) => {
    const b = byKey.get(owner)!;
    return [
      { type: "set_field", field: "eth_src", value: gw.mac.toLowerCase() },
      { type: "set_field", field: "eth_dst", value: b.mac.toLowerCase() },
      { type: "set_field", field: "tun_id", value: key },
      { type: "output", port: gw.tunnelOfports.get(b.hypervisor)! },
    ];
  };
}

/** One VIP's flows on one gateway: the entry flow and one flow per owned slot, sent where `target` says. */
export function slotFlows(inputs: Inputs, vip: DeferredNatVip, table: SlotTable, target: SlotTarget, segmentOfport: number, cookie: bigint): Flow[] {
  const hypervisorOf = new Map(vip.backends.map((b) => [backendKey(b), b.hypervisor]));
  const hypervisorAddress = new Map(inputs.hypervisors.map((h) => [h.name, h.tunnelAddress!]));
  const bits = Math.log2(table.size);
  const vipMatch = { ...ipMatch(vip.protocol, "dst", vip.address), tp_dst: vip.port };
  const flows: Flow[] = [
    {
      table: 0,
      priority: SLOT_PRIORITY,
      cookie,
      match: { ...vipMatch, in_port: segmentOfport },
      actions: [
        { type: "multipath", fields: multipathFields(inputs.selectionFields, vip.protocol)!, basis: 0, links: table.size, dst: "NXM_NX_REG12", bits },
        { type: "resubmit", table: SLOT_TABLE },
      ],
    },
  ];
  for (let s = 0; s < table.size; s++) {
    if (table.owner[s] === NONE) continue;
    const owner = table.backends[table.owner[s]];
    const previousHv = table.previous[s] === NONE ? undefined : hypervisorOf.get(table.backends[table.previous[s]]);
    const key = previousHv !== undefined && previousHv !== hypervisorOf.get(owner) ? handOnKey(hypervisorAddress.get(previousHv)!) : 0;
    flows.push({ table: SLOT_TABLE, priority: SLOT_PRIORITY, cookie, match: { ...vipMatch, reg12: s }, actions: target(owner, key) });
  }
  return flows;
}
