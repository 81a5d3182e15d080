import schema from "../../../schema/dsr-hypervisor-flows.json";
import { applyBundle, observeBridge, observeBundles as observeAllBundles, type BridgeRef } from "../../engine/bridge";
import { ownedFlows, planBridge, type ApplySummary } from "../../engine/plan";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import type { ResourceHandler } from "../../resource-handler";
import { withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { actualInputs, checkRules, cookieOf, dsrId, planIntent, withDefaults, zonesOf } from "./plan";

type Inputs = DsrHypervisorFlowsInputs;

/** What DsrHypervisorFlows records besides its inputs. */
export interface DsrHypervisorFlowsState {
  /** The owner cookie on every flow, as hex ("0x0b5e..."). */
  cookie: string;
  /** The conntrack zone in use: derived once and kept (sticky), unless the `zone` input overrides it. */
  ctZone: number;
  /** Each backend's bridge port and the ofport its flows deliver to, looked up at apply time. */
  ofports: Record<string, number>;
  /** What the last create/update sent to the bridge. */
  lastApply: ApplySummary;
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

/**
 * Reads the bridge, plans the difference and applies it in one bundle: the
 * same path for create and update, so a partial or drifted host converges.
 */
async function converge(s: OvsHostSession, id: string, inputs: Inputs, recordedZone: number | undefined): Promise<DsrHypervisorFlowsState> {
  const ref: BridgeRef = { session: s, bridge: inputs.bridge };
  // Every flow of the bridge: others' flows decide the zone and must not be overwritten.
  const observed = await observeBridge(ref, "all", cookieOf(id));
  if (!observed) throw new Error(`${s.hostName}: bridge ${inputs.bridge} does not exist`);
  const { intent, zone, ofports } = await onHost(s, () => planIntent(id, inputs, recordedZone, observed));
  const lastApply = await applyBundle(ref, planBridge(`${s.hostName}: bridge ${inputs.bridge}`, intent, observed));
  return { cookie: `0x${intent.cookie.toString(16)}`, ctZone: zone, ofports: Object.fromEntries(ofports), lastApply };
}

export const dsrHypervisorFlowsHandler: ResourceHandler<Inputs, DsrHypervisorFlowsState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ name: i.name, "host.connection.host": i.host.connection.host, bridge: i.bridge }),

  async create(inputs) {
    const id = dsrId(inputs);
    const [state] = await withOvsHosts([inputs.host], (s) => converge(s, id, inputs, undefined));
    return { id, state };
  },

  async read(id, inputs, state) {
    const cookie = cookieOf(id);
    const [found] = await withOvsHosts([inputs.host], async (s) => {
      const observed = await observeBridge({ session: s, bridge: inputs.bridge }, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      if (!observed || owned.length === 0) return undefined; // bridge or every flow gone: the resource is gone
      const portNames = new Map([...observed.ports].map(([name, ofport]) => [ofport, name]));
      const actual = actualInputs(inputs, owned, { cookie, zone: state.ctZone, ofports: observed.ports, portNames });
      const ofports = Object.fromEntries(
        actual.vips.flatMap((v) => v.backends.map((b) => [b.bridgePort, observed.ports.get(b.bridgePort)!] as const)),
      );
      return { inputs: actual, state: { ...state, ofports } };
    });
    return found;
  },

  async update(id, old, news) {
    // The zone is sticky; dropping an explicit zone goes back to the derived one.
    const recorded = old.inputs.zone !== undefined && news.zone === undefined ? undefined : old.state.ctZone;
    const [state] = await withOvsHosts([news.host], (s) => converge(s, id, news, recorded));
    return state;
  },

  async delete(id, inputs) {
    const cookie = cookieOf(id);
    await withOvsHosts([inputs.host], async (s) => {
      const ref: BridgeRef = { session: s, bridge: inputs.bridge };
      const observed = await observeBridge(ref, "owned", cookie);
      const owned = observed ? ownedFlows(observed, cookie) : [];
      if (!observed || owned.length === 0) return; // already gone
      await applyBundle(ref, [{ op: "delete-flows", cookie, mask: ALL_ONES }]);
      // Connections NATed in the zone would outlive the flows, and whoever takes the zone next would inherit them.
      for (const zone of zonesOf(owned)) await s.appctl(["dpctl/flush-conntrack", `zone=${zone}`]);
    });
  },
};
