import { describeVersion } from "../../model/ovs-versions";
import type { DistributorDeviceOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/distributor-device.json";
import type { ResourceHandler } from "../../resource-handler";
import type { DistributorDeviceInputs } from "../../model/inputs.generated";
import { withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { convergeOn, onHost } from "../../engine/converge";
import { ownedFlowCount, openflowOf } from "../../engine/bridge";
import { ovsVersionOf } from "../../engine/ovs-version";
import {
  ATTACHMENT_KEY,
  DEVICE_KEY,
  DISTRIBUTOR_DEVICE_KEY,
  OPEN_VSWITCH,
  OwnedTransaction,
  Transaction,
  ownerMark,
  where,
  type BridgeRow,
  type OpenVSwitchRow,
} from "../../ovsdb";
import { SshError } from "../../transport/ssh";
import { ownerCookie } from "../../model/ids";
import { KIND, attachmentId, attachmentNames } from "../distributor-attachment/plan";
import { checkRules, deleteRefusal, deviceResourceId, registeredDevice, stringMap, withDefaults } from "./plan";

/** What DistributorDevice observes on every read: its outputs, declared in schema/distributor-device.json ("x-outputs"). */
export type DistributorDeviceState = DistributorDeviceOutputs;

interface DeviceRows {
  root: Pick<OpenVSwitchRow, "_uuid" | "external_ids" | "ovs_version">;
  uplink: Pick<BridgeRow, "_uuid" | "name" | "ports"> | undefined;
  attachments: string[];
  /** attachment id -> its bridge's name and port names. */
  bridges: Map<string, { bridge: string; ports: Set<string> }>;
  uplinkPorts: Set<string>;
}

async function readRows(s: OvsHostSession, inputs: DistributorDeviceInputs): Promise<DeviceRows> {
  const db = await s.vswitchDb();
  const txn = new Transaction(OPEN_VSWITCH);
  const root = txn.select("Open_vSwitch", [], ["_uuid", "external_ids", "ovs_version"]);
  const uplink = txn.select("Bridge", [where("name", "==", inputs.uplinkBridge)], ["_uuid", "name", "ports"]);
  const attached = txn.select("Bridge", [where("external_ids", "includes", { [DEVICE_KEY]: inputs.deviceId })], ["name", "external_ids", "ports"]);
  const ports = txn.select("Port", [], ["_uuid", "name"]);
  const results = await db.run(txn);
  const rootRow = results.first(root);
  if (!rootRow) throw new Error(`${s.hostName}: the Open_vSwitch database has no root row (is ovs-vswitchd's database initialized?)`);
  const portName = new Map(results.rows(ports).map((p) => [p._uuid.id, p.name]));
  const bridges = new Map(
    results
      .rows(attached)
      .map((r) => [stringMap(r.external_ids)[ATTACHMENT_KEY] ?? r.name, { bridge: r.name, ports: new Set(r.ports.map((u) => portName.get(u.id) ?? "")) }]),
  );
  const uplinkRow = results.first(uplink);
  const uplinkPorts = new Set((uplinkRow?.ports ?? []).map((u) => portName.get(u.id) ?? ""));
  return { root: rootRow, uplink: uplinkRow, attachments: [...bridges.keys()].sort(), bridges, uplinkPorts };
}

/** Each attachment's bridge: its two patch ports there, and how many of its own flows (by its cookie) it carries. */
async function attachmentHealth(s: OvsHostSession, inputs: DistributorDeviceInputs, rows: DeviceRows) {
  const health: Record<string, { ports: boolean; flows: number }> = {};
  for (const [attachment, b] of rows.bridges) {
    const names = attachmentNames({ attachmentId: attachment });
    const cookie = ownerCookie(KIND, attachmentId({ deviceId: inputs.deviceId, attachmentId: attachment }));
    health[attachment] = {
      ports: b.ports.has(names.frontendPort) && rows.uplinkPorts.has(names.uplinkPort),
      flows: await ownedFlowCount({ session: s, bridge: b.bridge }, cookie),
    };
  }
  return health;
}

async function observe(s: OvsHostSession, inputs: DistributorDeviceInputs, rows: DeviceRows): Promise<DistributorDeviceState> {
  const ovsVersion = await ovsVersionOf(s, rows.root);
  return {
    reachable: true,
    ...(ovsVersion ? { ovsVersion } : {}),
    ovsVersions: { [inputs.host.connection.host]: describeVersion(ovsVersion) },
    openflow15: await openflowOf({ session: s, bridge: inputs.uplinkBridge }).speaksOpenFlow15(),
    attachments: rows.attachments,
    attachmentHealth: await attachmentHealth(s, inputs, rows),
  };
}

/** The device's one change: `txn` (built from the rows read; none when there is nothing to write), then what it observes (or `finish`). */
function deviceChange<S extends object = DistributorDeviceState>(
  inputs: DistributorDeviceInputs,
  txnFor: (rows: DeviceRows) => OwnedTransaction<typeof OPEN_VSWITCH> | undefined,
  finish: (s: OvsHostSession, rows: DeviceRows) => Promise<S> = (s, rows) => observe(s, inputs, rows) as Promise<S>,
) {
  return convergeOn(deviceResourceId(inputs), inputs.host, {
    async plan(s, where) {
      const rows = await readRows(s, inputs);
      return { rows, txn: await onHost(where, () => txnFor(rows)) };
    },
    apply: async (s, plan) => void (plan.txn && (await (await s.vswitchDb()).run(plan.txn))),
    finish: (s, plan) => finish(s, plan.rows),
  });
}

export const distributorDeviceHandler: ResourceHandler<DistributorDeviceInputs, DistributorDeviceState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ "host.connection.host": i.host.connection.host, deviceId: i.deviceId }),

  async create(inputs) {
    const state = await deviceChange(inputs, (rows) => {
      const registered = registeredDevice(rows.root);
      if (registered && registered !== inputs.deviceId)
        throw new Error(`this host is already distributor device ${registered}; refusing to register it as ${inputs.deviceId}`);
      if (!rows.uplink) throw new Error(`uplink bridge ${inputs.uplinkBridge} does not exist on the device`);
      if (registered) return undefined;
      const txn = new OwnedTransaction(
        OPEN_VSWITCH,
        ownerMark(inputs.deviceId, DISTRIBUTOR_DEVICE_KEY),
        `ovslb: register distributor device ${inputs.deviceId}`,
      );
      // Precondition: external_ids unchanged since read, so no one registered meanwhile.
      txn.requireUnchanged("Open_vSwitch", rows.root, ["external_ids"]);
      txn.addMark("Open_vSwitch", rows.root);
      return txn;
    });
    return { id: deviceResourceId(inputs), state };
  },

  async read(_id, inputs, state) {
    try {
      const [found] = await withOvsHosts([inputs.host], async (s) => {
        const rows = await readRows(s, inputs);
        if (registeredDevice(rows.root) !== inputs.deviceId) return undefined;
        return { inputs, state: await observe(s, inputs, rows) };
      });
      return found;
    } catch (e) {
      // An unreachable device is still a device: report it, do not drop it from state.
      if (e instanceof SshError) return { inputs, state: { ...state, reachable: false, openflow15: false } };
      throw e;
    }
  },

  async update(_id, _old, news) {
    return deviceChange(news, (rows) => {
      if (!rows.uplink) throw new Error(`uplink bridge ${news.uplinkBridge} does not exist on the device`);
      return undefined;
    });
  },

  async delete(_id, inputs) {
    await deviceChange(
      inputs,
      (rows) => {
        const refusal = deleteRefusal(inputs.deviceId, rows.attachments);
        if (refusal) throw new Error(refusal);
        if (registeredDevice(rows.root) !== inputs.deviceId) return undefined; // already gone, or not ours
        const txn = new OwnedTransaction(
          OPEN_VSWITCH,
          ownerMark(inputs.deviceId, DISTRIBUTOR_DEVICE_KEY),
          `ovslb: unregister distributor device ${inputs.deviceId}`,
        );
        txn.requireOwned("Open_vSwitch", rows.root);
        // No attachment may appear between the check and the commit.
        txn.requireAbsent("Bridge", [where("external_ids", "includes", { [DEVICE_KEY]: inputs.deviceId })]);
        txn.removeMark("Open_vSwitch", rows.root);
        return txn;
      },
      async () => ({}),
    );
  },
};
