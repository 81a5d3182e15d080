import { OWNER_KEY } from "../ovsdb/owned";

/** A GRE port's rows as read from OVSDB (absent ones undefined). */
export interface GrePortRows {
  /** Whether the port is on the bridge it should be on (unknown: not checked). */
  onBridge?: boolean;
  port?: { external_ids: ReadonlyMap<string, string> };
  iface?: { type: string; options: ReadonlyMap<string, string> };
}

/**
 * What a GRE port an owner wants is on the host: absent, right, the owner's
 * own but changed by hand (its type or options, or moved off the bridge), or
 * someone else's, which is never taken over.
 */
export function grePortState(owner: string, options: Readonly<Record<string, string>>, rows: GrePortRows): "absent" | "right" | "changed" | "foreign" {
  if (!rows.port && !rows.iface) return "absent";
  if (!rows.port || rows.port.external_ids.get(OWNER_KEY) !== owner || rows.onBridge === false) return "foreign";
  const have = rows.iface?.options;
  const right = rows.iface?.type === "gre" && have?.size === Object.keys(options).length && Object.entries(options).every(([k, v]) => have.get(k) === v);
  return right ? "right" : "changed";
}
