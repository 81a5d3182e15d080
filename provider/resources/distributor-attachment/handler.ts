import { convergeOn, onHost } from "../../engine/converge";
import { observeOvsVersion } from "../../engine/ovs-version";
import type { DistributorAttachmentOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/distributor-attachment.json";
import { applyBundle, insertOwnedBridge, observeBridge, openflowOf, type BridgeRef } from "../../engine/bridge";
import { ipFamily, neighbourAnnouncement } from "../../openflow";
import { foreignGroupIds, ownedFlows, ownedGroupIds, planBridge, type ObservedBridge } from "../../engine/plan";
import type { DistributorAttachmentInputs } from "../../model/inputs.generated";
import { ATTACHMENT_KEY, DEVICE_KEY, OPEN_VSWITCH, OwnedTransaction, Transaction, mutation, ownerMark, ownerOf, where, type BridgeRow } from "../../ovsdb";
import type { ResourceHandler } from "../../resource-handler";
import { withOvsHosts } from "../../transport/ovs-host";
import type { OvsdbClient } from "../../transport/ovsdb-client";
import { registeredDevice } from "../distributor-device/plan";
import {
  FRONTEND_OFPORT,
  assignSlots,
  attachmentId,
  attachmentIntent,
  attachmentNames,
  checkRules,
  planIds,
  readBack,
  type SlotOccupant,
  withDefaults,
  type AttachmentDefaulted,
  type ActualDataplane,
  type DataplaneIds,
  type RecordedSlot,
} from "./plan";

/** What DistributorAttachment records besides its inputs (names and ids on the device, sticky across updates): its outputs, declared in schema/distributor-attachment.json ("x-outputs"). */
export type DistributorAttachmentState = DistributorAttachmentOutputs;

/** Each slot's bucket liveness: a slot with a watchPort is live while that port is LIVE (what the group sees). */
async function slotLiveness(ref: BridgeRef, slots: readonly SlotOccupant[]): Promise<Record<string, boolean>> {
  const live = new Map((await openflowOf(ref).dumpPortsDesc()).map((p) => [p.ofport, p.live]));
  return Object.fromEntries(slots.map((x) => [String(x.slot), x.watchPort === undefined || live.get(x.watchPort) === true]));
}

const PROTOCOLS = ["OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"] as const;

/** What the device's database holds for this attachment, read in one transaction. */
async function readRows(db: OvsdbClient, i: DistributorAttachmentInputs) {
  const names = attachmentNames(i);
  const txn = new Transaction(OPEN_VSWITCH);
  const root = txn.select("Open_vSwitch", [], ["_uuid", "external_ids"]);
  const bridge = txn.select("Bridge", [where("name", "==", names.bridge)], ["_uuid", "name", "external_ids", "other_config"]);
  // Bridges on the device already marked with this attachment id, under any name.
  const sameId = txn.select("Bridge", [where("external_ids", "includes", { [ATTACHMENT_KEY]: i.attachmentId })], ["_uuid", "name", "external_ids"]);
  const uplink = txn.select("Bridge", [where("name", "==", i.uplinkBridge)], ["_uuid", "name", "datapath_type"]);
  const up = txn.select("Port", [where("name", "==", names.uplinkPort)], ["_uuid", "name", "external_ids", "tag"]);
  const fe = txn.select("Port", [where("name", "==", names.frontendPort)], ["_uuid", "name", "external_ids"]);
  const r = await db.run(txn);
  return {
    root: r.first(root)!,
    bridge: r.first(bridge),
    sameId: r.rows(sameId),
    uplink: r.first(uplink),
    uplinkPort: r.first(up),
    ports: [...r.rows(up), ...r.rows(fe)],
  };
}
type DeviceRows = Awaited<ReturnType<typeof readRows>>;

/** Refuses a device that is not registered as deviceId, an IPv6 VIP on an uplink the ND responder cannot work behind, and ids or names that someone else holds. */
function refuseCollisions(i: DistributorAttachmentInputs, rows: DeviceRows, creating: boolean): void {
  const me = attachmentId(i);
  const registered = registeredDevice(rows.root);
  if (registered !== i.deviceId) {
    throw new Error(`the host is ${registered ? `distributor device ${registered}` : "not a registered distributor device"}, not ${i.deviceId}`);
  }
  if (!rows.uplink) throw new Error(`uplink bridge ${i.uplinkBridge} does not exist on device ${i.deviceId}`);
  const datapath = rows.uplink.datapath_type || "system";
  if (datapath !== "netdev" && [i.vip, i.nextHop].some((a) => a !== undefined && ipFamily(a) === 6)) {
    throw new Error(
      `uplink bridge ${i.uplinkBridge} on device ${i.deviceId} is on the ${datapath} datapath: an IPv6 VIP's neighbour responder sets nd_reserved and nd_options_type, which only the userspace datapath (datapath_type netdev) can set`,
    );
  }
  const names = attachmentNames(i);
  const taken = [
    ...(rows.bridge && (creating || ownerOf(rows.bridge) !== me) ? [`bridge ${names.bridge} (${ownerOf(rows.bridge) ?? "not owned by ovslb"})`] : []),
    ...rows.sameId.filter((b) => b.name !== names.bridge).map((b) => `bridge ${b.name} (${ownerOf(b)})`),
    ...rows.ports.filter((p) => (creating && !rows.bridge) || ownerOf(p) !== me).map((p) => `port ${p.name} (${ownerOf(p) ?? "not owned by ovslb"})`),
  ];
  if (taken.length > 0) {
    throw new Error(`attachment id ${i.attachmentId} collides on device ${i.deviceId}: ${taken.join(", ")} already exist; refusing to take them over`);
  }
}

const ownedBy = (i: DistributorAttachmentInputs, comment: string) => new OwnedTransaction(OPEN_VSWITCH, ownerMark(attachmentId(i)), comment);

/** One transaction: the attachment's bridge with its frontend patch port, and the patch's peer on the uplink. */
function createRows(d: AttachmentDefaulted, uplink: NonNullable<DeviceRows["uplink"]>) {
  const i = d;
  const names = attachmentNames(i);
  const marks = { [DEVICE_KEY]: i.deviceId, [ATTACHMENT_KEY]: i.attachmentId };
  const txn = ownedBy(i, `ovslb: attach ${attachmentId(i)}`);
  txn.requireAbsent("Bridge", [where("name", "==", names.bridge)]);
  txn.requireAbsent("Port", [where("name", "==", names.uplinkPort)]);
  txn.requireAbsent("Port", [where("name", "==", names.frontendPort)]);
  txn.requireUnchanged("Bridge", uplink, ["name"]);
  const fe = txn.insert(
    "Interface",
    { name: names.frontendPort, type: "patch", options: { peer: names.uplinkPort }, ofport_request: [FRONTEND_OFPORT] },
    "fe_if",
  );
  const fePort = txn.insertOwned("Port", { name: names.frontendPort, interfaces: [fe], external_ids: marks }, "fe_port");
  const up = txn.insert("Interface", { name: names.uplinkPort, type: "patch", options: { peer: names.frontendPort } }, "up_if");
  // An access port: only the tenant's VLAN (0 = untagged) reaches the attachment.
  const upPort = txn.insertOwned("Port", { name: names.uplinkPort, interfaces: [up], tag: [d.vlan ?? 0], external_ids: marks }, "up_port");
  insertOwnedBridge(
    txn,
    {
      name: names.bridge,
      datapath_type: "netdev",
      fail_mode: ["secure"],
      protocols: PROTOCOLS,
      external_ids: marks,
      // The frontend MAC is the bridge's own, set once and only on this attachment's bridge.
      other_config: { hwaddr: d.frontendMac },
    },
    [fePort],
  );
  txn.mutate("Bridge", [where("_uuid", "==", uplink._uuid)], [mutation("ports", "insert", [upPort])]);
  return txn;
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
function ownDataplane(d: AttachmentDefaulted, observed: ObservedBridge, ids: DataplaneIds): ActualDataplane {
  const owned = ownedGroupIds(observed, attachmentIntent(d, ids, []));
  return { flows: ownedFlows(observed, ids.cookie), group: owned.has(ids.groupId) ? observed.groups.find((g) => g.groupId === ids.groupId) : undefined };
}

/**
 * Brings the device to the inputs: OVSDB rows first (one transaction, so
 * the bridge exists to be read), then one bundle on the attachment's bridge.
 */
async function ensure(d: AttachmentDefaulted, previous: DistributorAttachmentState | undefined): Promise<DistributorAttachmentState> {
  const names = attachmentNames(d);
  const creating = previous === undefined;
  let made = false;
  try {
    return await convergeOn(attachmentId(d), d.host, {
      async plan(s, where) {
        const db = await s.vswitchDb();
        let rows = await readRows(db, d);
        await onHost(where, () => refuseCollisions(d, rows, creating));
        if (!rows.bridge) {
          await s.commitApplied(createRows(d, rows.uplink!));
          made = true;
          rows = await readRows(db, d);
        } else {
          const repair = repairRows(d, rows);
          if (repair) await s.commitApplied(repair);
        }
        const ref: BridgeRef = { session: s, bridge: names.bridge };
        const { slots, vacant } = assignSlots(d.amphorae, recordedSlots(previous));
        const kept = planIds(d, [], previous);
        const observed = await observeAttachment(ref, kept.cookie);
        // A new group id is probed past groups that are not the attachment's.
        const foreign = foreignGroupIds(observed, attachmentIntent(d, kept, []));
        const ids = planIds(
          d,
          slots.map((x) => x.slot),
          previous,
          (g) => foreign.has(g),
        );
        const mods = await onHost(where, () => planBridge(`bridge ${names.bridge}`, attachmentIntent(d, ids, slots), observed));
        return { ref, mods, ids, slots, vacant, bridgeUuid: rows.bridge!._uuid.id };
      },
      async apply(_s, plan) {
        const lastApply = await applyBundle(plan.ref, plan.mods);
        // A router that gave up on this next hop (the device was down) takes it back now, not at its next resolution.
        if (d.nextHop) await openflowOf(plan.ref).packetOut(neighbourAnnouncement(d.frontendMac, d.nextHop), FRONTEND_OFPORT);
        return lastApply;
      },
      async finish(_s, plan, lastApply) {
        const { ids, slots } = plan;
        return {
          bridge: names.bridge,
          bridgeUuid: plan.bridgeUuid,
          frontendPort: names.frontendPort,
          uplinkPort: names.uplinkPort,
          frontendOfport: FRONTEND_OFPORT,
          cookie: `0x${ids.cookie.toString(16)}`,
          groupId: ids.groupId,
          slots: slots.map((x) => ({
            slot: x.slot,
            bucketId: ids.bucketIds.get(x.slot)!,
            amphora: x.amphora,
            mac: x.mac,
            ...(x.takenOver ? { takenOver: x.takenOver } : {}),
          })),
          vacantSlots: plan.vacant,
          lastApply,
          slotLiveness: await slotLiveness(plan.ref, slots),
        };
      },
    });
  } catch (e) {
    // A create that could not program its bridge leaves nothing behind.
    if (made && creating) await remove(d).catch(() => undefined);
    throw e;
  }
}

/** Settings changed on the host put back (the MAC and names never change for an existing attachment); undefined when none changed. */
function repairRows(d: AttachmentDefaulted, rows: DeviceRows) {
  const txn = ownedBy(d, `ovslb: repair ${attachmentId(d)}`);
  if (rows.bridge!.other_config.get("hwaddr") !== d.frontendMac) {
    txn.requireOwned("Bridge", rows.bridge!);
    const byUuid = [where<BridgeRow>("_uuid", "==", rows.bridge!._uuid)];
    txn.mutate("Bridge", byUuid, [mutation("other_config", "delete", ["hwaddr"])]);
    txn.mutate("Bridge", byUuid, [mutation("other_config", "insert", { hwaddr: d.frontendMac })]);
  }
  const up = rows.uplinkPort;
  if (up && (up.tag[0] ?? -1) !== (d.vlan ?? 0)) txn.updateOwned("Port", up, { tag: [d.vlan ?? 0] }, ["external_ids"]);
  return txn.operations.length > 1 ? txn : undefined;
}

/** Removes the attachment's bridge and its uplink patch port (their flows and groups go with the bridge). */
function remove(d: AttachmentDefaulted) {
  return convergeOn(attachmentId(d), d.host, {
    plan: async (s) => removeTransaction(d, await readRows(await s.vswitchDb(), d)),
    apply: async (s, txn) => void (txn && (await s.commitApplied(txn))),
  });
}

/** The transaction that removes the attachment's bridge and uplink patch port, only where they carry its owner mark; undefined when none is left. */
function removeTransaction(i: DistributorAttachmentInputs, rows: DeviceRows) {
  const me = attachmentId(i);
  const txn = ownedBy(i, `ovslb: detach ${me}`);
  if (rows.bridge && ownerOf(rows.bridge) === me) {
    txn.requireOwned("Bridge", rows.bridge, ["external_ids"]);
    txn.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [rows.bridge._uuid])]);
  }
  const up = rows.uplinkPort;
  if (up && ownerOf(up) === me && rows.uplink) {
    txn.requireOwned("Port", up);
    txn.mutate("Bridge", [where("_uuid", "==", rows.uplink._uuid)], [mutation("ports", "delete", [up._uuid])]);
  }
  return txn.operations.length > 1 ? txn : undefined;
}

export const distributorAttachmentHandler: ResourceHandler<DistributorAttachmentInputs, DistributorAttachmentState, AttachmentDefaulted> = {
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
    return { id: attachmentId(inputs), state: await ensure(inputs, undefined) };
  },

  async read(_id, inputs, state) {
    const d = inputs;
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const db = await s.vswitchDb();
      const rows = await readRows(db, d);
      if (!rows.bridge || ownerOf(rows.bridge) !== attachmentId(d)) return undefined;
      const ids: DataplaneIds = {
        ...planIds(d, [], state),
        bucketIds: new Map(state.slots.map((x) => [x.slot, x.bucketId])),
      };
      const bridge = await observeAttachment({ session: s, bridge: state.bridge }, ids.cookie);
      const found = readBack(d, ids, ownDataplane(d, bridge, ids), state.slots, rows.uplinkPort?.tag[0]);
      const liveness = await slotLiveness({ session: s, bridge: state.bridge }, assignSlots(d.amphorae, state.slots).slots);
      return {
        inputs: found.inputs,
        state: { ...state, bridgeUuid: rows.bridge._uuid.id, slots: found.slots, slotLiveness: liveness, ovsVersions: await observeOvsVersion(s) },
      };
    });
    return found;
  },

  async update(_id, old, news) {
    return ensure(news, old.state);
  },

  async delete(_id, inputs) {
    await remove(inputs);
  },
};
