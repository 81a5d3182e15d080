import schema from "../../../schema/distributor-attachment.json";
import { applyBundle, observeBridge, type BridgeRef } from "../../engine/bridge";
import { foreignGroupIds, ownedFlows, ownedGroupIds, planBridge, type ApplySummary, type ObservedBridge } from "../../engine/plan";
import type { DistributorAttachmentInputs } from "../../model/inputs.generated";
import { NamedUuid, Transaction, mutation, where, type Row, type Uuid } from "../../ovsdb";
import type { ResourceHandler } from "../../resource-handler";
import { withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import type { OvsdbClient } from "../../transport/ovsdb-client";
import { DEVICE_MARK, stringMap } from "../distributor-device/plan";
import {
  ATTACHMENT_KEY,
  DEVICE_KEY,
  FRONTEND_OFPORT,
  OWNER_KEY,
  actualInputs,
  assignSlots,
  attachmentId,
  attachmentIntent,
  attachmentNames,
  bucketMac,
  checkRules,
  planIds,
  withDefaults,
  type ActualDataplane,
  type DataplaneIds,
  type RecordedSlot,
} from "./plan";

/** What DistributorAttachment records besides its inputs: names and ids on the device, sticky across updates. */
export interface DistributorAttachmentState {
  bridge: string;
  bridgeUuid: string;
  frontendPort: string;
  uplinkPort: string;
  frontendOfport: number;
  /** The owner cookie on every flow, as 0x-hex. */
  cookie: string;
  groupId: number;
  /**
   * Who serves each slot, and the slot's bucket id (never changes while the
   * slot exists). `takenOver` records a takeover: the standby keeps that slot
   * on later updates while it is listed as a standby.
   */
  slots: (RecordedSlot & { mac: string })[];
  /** Failed slots no standby could take: they have no bucket. */
  vacantSlots: number[];
  /** What the last apply sent to the bridge. */
  lastApply?: ApplySummary;
}

const DB = "Open_vSwitch";
const PROTOCOLS = ["OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"];

interface DeviceRows {
  root: Row;
  bridge: Row | undefined;
  /** Bridges on the device already marked with this attachment id, under any name. */
  sameId: Row[];
  uplink: Row | undefined;
  ports: Row[];
}

async function readRows(db: OvsdbClient, i: DistributorAttachmentInputs): Promise<DeviceRows> {
  const names = attachmentNames(i);
  const txn = new Transaction();
  txn.select("Open_vSwitch", [], ["_uuid", "external_ids", "next_cfg", "cur_cfg"]);
  txn.select("Bridge", [where("name", "==", names.bridge)]);
  txn.select("Bridge", [where("external_ids", "includes", { [ATTACHMENT_KEY]: i.attachmentId })], ["_uuid", "name", "external_ids"]);
  txn.select("Bridge", [where("name", "==", i.uplinkBridge)], ["_uuid", "name"]);
  txn.select("Port", [where("name", "==", names.uplinkPort)]);
  txn.select("Port", [where("name", "==", names.frontendPort)]);
  const [root, bridge, sameId, uplink, up, fe] = await db.transact(DB, txn.operations);
  return { root: root.rows![0], bridge: bridge.rows?.[0], sameId: sameId.rows ?? [], uplink: uplink.rows?.[0], ports: [...up.rows!, ...fe.rows!] };
}

const ownerOf = (row: Row) => stringMap(row.external_ids)[OWNER_KEY];

/** Refuses a device that is not registered as deviceId, and ids or names that someone else holds. */
function refuseCollisions(s: OvsHostSession, i: DistributorAttachmentInputs, rows: DeviceRows, creating: boolean): void {
  const me = attachmentId(i);
  const registered = stringMap(rows.root.external_ids)[DEVICE_MARK];
  if (registered !== i.deviceId) {
    throw new Error(`${s.hostName}: the host is ${registered ? `distributor device ${registered}` : "not a registered distributor device"}, not ${i.deviceId}`);
  }
  if (!rows.uplink) throw new Error(`${s.hostName}: uplink bridge ${i.uplinkBridge} does not exist on device ${i.deviceId}`);
  const names = attachmentNames(i);
  const taken = [
    ...(rows.bridge && (creating || ownerOf(rows.bridge) !== me) ? [`bridge ${names.bridge} (${ownerOf(rows.bridge) ?? "not owned by ovslb"})`] : []),
    ...rows.sameId.filter((b) => b.name !== names.bridge).map((b) => `bridge ${String(b.name)} (${ownerOf(b)})`),
    ...rows.ports.filter((p) => (creating && !rows.bridge) || ownerOf(p) !== me).map((p) => `port ${String(p.name)} (${ownerOf(p) ?? "not owned by ovslb"})`),
  ];
  if (taken.length > 0) {
    throw new Error(`${s.hostName}: attachment id ${i.attachmentId} collides on device ${i.deviceId}: ${taken.join(", ")} already exist; refusing to take them over`);
  }
}

/** One transaction: the attachment's bridge with its frontend patch port, and the patch's peer on the uplink. */
function createRows(txn: Transaction, i: DistributorAttachmentInputs, rows: DeviceRows): number {
  const d = withDefaults(i);
  const names = attachmentNames(i);
  const marks = { [OWNER_KEY]: attachmentId(i), [DEVICE_KEY]: i.deviceId, [ATTACHMENT_KEY]: i.attachmentId };
  const none = { columns: ["_uuid"], until: "==" as const, rows: [] };
  txn.wait("Bridge", [where("name", "==", names.bridge)], none);
  txn.wait("Port", [where("name", "==", names.uplinkPort)], none);
  txn.wait("Port", [where("name", "==", names.frontendPort)], none);
  txn.wait("Bridge", [where("_uuid", "==", rows.uplink!._uuid as Uuid)], { columns: ["name"], until: "==", rows: [{ name: i.uplinkBridge }] });
  const local = txn.insert("Interface", { name: names.bridge, type: "internal" }, "local_if");
  const localPort = txn.insert("Port", { name: names.bridge, interfaces: [local] }, "local_port");
  const fe = txn.insert("Interface", { name: names.frontendPort, type: "patch", options: { peer: names.uplinkPort }, ofport_request: FRONTEND_OFPORT }, "fe_if");
  const fePort = txn.insert("Port", { name: names.frontendPort, interfaces: [fe], external_ids: marks }, "fe_port");
  const up = txn.insert("Interface", { name: names.uplinkPort, type: "patch", options: { peer: names.frontendPort } }, "up_if");
  // An access port: only the tenant's VLAN (0 = untagged) reaches the attachment.
  const upPort = txn.insert("Port", { name: names.uplinkPort, interfaces: [up], tag: d.vlan ?? 0, external_ids: marks }, "up_port");
  const bridgeAt = txn.operations.length;
  const bridge: NamedUuid = txn.insert("Bridge", {
    name: names.bridge,
    datapath_type: "netdev",
    fail_mode: "secure",
    protocols: PROTOCOLS,
    ports: [localPort, fePort],
    external_ids: marks,
    // The frontend MAC is the bridge's own, set once and only on this attachment's bridge.
    other_config: { hwaddr: d.frontendMac! },
  }, "bridge");
  txn.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [bridge])]);
  txn.mutate("Bridge", [where("_uuid", "==", rows.uplink!._uuid as Uuid)], [mutation("ports", "insert", [upPort])]);
  return bridgeAt;
}

/** Waits until ovs-vswitchd has applied the database (cur_cfg catches up with next_cfg), as `ovs-vsctl --wait` does. */
async function waitApplied(db: OvsdbClient, nextCfg: number, hostName: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const txn = new Transaction();
    txn.select("Open_vSwitch", [], ["cur_cfg"]);
    const [r] = await db.transact(DB, txn.operations);
    if (Number(r.rows![0].cur_cfg) >= nextCfg) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`${hostName}: ovs-vswitchd did not apply configuration ${nextCfg} within 10 s`);
}

/** Commits txn with a next_cfg bump and waits for ovs-vswitchd to apply it. Returns the results. */
async function commitApplied(s: OvsHostSession, db: OvsdbClient, txn: Transaction) {
  txn.mutate("Open_vSwitch", [], [mutation("next_cfg", "+=", 1)]);
  const cfgAt = txn.select("Open_vSwitch", [], ["next_cfg"]);
  const results = await db.transact(DB, txn.operations);
  await waitApplied(db, Number(results[cfgAt].rows![0].next_cfg), s.hostName);
  return results;
}

/** The attachment's bridge as the engine sees it: its own flows (it is the bridge's only owner) and the groups. */
async function observeAttachment(ref: BridgeRef, cookie: bigint): Promise<ObservedBridge> {
  const observed = await observeBridge(ref, "owned", cookie);
  if (!observed) throw new Error(`${ref.session.hostName}: bridge ${ref.bridge} does not exist`);
  return observed;
}

/** The slots recorded in the last outputs, as the planner takes them. */
const recordedSlots = (state: DistributorAttachmentState | undefined): RecordedSlot[] => state?.slots ?? [];

/** The owned flows and the attachment's group if one of them references it (or its recorded buckets mark it). */
function ownDataplane(d: DistributorAttachmentInputs, observed: ObservedBridge, ids: DataplaneIds): ActualDataplane {
  const owned = ownedGroupIds(observed, attachmentIntent(d, ids, []));
  return { flows: ownedFlows(observed, ids.cookie), group: owned.has(ids.groupId) ? observed.groups.find((g) => g.groupId === ids.groupId) : undefined };
}

/** Brings the device to the inputs: OVSDB rows first (one transaction), then one bundle on the attachment's bridge. */
async function ensure(
  s: OvsHostSession,
  inputs: DistributorAttachmentInputs,
  previous: DistributorAttachmentState | undefined,
): Promise<DistributorAttachmentState> {
  const d = withDefaults(inputs);
  const names = attachmentNames(d);
  const db = await s.vswitchDb();
  let rows = await readRows(db, d);
  const creating = previous === undefined;
  refuseCollisions(s, d, rows, creating);

  let made = false;
  if (!rows.bridge) {
    const txn = new Transaction();
    txn.comment(`ovslb: attach ${attachmentId(d)}`);
    createRows(txn, d, rows);
    await commitApplied(s, db, txn);
    made = true;
    rows = await readRows(db, d);
  } else {
    // Put back settings changed on the host; the MAC and names never change for an existing attachment.
    const txn = new Transaction();
    const hwaddr = stringMap(rows.bridge.other_config).hwaddr;
    if (hwaddr !== d.frontendMac) {
      txn.wait("Bridge", [where("name", "==", names.bridge)], { columns: ["_uuid"], until: "==", rows: [{ _uuid: rows.bridge._uuid as Uuid }] });
      txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid as Uuid)], [mutation("other_config", "delete", ["hwaddr"])]);
      txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid as Uuid)], [mutation("other_config", "insert", { hwaddr: d.frontendMac! })]);
    }
    const up = rows.ports.find((p) => p.name === names.uplinkPort);
    const tag = up ? (Array.isArray(up.tag) ? up.tag[0] : up.tag) : undefined;
    if (up && Number(tag ?? -1) !== (d.vlan ?? 0)) {
      txn.wait("Port", [where("_uuid", "==", up._uuid as Uuid)], { columns: ["external_ids"], until: "==", rows: [{ external_ids: up.external_ids as Map<string, string> }] });
      txn.update("Port", [where("_uuid", "==", up._uuid as Uuid)], { tag: d.vlan ?? 0 });
    }
    if (txn.operations.length > 0) await commitApplied(s, db, txn);
  }

  const ref: BridgeRef = { session: s, bridge: names.bridge };
  try {
    const { slots, vacant } = assignSlots(d.amphorae, recordedSlots(previous));
    const kept = planIds(d, [], previous);
    const observed = await observeAttachment(ref, kept.cookie);
    // A new group id is probed past groups that are not the attachment's.
    const foreign = foreignGroupIds(observed, attachmentIntent(d, kept, []));
    const ids = planIds(d, slots.map((x) => x.slot), previous, (g) => foreign.has(g));
    const lastApply = await applyBundle(ref, planBridge(`${s.hostName}: bridge ${names.bridge}`, attachmentIntent(d, ids, slots), observed));
    return {
      bridge: names.bridge,
      bridgeUuid: (rows.bridge!._uuid as Uuid).id,
      frontendPort: names.frontendPort,
      uplinkPort: names.uplinkPort,
      frontendOfport: FRONTEND_OFPORT,
      cookie: `0x${ids.cookie.toString(16)}`,
      groupId: ids.groupId,
      slots: slots.map((x) => ({ slot: x.slot, bucketId: ids.bucketIds.get(x.slot)!, amphora: x.amphora, mac: x.mac, ...(x.takenOver ? { takenOver: x.takenOver } : {}) })),
      vacantSlots: vacant,
      lastApply,
    };
  } catch (e) {
    // A create that could not program its bridge leaves nothing behind.
    if (made && creating) await removeRows(s, db, d).catch(() => undefined);
    throw e;
  }
}

/** Removes the attachment's bridge and its uplink patch port, only if they carry its owner mark. */
async function removeRows(s: OvsHostSession, db: OvsdbClient, i: DistributorAttachmentInputs): Promise<void> {
  const rows = await readRows(db, i);
  const me = attachmentId(i);
  const txn = new Transaction();
  txn.comment(`ovslb: detach ${me}`);
  if (rows.bridge && ownerOf(rows.bridge) === me) {
    txn.wait("Bridge", [where("_uuid", "==", rows.bridge._uuid as Uuid)], { columns: ["external_ids"], until: "==", rows: [{ external_ids: rows.bridge.external_ids as Map<string, string> }] });
    txn.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [rows.bridge._uuid as Uuid])]);
  }
  const up = rows.ports.find((p) => p.name === attachmentNames(i).uplinkPort && ownerOf(p) === me);
  if (up && rows.uplink) {
    txn.mutate("Bridge", [where("_uuid", "==", rows.uplink._uuid as Uuid)], [mutation("ports", "delete", [up._uuid as Uuid])]);
  }
  if (txn.operations.length > 1) await commitApplied(s, db, txn);
}

export const distributorAttachmentHandler: ResourceHandler<DistributorAttachmentInputs, DistributorAttachmentState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({
    "host.connection.host": i.host.connection.host,
    deviceId: i.deviceId,
    uplinkBridge: i.uplinkBridge,
    attachmentId: i.attachmentId,
    frontendMac: i.frontendMac,
  }),

  async create(inputs) {
    const [state] = await withOvsHosts([inputs.host], (s) => ensure(s, inputs, undefined));
    return { id: attachmentId(inputs), state };
  },

  async read(_id, inputs, state) {
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const d = withDefaults(inputs);
      const db = await s.vswitchDb();
      const rows = await readRows(db, d);
      if (!rows.bridge || ownerOf(rows.bridge) !== attachmentId(d)) return undefined;
      const ids: DataplaneIds = {
        ...planIds(d, [], state),
        bucketIds: new Map(state.slots.map((x) => [x.slot, x.bucketId])),
      };
      const observed = await observeAttachment({ session: s, bridge: state.bridge }, ids.cookie);
      const actual = ownDataplane(d, observed, ids);
      const observedInputs = actualInputs(d, ids, actual, state.slots);
      const up = rows.ports.find((p) => p.name === state.uplinkPort);
      const tag = Number((Array.isArray(up?.tag) ? up?.tag[0] : up?.tag) ?? 0);
      if (tag > 0) observedInputs.vlan = tag;
      else delete observedInputs.vlan;
      const buckets = new Map(actual.group?.buckets.map((b) => [b.bucketId, b]) ?? []);
      return {
        inputs: observedInputs,
        state: {
          ...state,
          bridgeUuid: (rows.bridge._uuid as Uuid).id,
          // The slots as the bridge has them: a bucket changed by hand shows its actual MAC.
          slots: state.slots
            .filter((x) => buckets.has(x.bucketId))
            .map((x) => ({ ...x, mac: bucketMac(buckets.get(x.bucketId)!.actions) ?? x.mac })),
        },
      };
    });
    return found;
  },

  async update(_id, old, news) {
    const [state] = await withOvsHosts([news.host], (s) => ensure(s, news, old.state));
    return state;
  },

  async delete(_id, inputs) {
    await withOvsHosts([inputs.host], async (s) => removeRows(s, await s.vswitchDb(), withDefaults(inputs)));
  },
};
