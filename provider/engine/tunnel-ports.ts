import { OPEN_VSWITCH, OWNER_KEY, OwnedTransaction, Transaction, describeOwner, mutation, ownerMark, where, type Uuid } from "../ovsdb";
import type { OvsHostSession } from "../transport/ovs-host";
import { grePortState, type WantedTunnelPort } from "./gre-port";

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
  bridge?: { _uuid: Uuid; ports: Uuid[] };
  owned: { _uuid: Uuid; name: string; external_ids: Map<string, string> }[];
  wanted: {
    want: W;
    port?: { _uuid: Uuid; external_ids: Map<string, string> };
    iface?: { _uuid: Uuid; type: string; options: Map<string, string>; bfd: Map<string, string>; bfd_status: Map<string, string>; ofport: number[] };
  }[];
}

async function readRows<W extends WantedTunnelPort>(s: OvsHostSession, owner: string, bridge: string, wanted: readonly W[]): Promise<Rows<W>> {
  const txn = new Transaction(OPEN_VSWITCH);
  const br = txn.select("Bridge", [where("name", "==", bridge)], ["_uuid", "ports"]);
  const owned = txn.select("Port", [where("external_ids", "includes", { [OWNER_KEY]: owner })], ["_uuid", "name", "external_ids"]);
  const ports = wanted.map((w) => txn.select("Port", [where("name", "==", w.name)], ["_uuid", "external_ids"]));
  const ifaces = wanted.map((w) => txn.select("Interface", [where("name", "==", w.name)], ["_uuid", "type", "options", "bfd", "bfd_status", "ofport"]));
  const r = await (await s.vswitchDb()).run(txn);
  return { bridge: r.first(br), owned: r.rows(owned), wanted: wanted.map((want, i) => ({ want, port: r.first(ports[i]), iface: r.first(ifaces[i]) })) };
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
 * Creates the ports the bridge lacks and puts back ones changed by hand, in
 * one transaction; refuses names someone else holds (nothing is changed then).
 */
export async function ensureTunnelPorts(s: OvsHostSession, owner: string, bridge: string, wanted: readonly WantedTunnelPort[], where_: string): Promise<void> {
  if (wanted.length === 0) return;
  const rows = await readRows(s, owner, bridge, wanted);
  if (!rows.bridge) throw new Error(`${where_}: bridge ${bridge} does not exist`);
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
