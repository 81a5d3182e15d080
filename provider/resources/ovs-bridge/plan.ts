import type { OvsBridgeInputs } from "../../model/inputs.generated";
import { checkConnection, type CheckFailure } from "../../model/validate";
import type { Row } from "../../ovsdb";

/**
 * OvsBridge as pure data: the Bridge row it wants, and the inputs an
 * actual Bridge row amounts to (so a refresh shows drift).
 */

export const OWNER_KEY = "ovslb:owner";
export const PROTOCOLS = ["OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"];

/** The resource id, also written to the row's external_ids as its owner mark. */
export const bridgeId = (inputs: OvsBridgeInputs) => `ovs-bridge/${inputs.host.connection.host}/${inputs.name}`;

export function withDefaults(inputs: OvsBridgeInputs): OvsBridgeInputs {
  return { datapathType: "netdev", failMode: "secure", externalIds: {}, ...inputs };
}

export function checkRules(inputs: OvsBridgeInputs): CheckFailure[] {
  return [
    ...checkConnection(inputs.host.connection, "host.connection"),
    ...Object.keys(inputs.externalIds ?? {})
      .filter((k) => k.startsWith("ovslb:"))
      .map((k) => ({ property: `externalIds.${k}`, reason: 'keys starting with "ovslb:" are reserved for ownership marks' })),
  ];
}

/** The columns ovslb sets; the rest of the row (ports, controller, ...) is left alone. */
export interface BridgeColumns {
  datapath_type: string;
  fail_mode: string;
  protocols: string[];
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

function stringMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value instanceof Map) for (const [k, v] of value) out[String(k)] = String(v);
  return out;
}

export const ownerOf = (row: Row) => stringMap(row.external_ids)[OWNER_KEY];

/** The inputs that the actual row amounts to. */
export function actualInputs(inputs: OvsBridgeInputs, row: Row): OvsBridgeInputs {
  const externalIds = Object.fromEntries(Object.entries(stringMap(row.external_ids)).filter(([k]) => !k.startsWith("ovslb:")));
  const hwaddr = stringMap(row.other_config).hwaddr;
  const actual: OvsBridgeInputs = {
    host: inputs.host,
    name: String(row.name),
    // An empty column means the OVS default: the kernel datapath, standalone.
    datapathType: (String(row.datapath_type) || "system") as OvsBridgeInputs["datapathType"],
    failMode: ((Array.isArray(row.fail_mode) ? row.fail_mode[0] : row.fail_mode) || "standalone") as OvsBridgeInputs["failMode"],
    externalIds,
  };
  if (hwaddr) actual.hwaddr = hwaddr;
  return actual;
}
