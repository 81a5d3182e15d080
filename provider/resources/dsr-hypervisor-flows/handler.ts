import schema from "../../../schema/dsr-hypervisor-flows.json";
import type { ResourceHandler } from "../../resource-handler";
import { conflictingFlows, describeFlow, diffFlows } from "../../model/flow-diff";
import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import { bridgeSocket, withOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { OpenFlowBridge, summarizeApply, type ApplySummary, type BundleSent } from "../../transport/openflow-bridge";
import { type DumpedFlow, type FlowEntry } from "../../openflow";
import { Transaction, where, type Row, type Value } from "../../ovsdb";
import { actualInputs, checkRules, cookieOf, derivedZone, desiredFlows, dsrId, withDefaults, zonesOf } from "./plan";

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

const DB = "Open_vSwitch";

/** Who wants to see each bundle sent (tests prove incremental applies from it). */
const bundleObservers = new Set<(host: string, sent: BundleSent) => void>();
export function observeBundles(fn: (host: string, sent: BundleSent) => void): () => void {
  bundleObservers.add(fn);
  return () => bundleObservers.delete(fn);
}

const asArray = (v: Value | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** The bridge's ports and their ofports (name -> ofport), or undefined when the bridge does not exist. */
async function bridgePorts(s: OvsHostSession, bridge: string): Promise<Map<string, number> | undefined> {
  const db = await s.vswitchDb();
  const txn = new Transaction();
  txn.select("Bridge", [where("name", "==", bridge)], ["ports"]);
  txn.select("Port", [], ["_uuid", "interfaces"]);
  txn.select("Interface", [], ["_uuid", "name", "ofport"]);
  const [bridges, ports, interfaces] = await db.transact(DB, txn.operations);
  const row = bridges.rows?.[0];
  if (!row) return undefined;
  const uuidOf = (r: Row) => String((r._uuid as { id: string }).id);
  const portIds = new Set(asArray(row.ports).map((u) => (u as { id: string }).id));
  const ifaceIds = new Set(
    (ports.rows ?? []).filter((p) => portIds.has(uuidOf(p))).flatMap((p) => asArray(p.interfaces).map((u) => (u as { id: string }).id)),
  );
  const result = new Map<string, number>();
  for (const i of interfaces.rows ?? []) {
    const ofport = asArray(i.ofport)[0];
    // An interface OVS could not attach has ofport -1 (or none yet): nothing can be delivered to it.
    if (ifaceIds.has(uuidOf(i)) && typeof ofport === "number" && ofport > 0) result.set(String(i.name), ofport);
  }
  return result;
}

const strip = (f: DumpedFlow): FlowEntry => ({ cookie: f.cookie, table: f.table, priority: f.priority, match: f.match, actions: f.actions });

/** What one host has: its bridge ports, and the bridge's flows split into ours and everyone else's. */
interface Observed {
  ports: Map<string, number>;
  owned: FlowEntry[];
  others: FlowEntry[];
}

async function observe(s: OvsHostSession, inputs: Inputs, cookie: bigint, all: boolean): Promise<Observed | undefined> {
  const ports = await bridgePorts(s, inputs.bridge);
  if (!ports) return undefined;
  const of = new OpenFlowBridge(s.ssh, bridgeSocket(inputs.host, inputs.bridge));
  const flows = (await of.dumpFlows(all ? undefined : { cookie, mask: (1n << 64n) - 1n })).map(strip);
  return { ports, owned: flows.filter((f) => f.cookie === cookie), others: flows.filter((f) => f.cookie !== cookie) };
}

/** The zone for this apply: the input's, else the recorded one, else derived past the zones others' flows use. */
function zoneFor(id: string, news: Inputs, recorded: number | undefined, others: readonly FlowEntry[]): number {
  const taken = zonesOf(others);
  if (news.zone !== undefined) {
    if (taken.has(news.zone)) throw new Error(`zone: conntrack zone ${news.zone} is already used by flows ovslb does not own on bridge ${news.bridge}`);
    return news.zone;
  }
  return recorded ?? derivedZone(id, taken);
}

/**
 * Reads the host, plans the difference and applies it in one bundle: the
 * same path for create and update, so a partial or drifted host converges.
 */
async function converge(s: OvsHostSession, id: string, inputs: Inputs, recordedZone: number | undefined): Promise<DsrHypervisorFlowsState> {
  const cookie = cookieOf(id);
  const seen = await observe(s, inputs, cookie, true);
  if (!seen) throw new Error(`${s.hostName}: bridge ${inputs.bridge} does not exist`);
  const zone = zoneFor(id, inputs, recordedZone, seen.others);
  const ofports = new Map<string, number>();
  inputs.vips.forEach((v, i) =>
    v.backends.forEach((b, k) => {
      const ofport = seen.ports.get(b.bridgePort);
      if (ofport === undefined) {
        throw new Error(`${s.hostName}: vips[${i}].backends[${k}].bridgePort: bridge ${inputs.bridge} has no port ${b.bridgePort} with an ofport`);
      }
      ofports.set(b.bridgePort, ofport);
    }),
  );
  const desired = desiredFlows(inputs, { cookie, zone, ofports });
  const conflicts = conflictingFlows(desired, seen.others);
  if (conflicts.length > 0) {
    throw new Error(
      `${s.hostName}: bridge ${inputs.bridge}: refusing to replace flows ovslb does not own: ${conflicts.map((c) => describeFlow(c.other)).join("; ")}`,
    );
  }
  const mods = diffFlows(desired, seen.owned);
  const sent = await new OpenFlowBridge(s.ssh, bridgeSocket(inputs.host, inputs.bridge)).applyBundle(mods);
  if (sent.messages > 0) for (const fn of bundleObservers) fn(s.hostName, sent);
  return { cookie: `0x${cookie.toString(16)}`, ctZone: zone, ofports: Object.fromEntries(ofports), lastApply: summarizeApply(mods, sent) };
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
      const seen = await observe(s, inputs, cookie, false);
      if (!seen || seen.owned.length === 0) return undefined; // bridge or every flow gone: the resource is gone
      const portNames = new Map([...seen.ports].map(([name, ofport]) => [ofport, name]));
      const actual = actualInputs(inputs, seen.owned, { cookie, zone: state.ctZone, ofports: seen.ports, portNames });
      const ofports = Object.fromEntries(
        actual.vips.flatMap((v) => v.backends.map((b) => [b.bridgePort, seen.ports.get(b.bridgePort)!] as const)),
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
      const seen = await observe(s, inputs, cookie, false);
      if (!seen || seen.owned.length === 0) return; // already gone
      const sent = await new OpenFlowBridge(s.ssh, bridgeSocket(inputs.host, inputs.bridge)).applyBundle([
        { op: "delete-flows", cookie, mask: (1n << 64n) - 1n },
      ]);
      for (const fn of bundleObservers) fn(s.hostName, sent);
      // Connections NATed in the zone would outlive the flows, and whoever takes the zone next would inherit them.
      for (const zone of zonesOf(seen.owned)) await s.appctl(["dpctl/flush-conntrack", `zone=${zone}`]);
    });
  },
};

