import schema from "../../../schema/deferred-nat-load-balancer.json";
import { applyBundles, observeBridge, type BridgeRef } from "../../engine/bridge";
import { ownedGroupIds, ownedFlows, type ApplySummary, type ObservedBridge } from "../../engine/plan";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../../model/inputs.generated";
import type { ResourceHandler } from "../../resource-handler";
import { withAllOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { applyNorthbound, deleteNorthbound, preflightNorthbound, readNorthbound, withNorthbound } from "./ovn";
import { assessHealth, monitorsToMarkOffline, type BackendHealth, type BfdView, type StaleBackend } from "./health";
import { markOffline, readSouthbound, withSouthbound } from "./southbound";
import { SLOT_TABLE, planAllSlots, recordAllSlots, unsafeMovesError, type SlotPlans } from "./second-chance";
import { readSlots, shares, type RecordedSlotTable } from "./slots";
import { ensureTunnels, removeStaleTunnels, workingTunnels } from "./tunnels";
import {
  actualInputs,
  assignIds,
  checkRules,
  bfdKeyOf,
  cookieOf,
  foreignGroupsOn,
  lbId,
  mergeIds,
  planGateway,
  recordedGroups,
  withDefaults,
  type GatewayPort,
  type RecordedIds,
} from "./plan";

/** What DeferredNatLoadBalancer records besides its inputs. */
export interface DeferredNatState extends RecordedIds {
  /** The cookie on every flow it owns, as hex. */
  cookie: string;
  /** What the last create/update sent to each gateway: OpenFlow messages, bytes and operations by kind. */
  lastApply: Record<string, ApplySummary>;
  /** Where the hosts differed from the inputs at the last read (empty when in sync). */
  drift: string[];
  /** secondChance: each VIP's slot table (owners and previous owners), kept for life so a change moves only the slots it must. */
  slotTables?: Record<string, RecordedSlotTable>;
  /** secondChance: each VIP's share of slots per backend ("address:port" -> fraction), and what the last change moved. */
  slotShares?: Record<string, Record<string, number>>;
  slotMoves?: Record<string, { moved: number; minimum: number }>;
  /** healthCheck.bfd: the GRE key of the BFD sessions, for the hypervisors' DsrHypervisorFlows gre.bfd.peers. */
  bfdKey?: number;
  /** healthCheck: each backend as the southbound and every gateway's BFD see it, at the last create, update or read. */
  health?: BackendHealth[];
  /** healthCheck: backends OVN reports online that cannot serve (port unbound, or their hypervisor's BFD down on a majority of gateways). */
  stale?: StaleBackend[];
}

const EMPTY_IDS: RecordedIds = { groupIds: {}, bucketIds: {} };
const recordedIn = (state: Partial<DeferredNatState>): RecordedIds => ({ groupIds: state.groupIds ?? {}, bucketIds: state.bucketIds ?? {} });

interface GatewayRead {
  ref: BridgeRef;
  name: string;
  where: string;
  port: GatewayPort;
  observed: ObservedBridge;
  /** healthCheck.bfd: this gateway's BFD session toward each hypervisor. */
  bfd: Map<string, BfdView>;
}

/** Reads each gateway's bridge: its ports (and working tunnel ports), table 0 (every owner's flows, for conflicts) and its groups. */
async function readGateways(inputs: Inputs, sessions: OvsHostSession[]): Promise<GatewayRead[]> {
  const cookie = cookieOf(inputs);
  return Promise.all(
    inputs.gateways.map(async (gw, i) => {
      const ref = { session: sessions[i], bridge: gw.bridge };
      // Every owner's flows in the tables ovslb uses, for conflicts; the slot table too, so a change of mode leaves no slot behind.
      const observed = await observeBridge(ref, { tables: [0, SLOT_TABLE] }, cookie);
      const where = `${ref.session.hostName} (${gw.name})`;
      if (!observed) throw new Error(`${where}: bridge ${gw.bridge} does not exist`);
      const segmentOfport = observed.ports.get(gw.segmentPort);
      if (segmentOfport === undefined) throw new Error(`${where}: gateway ${gw.name} has no port ${gw.segmentPort} with an OpenFlow port number`);
      const { tunnelOfports, bfdOfports, bfd } = await workingTunnels(ref.session, inputs, gw);
      return { ref, name: gw.name, where, port: { segmentOfport, mac: gw.mac, tunnelOfports, bfdOfports }, observed, bfd };
    }),
  );
}

function slotOutputs(slots: SlotPlans): Pick<DeferredNatState, "slotTables" | "slotShares" | "slotMoves"> {
  const slotShares = Object.fromEntries(
    Object.entries(slots.tables).map(([vip, t]) => [vip, Object.fromEntries([...shares(t)].map(([b, n]) => [b, n / t.size]))]),
  );
  return { slotTables: recordAllSlots(slots.tables), slotShares, slotMoves: slots.moves };
}

/**
 * The health check's view: the southbound's monitors and bindings (when read)
 * and every gateway's BFD sessions. With enforce, stale monitors are set
 * offline, and the report says what was found before that.
 */
async function observeHealth(inputs: Inputs, reads: readonly GatewayRead[], enforce: boolean): Promise<Pick<DeferredNatState, "bfdKey" | "health" | "stale">> {
  const hc = inputs.healthCheck;
  if (!hc) return {};
  const bfd = new Map(reads.filter((r) => r.bfd.size > 0).map((r) => [r.name, r.bfd]));
  return withSouthbound(inputs, async (sb) => {
    const view = sb ? await readSouthbound(inputs, sb) : undefined;
    const report = assessHealth(inputs, { ...(view ? { monitors: view.monitors, bindings: view.bindings } : {}), bfd });
    if (enforce && hc.enforce && sb && view) await markOffline(sb, monitorsToMarkOffline(report, inputs, view.monitors), view.hasChassisName);
    return { ...(hc.bfd ? { bfdKey: bfdKeyOf(inputs) } : {}), health: report.backends, stale: report.stale };
  });
}

/**
 * Read every gateway, plan every gateway, then apply: nothing is sent until
 * every plan is made, so a refusal (an id or a flow someone else owns)
 * leaves all gateways untouched. Bundles go to all gateways in parallel to
 * keep the window in which they disagree short.
 */
async function converge(inputs: Inputs, recorded: RecordedIds, recordedSlots?: DeferredNatState["slotTables"]): Promise<DeferredNatState> {
  const d = withDefaults(inputs);
  // secondChance: the slot tables first, pure, so a change that would take second chances away is refused before any host is touched.
  const slots = d.secondChance ? planAllSlots(d, recordedSlots) : undefined;
  if (slots && slots.unsafe.length > 0) throw unsafeMovesError(slots.unsafe);
  return withNorthbound(d, (nb) => withAllOvsHosts(d.gateways.map((g) => g.host), async (sessions) => {
    // gre delivery: the tunnel ports first, so the buckets that output to them can be planned.
    await Promise.all(d.gateways.map((gw, i) => ensureTunnels(sessions[i], d, gw, `${sessions[i].hostName} (${gw.name})`)));
    const reads = await readGateways(d, sessions);
    const foreign = new Set(reads.flatMap((r) => [...foreignGroupsOn(d, r.observed, recorded)]));
    // secondChance VIPs have no groups: recorded ones (an earlier mode's) stay owned, so the plan removes them.
    const ids = slots ? { groupIds: {}, bucketIds: {} } : assignIds(d, recorded, foreign);
    const marks = mergeIds(recorded, ids);
    const plans = reads.map((r) => ({ ref: r.ref, mods: planGateway(r.where, d, marks, r.port, r.observed, slots?.tables) }));
    if (nb) await preflightNorthbound(d, nb);
    const sent = await applyBundles(plans);
    await Promise.all(d.gateways.map((gw, i) => removeStaleTunnels(sessions[i], d, gw)));
    if (nb) await applyNorthbound(d, nb);
    return {
      ...ids,
      cookie: `0x${cookieOf(d).toString(16)}`,
      lastApply: Object.fromEntries(reads.map((r, i) => [r.name, sent[i]])),
      drift: [],
      ...(slots ? slotOutputs(slots) : {}),
      ...(await observeHealth(d, reads, true)),
    };
  }));
}

/** Removes every flow and group this load balancer owns from the inputs' gateways. Idempotent. */
async function removeFrom(inputs: Inputs, ids: RecordedIds): Promise<void> {
  await withAllOvsHosts(inputs.gateways.map((g) => g.host), async (sessions) => {
    const reads = await readGateways(inputs, sessions);
    // Nothing wanted: no VIP, and no BFD port left to guard.
    const none = { ...inputs, vips: [] };
    await applyBundles(reads.map((r) => ({ ref: r.ref, mods: planGateway(r.where, none, ids, { ...r.port, bfdOfports: new Map() }, r.observed) })));
    await Promise.all(inputs.gateways.map((gw, i) => removeStaleTunnels(sessions[i], inputs, gw, true)));
  });
}

export const deferredNatLoadBalancerHandler: ResourceHandler<Inputs, DeferredNatState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name }),

  async create(inputs) {
    return { id: lbId(inputs), state: await converge(inputs, EMPTY_IDS, undefined) };
  },

  async read(_id, inputs, state) {
    const d = withDefaults(inputs);
    const ids = recordedIn(state);
    return withAllOvsHosts(d.gateways.map((g) => g.host), async (sessions) => {
      const reads = await readGateways(d, sessions);
      const marks = { cookie: cookieOf(d), recordedGroups: recordedGroups(ids) };
      const anything = reads.some((r) => ownedFlows(r.observed, marks.cookie).length > 0 || ownedGroupIds(r.observed, marks).size > 0);
      const nb = await withNorthbound(d, async (db) => (db ? readNorthbound(d, db) : { present: false, findings: [] }));
      if (!anything && !nb.present) return undefined;
      const tables = Object.fromEntries(Object.entries(state.slotTables ?? {}).map(([vip, t]) => [vip, readSlots(t)]));
      const { inputs: actual, observations } = actualInputs(d, ids, reads, tables);
      const drift = [...observations.flatMap((o) => o.findings.map((f) => `${o.gateway}: ${f}`)), ...nb.findings];
      // A northbound row that differs reads as no OVN part, so the diff shows it and update rewrites it.
      if (nb.findings.length > 0) delete actual.ovn;
      const { health: _h, stale: _s, bfdKey: _k, ...kept } = state;
      return { inputs: actual, state: { ...kept, drift, ...(await observeHealth(d, reads, false)) } };
    });
  },

  async update(_id, old, news) {
    const recorded = recordedIn(old.state);
    const state = await converge(news, recorded, old.state.slotTables);
    // Gateways taken out of the list lose this load balancer's flows and groups.
    const kept = new Set(news.gateways.map((g) => `${g.host.connection.host}/${g.bridge}`));
    const dropped = old.inputs.gateways.filter((g) => !kept.has(`${g.host.connection.host}/${g.bridge}`));
    if (dropped.length > 0) await removeFrom({ ...old.inputs, gateways: dropped }, recorded);
    if (!news.ovn) await withNorthbound(old.inputs, async (db) => db && deleteNorthbound(old.inputs, db));
    return state;
  },

  async delete(_id, inputs, state) {
    await removeFrom(withDefaults(inputs), recordedIn(state));
    await withNorthbound(inputs, async (db) => db && deleteNorthbound(inputs, db));
  },
};
