import { OPEN_VSWITCH, OWNER_KEY, OwnedTransaction, Transaction, describeOwner, mutation, ownerMark, where, type Uuid } from "../ovsdb";
import type { OvsHostSession } from "../transport/ovs-host";
import { grePortState, type TunnelType, type WantedTunnelPort } from "./gre-port";

/**
 * Owned GRE ports with a fixed remote (the gateways' tunnels to each
 * hypervisor, and the BFD liveness ports on both ends): ensured in one owned
 * OVSDB transaction per bridge, read back with their BFD status, and removed
 * when no longer wanted. Every port carries a `role` external id, so an
 * owner's ports of different roles are kept apart.
 */

/** A wanted port as found: its state, and its ofport and BFD status when right. */
export interface TunnelPortRead<W extends WantedTunnelPort = WantedTunnelPort> {
  want: W;
  state: "absent" | "right" | "changed" | "foreign";
  ofport?: number;
  bfdStatus?: ReadonlyMap<string, string>;
}

interface Rows<W extends WantedTunnelPort = WantedTunnelPort> {
  bridge?: { _uuid: Uuid; ports: Uuid[]; datapath_type: string };
  /** The names of the host's GRE interfaces of the other type than the wanted ports' (when asked). */
  otherFamily: Set<string>;
  owned: { _uuid: Uuid; name: string; external_ids: Map<string, string> }[];
  wanted: {
    want: W;
    port?: { _uuid: Uuid; external_ids: Map<string, string> };
    iface?: { _uuid: Uuid; type: string; options: Map<string, string>; bfd: Map<string, string>; bfd_status: Map<string, string>; ofport: number[] };
  }[];
}

async function readRows<W extends WantedTunnelPort>(
  s: OvsHostSession,
  owner: string,
  bridge: string,
  wanted: readonly W[],
  otherType?: TunnelType,
): Promise<Rows<W>> {
  const txn = new Transaction(OPEN_VSWITCH);
  const br = txn.select("Bridge", [where("name", "==", bridge)], ["_uuid", "ports", "datapath_type"]);
  const others = otherType ? txn.select("Interface", [where("type", "==", otherType)], ["name"]) : undefined;
  const owned = txn.select("Port", [where("external_ids", "includes", { [OWNER_KEY]: owner })], ["_uuid", "name", "external_ids"]);
  const ports = wanted.map((w) => txn.select("Port", [where("name", "==", w.name)], ["_uuid", "external_ids"]));
  const ifaces = wanted.map((w) => txn.select("Interface", [where("name", "==", w.name)], ["_uuid", "type", "options", "bfd", "bfd_status", "ofport"]));
  const r = await (await s.vswitchDb()).run(txn);
  return {
    bridge: r.first(br),
    otherFamily: new Set(others ? r.rows<{ name: string }>(others).map((i) => i.name) : []),
    owned: r.rows(owned),
    wanted: wanted.map((want, i) => ({ want, port: r.first(ports[i]), iface: r.first(ifaces[i]) })),
  };
}

/** The bfd column a wanted port sets: none when it leaves the column as found. */
const bfdSet = (w: WantedTunnelPort) => (w.bfd === "unmanaged" ? {} : { bfd: w.bfd ?? {} });

function stateOf(owner: string, w: Rows["wanted"][number], bridge: Rows["bridge"]): TunnelPortRead["state"] {
  const onBridge = !w.port || !bridge ? undefined : bridge.ports.some((u) => u.id === w.port!._uuid.id);
  const state = grePortState(owner, w.want.options, { port: w.port, iface: w.iface, ...(onBridge === undefined ? {} : { onBridge }) }, w.want.type);
  if (state !== "right" || w.want.bfd === "unmanaged") return state;
  const want = w.want.bfd ?? {};
  const have = w.iface!.bfd;
  const sameBfd = have.size === Object.keys(want).length && Object.entries(want).every(([k, v]) => have.get(k) === v);
  return sameBfd ? "right" : "changed";
}

/** The wanted ports as they are on the bridge. */
export async function readTunnelPorts<W extends WantedTunnelPort>(
  s: OvsHostSession,
  owner: string,
  bridge: string,
  wanted: readonly W[],
): Promise<TunnelPortRead<W>[]> {
  const rows = await readRows(s, owner, bridge, wanted);
  return rows.wanted.map((w) => {
    const state = stateOf(owner, w, rows.bridge);
    const ofport = w.iface?.ofport[0];
    return {
      want: w.want,
      state,
      ...(state === "right" && ofport !== undefined && ofport > 0 ? { ofport } : {}),
      ...(state === "right" && w.want.bfd && w.want.bfd !== "unmanaged" ? { bfdStatus: w.iface!.bfd_status } : {}),
    };
  });
}

/**
 * On the userspace datapath gre and ip6gre ports cannot receive side by side
 * in one ovs-vswitchd: it registers each local address once for GRE, for the
 * tunnel type that registered first (lib/tnl-ports.c: map_insert takes a
 * reference on an existing entry of the same address and keeps its port), so
 * the other type's packets are popped to the first type's vport and dropped
 * ("receive tunnel port not found"). The entries outlive the first type's
 * ports while the second type's are there (OVS 3.1 to main). So a change of
 * underlay family removes the owner's ports of the old family in a
 * transaction of their own before any port of the new one is made, and
 * someone else's GRE ports of the other family are refused on a userspace
 * bridge.
 */
async function clearOtherFamily(s: OvsHostSession, owner: string, rows: Rows, type: TunnelType, other: TunnelType, where_: string): Promise<void> {
  const mine = rows.owned.filter((p) => rows.otherFamily.has(p.name));
  const foreign = [...rows.otherFamily].filter((name) => !mine.some((p) => p.name === name));
  if (foreign.length > 0 && rows.bridge!.datapath_type === "netdev") {
    throw new Error(
      `${where_}: ${other} port${foreign.length > 1 ? "s" : ""} ${foreign.join(", ")} on this host: on the userspace datapath ovs-vswitchd receives GRE for one tunnel type per local address (the first registered, lib/tnl-ports.c), so ${type} and ${other} ports cannot both receive; give this host's GRE tunnels one underlay family`,
    );
  }
  if (mine.length === 0) return;
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(owner), `ovslb: ${other} ports of ${owner} (its underlay is now ${type})`);
  for (const p of mine) txn.requireOwned("Port", p);
  txn.mutate(
    "Bridge",
    [where("_uuid", "==", rows.bridge!._uuid)],
    [
      mutation(
        "ports",
        "delete",
        mine.map((p) => p._uuid),
      ),
    ],
  );
  await s.commitApplied(txn);
}

/**
 * Creates the ports the bridge lacks and puts back ones changed by hand, in
 * one transaction; refuses names someone else holds (nothing is changed then).
 */
export async function ensureTunnelPorts(s: OvsHostSession, owner: string, bridge: string, wanted: readonly WantedTunnelPort[], where_: string): Promise<void> {
  if (wanted.length === 0) return;
  const type = wanted[0].type ?? "gre";
  const other: TunnelType = type === "gre" ? "ip6gre" : "gre";
  let rows = await readRows(s, owner, bridge, wanted, other);
  if (!rows.bridge) throw new Error(`${where_}: bridge ${bridge} does not exist`);
  if (rows.otherFamily.size > 0) {
    await clearOtherFamily(s, owner, rows, type, other, where_);
    rows = await readRows(s, owner, bridge, wanted);
    if (!rows.bridge) throw new Error(`${where_}: bridge ${bridge} does not exist`);
  }
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(owner), `ovslb: tunnel ports of ${owner}`);
  let changes = 0;
  for (const w of rows.wanted) {
    const state = stateOf(owner, w, rows.bridge);
    if (state === "foreign") {
      const { property, hint } = w.want.refusal ?? {};
      throw new Error(
        `${where_}: ${property ? `${property}: ` : ""}port ${w.want.name} exists and is ${w.port ? describeOwner(w.port) : "not owned by ovslb"} (or not on bridge ${bridge}); refusing to take it over${hint ? ` (${hint})` : ""}`,
      );
    }
    if (state === "absent") {
      txn.requireAbsent("Port", [where("name", "==", w.want.name)]);
      txn.requireAbsent("Interface", [where("name", "==", w.want.name)]);
      const iface = txn.insertOwned("Interface", {
        name: w.want.name,
        type: w.want.type ?? "gre",
        options: w.want.options,
        ...bfdSet(w.want),
        ofport_request: [w.want.ofportRequest],
      });
      const port = txn.insertOwned("Port", {
        name: w.want.name,
        interfaces: [iface],
        ...(w.want.tag === undefined ? {} : { tag: [w.want.tag] }),
        external_ids: w.want.externalIds,
      });
      txn.requirePresent("Bridge", [where("_uuid", "==", rows.bridge._uuid)]);
      txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid)], [mutation("ports", "insert", [port])]);
      changes++;
    } else if (state === "changed") {
      txn.requireOwned("Port", w.port!);
      if (!rows.bridge.ports.some((u) => u.id === w.port!._uuid.id)) {
        txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid)], [mutation("ports", "insert", [w.port!._uuid])]);
      }
      txn.update("Interface", [where("_uuid", "==", w.iface!._uuid)], { type: w.want.type ?? "gre", options: w.want.options, ...bfdSet(w.want) });
      changes++;
    }
  }
  if (changes > 0) await s.commitApplied(txn);
}

/** Removes the owner's ports of a role (told by their external ids, or their name) on the bridge that are not in `keep`. */
export async function removeTunnelPorts(
  s: OvsHostSession,
  owner: string,
  bridge: string,
  role: string,
  isRole: (externalIds: ReadonlyMap<string, string>, name: string) => boolean,
  keep: readonly WantedTunnelPort[],
): Promise<void> {
  const rows = await readRows(s, owner, bridge, []);
  const kept = new Set(keep.map((w) => w.name));
  const stale = rows.owned.filter((p) => isRole(p.external_ids, p.name) && !kept.has(p.name));
  if (stale.length === 0 || !rows.bridge) return;
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(owner), `ovslb: remove ${role} ports of ${owner}`);
  for (const p of stale) txn.requireOwned("Port", p);
  txn.mutate(
    "Bridge",
    [where("_uuid", "==", rows.bridge._uuid)],
    [
      mutation(
        "ports",
        "delete",
        stale.map((p) => p._uuid),
      ),
    ],
  );
  await s.commitApplied(txn);
}
