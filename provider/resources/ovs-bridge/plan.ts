import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { checkConnection, joinProperty, type CheckFailure } from "../../model/validate";
import { MARK_PREFIX, OWNER_KEY, ownerOf, type BridgeRow } from "../../ovsdb";

/**
 * OvsBridge as pure data: the Bridge row it wants, and the inputs an
 * actual Bridge row amounts to (so a refresh shows drift).
 */

export { OWNER_KEY };
export const PROTOCOLS: BridgeRow["protocols"] = ["OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"];

/** The resource id, also written to the row's external_ids as its owner mark. */
export const bridgeId = (inputs: OvsBridgeInputs) => `ovs-bridge/${inputs.host.connection.host}/${inputs.name}`;

export function withDefaults(inputs: OvsBridgeInputs): OvsBridgeInputs {
  return { datapathType: "netdev", failMode: "secure", externalIds: {}, ...inputs };
}

export function checkRules(inputs: OvsBridgeInputs): CheckFailure[] {
  return [
    ...checkConnection(inputs.host.connection, "host.connection"),
    ...Object.keys(inputs.externalIds ?? {})
      .filter((k) => k.startsWith(MARK_PREFIX))
      .map((k) => ({ property: joinProperty("externalIds", k), reason: `keys starting with "${MARK_PREFIX}" are reserved for ownership marks` })),
  ];
}

/** The columns ovslb sets; the rest of the row (ports, controller, ...) is left alone. */
export interface BridgeColumns {
  datapath_type: BridgeRow["datapath_type"];
  fail_mode: BridgeRow["fail_mode"][number];
  protocols: BridgeRow["protocols"];
  hwaddr: string | undefined;
  externalIds: Record<string, string>;
}

export function desiredColumns(inputs: OvsBridgeInputs): BridgeColumns {
  const d = withDefaults(inputs);
  return {
    datapath_type: d.datapathType!,
    fail_mode: d.failMode!,
    protocols: PROTOCOLS,
    hwaddr: d.hwaddr?.toLowerCase(),
    externalIds: { ...d.externalIds, [OWNER_KEY]: bridgeId(d) },
  };
}

/** The Bridge columns OvsBridge reads. */
export const BRIDGE_COLUMNS = ["_uuid", "name", "datapath_type", "fail_mode", "external_ids", "other_config"] as const;
export type BridgeRead = Pick<BridgeRow, (typeof BRIDGE_COLUMNS)[number]>;

export { ownerOf };

/** The inputs that the actual row amounts to. */
export function actualInputs(inputs: OvsBridgeInputs, row: BridgeRead): OvsBridgeInputs {
  const externalIds = Object.fromEntries([...row.external_ids].filter(([k]) => !k.startsWith(MARK_PREFIX)));
  const hwaddr = row.other_config.get("hwaddr");
  const actual: OvsBridgeInputs = {
    host: inputs.host,
    name: row.name,
    // An empty column means the OVS default: the kernel datapath, standalone. Another
    // datapath type (e.g. dummy) is reported as it is, so the diff shows it.
    datapathType: (row.datapath_type || "system") as OvsBridgeInputs["datapathType"],
    failMode: row.fail_mode[0] ?? "standalone",
    externalIds,
  };
  if (hwaddr) actual.hwaddr = hwaddr;
  return actual;
}
