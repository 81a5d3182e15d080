import { convergeOn } from "../../engine/converge";
import { observeOvsVersion } from "../../engine/ovs-version";
import { insertOwnedBridge } from "../../engine/bridge";
import type { OvsBridgeOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/ovs-bridge.json";
import type { ResourceHandler } from "../../resource-handler";
import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { bridgeSocket, withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import {
  OPEN_VSWITCH,
  OwnedTransaction,
  Transaction,
  describeOwner,
  mutation,
  ownerMark,
  where,
  type BridgeRow,
  type Condition,
  type TransactionResults,
} from "../../ovsdb";
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

/** The one transaction that brings the bridge to the inputs: created whole, or its owned columns set. */
function ensureTransaction(s: OvsHostSession, inputs: OvsBridgeInputs, row: BridgeRead | undefined, previousKeys: string[]) {
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(bridgeId(inputs)), `ovslb: ensure bridge ${inputs.name}`);
  if (row) {
    refuseForeign(s, inputs, row);
    updateColumns(txn, row, inputs, previousKeys);
    return { txn, uuid: () => row._uuid.id };
  }
  const want = desiredColumns(inputs);
  // Precondition: still no bridge of that name when this commits.
  txn.requireAbsent("Bridge", [where("name", "==", inputs.name)]);
  const bridge = insertOwnedBridge(txn, {
    name: inputs.name,
    datapath_type: want.datapath_type,
    fail_mode: [want.fail_mode],
    protocols: want.protocols,
    external_ids: want.externalIds,
    other_config: want.hwaddr ? { hwaddr: want.hwaddr } : {},
  });
  return { txn, uuid: (results: TransactionResults) => results.uuid(bridge).id };
}

/** Creates the bridge or puts its owned columns back: one owned transaction on the one host. */
function ensure(inputs: OvsBridgeInputs, previousKeys: string[]): Promise<OvsBridgeState> {
  return convergeOn(bridgeId(inputs), inputs.host, {
    plan: async (s) => ensureTransaction(s, inputs, await selectBridge(s, inputs.name), previousKeys),
    apply: async (s, plan) => plan.uuid(await (await s.vswitchDb()).run(plan.txn)),
    finish: async (_s, _plan, uuid) => ({ uuid, managementSocket: bridgeSocket(inputs.host, inputs.name) }),
  });
}

/** Removes the bridge (its ports and interfaces with it) when it is still ours. */
async function remove(inputs: OvsBridgeInputs): Promise<void> {
  await convergeOn(bridgeId(inputs), inputs.host, {
    async plan(s) {
      const row = await selectBridge(s, inputs.name);
      if (!row || ownerOf(row) !== bridgeId(inputs)) return undefined; // already gone, or no longer ours
      const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(bridgeId(inputs)), `ovslb: delete bridge ${inputs.name}`);
      txn.requireOwned("Bridge", row);
      // Bridges are not a root table: dropping the reference deletes the row, its ports and interfaces.
      txn.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [row._uuid])]);
      return txn;
    },
    apply: async (s, txn) => void (txn && (await (await s.vswitchDb()).run(txn))),
  });
}

export const ovsBridgeHandler: ResourceHandler<OvsBridgeInputs, OvsBridgeState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ "host.connection.host": i.host.connection.host, name: i.name }),

  async create(inputs) {
    return { id: bridgeId(inputs), state: await ensure(inputs, []) };
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
    return ensure(news, Object.keys(old.inputs.externalIds ?? {}));
  },

  async delete(_id, inputs) {
    await remove(inputs);
  },
};
