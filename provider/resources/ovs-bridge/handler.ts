import { observeOvsVersion, withOvsVersion } from "../../engine/ovs-version";
import type { OvsBridgeOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/ovs-bridge.json";
import type { ResourceHandler } from "../../resource-handler";
import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { bridgeSocket, operationLock, withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { OPEN_VSWITCH, OwnedTransaction, Transaction, describeOwner, mutation, ownerMark, where, type BridgeRow, type Condition } from "../../ovsdb";
import { BRIDGE_COLUMNS, actualInputs, bridgeId, checkRules, desiredColumns, ownerOf, withDefaults, type BridgeRead } from "./plan";

/** What OvsBridge records besides its inputs: its outputs, declared in schema/ovs-bridge.json ("x-outputs"). */
export type OvsBridgeState = OvsBridgeOutputs;

async function selectBridge(s: OvsHostSession, name: string): Promise<BridgeRead | undefined> {
  const db = await s.vswitchDb();
  const txn = new Transaction(OPEN_VSWITCH);
  const bridge = txn.select("Bridge", [where("name", "==", name)], BRIDGE_COLUMNS);
  return (await db.run(txn)).first(bridge);
}

function refuseForeign(s: OvsHostSession, inputs: OvsBridgeInputs, row: BridgeRead): void {
  if (ownerOf(row) !== bridgeId(inputs)) {
    throw new Error(`${s.hostName}: bridge ${inputs.name} already exists and is ${describeOwner(row)}; refusing to take it over`);
  }
}

/** Sets the owned columns on the bridge read, guarded by a wait that it is still that row and still ours. */
function updateColumns(txn: OwnedTransaction<typeof OPEN_VSWITCH>, row: BridgeRead, inputs: OvsBridgeInputs, previousKeys: string[]) {
  const want = desiredColumns(inputs);
  const byUuid: Condition<BridgeRow>[] = [where("_uuid", "==", row._uuid)];
  txn.requireOwned("Bridge", row);
  txn.update("Bridge", byUuid, { datapath_type: want.datapath_type, fail_mode: [want.fail_mode], protocols: want.protocols });
  // Map mutations: delete then insert, since an insert never replaces an existing key.
  const keys = [...new Set([...previousKeys, ...Object.keys(want.externalIds)])];
  txn.mutate("Bridge", byUuid, [mutation("external_ids", "delete", keys)]);
  txn.mutate("Bridge", byUuid, [mutation("external_ids", "insert", want.externalIds)]);
  txn.mutate("Bridge", byUuid, [mutation("other_config", "delete", ["hwaddr"])]);
  if (want.hwaddr) txn.mutate("Bridge", byUuid, [mutation("other_config", "insert", { hwaddr: want.hwaddr })]);
}

async function ensure(s: OvsHostSession, inputs: OvsBridgeInputs, previousKeys: string[]): Promise<OvsBridgeState> {
  const db = await s.vswitchDb();
  const row = await selectBridge(s, inputs.name);
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(bridgeId(inputs)), `ovslb: ensure bridge ${inputs.name}`);
  if (row) {
    refuseForeign(s, inputs, row);
    updateColumns(txn, row, inputs, previousKeys);
    await db.run(txn);
    return { uuid: row._uuid.id, managementSocket: bridgeSocket(s.host, inputs.name) };
  }
  const want = desiredColumns(inputs);
  // Precondition: still no bridge of that name when this commits.
  txn.requireAbsent("Bridge", [where("name", "==", inputs.name)]);
  const iface = txn.insert("Interface", { name: inputs.name, type: "internal" }, "iface");
  const port = txn.insert("Port", { name: inputs.name, interfaces: [iface] }, "port");
  const bridge = txn.insertOwned(
    "Bridge",
    {
      name: inputs.name,
      datapath_type: want.datapath_type,
      fail_mode: [want.fail_mode],
      protocols: want.protocols,
      ports: [port],
      external_ids: want.externalIds,
      other_config: want.hwaddr ? { hwaddr: want.hwaddr } : {},
    },
    "bridge",
  );
  txn.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [bridge])]);
  const results = await db.run(txn);
  return { uuid: results.uuid(bridge).id, managementSocket: bridgeSocket(s.host, inputs.name) };
}

export const ovsBridgeHandler: ResourceHandler<OvsBridgeInputs, OvsBridgeState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ "host.connection.host": i.host.connection.host, name: i.name }),

  async create(inputs) {
    const [state] = await withOvsHosts([inputs.host], async (s) => withOvsVersion(s, await ensure(s, inputs, [])), operationLock(bridgeId(inputs)));
    return { id: bridgeId(inputs), state };
  },

  async read(_id, inputs) {
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const row = await selectBridge(s, inputs.name);
      if (!row || ownerOf(row) !== bridgeId(inputs)) return undefined;
      return {
        inputs: actualInputs(inputs, row),
        state: { uuid: row._uuid.id, managementSocket: bridgeSocket(inputs.host, inputs.name), ovsVersions: await observeOvsVersion(s) },
      };
    });
    return found;
  },

  async update(_id, old, news) {
    const previousKeys = Object.keys(old.inputs.externalIds ?? {});
    const [state] = await withOvsHosts([news.host], async (s) => withOvsVersion(s, await ensure(s, news, previousKeys)), operationLock(bridgeId(news)));
    return state;
  },

  async delete(_id, inputs) {
    await withOvsHosts([inputs.host], async (s) => {
      const row = await selectBridge(s, inputs.name);
      if (!row || ownerOf(row) !== bridgeId(inputs)) return; // already gone, or no longer ours
      const db = await s.vswitchDb();
      const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(bridgeId(inputs)), `ovslb: delete bridge ${inputs.name}`);
      txn.requireOwned("Bridge", row);
      // Bridges are not a root table: dropping the reference deletes the row, its ports and interfaces.
      txn.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [row._uuid])]);
      await db.run(txn);
    }, operationLock(bridgeId(inputs)));
  },
};
