import type { DistributorAmphora, DistributorAttachmentInputs } from "../../model/inputs.generated";
import { derivedId, interfaceName, MAX_BUCKET_ID, MAX_GROUP_ID, ownerCookie } from "../../model/ids";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { toFlowEntry, toGroupEntry, type Action, type Flow, type FlowEntry, type Group, type GroupEntry, type HashField, type Modification, type SelectBucket } from "../../openflow";

/**
 * DistributorAttachment as pure data: which amphora serves each slot, the
 * flows and select group that amount to it, and the modifications that take
 * an actual bridge there. No I/O here.
 */

export const KIND = "distributor-attachment";
export const OWNER_KEY = "ovslb:owner";
export const DEVICE_KEY = "ovslb:device";
export const ATTACHMENT_KEY = "ovslb:attachment";
/** The frontend patch port's OpenFlow number on the attachment's bridge (ofport_request), so flows are planned without I/O. */
export const FRONTEND_OFPORT = 1;
/** Every bucket weighs the same: slots share traffic equally (weights scale a 16-bit score, DESIGN §1). */
export const BUCKET_WEIGHT = 100;

const FIVE_TUPLE: readonly HashField[] = ["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst"];
const SOURCE_IP: readonly HashField[] = ["ip_src"];

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

export function withDefaults(inputs: DistributorAttachmentInputs): DistributorAttachmentInputs {
  return {
    affinity: "5-tuple",
    returnPath: "direct",
    ...inputs,
    frontendMac: (inputs.frontendMac ?? derivedFrontendMac(inputs.attachmentId)).toLowerCase(),
    amphorae: inputs.amphorae.map((a) => ({ ...a, mac: a.mac.toLowerCase() })),
  };
}

export function checkRules(inputs: DistributorAttachmentInputs): CheckFailure[] {
  const failures: CheckFailure[] = [...checkConnection(inputs.host.connection, "host.connection")];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  const names = new Set<string>();
  const macs = new Map<string, number>();
  const activeSlots = new Map<number, number>();
  let standbys = 0;
  inputs.amphorae.forEach((a, i) => {
    const at = `amphorae[${i}]`;
    if (names.has(a.name)) fail(`${at}.name`, "is used by another amphora of this attachment");
    names.add(a.name);
    const mac = a.mac.toLowerCase();
    if (macs.has(mac)) fail(`${at}.mac`, `is also amphorae[${macs.get(mac)}]'s MAC`);
    macs.set(mac, i);
    if (a.role === "standby") {
      standbys++;
      if (a.slot !== undefined) fail(`${at}.slot`, "a standby amphora has no slot: it takes over a failed one's");
    } else if (a.slot === undefined) {
      fail(`${at}.slot`, `is required for an ${a.role} amphora`);
    } else if (a.role === "active") {
      if (activeSlots.has(a.slot)) fail(`${at}.slot`, `is already served by amphorae[${activeSlots.get(a.slot)}]`);
      activeSlots.set(a.slot, i);
    }
  });
  if (standbys > 1) fail("amphorae", "at most one standby amphora");
  if (inputs.amphorae.length > 0 && failures.length === 0 && assignSlots(inputs.amphorae).slots.length === 0) {
    fail("amphorae", "no slot would be served: give at least one active amphora (or a standby for a failed one)");
  }
  const frontendMac = (inputs.frontendMac ?? derivedFrontendMac(inputs.attachmentId)).toLowerCase();
  if (macs.has(frontendMac)) fail("frontendMac", `is amphorae[${macs.get(frontendMac)}]'s MAC`);
  if (inputs.returnPath === "hairpin" && !inputs.gatewayMac) fail("gatewayMac", "is required when returnPath is hairpin");
  if (inputs.returnPath !== "hairpin" && inputs.gatewayMac) fail("gatewayMac", "is only used when returnPath is hairpin");
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

/**
 * The slot each amphora serves. An active amphora serves its own slot; the
 * slot of a failed one (not re-filled by a new active amphora) is taken over
 * in place by the standby, lowest slot first; any further failed slot is
 * vacant and gets no bucket, so no traffic is sent to a failed amphora.
 */
export function assignSlots(amphorae: readonly DistributorAmphora[]): { slots: SlotOccupant[]; vacant: number[] } {
  const served = new Map<number, SlotOccupant>();
  for (const a of amphorae) {
    if (a.role === "active" && a.slot !== undefined) {
      served.set(a.slot, { slot: a.slot, amphora: a.name, mac: a.mac.toLowerCase(), ...(a.watchPort ? { watchPort: a.watchPort } : {}) });
    }
  }
  const failed = amphorae
    .filter((a) => a.role === "failed" && a.slot !== undefined && !served.has(a.slot))
    .sort((x, y) => x.slot! - y.slot!);
  let standby = amphorae.find((a) => a.role === "standby");
  const vacant: number[] = [];
  for (const f of failed) {
    if (served.has(f.slot!)) continue;
    if (!standby) {
      if (!vacant.includes(f.slot!)) vacant.push(f.slot!);
      continue;
    }
    // The standby inherits the failed slot's liveness port too: it is the same slot.
    const watchPort = standby.watchPort ?? f.watchPort;
    served.set(f.slot!, { slot: f.slot!, amphora: standby.name, mac: standby.mac.toLowerCase(), takenOver: f.name, ...(watchPort ? { watchPort } : {}) });
    standby = undefined;
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
  const groupId = previous?.groupId ?? derivedId([KIND, id, "group"], MAX_GROUP_ID, groupTaken);
  const bucketIds = new Map<number, number>();
  for (const p of previous?.slots ?? []) bucketIds.set(p.slot, p.bucketId);
  const used = new Set(bucketIds.values());
  for (const slot of slots) {
    if (bucketIds.has(slot)) continue;
    const bucketId = derivedId([KIND, id, "slot", String(slot)], MAX_BUCKET_ID, (b) => used.has(b));
    bucketIds.set(slot, bucketId);
    used.add(bucketId);
  }
  return { cookie: ownerCookie(KIND, id), groupId, bucketIds };
}

export interface DesiredDataplane {
  flows: Flow[];
  group: Group;
}

const setMac = (field: "eth_src" | "eth_dst" | "arp_sha", value: string): Action => ({ type: "set_field", field, value });

/** The attachment's flows (all in table 0, all with its cookie) and its select group. */
export function desiredDataplane(inputs: DistributorAttachmentInputs, ids: DataplaneIds): DesiredDataplane {
  const d = withDefaults(inputs);
  const fe = d.frontendMac!;
  const inPort = FRONTEND_OFPORT;
  const { slots } = assignSlots(d.amphorae);
  const flow = (priority: number, match: Flow["match"], actions: Action[]): Flow => ({ table: 0, priority, cookie: ids.cookie, match, actions });
  const flows: Flow[] = [
    // The distributor answers ARP for the VIP with the frontend MAC (amphorae must not).
    flow(200, { protocol: "arp", in_port: inPort, arp_op: 1, arp_tpa: d.vip }, [
      { type: "move", src: "NXM_OF_ETH_SRC", dst: "NXM_OF_ETH_DST" },
      setMac("eth_src", fe),
      { type: "set_field", field: "arp_op", value: 2 },
      { type: "move", src: "NXM_NX_ARP_SHA", dst: "NXM_NX_ARP_THA" },
      setMac("arp_sha", fe),
      { type: "move", src: "NXM_OF_ARP_SPA", dst: "NXM_OF_ARP_TPA" },
      { type: "set_field", field: "arp_spa", value: d.vip },
      { type: "in_port" },
    ]),
    flow(100, { protocol: "ip", in_port: inPort, dl_dst: fe, nw_dst: d.vip }, [{ type: "group", groupId: ids.groupId }]),
    flow(0, {}, [{ type: "drop" }]),
  ];
  if (d.returnPath === "hairpin") {
    // Replies from a serving amphora go back out to the recorded gateway, from the frontend MAC.
    for (const s of slots) {
      flows.push(flow(150, { protocol: "ip", in_port: inPort, dl_src: s.mac, dl_dst: fe, nw_src: d.vip }, [
        setMac("eth_src", fe),
        setMac("eth_dst", d.gatewayMac!),
        { type: "in_port" },
      ]));
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
    fields: d.affinity === "source-ip" ? SOURCE_IP : FIVE_TUPLE,
    buckets,
  };
  return { flows, group };
}

/** What is on the bridge now: the flows carrying the attachment's cookie, and its group if present. */
export interface ActualDataplane {
  flows: readonly FlowEntry[];
  group: GroupEntry | undefined;
}

const flowKey = (f: FlowEntry) => JSON.stringify([f.table, f.priority, Object.entries(f.match).sort()]);
const sameBucket = (a: GroupEntry["buckets"][number], b: GroupEntry["buckets"][number]) =>
  a.weight === b.weight && a.watchPort === b.watchPort && JSON.stringify(a.actions) === JSON.stringify(b.actions);

/**
 * The modifications, in bundle order, that take `actual` to `desired`.
 * Buckets are changed in place: a slot whose amphora changed is removed and
 * re-inserted at the same position with the same id, in the same bundle, so
 * no other slot's traffic moves; a new slot only adds a bucket.
 */
export function planModifications(desired: DesiredDataplane, actual: ActualDataplane): Modification[] {
  const mods: Modification[] = [];
  const want = toGroupEntry(desired.group);
  const have = actual.group;
  const groupId = desired.group.groupId;
  if (!have) {
    mods.push({ op: "add-group", group: desired.group });
  } else if (have.type !== want.type || have.selectionMethod !== want.selectionMethod || JSON.stringify(have.fields) !== JSON.stringify(want.fields)) {
    // Affinity changed: selection changes for every flow anyway, so the group is rewritten whole.
    mods.push({ op: "modify-group", group: desired.group });
  } else {
    const wanted = new Map(want.buckets.map((b, i) => [b.bucketId, { entry: b, bucket: (desired.group.buckets as SelectBucket[])[i] }]));
    let order = have.buckets.map((b) => b.bucketId);
    for (const b of have.buckets) {
      if (!wanted.has(b.bucketId)) {
        mods.push({ op: "remove-buckets", groupId, commandBucketId: b.bucketId });
        order = order.filter((id) => id !== b.bucketId);
      }
    }
    for (const b of have.buckets) {
      const w = wanted.get(b.bucketId);
      if (!w || sameBucket(b, w.entry)) continue;
      const at = order.indexOf(b.bucketId);
      mods.push({ op: "remove-buckets", groupId, commandBucketId: b.bucketId });
      mods.push({ op: "insert-buckets", groupId, commandBucketId: at === 0 ? "first" : order[at - 1], buckets: [w.bucket] });
    }
    const present = new Set(order);
    const added = (desired.group.buckets as SelectBucket[]).filter((b) => !present.has(b.bucketId));
    if (added.length > 0) mods.push({ op: "insert-buckets", groupId, commandBucketId: "last", buckets: added });
  }

  const desiredEntries = desired.flows.map((f) => ({ flow: f, entry: toFlowEntry(f) }));
  const wantedKeys = new Set(desiredEntries.map((d) => flowKey(d.entry)));
  const haveByKey = new Map(actual.flows.map((f) => [flowKey(f), f]));
  const extra = actual.flows.filter((f) => !wantedKeys.has(flowKey(f)));
  if (extra.length > 0) {
    // Flows of ours that should not be there: replace the whole owned set, atomically in this bundle.
    mods.push({ op: "delete-flows", cookie: desired.flows[0].cookie, mask: (1n << 64n) - 1n });
    for (const d of desiredEntries) mods.push({ op: "add-flow", flow: d.flow });
  } else {
    for (const d of desiredEntries) {
      const h = haveByKey.get(flowKey(d.entry));
      if (!h) mods.push({ op: "add-flow", flow: d.flow });
      else if (JSON.stringify(h.actions) !== JSON.stringify(d.entry.actions)) mods.push({ op: "modify-flow", flow: d.flow });
    }
  }
  return mods;
}

/** The amphora MAC a bucket sends to, from its printed actions. */
export function bucketMac(actions: readonly string[]): string | undefined {
  for (const a of actions) {
    const m = /^set_field:([0-9a-f:]{17})->eth_dst$/.exec(a);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * The inputs the actual dataplane amounts to, starting from the recorded
 * ones: a bucket changed by hand shows as its slot's amphora with that MAC,
 * a missing bucket as its amphora gone, a foreign bucket as an extra amphora,
 * so a refresh shows the drift and the next update restores it.
 */
export function actualInputs(
  recorded: DistributorAttachmentInputs,
  ids: DataplaneIds,
  actual: ActualDataplane,
): DistributorAttachmentInputs {
  const d = withDefaults(recorded);
  if (!actual.group) return { ...d, amphorae: d.amphorae.filter((a) => a.role !== "active") };
  const bySlot = new Map([...ids.bucketIds].map(([slot, bucketId]) => [bucketId, slot]));
  const buckets = new Map(actual.group.buckets.map((b) => [b.bucketId, b]));
  const { slots } = assignSlots(d.amphorae);
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
  const affinity = actual.group.fields.length === 1 && actual.group.fields[0] === "ip_src" ? "source-ip" : "5-tuple";
  const arp = actual.flows.find((f) => f.priority === 200 && f.match.protocol === "arp");
  const hairpin = actual.flows.find((f) => f.priority === 150);
  const gateway = hairpin?.actions.map((a) => /^set_field:([0-9a-f:]{17})->eth_dst$/.exec(a)?.[1]).find(Boolean);
  const out: DistributorAttachmentInputs = { ...d, affinity, amphorae, vip: arp?.match.arp_tpa ?? d.vip };
  if (hairpin && gateway) Object.assign(out, { returnPath: "hairpin", gatewayMac: gateway });
  else {
    out.returnPath = "direct";
    delete out.gatewayMac;
  }
  return out;
}
