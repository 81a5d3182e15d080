import schema from "../../../schema/ovs-bridge.json";
import type { ResourceHandler } from "../../resource-handler";
import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { bridgeSocket, withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { NamedUuid, Transaction, Uuid, mutation, where, type Row } from "../../ovsdb";
import { actualInputs, bridgeId, checkRules, desiredColumns, ownerOf, withDefaults } from "./plan";

/** What OvsBridge records besides its inputs. */
export interface OvsBridgeState {
  uuid: string;
  /** The bridge's OpenFlow management socket (unix:...mgmt). */
  managementSocket: string;
}

const DB = "Open_vSwitch";

async function selectBridge(s: OvsHostSession, name: string): Promise<Row | undefined> {
  const db = await s.vswitchDb();
  const txn = new Transaction();
  txn.select("Bridge", [where("name", "==", name)]);
  const [result] = await db.transact(DB, txn.operations);
  return result.rows?.[0];
}

function refuseForeign(s: OvsHostSession, inputs: OvsBridgeInputs, row: Row): void {
  const owner = ownerOf(row);
  if (owner !== bridgeId(inputs)) {
    throw new Error(
      `${s.hostName}: bridge ${inputs.name} already exists and is ${owner ? `owned by ${owner}` : "not owned by ovslb"}; refusing to take it over`,
    );
  }
}

/** Sets the owned columns on an existing row, guarded by a wait that it is still the same row. */
function updateColumns(txn: Transaction, uuid: Uuid, name: string, inputs: OvsBridgeInputs, previousKeys: string[]) {
  const want = desiredColumns(inputs);
  const byUuid = [where("_uuid", "==", uuid)];
  txn.wait("Bridge", [where("name", "==", name)], { columns: ["_uuid"], until: "==", rows: [{ _uuid: uuid }] });
  txn.update("Bridge", byUuid, { datapath_type: want.datapath_type, fail_mode: want.fail_mode, protocols: want.protocols });
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
  const txn = new Transaction();
  txn.comment(`ovslb: ensure bridge ${inputs.name}`);
  let uuidOp: number | undefined;
  if (row) {
    refuseForeign(s, inputs, row);
    updateColumns(txn, row._uuid as Uuid, inputs.name, inputs, previousKeys);
  } else {
    const want = desiredColumns(inputs);
    // Precondition: still no bridge of that name when this commits.
    txn.wait("Bridge", [where("name", "==", inputs.name)], { columns: ["name"], until: "==", rows: [] });
    const iface = txn.insert("Interface", { name: inputs.name, type: "internal" }, "iface");
    const port = txn.insert("Port", { name: inputs.name, interfaces: [iface] }, "port");
    const other: Record<string, string> = want.hwaddr ? { hwaddr: want.hwaddr } : {};
    uuidOp = txn.operations.length; // the Bridge insert's result carries its uuid
    const bridge: NamedUuid = txn.insert(
      "Bridge",
      {
        name: inputs.name,
        datapath_type: want.datapath_type,
        fail_mode: want.fail_mode,
        protocols: want.protocols,
        ports: [port],
        external_ids: want.externalIds,
        other_config: other,
      },
      "bridge",
    );
    txn.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [bridge])]);
  }
  const results = await db.transact(DB, txn.operations);
  const uuid = uuidOp !== undefined ? results[uuidOp].uuid! : (row!._uuid as Uuid);
  return { uuid: uuid.id, managementSocket: bridgeSocket(s.host, inputs.name) };
}

export const ovsBridgeHandler: ResourceHandler<OvsBridgeInputs, OvsBridgeState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ "host.connection.host": i.host.connection.host, name: i.name }),

  async create(inputs) {
    const [state] = await withOvsHosts([inputs.host], (s) => ensure(s, inputs, []));
    return { id: bridgeId(inputs), state };
  },

  async read(_id, inputs) {
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const row = await selectBridge(s, inputs.name);
      if (!row || ownerOf(row) !== bridgeId(inputs)) return undefined;
      return {
        inputs: actualInputs(inputs, row),
        state: { uuid: (row._uuid as Uuid).id, managementSocket: bridgeSocket(inputs.host, inputs.name) },
      };
    });
    return found;
  },

  async update(_id, old, news) {
    const previousKeys = Object.keys(old.inputs.externalIds ?? {});
    const [state] = await withOvsHosts([news.host], (s) => ensure(s, news, previousKeys));
    return state;
  },

  async delete(_id, inputs) {
    await withOvsHosts([inputs.host], async (s) => {
      const row = await selectBridge(s, inputs.name);
      if (!row || ownerOf(row) !== bridgeId(inputs)) return; // already gone, or no longer ours
      const db = await s.vswitchDb();
      const txn = new Transaction();
      txn.comment(`ovslb: delete bridge ${inputs.name}`);
      txn.wait("Bridge", [where("name", "==", inputs.name)], { columns: ["_uuid"], until: "==", rows: [{ _uuid: row._uuid }] });
      // Bridges are not a root table: dropping the reference deletes the row, its ports and interfaces.
      txn.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [row._uuid as Uuid])]);
      await db.transact(DB, txn.operations);
    });
  },
};
