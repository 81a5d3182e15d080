import type { DistributorAmphora, DistributorAttachmentInputs } from "../../model/inputs.generated";
import type { Defaulted } from "../../model/defaulted";
import type { DistributorSlot } from "../../model/outputs.generated";
import { derivedId, interfaceName, MAX_BUCKET_ID, MAX_GROUP_ID, ownerCookie } from "../../model/ids";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { addressFamily, canonicalAddress } from "../../model/addresses";
import type { BridgeIntent } from "../../engine/plan";
import {
  bucketMac,
  dstAddressOf,
  familyHashField,
  ipFamily,
  ipMatch,
  type Action,
  type DumpedFlow,
  type Flow,
  type Group,
  type GroupEntry,
  type HashField,
  type SelectBucket,
} from "../../openflow";

/**
 * DistributorAttachment as pure data: which amphora serves each slot, the
 * flows and select group that amount to it, and the modifications that take
 * an actual bridge there. No I/O here.
 */

export const KIND = "distributor-attachment";
/** The frontend patch port's OpenFlow number on the attachment's bridge (ofport_request), so flows are planned without I/O. */
export const FRONTEND_OFPORT = 1;
/** Every bucket weighs the same: slots share traffic equally (OVS weights scale a 16-bit hash score, so weight 2 is not twice the share). */
export const BUCKET_WEIGHT = 100;

const FIVE_TUPLE: readonly HashField[] = ["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst"];
const SOURCE_IP: readonly HashField[] = ["ip_src"];
/** The neighbour advertisement's flags (RFC 4861 4.4) in nd_reserved's top bits: Solicited (0x40000000) and Override (0x20000000). */
const NA_SOLICITED_OVERRIDE = 0x60000000;
/** ND option type 2: the target link-layer address (the solicitation's option 1, the source's, rewritten in place). */
const ND_OPTION_TARGET_LLA = 2;

export const attachmentId = (i: Pick<DistributorAttachmentInputs, "deviceId" | "attachmentId">) => `${KIND}/${i.deviceId}/${i.attachmentId}`;

/** Names on the device, from the attachment id alone: a second attachment with the same id collides and is refused. */
export function attachmentNames(i: Pick<DistributorAttachmentInputs, "attachmentId">) {
  return {
    bridge: interfaceName("dlb-", i.attachmentId),
    frontendPort: interfaceName("dfe-", i.attachmentId),
    uplinkPort: interfaceName("dup-", i.attachmentId),
  };
}

/** A locally administered unicast MAC derived from the attachment id; set once on its bridge. */
export function derivedFrontendMac(id: string): string {
  const n = derivedId(["frontend-mac", id], 0xffffffff);
  const bytes = [0x02, 0xd1, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/** DistributorAttachment inputs as withDefaults returns them (MACs in lower case, as OVS prints them): the only form the plans take. */
export type AttachmentDefaulted = Defaulted<DistributorAttachmentInputs, "affinity" | "returnPath" | "frontendMac">;

export function withDefaults(inputs: DistributorAttachmentInputs): AttachmentDefaulted {
  return {
    ...inputs,
    affinity: inputs.affinity ?? "5-tuple",
    returnPath: inputs.returnPath ?? "direct",
    frontendMac: (inputs.frontendMac ?? derivedFrontendMac(inputs.attachmentId)).toLowerCase(),
    vip: canonicalAddress(inputs.vip),
    ...(inputs.nextHop === undefined ? {} : { nextHop: canonicalAddress(inputs.nextHop) }),
    amphorae: inputs.amphorae.map((a) => ({ ...a, mac: a.mac.toLowerCase() })),
  };
}

export function checkRules(inputs: AttachmentDefaulted): CheckFailure[] {
  const failures: CheckFailure[] = [...checkConnection(inputs.host.connection, "host.connection")];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  const names = new Set<string>();
  const macs = new Map<string, number>();
  const activeSlots = new Map<number, number>();
  inputs.amphorae.forEach((a, i) => {
    const at = `amphorae[${i}]`;
    if (names.has(a.name)) fail(`${at}.name`, "is used by another amphora of this attachment");
    names.add(a.name);
    const mac = a.mac;
    if (macs.has(mac)) fail(`${at}.mac`, `is also amphorae[${macs.get(mac)}]'s MAC`);
    macs.set(mac, i);
    if (a.role === "standby") {
      if (a.slot !== undefined) fail(`${at}.slot`, "a standby amphora has no slot: it takes over a failed one's");
    } else if (a.slot === undefined) {
      fail(`${at}.slot`, `is required for an ${a.role} amphora`);
    } else if (a.role === "active") {
      if (activeSlots.has(a.slot)) fail(`${at}.slot`, `is already served by amphorae[${activeSlots.get(a.slot)}]`);
      activeSlots.set(a.slot, i);
    }
  });
  if (inputs.amphorae.length > 0 && failures.length === 0 && assignSlots(inputs.amphorae).slots.length === 0) {
    fail("amphorae", "no slot would be served: give at least one active amphora (or a standby for a failed one)");
  }
  if (macs.has(inputs.frontendMac)) fail("frontendMac", `is amphorae[${macs.get(inputs.frontendMac)}]'s MAC`);
  if (inputs.returnPath === "hairpin" && !inputs.gatewayMac) fail("gatewayMac", "is required when returnPath is hairpin");
  if (inputs.returnPath !== "hairpin" && inputs.gatewayMac) fail("gatewayMac", "is only used when returnPath is hairpin");
  if (inputs.nextHop && inputs.nextHop === inputs.vip) fail("nextHop", "is the VIP: the router's next hop must be an address of its own");
  const family = addressFamily(inputs.vip, "vip", failures);
  const nextHopFamily = inputs.nextHop === undefined ? undefined : addressFamily(inputs.nextHop, "nextHop", failures);
  if (family !== undefined && nextHopFamily !== undefined && family !== nextHopFamily) {
    fail("nextHop", `is IPv${nextHopFamily} while the VIP is IPv${family}: the router reaches a VIP through a next hop of its family`);
  }
  return failures;
}

/** Who serves a slot: `takenOver` when the standby serves a failed amphora's slot. */
export interface SlotOccupant {
  slot: number;
  amphora: string;
  mac: string;
  watchPort?: number;
  takenOver?: string;
}

/** A slot as the attachment's `slots` output records it (what the planner needs of it): how a takeover is remembered between updates. */
export type RecordedSlot = Omit<DistributorSlot, "mac">;

/** A recorded slot with the MAC its bucket sends to: one of the `slots` output (schema/distributor-attachment.json, slot). */
export type OccupiedSlot = DistributorSlot;

/**
 * The slot each amphora serves.
 * 1. An active amphora serves its own slot.
 * 2. A standby recorded (in `previous`, the last outputs) as having taken
 *    over a slot keeps it, in place, for as long as it is listed as a standby
 *    and no active amphora is declared for that slot: a later failure never
 *    moves it, so only the newly failed slot's connections move.
 * 3. The slot of a failed amphora that nobody serves is taken over by a free
 *    standby (one that serves no slot yet, in list order), lowest slot first; a failed slot
 *    left over is vacant and gets no bucket, so nothing is sent to a failed
 *    amphora.
 */
export function assignSlots(amphorae: readonly DistributorAmphora[], previous: readonly RecordedSlot[] = []): { slots: SlotOccupant[]; vacant: number[] } {
  const served = new Map<number, SlotOccupant>();
  const occupant = (a: DistributorAmphora, slot: number, takenOver?: DistributorAmphora | string, inherited?: number): SlotOccupant => {
    const watchPort = a.watchPort ?? inherited;
    const over = typeof takenOver === "string" ? takenOver : takenOver?.name;
    return { slot, amphora: a.name, mac: a.mac.toLowerCase(), ...(over ? { takenOver: over } : {}), ...(watchPort ? { watchPort } : {}) };
  };
  for (const a of amphorae) {
    if (a.role === "active" && a.slot !== undefined) served.set(a.slot, occupant(a, a.slot));
  }
  const failedIn = (slot: number) => amphorae.find((a) => a.role === "failed" && a.slot === slot);
  const standbys = amphorae.filter((a) => a.role === "standby");
  const busy = new Set<string>();
  for (const p of previous) {
    const standby = standbys.find((a) => a.name === p.amphora);
    if (!p.takenOver || !standby || served.has(p.slot) || busy.has(standby.name)) continue;
    // The standby inherits the failed slot's liveness port too: it is the same slot.
    served.set(p.slot, occupant(standby, p.slot, p.takenOver, failedIn(p.slot)?.watchPort));
    busy.add(standby.name);
  }
  const failed = amphorae.filter((a) => a.role === "failed" && a.slot !== undefined && !served.has(a.slot)).sort((x, y) => x.slot! - y.slot!);
  const free = standbys.filter((a) => !busy.has(a.name));
  const vacant: number[] = [];
  for (const f of failed) {
    if (served.has(f.slot!)) continue;
    const standby = free.shift();
    if (standby) served.set(f.slot!, occupant(standby, f.slot!, f, f.watchPort));
    else if (!vacant.includes(f.slot!)) vacant.push(f.slot!);
  }
  return { slots: [...served.values()].sort((x, y) => x.slot - y.slot), vacant };
}

/** The ids an attachment uses on its bridge, recorded in its outputs and reused (sticky). */
export interface DataplaneIds {
  cookie: bigint;
  groupId: number;
  /** slot -> bucket id */
  bucketIds: ReadonlyMap<number, number>;
}

/**
 * Group id and bucket ids: reused from the previous outputs, else derived
 * from the attachment id (never the VIP) and the slot (never the amphora),
 * probing past ids taken by others.
 */
export function planIds(
  inputs: DistributorAttachmentInputs,
  slots: readonly number[],
  previous: { groupId?: number; slots?: readonly { slot: number; bucketId: number }[] } | undefined,
  groupTaken: (id: number) => boolean = () => false,
): DataplaneIds {
  const id = attachmentId(inputs);
  // One load balancer on several devices: ids from the load balancer, so every device holds the same group.
  const source = inputs.loadBalancerId ? ["load-balancer", inputs.loadBalancerId] : [id];
  const groupId = previous?.groupId ?? derivedId([KIND, ...source, "group"], MAX_GROUP_ID, groupTaken);
  const bucketIds = new Map<number, number>();
  for (const p of previous?.slots ?? []) bucketIds.set(p.slot, p.bucketId);
  const used = new Set(bucketIds.values());
  for (const slot of slots) {
    if (bucketIds.has(slot)) continue;
    const bucketId = derivedId([KIND, ...source, "slot", String(slot)], MAX_BUCKET_ID, (b) => used.has(b));
    bucketIds.set(slot, bucketId);
    used.add(bucketId);
  }
  return { cookie: ownerCookie(KIND, id), groupId, bucketIds };
}

export interface DesiredDataplane {
  flows: Flow[];
  group: Group;
}

const setMac = (field: "eth_src" | "eth_dst" | "arp_sha" | "nd_tll", value: string): Action => ({ type: "set_field", field, value });

/** The table where an ND responder's advertisement gets its target link-layer address. */
export const ND_REPLY_TABLE = 1;

/**
 * The distributor answers for the VIP (and its next hop) with the frontend
 * MAC (amphorae must not): ARP requests for an IPv4 address, neighbour
 * solicitations for an IPv6 one, each turned into the reply in OpenFlow and
 * sent back out the port it came in on. The ND reply rewrites the
 * solicitation in place (type 136, Solicited and Override set, its source
 * link-layer option turned into the target's), which needs nd_reserved and
 * nd_options_type: OVS sets those only on the userspace datapath, where the
 * attachment's bridge always is. The option's address is set in a second
 * table, as nd_tll: OVS accepts nd_tll only in a flow matching an
 * advertisement, and its datapath sets the option type before the address
 * (nd_sll set on the solicitation would land in an option that is no longer
 * one). A solicitation from :: (duplicate address detection) gets an answer
 * to :: that its sender drops.
 */
export function neighbourResponder(address: string, mac: string, inPort: number): Pick<Flow, "table" | "match" | "actions">[] {
  const swapEth: Action[] = [{ type: "move", src: "NXM_OF_ETH_SRC", dst: "NXM_OF_ETH_DST" }, setMac("eth_src", mac)];
  if (ipFamily(address) === 6) {
    const nd = { protocol: "icmp6", in_port: inPort, nd_target: address } as const;
    return [
      {
        table: 0,
        match: { ...nd, icmp_type: 135 },
        actions: [
          ...swapEth,
          { type: "move", src: "NXM_NX_IPV6_SRC", dst: "NXM_NX_IPV6_DST" },
          { type: "set_field", field: "ipv6_src", value: address },
          { type: "set_field", field: "icmpv6_type", value: 136 },
          { type: "set_field", field: "nd_reserved", value: NA_SOLICITED_OVERRIDE },
          { type: "set_field", field: "nd_options_type", value: ND_OPTION_TARGET_LLA },
          { type: "resubmit", table: ND_REPLY_TABLE },
        ],
      },
      { table: ND_REPLY_TABLE, match: { ...nd, icmp_type: 136 }, actions: [setMac("nd_tll", mac), { type: "in_port" }] },
    ];
  }
  return [
    {
      table: 0,
      match: { protocol: "arp", in_port: inPort, arp_op: 1, arp_tpa: address },
      actions: [
        ...swapEth,
        { type: "set_field", field: "arp_op", value: 2 },
        { type: "move", src: "NXM_NX_ARP_SHA", dst: "NXM_NX_ARP_THA" },
        setMac("arp_sha", mac),
        { type: "move", src: "NXM_OF_ARP_SPA", dst: "NXM_OF_ARP_TPA" },
        { type: "set_field", field: "arp_spa", value: address },
        { type: "in_port" },
      ],
    },
  ];
}

/** The attachment's flows (in table 0, an ND responder's second half in ND_REPLY_TABLE; all with its cookie) and its select group, for the slots as assigned. */
export function desiredDataplane(d: AttachmentDefaulted, ids: DataplaneIds, slots: readonly SlotOccupant[]): DesiredDataplane {
  const fe = d.frontendMac;
  const inPort = FRONTEND_OFPORT;
  const flow = (priority: number, match: Flow["match"], actions: readonly Action[]): Flow => ({ table: 0, priority, cookie: ids.cookie, match, actions });
  const flows: Flow[] = [
    ...[d.vip, ...(d.nextHop ? [d.nextHop] : [])].flatMap((address) =>
      neighbourResponder(address, fe, inPort).map((r) => ({ ...flow(200, r.match, r.actions), table: r.table })),
    ),
    flow(100, { in_port: inPort, dl_dst: fe, ...ipMatch("ip", "dst", d.vip) }, [{ type: "group", groupId: ids.groupId }]),
    flow(0, {}, [{ type: "drop" }]),
  ];
  if (d.returnPath === "hairpin") {
    // Replies from a serving amphora go back out to the recorded gateway, from the frontend MAC.
    for (const s of slots) {
      flows.push(
        flow(150, { in_port: inPort, dl_src: s.mac, dl_dst: fe, ...ipMatch("ip", "src", d.vip) }, [
          setMac("eth_src", fe),
          setMac("eth_dst", d.gatewayMac!),
          { type: "in_port" },
        ]),
      );
    }
  }
  const buckets: SelectBucket[] = slots.map((s) => ({
    bucketId: ids.bucketIds.get(s.slot)!,
    weight: BUCKET_WEIGHT,
    ...(s.watchPort ? { watchPort: s.watchPort } : {}),
    // L2 only: ip.dst stays the VIP; back out the ingress port (one-legged).
    actions: [setMac("eth_src", fe), setMac("eth_dst", s.mac), { type: "in_port" }],
  }));
  const group: Group = {
    groupId: ids.groupId,
    type: "select",
    selectionMethod: "hash",
    fields: (d.affinity === "source-ip" ? SOURCE_IP : FIVE_TUPLE).map((f) => familyHashField(f, d.vip)),
    buckets,
  };
  return { flows, group };
}

/** What the attachment wants on its own bridge. Buckets change in place (the engine's group differ), so a takeover moves no other slot. */
export function attachmentIntent(inputs: AttachmentDefaulted, ids: DataplaneIds, slots: readonly SlotOccupant[]): BridgeIntent {
  const { flows, group } = desiredDataplane(inputs, ids, slots);
  return {
    cookie: ids.cookie,
    flows,
    groups: [group],
    recordedGroups: new Map([[ids.groupId, new Set(ids.bucketIds.values())]]),
    owner: `attachment ${inputs.attachmentId}`,
  };
}

/** What is on the bridge now: the flows carrying the attachment's cookie, and its group if present. */
export interface ActualDataplane {
  flows: readonly DumpedFlow[];
  group: GroupEntry | undefined;
}

/**
 * The inputs the actual dataplane amounts to, starting from the recorded
 * ones: a bucket changed by hand shows as its slot's amphora with that MAC,
 * a missing bucket as its amphora gone, a foreign bucket as an extra amphora,
 * so a refresh shows the drift and the next update restores it.
 */
export function actualInputs(
  d: AttachmentDefaulted,
  ids: DataplaneIds,
  actual: ActualDataplane,
  previous: readonly RecordedSlot[] = [],
): DistributorAttachmentInputs {
  if (!actual.group) return { ...d, amphorae: d.amphorae.filter((a) => a.role !== "active") };
  const bySlot = new Map([...ids.bucketIds].map(([slot, bucketId]) => [bucketId, slot]));
  const buckets = new Map(actual.group.buckets.map((b) => [b.bucketId, b]));
  const { slots } = assignSlots(d.amphorae, previous);
  const occupant = new Map(slots.map((s) => [s.amphora, s]));
  const amphorae: DistributorAmphora[] = [];
  for (const a of d.amphorae) {
    const s = occupant.get(a.name);
    if (!s) {
      amphorae.push(a);
      continue;
    }
    const bucket = buckets.get(ids.bucketIds.get(s.slot)!);
    if (!bucket) continue;
    amphorae.push({ ...a, mac: bucketMac(bucket.actions) ?? a.mac });
  }
  for (const b of actual.group.buckets) {
    if (!bySlot.has(b.bucketId) || !slots.some((s) => ids.bucketIds.get(s.slot) === b.bucketId)) {
      amphorae.push({ name: `unknown-bucket-${b.bucketId}`, mac: bucketMac(b.actions) ?? "00:00:00:00:00:00", role: "active" });
    }
  }
  const affinity = actual.group.fields.length === 1 && actual.group.fields[0] === familyHashField("ip_src", d.vip) ? "source-ip" : "5-tuple";
  // Each address the bridge answers for (ARP or ND), and the VIP among them.
  const answered = actual.flows.filter((f) => f.table === 0 && f.priority === 200).map((f) => f.match.arp_tpa ?? f.match.nd_target);
  const vipFlow = actual.flows.find((f) => f.priority === 100 && dstAddressOf(f.match) !== undefined);
  const vip = answered.includes(d.vip) ? d.vip : (dstAddressOf(vipFlow?.match ?? {}) ?? (answered.length === 1 ? answered[0] : undefined));
  const hairpin = actual.flows.find((f) => f.priority === 150);
  const gateway = hairpin && bucketMac(hairpin.actions);
  const out: DistributorAttachmentInputs = { ...d, affinity, amphorae, vip: vip ?? d.vip };
  // A next hop whose responder is gone reads as none, so the diff shows it.
  if (d.nextHop && !answered.includes(d.nextHop)) delete out.nextHop;
  if (hairpin && gateway) Object.assign(out, { returnPath: "hairpin", gatewayMac: gateway });
  else {
    out.returnPath = "direct";
    delete out.gatewayMac;
  }
  return out;
}

/**
 * What read reports: the inputs the bridge amounts to (actualInputs), with
 * the uplink port's VLAN tag as found, and the recorded slots as the bridge
 * has them (a slot whose bucket is gone is dropped; one changed by hand shows
 * its actual MAC).
 */
export function readBack(
  recorded: AttachmentDefaulted,
  ids: DataplaneIds,
  actual: ActualDataplane,
  slots: readonly OccupiedSlot[],
  uplinkTag: number | undefined,
): { inputs: DistributorAttachmentInputs; slots: OccupiedSlot[] } {
  const inputs = actualInputs(recorded, ids, actual, slots);
  if (uplinkTag !== undefined && uplinkTag > 0) inputs.vlan = uplinkTag;
  else delete inputs.vlan;
  const buckets = new Map(actual.group?.buckets.map((b) => [b.bucketId, b]) ?? []);
  return {
    inputs,
    slots: slots.filter((x) => buckets.has(x.bucketId)).map((x) => ({ ...x, mac: bucketMac(buckets.get(x.bucketId)!.actions) ?? x.mac })),
  };
}
