import schema from "../../../schema/deferred-nat-load-balancer.json";
import type { ResourceHandler } from "../../resource-handler";
import type { DeferredNatLoadBalancerInputs as Inputs } from "../../model/inputs.generated";
import { OpenFlowBridge, summarizeApply, type ApplySummary } from "../../transport/openflow-bridge";
import { bridgeSocket, withAllOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { Transaction, where } from "../../ovsdb";
import { applyNorthbound, deleteNorthbound, preflightNorthbound, readNorthbound, withNorthbound } from "./ovn";
import {actualInputs, assignIds, checkRules, cookieOf, desiredDataplane, foreignGroupIds, lbId, ownedGroupIds, planGateway, withDefaults, type GatewayActual, type GatewayPort, type RecordedIds,} from "./plan";

/** What DeferredNatLoadBalancer records besides its inputs. */
export interface DeferredNatState extends RecordedIds {
  /** The cookie on every flow it owns, as hex. */
  cookie: string;
  /** What the last create/update sent to each gateway: OpenFlow messages, bytes and operations by kind. */
  lastApply: Record<string, ApplySummary>;
  /** Where the hosts differed from the inputs at the last read (empty when in sync). */
  drift: string[];
}

const EMPTY_IDS: RecordedIds = { groupIds: {}, bucketIds: {} };
const recordedIn = (state: Partial<DeferredNatState>): RecordedIds => ({ groupIds: state.groupIds ?? {}, bucketIds: state.bucketIds ?? {} });
const ALL_COOKIES = { cookie: 0n, mask: 0n, table: 0 };

interface GatewayRead {
  session: OvsHostSession;
  name: string;
  port: GatewayPort;
  actual: GatewayActual;
  openflow: OpenFlowBridge;
}

/** Reads each gateway: its segment port's ofport (OVSDB), table 0 and its groups (OpenFlow). */
async function readGateways(inputs: Inputs, sessions: OvsHostSession[]): Promise<GatewayRead[]> {
  const cookie = cookieOf(inputs);
  return Promise.all(
    inputs.gateways.map(async (gw, i) => {
      const session = sessions[i];
      const db = await session.vswitchDb();
      const t = new Transaction();
      t.select("Interface", [where("name", "==", gw.segmentPort)], ["ofport"]);
      const [sel] = await db.transact("Open_vSwitch", t.operations);
      const ofport = sel.rows?.[0]?.ofport;
      const segmentOfport = Array.isArray(ofport) ? Number(ofport[0]) : Number(ofport);
      if (!Number.isInteger(segmentOfport) || segmentOfport <= 0) {
        throw new Error(`${session.hostName}: gateway ${gw.name} has no port ${gw.segmentPort} with an OpenFlow port number`);
      }
      const openflow = new OpenFlowBridge(session.ssh, bridgeSocket(gw.host, gw.bridge));
      const [table0, groups] = await Promise.all([openflow.dumpFlows(ALL_COOKIES), openflow.dumpGroups()]);
      return {
        session,
        name: gw.name,
        port: { segmentOfport, mac: gw.mac },
        actual: { table0, groups, ownedFlows: table0.filter((f) => f.cookie === cookie) },
        openflow,
      };
    }),
  );
}

/**
 * Read every gateway, plan every gateway, then apply: nothing is sent until
 * every plan is made, so a refusal (an id or a flow someone else owns)
 * leaves all gateways untouched. Bundles go to all gateways in parallel to
 * keep the window in which they disagree short.
 */
async function converge(inputs: Inputs, recorded: RecordedIds): Promise<DeferredNatState> {
  const d = withDefaults(inputs);
  return withNorthbound(d, (nb) => withAllOvsHosts(d.gateways.map((g) => g.host), async (sessions) => {
    const reads = await readGateways(d, sessions);
    const foreign = new Set(reads.flatMap((r) => [...foreignGroupIds(r.actual, recorded)]));
    const ids = assignIds(d, recorded, foreign);
    const plans = reads.map((r) => {
      const owned = ownedGroupIds(r.actual, { groupIds: { ...recorded.groupIds, ...ids.groupIds }, bucketIds: { ...recorded.bucketIds, ...ids.bucketIds } });
      return planGateway(`${r.session.hostName} (${r.name})`, desiredDataplane(d, ids, r.port), r.actual, owned);
    });
    if (nb) await preflightNorthbound(d, nb);
    const sent = await Promise.all(reads.map((r, i) => (plans[i].length > 0 ? r.openflow.applyBundle(plans[i]) : undefined)));
    if (nb) await applyNorthbound(d, nb);
    return {
      ...ids,
      cookie: `0x${cookieOf(d).toString(16)}`,
      lastApply: Object.fromEntries(reads.map((r, i) => [r.name, summarizeApply(plans[i], sent[i])])),
      drift: [],
    };
  }));
}

/** Removes every flow and group this load balancer owns from the inputs' gateways. Idempotent. */
async function removeFrom(inputs: Inputs, ids: RecordedIds): Promise<void> {
  await withAllOvsHosts(inputs.gateways.map((g) => g.host), async (sessions) => {
    const reads = await readGateways(inputs, sessions);
    await Promise.all(
      reads.map((r) => {
        const mods = planGateway(r.name, [], r.actual, ownedGroupIds(r.actual, ids));
        return mods.length > 0 ? r.openflow.applyBundle(mods) : undefined;
      }),
    );
  });
}

export const deferredNatLoadBalancerHandler: ResourceHandler<Inputs, DeferredNatState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name }),

  async create(inputs) {
    return { id: lbId(inputs), state: await converge(inputs, EMPTY_IDS) };
  },

  async read(_id, inputs, state) {
    const d = withDefaults(inputs);
    const ids = recordedIn(state);
    return withAllOvsHosts(d.gateways.map((g) => g.host), async (sessions) => {
      const reads = await readGateways(d, sessions);
      const anything = reads.some((r) => r.actual.ownedFlows.length > 0 || ownedGroupIds(r.actual, ids).size > 0);
      const nb = await withNorthbound(d, async (db) => (db ? readNorthbound(d, db) : []));
      if (!anything && (!d.ovn || nb.every((f) => / missing$/.test(f)))) return undefined;
      const { inputs: actual, observations } = actualInputs(d, ids, reads.map((r) => ({ name: r.name, port: r.port, actual: r.actual })));
      const drift = [...observations.flatMap((o) => o.findings.map((f) => `${o.gateway}: ${f}`)), ...nb];
      // A northbound row that differs reads as no OVN part, so the diff shows it and update rewrites it.
      if (nb.length > 0) delete actual.ovn;
      return { inputs: actual, state: { ...state, drift } };
    });
  },

  async update(_id, old, news) {
    const recorded = recordedIn(old.state);
    const state = await converge(news, recorded);
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
