import { observeOvsVersion, withOvsVersion } from "../../engine/ovs-version";
import type { DsrHypervisorFlowsOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/dsr-hypervisor-flows.json";
import { applyBundle, observeBridge, observeBundles as observeAllBundles, type BridgeRef } from "../../engine/bridge";
import { ownedFlows, planBridge } from "../../engine/plan";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import type { ResourceHandler } from "../../resource-handler";
import { OPEN_VSWITCH, OwnedTransaction, ROLE_KEY, Transaction, describeOwner, mutation, ownerMark, where } from "../../ovsdb";
import { operationLock, withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { ensureTunnelPorts, readTunnelPorts, removeTunnelPorts } from "../../engine/tunnel-ports";
import {
  BFD_PEER_ROLE,
  GRE_OPTIONS,
  actualInputs,
  bfdDropFlows,
  bfdPorts,
  checkRules,
  conntrackFlushes,
  cookieOf,
  dsrId,
  greOfportRequest,
  planIntent,
  withDefaults,
  zonesOf,
} from "./plan";
import { grePortState, type GrePortRows } from "../../engine/gre-port";
import { flowPresent } from "../../engine/flows";
import { liveConnections, parseConntrack, type DumpedFlow } from "../../openflow";

type Inputs = DsrHypervisorFlowsInputs;

/** What DsrHypervisorFlows records besides its inputs: its outputs, declared in schema/dsr-hypervisor-flows.json ("x-outputs"). */
export type DsrHypervisorFlowsState = DsrHypervisorFlowsOutputs;

/** gre.secondChance: each declared backend's live connections in the zone. */
async function connectionsOf(s: OvsHostSession, inputs: Inputs, zone: number): Promise<Record<string, number> | undefined> {
  if (!inputs.gre?.secondChance) return undefined;
  const live = liveConnections(parseConntrack(await s.appctl(["dpctl/dump-conntrack", `zone=${zone}`])), zone);
  return Object.fromEntries([...new Set(inputs.vips.flatMap((v) => v.backends.map((b) => `${b.address}:${b.port}`)))].map((k) => [k, live.get(k) ?? 0]));
}

const isBfdPeer = (ids: ReadonlyMap<string, string>) => ids.get(ROLE_KEY) === BFD_PEER_ROLE;

/** gre.bfd: each peer's session state, and the peers whose port is right (and, given the owned flows, whose port drops all but BFD). */
async function readBfdPeers(s: OvsHostSession, id: string, inputs: Inputs, owned?: readonly DumpedFlow[]) {
  const reads = await readTunnelPorts(s, id, inputs.bridge, bfdPorts(id, inputs));
  const states: Record<string, string> = {};
  for (const r of reads) states[r.want.peer] = r.state !== "right" ? "absent" : r.bfdStatus?.get("state") ?? "down";
  const present = owned && flowPresent(owned);
  const dropping = (r: (typeof reads)[number]) => !present || (r.ofport !== undefined && bfdDropFlows({ cookie: cookieOf(id), bfdOfports: [r.ofport] }).every(present));
  return { states, working: new Set(reads.filter((r) => r.state === "right" && dropping(r)).map((r) => r.want.peer)) };
}

const ALL_ONES = (1n << 64n) - 1n;

/** Every bundle any resource sends (tests prove incremental applies from it). */
export const observeBundles = observeAllBundles;

/** Refusals found while planning name the host. */
async function onHost<R>(s: OvsHostSession, fn: () => R): Promise<R> {
  try {
    return fn();
  } catch (e) {
    if (e instanceof Error && !e.message.startsWith(s.hostName)) e.message = `${s.hostName}: ${e.message}`;
    throw e;
  }
}

/** The GRE port's rows on the host (by name), and whether the port is on the bridge. */
async function readGrePort(s: OvsHostSession, bridge: string, name: string) {
  const txn = new Transaction(OPEN_VSWITCH);
  const br = txn.select("Bridge", [where("name", "==", bridge)], ["_uuid", "ports"]);
  const port = txn.select("Port", [where("name", "==", name)], ["_uuid", "name", "external_ids"]);
  const iface = txn.select("Interface", [where("name", "==", name)], ["_uuid", "name", "type", "options", "external_ids"]);
  const r = await (await s.vswitchDb()).run(txn);
  const rows = { bridge: r.first(br), port: r.first(port), iface: r.first(iface) };
  const onBridge = !!rows.port && !!rows.bridge?.ports.some((u) => u.id === rows.port!._uuid.id);
  return { ...rows, onBridge } satisfies GrePortRows & Record<string, unknown>;
}

/**
 * gre mode: the flow-based GRE port, ensured in one owned transaction (created,
 * or its type and options put back) and applied before flows are planned, so
 * its ofport is known. Someone else's port of that name is refused.
 */
async function ensureGrePort(s: OvsHostSession, id: string, inputs: Inputs): Promise<void> {
  const name = inputs.gre!.port!;
  const rows = await readGrePort(s, inputs.bridge, name);
  const state = grePortState(id, GRE_OPTIONS, rows);
  if (!rows.bridge) throw new Error(`${s.hostName}: bridge ${inputs.bridge} does not exist`);
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(id), `ovslb: GRE port ${name} of ${id}`);
  if (state === "foreign") {
    throw new Error(
      `${s.hostName}: gre.port: port ${name} exists and is ${rows.port ? describeOwner(rows.port) : "not owned by ovslb"} (or not on bridge ${inputs.bridge}); refusing to take it over (a bridge has one flow-based GRE port: give the services of one bridge to one DsrHypervisorFlows)`,
    );
  }
  if (state === "right") return;
  if (state === "absent") {
    txn.requireAbsent("Port", [where("name", "==", name)]);
    txn.requireAbsent("Interface", [where("name", "==", name)]);
    const iface = txn.insertOwned("Interface", { name, type: "gre", options: GRE_OPTIONS, ofport_request: [greOfportRequest(id)] }, "gre_if");
    const port = txn.insertOwned("Port", { name, interfaces: [iface] }, "gre_port");
    txn.requireUnchanged("Bridge", rows.bridge, []);
    txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid)], [mutation("ports", "insert", [port])]);
  } else {
    txn.requireOwned("Port", rows.port!);
    txn.update("Interface", [where("_uuid", "==", rows.iface!._uuid)], { type: "gre", options: GRE_OPTIONS });
  }
  await s.commitApplied(txn);
}

/** Removes the resource's GRE port from the bridge, if it has one. */
async function removeGrePort(s: OvsHostSession, id: string, bridge: string, name: string): Promise<void> {
  const rows = await readGrePort(s, bridge, name);
  if (!rows.port || !rows.bridge || grePortState(id, GRE_OPTIONS, rows) === "foreign") return;
  const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(id), `ovslb: remove GRE port ${name} of ${id}`);
  txn.requireOwned("Port", rows.port);
  txn.mutate("Bridge", [where("_uuid", "==", rows.bridge._uuid)], [mutation("ports", "delete", [rows.port._uuid])]);
  await s.commitApplied(txn);
}

/**
 * Reads the bridge, plans the difference and applies it in one bundle: the
 * same path for create and update, so a partial or drifted host converges.
 */
async function converge(s: OvsHostSession, id: string, inputs: Inputs, recordedZone: number | undefined): Promise<DsrHypervisorFlowsState> {
  const ref: BridgeRef = { session: s, bridge: inputs.bridge };
  if (inputs.mode === "gre") await ensureGrePort(s, id, inputs);
  const bfd = bfdPorts(id, inputs);
  await ensureTunnelPorts(s, id, inputs.bridge, bfd, s.hostName);
  await removeTunnelPorts(s, id, inputs.bridge, BFD_PEER_ROLE, isBfdPeer, bfd);
  // Every flow of the bridge: others' flows decide the zone and must not be overwritten.
  const observed = await observeBridge(ref, "all", cookieOf(id));
  if (!observed) throw new Error(`${s.hostName}: bridge ${inputs.bridge} does not exist`);
  const { intent, zone, ofports } = await onHost(s, () => planIntent(id, inputs, recordedZone, observed));
  const lastApply = await applyBundle(ref, planBridge(`${s.hostName}: bridge ${inputs.bridge}`, intent, observed));
  // After the bundle: once no flow commits connections to a backend that left, none of its entries can come back.
  for (const flush of conntrackFlushes(ownedFlows(observed, intent.cookie), intent.flows)) await s.appctl(flush);
  const peers = bfd.length > 0 ? (await readBfdPeers(s, id, inputs)).states : undefined;
  const connections = await connectionsOf(s, inputs, zone);
  return {
    cookie: `0x${intent.cookie.toString(16)}`,
    ctZone: zone,
    ofports: Object.fromEntries(ofports),
    lastApply,
    ...(peers ? { bfd: peers } : {}),
    ...(connections ? { connections } : {}),
  };
}

export const dsrHypervisorFlowsHandler: ResourceHandler<Inputs, DsrHypervisorFlowsState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name, "host.connection.host": i.host.connection.host, bridge: i.bridge }),

  async create(inputs) {
    const id = dsrId(inputs);
    const [state] = await withOvsHosts([inputs.host], async (s) => withOvsVersion(s, await converge(s, id, inputs, undefined)), operationLock(id));
    return { id, state };
  },

  async read(id, inputs, state) {
    const cookie = cookieOf(id);
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const observed = await observeBridge({ session: s, bridge: inputs.bridge }, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      if (!observed || owned.length === 0) return undefined; // bridge or every flow gone: the resource is gone
      const portNames = new Map([...observed.ports].map(([name, ofport]) => [ofport, name]));
      // gre mode: a GRE port removed or changed by hand delivers nothing, whatever flows are left.
      const grePort = inputs.mode === "gre" ? inputs.gre!.port! : undefined;
      const greRight = grePort !== undefined && grePortState(id, GRE_OPTIONS, await readGrePort(s, inputs.bridge, grePort)) === "right";
      const greOfport = greRight ? observed.ports.get(grePort!) : undefined;
      const actual = actualInputs(inputs, owned, { cookie, zone: state.ctZone, ofports: observed.ports, portNames, ...(greOfport === undefined ? {} : { greOfport }) });
      const ofports = Object.fromEntries(
        actual.vips.flatMap((v) => v.backends.map((b) => [b.bridgePort, observed.ports.get(b.bridgePort)!] as const)),
      );
      const { bfd: _, connections: _c, ...rest } = state;
      const connections = await connectionsOf(s, inputs, state.ctZone);
      const kept = { ...rest, ...(connections ? { connections } : {}), ovsVersions: await observeOvsVersion(s) };
      const wantedBfd = inputs.gre?.bfd;
      if (!wantedBfd) return { inputs: actual, state: { ...kept, ofports } };
      // A peer whose port is gone or changed reads as not declared, so the diff shows it.
      const peers = await readBfdPeers(s, id, inputs, owned);
      const left = wantedBfd.peers.filter((p) => peers.working.has(`${p.address}/${p.key}`));
      const gre = { ...actual.gre!, bfd: { ...wantedBfd, peers: left } };
      if (left.length === 0) delete (gre as { bfd?: unknown }).bfd;
      return { inputs: { ...actual, gre }, state: { ...kept, ofports, bfd: peers.states } };
    });
    return found;
  },

  async update(id, old, news) {
    // The zone is sticky; dropping an explicit zone goes back to the derived one.
    const recorded = old.inputs.zone !== undefined && news.zone === undefined ? undefined : old.state.ctZone;
    const [state] = await withOvsHosts([news.host], async (s) => {
      const converged = await converge(s, id, news, recorded);
      // Out of gre mode, or onto another GRE port: the old port goes once no flow uses it.
      const oldPort = old.inputs.mode === "gre" ? old.inputs.gre?.port : undefined;
      if (oldPort && (news.mode !== "gre" || news.gre?.port !== oldPort)) await removeGrePort(s, id, news.bridge, oldPort);
      return withOvsVersion(s, converged);
    }, operationLock(dsrId(news)));
    return state;
  },

  async delete(id, inputs) {
    const cookie = cookieOf(id);
    await withOvsHosts([inputs.host], async (s) => {
      const ref: BridgeRef = { session: s, bridge: inputs.bridge };
      const observed = await observeBridge(ref, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      if (observed && owned.length > 0) {
        await applyBundle(ref, [{ op: "delete-flows", cookie, mask: ALL_ONES }]);
        // Connections NATed in the zone would outlive the flows, and whoever takes the zone next would inherit them.
        for (const zone of zonesOf(owned)) await s.appctl(["dpctl/flush-conntrack", `zone=${zone}`]);
      }
      if (inputs.mode === "gre" && observed) await removeGrePort(s, id, inputs.bridge, inputs.gre!.port!);
      await removeTunnelPorts(s, id, inputs.bridge, BFD_PEER_ROLE, isBfdPeer, []);
    }, operationLock(dsrId(inputs)));
  },
};
