import { convergeOn, onHost } from "../../engine/converge";
import { observeOvsVersion } from "../../engine/ovs-version";
import type { DsrHypervisorFlowsOutputs } from "../../model/outputs.generated";
import schema from "../../../schema/dsr-hypervisor-flows.json";
import { applyBundle, observeBridge, observeBundles as observeAllBundles, type BridgeRef } from "../../engine/bridge";
import { ownedFlows, planBridge } from "../../engine/plan";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import type { ResourceHandler } from "../../resource-handler";
import { ROLE_KEY } from "../../ovsdb";
import { withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { ensureTunnelPorts, readTunnelPorts, removeTunnelPorts } from "../../engine/tunnel-ports";
import {
  BFD_PEER_ROLE,
  actualInputs,
  bfdDropFlows,
  bfdPorts,
  checkRules,
  conntrackFlushes,
  cookieOf,
  dsrId,
  grePort,
  greTypeOf,
  planIntent,
  withDefaults,
  zonesOf,
  type DsrDefaulted,
} from "./plan";
import { flowPresent } from "../../engine/flows";
import { hypervisorTraffic } from "./traffic";
import { liveConnections, type DumpedFlow, type Modification } from "../../openflow";

type Inputs = DsrDefaulted;

/** What DsrHypervisorFlows records besides its inputs: its outputs, declared in schema/dsr-hypervisor-flows.json ("x-outputs"). */
export type DsrHypervisorFlowsState = DsrHypervisorFlowsOutputs;

/** gre.secondChance: each declared backend's live connections in the zone. */
async function connectionsOf(s: OvsHostSession, inputs: Inputs, zone: number): Promise<Record<string, number> | undefined> {
  if (!inputs.gre?.secondChance) return undefined;
  const live = liveConnections(await s.dumpConntrack(zone), zone);
  return Object.fromEntries([...new Set(inputs.vips.flatMap((v) => v.backends.map((b) => `${b.address}:${b.port}`)))].map((k) => [k, live.get(k) ?? 0]));
}

const isBfdPeer = (ids: ReadonlyMap<string, string>) => ids.get(ROLE_KEY) === BFD_PEER_ROLE;

/** gre.bfd: each peer's session state, and the peers whose port is right (and, given the owned flows, whose port drops all but BFD). */
async function readBfdPeers(s: OvsHostSession, id: string, inputs: Inputs, owned?: readonly DumpedFlow[]) {
  const reads = await readTunnelPorts(s, id, inputs.bridge, bfdPorts(id, inputs));
  const states: Record<string, string> = {};
  for (const r of reads) states[r.want.peer] = r.state !== "right" ? "absent" : (r.bfdStatus?.get("state") ?? "down");
  const present = owned && flowPresent(owned);
  const dropping = (r: (typeof reads)[number]) =>
    !present || (r.ofport !== undefined && bfdDropFlows({ cookie: cookieOf(id), bfdOfports: [r.ofport] }).every(present));
  return { states, working: new Set(reads.filter((r) => r.state === "right" && dropping(r)).map((r) => r.want.peer)) };
}

/** Every bundle any resource sends (tests prove incremental applies from it). */
export const observeBundles = observeAllBundles;

/** Removes the resource's GRE port from the bridge, if it has one (it is told by its name: it has no role). */
const removeGrePort = (s: OvsHostSession, id: string, bridge: string, name: string) =>
  removeTunnelPorts(s, id, bridge, "GRE", (_ids, port) => port === name, []);

/**
 * Reads the bridge, plans the difference and applies it in one bundle: the
 * same path for create, update and delete (which wants nothing), so a
 * partial or drifted host converges. The GRE and BFD ports go first, so
 * their ofports are known to the plan.
 */
function change(id: string, inputs: Inputs, recordedZone: number | undefined, after?: (s: OvsHostSession) => Promise<void>) {
  return convergeOn(id, inputs.host, {
    async plan(s, where) {
      const ref: BridgeRef = { session: s, bridge: inputs.bridge };
      // The apply's conntrack flushes and zone limit, and finish's reads, go to ovs-vswitchd's control socket.
      s.prepareAppctl();
      if (inputs.mode === "gre") await ensureTunnelPorts(s, id, inputs.bridge, [grePort(id, inputs.gre!.port, greTypeOf(inputs))], s.hostName);
      const bfd = bfdPorts(id, inputs);
      await ensureTunnelPorts(s, id, inputs.bridge, bfd, s.hostName);
      await removeTunnelPorts(s, id, inputs.bridge, BFD_PEER_ROLE, isBfdPeer, bfd);
      // Every flow of the bridge: others' flows decide the zone and must not be overwritten.
      const observed = await observeBridge(ref, "all", cookieOf(id));
      if (!observed) throw new Error(`${where}: bridge ${inputs.bridge} does not exist`);
      const planned = await onHost(where, () => planIntent(id, inputs, recordedZone, observed));
      const mods = await onHost(where, () => planBridge(`bridge ${inputs.bridge}`, planned.intent, observed));
      // Once no flow commits connections to a backend that left, none of its entries can come back: they go after the bundle.
      const flushes = conntrackFlushes(ownedFlows(observed, planned.intent.cookie), planned.intent.flows);
      return { ref, mods, flushes, ...planned, bfd };
    },
    async apply(s, plan) {
      const lastApply = await applyBundle(plan.ref, plan.mods);
      for (const flush of plan.flushes) await s.flushConntrack(flush);
      await applyZoneLimit(s, plan.zone, inputs.connectionLimit);
      return lastApply;
    },
    async finish(s, plan, lastApply) {
      await after?.(s);
      const peers = plan.bfd.length > 0 ? (await readBfdPeers(s, id, inputs)).states : undefined;
      const connections = await connectionsOf(s, inputs, plan.zone);
      return {
        cookie: `0x${plan.intent.cookie.toString(16)}`,
        ctZone: plan.zone,
        ofports: Object.fromEntries(plan.ofports),
        lastApply,
        ...(peers ? { bfd: peers } : {}),
        ...(connections ? { connections } : {}),
      };
    },
  });
}

/** connectionLimit: the zone's own limit as wanted (undefined: none of its own); set only where it differs (limits live in ovs-vswitchd's memory, so a restart loses them: read shows it). */
async function applyZoneLimit(s: OvsHostSession, zone: number, wanted: number | undefined): Promise<void> {
  const have = await s.zoneLimit(zone);
  if ((have.own ? have.limit : undefined) !== wanted) await s.setZoneLimit(zone, wanted);
}

const ALL_ONES = (1n << 64n) - 1n;

/**
 * Removes every flow it owns, then the zone's
 * conntrack entries (connections NATed in the zone would outlive the flows,
 * and whoever takes the zone next would inherit them), its GRE port and
 * its BFD ports.
 */
function remove(id: string, inputs: Inputs) {
  return convergeOn(id, inputs.host, {
    async plan(s) {
      const ref: BridgeRef = { session: s, bridge: inputs.bridge };
      s.prepareAppctl();
      const cookie = cookieOf(id);
      const observed = await observeBridge(ref, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      // Every flow it owns, in one message (it owns no group).
      const mods: Modification[] = owned.length > 0 ? [{ op: "delete-flows", cookie, mask: ALL_ONES }] : [];
      return { ref, mods, zones: mods.length > 0 ? zonesOf(owned) : [], bridge: !!observed };
    },
    async apply(s, plan) {
      await applyBundle(plan.ref, plan.mods);
      for (const zone of plan.zones) await s.flushConntrack({ zone });
      for (const zone of plan.zones) await s.setZoneLimit(zone, undefined);
      if (inputs.mode === "gre" && plan.bridge) await removeGrePort(s, id, inputs.bridge, inputs.gre!.port);
      await removeTunnelPorts(s, id, inputs.bridge, BFD_PEER_ROLE, isBfdPeer, []);
    },
  });
}

export const dsrHypervisorFlowsHandler: ResourceHandler<DsrHypervisorFlowsInputs, DsrHypervisorFlowsState, DsrDefaulted> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name, "host.connection.host": i.host.connection.host, bridge: i.bridge }),

  async create(inputs) {
    const id = dsrId(inputs);
    return { id, state: await change(id, inputs, undefined) };
  },

  async read(id, inputs, state) {
    const cookie = cookieOf(id);
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const observed = await observeBridge({ session: s, bridge: inputs.bridge }, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      if (!observed || owned.length === 0) return undefined; // bridge or every flow gone: the resource is gone
      const portNames = new Map([...observed.ports].map(([name, ofport]) => [ofport, name]));
      // gre mode: a GRE port removed or changed by hand delivers nothing, whatever flows are left.
      const greName = inputs.mode === "gre" ? inputs.gre!.port : undefined;
      const greRight = greName !== undefined && (await readTunnelPorts(s, id, inputs.bridge, [grePort(id, greName, greTypeOf(inputs))]))[0].state === "right";
      const greOfport = greRight ? observed.ports.get(greName) : undefined;
      const placement = { cookie, zone: state.ctZone, ofports: observed.ports, ...(greOfport === undefined ? {} : { greOfport }) };
      const actual = actualInputs(inputs, owned, { ...placement, portNames });
      const traffic = hypervisorTraffic(inputs, owned, placement);
      // connectionLimit: what the zone's limit is (a restart of ovs-vswitchd, or a hand, may have taken it away).
      if (inputs.connectionLimit !== undefined) {
        const zoneLimit = await s.zoneLimit(state.ctZone);
        delete actual.connectionLimit;
        if (zoneLimit.own) actual.connectionLimit = zoneLimit.limit;
      }
      const ofports = Object.fromEntries(actual.vips.flatMap((v) => v.backends.map((b) => [b.bridgePort, observed.ports.get(b.bridgePort)!] as const)));
      const { bfd: _, connections: _c, traffic: _t, ...rest } = state;
      const connections = await connectionsOf(s, inputs, state.ctZone);
      const kept = { ...rest, ...(connections ? { connections } : {}), ...(traffic ? { traffic } : {}), ovsVersions: await observeOvsVersion(s) };
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
    // Out of gre mode, or onto another GRE port: the old port goes once no flow uses it.
    const oldPort = old.inputs.mode === "gre" ? old.inputs.gre?.port : undefined;
    const dropPort = oldPort && (news.mode !== "gre" || news.gre?.port !== oldPort) ? oldPort : undefined;
    return change(dsrId(news), news, recorded, dropPort ? (s) => removeGrePort(s, id, news.bridge, dropPort) : undefined);
  },

  async delete(id, inputs) {
    await remove(id, inputs);
  },
};
