import type { DeferredNatLoadBalancerInputs } from "../../model/inputs.generated";
import type { DeferredNatDefaulted as Inputs } from "./plan";
import { observeOvsVersions, readOvsVersion } from "../../engine/ovs-version";
import { versionRefusal } from "../../model/ovs-versions";
import schema from "../../../schema/deferred-nat-load-balancer.json";
import { applyBundle, bridgePorts, observeFlowsAndGroups, observePartial, openflowOf, ownedFlowCount, type BridgeRef } from "../../engine/bridge";
import { ownedFlowCountAfter, ownedGroupIds, ownedFlows, type ApplySummary, type ObservedBridge } from "../../engine/plan";
import type { DeferredNatLoadBalancerOutputs } from "../../model/outputs.generated";
import { driftOutputs, renderFinding, type DriftFinding } from "../../model/drift";
import type { DumpedFlow, GroupEntry } from "../../openflow";
import { PartialApplyError, type ResourceHandler } from "../../resource-handler";
import type { Modification } from "../../openflow";
import { converge, hostLabel, onHost } from "../../engine/converge";
import { withAllOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { applyNorthbound, deleteNorthbound, preflightNorthbound, readNorthbound, withNorthbound } from "./ovn";
import { assessHealth, monitorsToMarkOffline, type BfdView } from "./health";
import { markOffline, readSouthbound, withSouthbound } from "./southbound";
import { SLOT_TABLE, planAllSlots, recordAllSlots, unsafeMovesError, type SlotPlans } from "./second-chance";
import { readSlots, shares, type SlotTable } from "./slots";
import { ensureTunnels, removeStaleTunnels, workingTunnels } from "./tunnels";
import { gatewayTraffic } from "./traffic";
import { idsOf, planGatewayScoped, recordPorts, samePorts, scopedIds, scopedRead, updateScope, type UpdateScope } from "./scope";
import {
  actualInputs,
  assignIds,
  checkRules,
  bfdKeyOf,
  cookieOf,
  deliveryOf,
  foreignGroupsOn,
  greKeyOf,
  lbId,
  mergeIds,
  planGateway,
  recordedGroups,
  withDefaults,
  type GatewayPort,
  type RecordedIds,
} from "./plan";
import { warn } from "../../transport/engine-log";
import { readUnderlay, underlayMtuWarnings } from "../../transport/underlay";

/** What DeferredNatLoadBalancer records besides its inputs: its outputs, declared in schema/deferred-nat-load-balancer.json ("x-outputs"). */
export type DeferredNatState = DeferredNatLoadBalancerOutputs;

const EMPTY_IDS: RecordedIds = { groupIds: {}, bucketIds: {} };
const recordedIn = (state: Partial<DeferredNatState>): RecordedIds => ({
  groupIds: state.groupIds ?? {},
  bucketIds: state.bucketIds ?? {},
  ...(state.ownerGroupIds ? { ownerGroupIds: state.ownerGroupIds } : {}),
});

interface GatewayPorts {
  ref: BridgeRef;
  name: string;
  where: string;
  port: GatewayPort;
  ports: ReadonlyMap<string, number>;
  /** healthCheck.bfd: this gateway's BFD session toward each hypervisor. */
  bfd: Map<string, BfdView>;
}

interface GatewayRead extends GatewayPorts {
  observed: ObservedBridge;
}

/** How many flows of this load balancer each gateway holds now (one dump-aggregate each, all at once). */
const countHeldFlows = (d: Inputs, gateways: readonly GatewayPorts[]) => Promise.all(gateways.map((g) => ownedFlowCount(g.ref, cookieOf(d))));

/** Each gateway's ports from OVSDB: the segment port's number, and the working tunnel and BFD ports. */
function readPorts(inputs: Inputs, sessions: readonly OvsHostSession[]): Promise<GatewayPorts[]> {
  return Promise.all(
    inputs.gateways.map(async (gw, i) => {
      const ref = { session: sessions[i], bridge: gw.bridge };
      const where = hostLabel(ref.session, gw.name);
      const ports = await bridgePorts(ref.session, gw.bridge);
      if (!ports) throw new Error(`${where}: bridge ${gw.bridge} does not exist`);
      const segmentOfport = ports.get(gw.segmentPort);
      if (segmentOfport === undefined) throw new Error(`${where}: gateway ${gw.name} has no port ${gw.segmentPort} with an OpenFlow port number`);
      const { tunnelOfports, bfdOfports, bfd } = await workingTunnels(ref.session, inputs, gw);
      return { ref, name: gw.name, where, port: { segmentOfport, mac: gw.mac, tunnelOfports, bfdOfports }, ports, bfd };
    }),
  );
}

/** Reads each gateway's bridge: its ports (and working tunnel ports), table 0 (every owner's flows, for conflicts) and its groups. */
async function readGateways(inputs: Inputs, sessions: readonly OvsHostSession[], known?: GatewayPorts[]): Promise<GatewayRead[]> {
  const cookie = cookieOf(inputs);
  const gateways = known ?? (await readPorts(inputs, sessions));
  return Promise.all(
    gateways.map(async (g) => {
      // Every owner's flows in the tables ovslb uses, for conflicts; the slot table too, so a change of mode leaves no slot behind.
      const seen = await observeFlowsAndGroups(g.ref, { tables: [0, SLOT_TABLE] }, cookie);
      return { ...g, observed: { ports: g.ports, ...seen } };
    }),
  );
}

/** Rounds of reading the candidate group ids of new VIPs before a scoped update gives up and reads everything. */
const MAX_ID_ROUNDS = 4;

/**
 * A scoped update's read: only the groups and flows of the VIPs it touches,
 * on every gateway. New VIPs' group ids are derived past every recorded id,
 * then read: one held by someone else is probed past, and read again. The
 * ids are those of the touched VIPs (and the removed VIPs' recorded ones,
 * for the plan); undefined when the ids did not settle (read everything).
 */
async function readScoped(
  d: Inputs,
  scope: Extract<UpdateScope, { kind: "vips" }>,
  recorded: RecordedIds,
  gateways: GatewayPorts[],
): Promise<{ reads: GatewayRead[]; ids: RecordedIds } | undefined> {
  const keys = new Set([...scope.touched, ...scope.removed]);
  const mine = idsOf(recorded, keys);
  // Kept VIPs' ids are taken: a new VIP must not derive one of them.
  const taken = new Set<number>();
  for (const k in recorded.groupIds) if (!keys.has(k)) taken.add(recorded.groupIds[k]);
  const inputs = { ...d, vips: scope.touchedVips };
  const observed = gateways.map((g) => ({ ports: g.ports, flows: [] as DumpedFlow[], groups: [] as GroupEntry[] }));
  const readGroups = new Set<number>();
  for (let round = 0; round < MAX_ID_ROUNDS; round++) {
    const ids = assignIds(inputs, mine, taken);
    const want = scopedRead(scope, mergeIds(mine, ids), gateways[0].port, d.pathMtu);
    const groupIds = want.groupIds.filter((id) => !readGroups.has(id));
    groupIds.forEach((id) => readGroups.add(id));
    await Promise.all(
      gateways.map(async (g, i) => {
        const flows = round === 0 ? scopedRead(scope, mine, g.port, d.pathMtu).flows : [];
        const seen = await observePartial(g.ref, { groupIds, flows });
        observed[i].groups.push(...seen.groups);
        observed[i].flows.push(...seen.flows);
      }),
    );
    const foreign = new Set(gateways.flatMap((_, i) => [...foreignGroupsOn(d, observed[i], mine)]).filter((id) => !taken.has(id)));
    if (foreign.size === 0) return { reads: gateways.map((g, i) => ({ ...g, observed: observed[i] })), ids };
    foreign.forEach((id) => taken.add(id));
  }
  return undefined;
}

function slotOutputs(slots: SlotPlans): Pick<DeferredNatState, "slotTables" | "slotShares" | "slotDeviation" | "slotHistory" | "slotMoves"> {
  const perVip = <T>(f: (vip: string, t: SlotTable) => T) => Object.fromEntries(Object.entries(slots.tables).map(([vip, t]) => [vip, f(vip, t)]));
  return {
    slotTables: recordAllSlots(slots.tables),
    slotShares: perVip((_, t) => Object.fromEntries([...shares(t)].map(([b, n]) => [b, n / t.size]))),
    slotDeviation: perVip((vip, t) => Object.fromEntries([...slots.deviation[vip]].map(([b, n]) => [b, n / t.size]))),
    slotHistory: perVip((vip) => {
      const h = slots.history[vip];
      return { slots: h.slots, released: h.released, ...(h.expires !== undefined ? { expires: new Date(h.expires * 1000).toISOString() } : {}) };
    }),
    slotMoves: slots.moves,
  };
}

/**
 * The health check's view: the southbound's monitors and bindings (when read)
 * and every gateway's BFD sessions. With enforce, stale monitors are set
 * offline, and the report says what was found before that.
 */
async function observeHealth(inputs: Inputs, reads: readonly GatewayPorts[], enforce: boolean): Promise<Pick<DeferredNatState, "bfdKey" | "health" | "stale">> {
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
 * A feature broken on a gateway's Open vSwitch is refused there, naming the
 * gateway, its version and the fixed releases, before any gateway is changed.
 * ovslb changes a group only by inserting and removing buckets, so a dp_hash
 * group would hit the dp_hash bug on every change (check refuses dp_hash
 * anyway; this holds whatever check says).
 */
async function refuseBrokenOvs(d: Inputs, sessions: readonly OvsHostSession[]): Promise<void> {
  if (d.selectionMethod !== "dp_hash") return;
  const versions = await Promise.all(sessions.map(readOvsVersion));
  const refusals = sessions.flatMap((s, i) => {
    const why = versionRefusal(versions[i], { dpHashBucketChanges: true });
    return why ? [`${hostLabel(s, d.gateways[i].name)}: ${why}`] : [];
  });
  if (refusals.length > 0) throw new Error(`${lbId(d)}: selectionMethod dp_hash refused: ${refusals.join("; ")}`);
}

/** gre delivery: a warning for each gateway whose underlay cannot carry a full-size client frame in GRE. */
async function warnOfUnderlayMtu(d: Inputs, sessions: readonly OvsHostSession[]): Promise<void> {
  const facts = await Promise.all(d.gateways.map((gw, i) => readUnderlay(sessions[i].ssh, gw.tunnelAddress ? [gw.tunnelAddress] : [])));
  const warnings = facts.flatMap((f, i) => underlayMtuWarnings(`${lbId(d)}: ${hostLabel(sessions[i], d.gateways[i].name)}`, f));
  for (const w of warnings) await warn(w);
}

/** One gateway's part of a change: its bundle, and what it held of this load balancer's flows before it. */
interface GatewayPlan {
  ref: BridgeRef;
  name: string;
  port: GatewayPort;
  mods: Modification[];
  heldFlows: number;
}

/**
 * Read every gateway, plan every gateway, then apply (provider/engine/converge.ts):
 * nothing is sent until every plan is made, so a refusal (an id or a flow
 * someone else owns) leaves all gateways untouched. Bundles go to all
 * gateways in parallel to keep the window in which they disagree short.
 */
async function apply(
  inputs: Inputs,
  recorded: RecordedIds,
  recordedSlots?: DeferredNatState["slotTables"],
  previous?: { inputs: Inputs; state: Partial<DeferredNatState> },
): Promise<DeferredNatState> {
  const d = inputs;
  // secondChance: the slot tables first, pure, so a change that would take second chances away is refused before any host is touched.
  const slots = d.secondChance ? planAllSlots(d, recordedSlots) : undefined;
  if (slots && slots.unsafe.length > 0) throw unsafeMovesError(slots.unsafe);
  // An update: what it touches, from the recorded inputs (as applied, or as the last refresh found the hosts) against these.
  let scope: UpdateScope = previous ? updateScope(previous.inputs, d, { ...recorded, ...previous.state }) : { kind: "all", reason: "create" };
  let ids: RecordedIds = EMPTY_IDS;
  let gateways: GatewayPorts[] = [];
  const cookie = `0x${cookieOf(d).toString(16)}`;
  const slotState = slots ? slotOutputs(slots) : {};
  return withNorthbound(d, (nb) =>
    converge<GatewayPlan, ApplySummary, DeferredNatState>({
      resource: lbId(d),
      hosts: d.gateways.map((g) => g.host),
      async plan(sessions) {
        await refuseBrokenOvs(d, sessions);
        // gre delivery: the tunnel ports first, so the buckets that output to them can be planned; and each gateway's
        // underlay MTU read beside them, so a too small one is said before anything is sent.
        const gre = d.hypervisors.some((h) => deliveryOf(d, h.name) === "gre");
        await Promise.all([
          ...d.gateways.map((gw, i) => ensureTunnels(sessions[i], d, gw, hostLabel(sessions[i], gw.name))),
          ...(gre ? [warnOfUnderlayMtu(d, sessions)] : []),
        ]);
        gateways = await readPorts(d, sessions);
        if (scope.kind === "vips" && !gateways.every((g) => samePorts(previous?.state.gatewayPorts?.[g.name], g.port))) {
          scope = { kind: "all", reason: "a gateway's port numbers changed since the last apply" };
        }
        let plans: GatewayPlan[] | undefined;
        if (scope.kind === "vips") {
          // Whether each gateway still holds what the last apply left, counted in the same round trip as the scoped read.
          const [held, scoped] = await Promise.all([countHeldFlows(d, gateways), readScoped(d, scope, recorded, gateways)]);
          const lost = lostFlows(gateways, held, previous?.state.gatewayFlows);
          if (lost) scope = { kind: "all", reason: lost };
          else if (!scoped) scope = { kind: "all", reason: "new VIPs' group ids did not settle in a scoped read" };
          else {
            const s = scope;
            const marks = mergeIds(idsOf(recorded, [...s.touched, ...s.removed]), scoped.ids);
            plans = await Promise.all(
              scoped.reads.map(async (r, i) => ({
                ...r,
                heldFlows: held[i],
                mods: await onHost(r.where, () => planGatewayScoped(r.where, d, s, marks, r.port, r.observed)),
              })),
            );
            // Untouched VIPs keep their recorded ids as they are.
            ids = scopedIds(recorded, d, s, scoped.ids);
          }
        }
        if (!plans) {
          // The count goes with the full read too: the next scoped update compares against it.
          const [reads, held] = await Promise.all([readGateways(d, sessions, gateways), countHeldFlows(d, gateways)]);
          const foreign = new Set(reads.flatMap((r) => [...foreignGroupsOn(d, r.observed, recorded)]));
          // Groups no longer wanted (an earlier mode's, a backend's that drains) stay owned by their recorded ids, so the plan removes them.
          ids = assignIds(d, recorded, foreign);
          const marks = mergeIds(recorded, ids);
          plans = await Promise.all(
            reads.map(async (r, i) => ({
              ...r,
              heldFlows: held[i],
              mods: await onHost(r.where, () => planGateway(r.where, d, marks, r.port, r.observed, slots?.tables)),
            })),
          );
        }
        if (nb) await preflightNorthbound(d, nb);
        return plans.map((p, i) => ({ session: sessions[i], where: gateways[i].where, plan: p }));
      },
      apply: ({ plan }, gate) => applyBundle(plan.ref, plan.mods, gate),
      async finish(hosts, sent) {
        await Promise.all(d.gateways.map((gw, i) => removeStaleTunnels(hosts[i].session, d, gw)));
        if (nb) await applyNorthbound(d, nb);
        return {
          ...ids,
          cookie,
          lastApply: Object.fromEntries(hosts.map((h, i) => [h.plan.name, sent[i]])),
          ...driftOutputs([]),
          // gre delivery: the key of the gateways' tunnel ports, for the hypervisors' gre.key.
          ...(d.hypervisors.some((h) => deliveryOf(d, h.name) === "gre") ? { greKey: greKeyOf(d) } : {}),
          ...slotState,
          ...(await observeHealth(d, gateways, true)),
          gatewayPorts: Object.fromEntries(hosts.map((h) => [h.plan.name, recordPorts(h.plan.port)])),
          gatewayFlows: Object.fromEntries(hosts.map((h) => [h.plan.name, ownedFlowCountAfter(h.plan.heldFlows, h.plan.mods)])),
          lastRead: scope.kind === "vips" ? { scope: "vips", vips: scope.touched.length + scope.removed.length } : { scope: "all", reason: scope.reason },
        };
      },
      // Every id that may now be on a gateway (this change's and the recorded ones, whose groups an unchanged
      // gateway still holds), lastApply only where applied, drift naming the rest: the next update converges from it.
      partial: (hosts, outcomes, findings) => ({
        ...mergeIds(recorded, ids),
        cookie,
        lastApply: Object.fromEntries(
          hosts.flatMap((h, i) => {
            const o = outcomes[i];
            return "applied" in o ? [[h.plan.name, o.applied]] : [];
          }),
        ),
        ...driftOutputs(findings),
        ...slotState,
      }),
    }),
  );
}

/**
 * Why a scoped update must read everything: a gateway holds another number
 * of this load balancer's flows than the last apply left there, so VIPs the
 * update does not touch may be gone from it. Undefined when all agree.
 */
function lostFlows(
  gateways: readonly { name: string; where: string }[],
  held: readonly number[],
  recorded: Record<string, number> | undefined,
): string | undefined {
  if (!recorded) return "no recorded flow counts (state from an earlier ovslb)";
  const i = gateways.findIndex((g, i) => recorded[g.name] !== held[i]);
  if (i < 0) return undefined;
  const was = recorded[gateways[i].name];
  return `${gateways[i].where} holds ${held[i]} flows of this load balancer where the last apply left ${was ?? "none recorded"} (ovs-vswitchd restarted, the bridge re-created, or flows or groups deleted by hand)`;
}

/** Removes every flow and group this load balancer owns from the inputs' gateways, and its tunnel ports. Idempotent. */
async function removeFrom(inputs: Inputs, ids: RecordedIds): Promise<void> {
  // Nothing wanted: no VIP, and no BFD port left to guard. The state still claims every gateway, so a retry removes the rest.
  const none = { ...inputs, vips: [] };
  await converge({
    resource: lbId(inputs),
    hosts: inputs.gateways.map((g) => g.host),
    async plan(sessions) {
      const reads = await readGateways(inputs, sessions);
      return Promise.all(
        reads.map(async (r, i) => ({
          session: sessions[i],
          where: r.where,
          plan: { ref: r.ref, mods: await onHost(r.where, () => planGateway(r.where, none, ids, { ...r.port, bfdOfports: new Map() }, r.observed)) },
        })),
      );
    },
    apply: ({ plan }, gate) => applyBundle(plan.ref, plan.mods, gate),
    async finish(hosts) {
      await Promise.all(inputs.gateways.map((gw, i) => removeStaleTunnels(hosts[i].session, inputs, gw, true)));
      return {};
    },
  });
}

export const deferredNatLoadBalancerHandler: ResourceHandler<DeferredNatLoadBalancerInputs, DeferredNatState, Inputs> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name }),

  async create(inputs) {
    return { id: lbId(inputs), state: await apply(inputs, EMPTY_IDS, undefined) };
  },

  async read(_id, inputs, state) {
    const d = inputs;
    const ids = recordedIn(state);
    return withAllOvsHosts(
      d.gateways.map((g) => g.host),
      async (sessions) => {
        const reads = await readGateways(d, sessions);
        const marks = { cookie: cookieOf(d), recordedGroups: recordedGroups(ids) };
        const anything = reads.some((r) => ownedFlows(r.observed, marks.cookie).length > 0 || ownedGroupIds(r.observed, marks).size > 0);
        const nb = await withNorthbound(d, async (db) => (db ? readNorthbound(d, db) : { present: false, findings: [] }));
        if (!anything && !nb.present) return undefined;
        const tables = Object.fromEntries(Object.entries(state.slotTables ?? {}).map(([vip, t]) => [vip, readSlots(t)]));
        const { inputs: actual, observations } = actualInputs(d, ids, reads, tables);
        const drift = driftOutputs([...observations.flatMap((o) => o.findings), ...nb.findings]);
        // A northbound row that differs reads as no OVN part, so the diff shows it and update rewrites it.
        if (nb.findings.length > 0) delete actual.ovn;
        const { health: _h, stale: _s, bfdKey: _k, traffic: _t, ...kept } = state;
        const [ovsVersions, groupStats] = await Promise.all([observeOvsVersions(sessions), Promise.all(reads.map((r) => openflowOf(r.ref).dumpGroupStats()))]);
        const traffic = gatewayTraffic(
          d,
          ids,
          reads.map((r, i) => ({ ...r, groupStats: groupStats[i] })),
          tables,
        );
        return { inputs: actual, state: { ...kept, ...drift, ...(await observeHealth(d, reads, false)), traffic, ovsVersions } };
      },
    );
  },

  async update(_id, old, news) {
    const recorded = recordedIn(old.state);
    // Gateways taken out of the list lose this load balancer's flows and groups.
    const kept = new Set(news.gateways.map((g) => `${g.host.connection.host}/${g.bridge}`));
    const dropped = old.inputs.gateways.filter((g) => !kept.has(`${g.host.connection.host}/${g.bridge}`));
    // Until they are cleaned, a partial state keeps them in the recorded inputs, or the next run would no longer know to.
    const pending = { ...news, gateways: [...news.gateways, ...dropped] };
    const state = await apply(news, recorded, old.state.slotTables, old).catch((e: unknown) => {
      throw e instanceof PartialApplyError && dropped.length > 0 ? new PartialApplyError(e.message, e.id, e.state, pending) : e;
    });
    if (dropped.length > 0)
      await removeFrom({ ...old.inputs, gateways: dropped }, recorded).catch((e: Error) => {
        const finding: DriftFinding = { host: lbId(news), kind: "gateway-removal-failed", object: dropped.map((g) => g.name).join(", "), detail: e.message };
        throw new PartialApplyError(renderFinding(finding), lbId(news), { ...state, ...mergeIds(recorded, state), ...driftOutputs([finding]) }, pending);
      });
    if (!news.ovn) await withNorthbound(old.inputs, async (db) => db && deleteNorthbound(old.inputs, db));
    return state;
  },

  async delete(_id, inputs, state) {
    await removeFrom(inputs, recordedIn(state));
    await withNorthbound(inputs, async (db) => db && deleteNorthbound(inputs, db));
  },
};
