import type { DumpedFlow, GroupEntry, Modification } from "../openflow";
import { OPEN_VSWITCH, Transaction, mutation, where, type NamedUuid, type OwnedTransaction, type RowInputOf, type RowOf } from "../ovsdb";
import { OpenFlowBridge, type BundleSent, type FlowFilter } from "../transport/openflow-bridge";
import { bridgeSocket, type OvsHostSession } from "../transport/ovs-host";
import { mapBounded } from "../transport/ssh";
import type { CommitGate } from "./converge";
import { summarizeApply, type ApplySummary, type ObservedBridge } from "./plan";

/**
 * The I/O half of bridge convergence: observe a bridge (its ports from
 * OVSDB, its flows and groups from OpenFlow, concurrently over one SSH
 * connection) and apply a planned bundle. Every resource that owns flows
 * and groups reads and writes bridges through here.
 */

/**
 * Which flows to dump. "owned": only the owner's (by cookie), for a bridge it
 * owns alone; a table: every flow of it, for conflict checks, when all the
 * owner's flows live in that table (or those tables); "all": every flow of the bridge.
 */
export type FlowScope = "owned" | "all" | { table: number } | { tables: readonly number[] };

export interface BridgeRef {
  session: OvsHostSession;
  bridge: string;
}

const ALL_ONES = (1n << 64n) - 1n;

function filtersOf(scope: FlowScope, cookie: bigint): (FlowFilter | undefined)[] {
  if (scope === "all") return [undefined];
  if (scope === "owned") return [{ cookie, mask: ALL_ONES }];
  const tables = "tables" in scope ? scope.tables : [scope.table];
  return tables.map((table) => ({ cookie: 0n, mask: 0n, table }));
}

/**
 * Adds to `txn` an owned bridge with its local port (the internal interface
 * named after the bridge, which OVS gives every bridge) besides `ports`, and
 * the root row's reference to it. Returns the bridge's uuid in the transaction.
 */
export function insertOwnedBridge(
  txn: OwnedTransaction<typeof OPEN_VSWITCH>,
  bridge: Omit<RowInputOf<RowOf<typeof OPEN_VSWITCH, "Bridge">>, "ports"> & { name: string },
  ports: readonly NamedUuid[] = [],
): NamedUuid {
  const local = txn.insert("Interface", { name: bridge.name, type: "internal" }, "local_if");
  const localPort = txn.insert("Port", { name: bridge.name, interfaces: [local] }, "local_port");
  const row = txn.insertOwned("Bridge", { ...bridge, ports: [localPort, ...ports] }, "bridge");
  txn.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [row])]);
  return row;
}

/** The bridge's interfaces and their ofports (name -> ofport), or undefined when the bridge does not exist. */
export async function bridgePorts(s: OvsHostSession, bridge: string): Promise<Map<string, number> | undefined> {
  const txn = new Transaction(OPEN_VSWITCH);
  const bridges = txn.select("Bridge", [where("name", "==", bridge)], ["ports"]);
  const ports = txn.select("Port", [], ["_uuid", "interfaces"]);
  const interfaces = txn.select("Interface", [], ["_uuid", "name", "ofport"]);
  const r = await (await s.vswitchDb()).run(txn);
  const row = r.first(bridges);
  if (!row) return undefined;
  const portIds = new Set(row.ports.map((u) => u.id));
  const ifaceIds = new Set(
    r
      .rows(ports)
      .filter((p) => portIds.has(p._uuid.id))
      .flatMap((p) => p.interfaces.map((u) => u.id)),
  );
  const result = new Map<string, number>();
  for (const i of r.rows(interfaces)) {
    const ofport = i.ofport[0];
    // An interface OVS could not attach has ofport -1 (or none yet): nothing can be delivered to it.
    if (ifaceIds.has(i._uuid.id) && ofport !== undefined && ofport > 0) result.set(i.name, ofport);
  }
  return result;
}

export const openflowOf = (ref: BridgeRef) => new OpenFlowBridge(ref.session.ssh, bridgeSocket(ref.session.host, ref.bridge));

/** One bridge as it is: ports, the flows in scope, groups. Undefined when the bridge does not exist. */
export async function observeBridge(ref: BridgeRef, scope: FlowScope, cookie: bigint): Promise<ObservedBridge | undefined> {
  const ports = await bridgePorts(ref.session, ref.bridge);
  if (!ports) return undefined;
  return { ports, ...(await observeFlowsAndGroups(ref, scope, cookie)) };
}

/** The flows in scope and every group (the caller has the ports). */
export async function observeFlowsAndGroups(ref: BridgeRef, scope: FlowScope, cookie: bigint): Promise<Omit<ObservedBridge, "ports">> {
  const of = openflowOf(ref);
  const [groups, ...dumps] = await Promise.all([of.dumpGroups(), ...filtersOf(scope, cookie).map((f) => of.dumpFlows(f))]);
  return { flows: dumps.flat(), groups };
}

/** How many flows of this owner (by cookie, every table) the bridge holds now: one short reply, whatever the bridge holds. */
export async function ownedFlowCount(ref: BridgeRef, cookie: bigint): Promise<number> {
  return (await openflowOf(ref).aggregate({ cookie, mask: ALL_ONES })).flows;
}

/** What a change touches on one bridge: these groups, and the flows these filters select. */
export interface PartialScope {
  groupIds: readonly number[];
  flows: readonly FlowFilter[];
}

/** Channels one partial observe keeps open at once on a host's connection (sshd allows 10 sessions per connection by default). */
export const PARTIAL_READ_PARALLELISM = 4;

/**
 * Only the named groups (`dump-groups BR ID`, one each; a group that does not
 * exist is simply absent) and the flows the filters select (`dump-flows BR
 * MATCH`): a change's read costs what the change touches, not what the bridge holds.
 */
export async function observePartial(ref: BridgeRef, scope: PartialScope): Promise<Omit<ObservedBridge, "ports">> {
  const of = openflowOf(ref);
  const groups: GroupEntry[] = [];
  const flows: DumpedFlow[] = [];
  const reads: Array<() => Promise<void>> = [
    ...scope.groupIds.map((id) => async () => {
      const g = await of.dumpGroup(id);
      if (g) groups.push(g);
    }),
    ...scope.flows.map((f) => async () => void flows.push(...(await of.dumpFlows(f)))),
  ];
  await mapBounded(reads, PARTIAL_READ_PARALLELISM, (read) => read());
  return { groups, flows };
}

/** Who wants to see each bundle sent (tests prove incremental applies from it). */
const bundleObservers = new Set<(host: string, sent: BundleSent) => void>();
export function observeBundles(fn: (host: string, sent: BundleSent) => void): () => void {
  bundleObservers.add(fn);
  return () => bundleObservers.delete(fn);
}

/**
 * Sends one planned bundle (nothing for no modifications) and says what was
 * sent. With a gate of several hosts (converge's), the bundle is staged on
 * the host first and committed once every host's is staged, so the hosts
 * take their changes together; when another host failed first, it is
 * withdrawn unapplied.
 */
export async function applyBundle(ref: BridgeRef, mods: readonly Modification[], gate?: CommitGate): Promise<ApplySummary> {
  if (mods.length === 0) return summarizeApply(mods, undefined);
  let sent: BundleSent;
  if (gate?.together) {
    const staged = await openflowOf(ref).stageBundle(mods);
    try {
      await gate.staged();
    } catch (e) {
      await staged.abort();
      throw e;
    }
    sent = await staged.commit();
  } else {
    sent = await openflowOf(ref).applyBundle(mods);
  }
  for (const fn of bundleObservers) fn(ref.session.hostName, sent);
  return summarizeApply(mods, sent);
}
