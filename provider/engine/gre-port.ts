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
export function grePortState(
  owner: string,
  options: Readonly<Record<string, string>>,
  rows: GrePortRows,
  type: TunnelType = "gre",
): "absent" | "right" | "changed" | "foreign" {
  if (!rows.port && !rows.iface) return "absent";
  if (!rows.port || rows.port.external_ids.get(OWNER_KEY) !== owner || rows.onBridge === false) return "foreign";
  const have = rows.iface?.options;
  const right = rows.iface?.type === type && have?.size === Object.keys(options).length && Object.entries(options).every(([k, v]) => have.get(k) === v);
  return right ? "right" : "changed";
}

/** The Interface type of a GRE tunnel: gre over an IPv4 underlay, ip6gre over an IPv6 one (both carry Ethernet). */
export type TunnelType = "gre" | "ip6gre";
/** The tunnel type for an underlay address (a remote or the sources a flow-based port takes). */
export const tunnelTypeOf = (address: string): TunnelType => (address.includes(":") ? "ip6gre" : "gre");

/** An owned GRE port with a fixed remote, as wanted (engine/tunnel-ports.ts ensures it). */
export interface WantedTunnelPort {
  name: string;
  /** gre unless given: ip6gre for an IPv6 underlay. */
  type?: TunnelType;
  options: Readonly<Record<string, string>>;
  /** The Interface's bfd column; undefined: no BFD (the column must be empty); "unmanaged": left as found. */
  bfd?: Readonly<Record<string, string>> | "unmanaged";
  /** Derived and kept, so a port re-created by hand keeps its number and what refers to it. */
  ofportRequest: number;
  /** An access VLAN: 4095 (never on a wire) keeps the bridge's NORMAL from flooding into the tunnel. */
  tag?: number;
  /** What the port is for (external_ids, besides the owner mark): ROLE_KEY, unless its owner removes it by name. */
  externalIds: Readonly<Record<string, string>>;
  /** How a refusal of someone else's port of this name starts (the input naming it) and ends (what to do instead). */
  refusal?: { property: string; hint: string };
}

/** The Interface bfd column for a session with these timers (decay off, so an idle session keeps its rate). */
export function bfdColumn(timers: { minRx?: number; minTx?: number; multiplier?: number } = {}): Record<string, string> {
  return {
    enable: "true",
    min_rx: String(timers.minRx ?? 100),
    min_tx: String(timers.minTx ?? 100),
    mult: String(timers.multiplier ?? 3),
    decay_min_rx: "0",
  };
}
