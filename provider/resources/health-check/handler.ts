import schema from "../../../schema/health-check.json";
import { assessVips, logicalPortsOf, staleMonitors, type BfdView } from "../../engine/health";
import { markOffline, readPortsHealth } from "../../engine/southbound";
import { withHealthCheckRows } from "../../engine/attached-health-checks";
import type { HealthCheckInputs as Inputs } from "../../model/inputs.generated";
import type { HealthCheckOutputs } from "../../model/outputs.generated";
import { driftOutputs } from "../../model/drift";
import {
  HYPERVISOR_KEY,
  OVN_NORTHBOUND,
  OPEN_VSWITCH,
  OWNER_KEY,
  ROLE_KEY,
  OwnedTransaction,
  Transaction,
  mutation,
  ownerMark,
  where,
  type LoadBalancerHealthCheckRow,
  type LoadBalancerRow,
  type Mutation,
  type NamedUuid,
  type Uuid,
} from "../../ovsdb";
import type { ResourceHandler } from "../../resource-handler";
import { withAllOvsHosts, type OvsHostSession } from "../../transport/ovs-host";
import { withRemoteOvsdb, type OvsdbClient } from "../../transport/ovsdb-client";
import { BFD_ROLE } from "../deferred-nat-load-balancer/plan";
import {
  PROTOCOLS,
  anyOwned,
  checkRules,
  healthCheckId,
  loadBalancerOwner,
  nbFindings,
  planRows,
  rowName,
  withDefaults,
  type ObservedRow,
  type RowChange,
} from "./plan";

/**
 * HealthCheck on the hosts: the northbound rows in one owned transaction,
 * the southbound's view of the backends (and enforce), and, given the
 * gateways, their BFD sessions read over OVSDB. No OpenFlow is ever sent.
 */

/** What HealthCheck records besides its inputs: declared in schema/health-check.json ("x-outputs"). */
export type HealthCheckState = HealthCheckOutputs;

const LB_COLUMNS = ["_uuid", "name", "vips", "ip_port_mappings", "health_check", "external_ids"] as const;

/** The load balancer's rows (one name per protocol) and every health check they reference, in two reads. */
async function readRows(inputs: Inputs, db: OvsdbClient): Promise<Map<string, ObservedRow | undefined>> {
  const t = new Transaction(OVN_NORTHBOUND);
  const sels = PROTOCOLS.map((p) => t.select("Load_Balancer", [where("name", "==", rowName(inputs, p))], LB_COLUMNS));
  const r = await db.run(t);
  const found = await withHealthCheckRows(
    db,
    sels.flatMap((s) => r.rows(s).slice(0, 1)),
  );
  return new Map(PROTOCOLS.map((p) => [p, found.find((row) => row.name === rowName(inputs, p))]));
}

/**
 * The changes in ONE owned transaction, each Load_Balancer row guarded as
 * read (still the load balancer's, its health_check and ip_port_mappings as
 * read), each health check row of this resource guarded as still its own,
 * each new one guarded against a twin made meanwhile.
 */
async function commit(inputs: Inputs, db: OvsdbClient, changes: readonly RowChange[], comment: string): Promise<void> {
  if (changes.length === 0) return;
  const lb = loadBalancerOwner(inputs);
  const t = new OwnedTransaction(OVN_NORTHBOUND, ownerMark(healthCheckId(inputs)), `ovslb: ${comment} ${healthCheckId(inputs)}`);
  for (const c of changes) {
    t.requirePresent("Load_Balancer", [where("_uuid", "==", c.row._uuid), where("external_ids", "includes", { [OWNER_KEY]: lb })]);
    t.requireUnchanged("Load_Balancer", c.row, ["name", "health_check", "ip_port_mappings"]);
    for (const u of c.update) t.updateOwned("Load_Balancer_Health_Check", u.row, { options: u.options, external_ids: u.externalIds }, ["vip"]);
    const inserted: NamedUuid[] = c.insert.map((i) => {
      t.requireAbsent("Load_Balancer_Health_Check", [where("vip", "==", i.vip), t.ownedBy<LoadBalancerHealthCheckRow>()]);
      return t.insertOwned("Load_Balancer_Health_Check", { vip: i.vip, options: i.options, external_ids: i.externalIds });
    });
    for (const d of c.detach) t.requireOwned("Load_Balancer_Health_Check", d);
    const detached: Uuid[] = c.detach.map((d) => d._uuid);
    const mutations: Mutation<LoadBalancerRow>[] = [
      ...(detached.length > 0 ? [mutation<LoadBalancerRow, "health_check">("health_check", "delete", detached)] : []),
      ...(inserted.length > 0 ? [mutation<LoadBalancerRow, "health_check">("health_check", "insert", inserted)] : []),
      ...(c.deleteMappings.length > 0 ? [mutation<LoadBalancerRow, "ip_port_mappings">("ip_port_mappings", "delete", c.deleteMappings)] : []),
      ...(Object.keys(c.insertMappings).length > 0 ? [mutation<LoadBalancerRow, "ip_port_mappings">("ip_port_mappings", "insert", c.insertMappings)] : []),
    ];
    if (mutations.length > 0) t.mutate("Load_Balancer", [where("_uuid", "==", c.row._uuid)], mutations);
  }
  await db.run(t);
}

/** One gateway's BFD sessions of the load balancer, by hypervisor: its BFD ports (Port external_ids) and their Interface.bfd_status. */
async function readBfd(s: OvsHostSession, inputs: Inputs, bridge: string): Promise<Map<string, BfdView>> {
  const lb = loadBalancerOwner(inputs);
  const t = new Transaction(OPEN_VSWITCH);
  const br = t.select("Bridge", [where("name", "==", bridge)], ["ports"]);
  const ports = t.select("Port", [where("external_ids", "includes", { [OWNER_KEY]: lb, [ROLE_KEY]: BFD_ROLE })], ["_uuid", "name", "external_ids"]);
  const ifaces = t.select("Interface", [where("external_ids", "includes", { [OWNER_KEY]: lb })], ["name", "bfd_status"]);
  const r = await (await s.vswitchDb()).run(t);
  const onBridge = new Set((r.first(br)?.ports ?? []).map((u) => u.id));
  const status = new Map(r.rows(ifaces).map((i) => [i.name, i.bfd_status]));
  const views = new Map<string, BfdView>();
  for (const p of r.rows(ports)) {
    const hv = p.external_ids.get(HYPERVISOR_KEY);
    if (!hv || !onBridge.has(p._uuid.id)) continue;
    const st = status.get(p.name);
    views.set(hv, st ? { state: st.get("state") ?? "down", forwarding: st.get("forwarding") === "true" } : { state: "absent", forwarding: false });
  }
  // A hypervisor of a backend with no BFD port on a gateway that has some: that gateway cannot reach it.
  if (views.size > 0) {
    for (const b of inputs.vips.flatMap((v) => v.backends))
      if (b.hypervisor && !views.has(b.hypervisor)) views.set(b.hypervisor, { state: "absent", forwarding: false });
  }
  return views;
}

/** Every gateway's BFD view (only gateways with BFD sessions of the load balancer count). */
async function gatewaysBfd(inputs: Inputs): Promise<Map<string, Map<string, BfdView>>> {
  const gateways = inputs.gateways ?? [];
  if (gateways.length === 0) return new Map();
  return withAllOvsHosts(
    gateways.map((g) => g.host),
    async (sessions) => {
      const views = await Promise.all(gateways.map((g, i) => readBfd(sessions[i], inputs, g.bridge)));
      return new Map(gateways.flatMap((g, i) => (views[i].size > 0 ? [[g.name, views[i]] as const] : [])));
    },
  );
}

/** The southbound's view and the gateways' BFD, assessed; with `enforce`, stale monitors are set offline (the report says what was found before). */
async function observeHealth(inputs: Inputs, enforce: boolean): Promise<Omit<HealthCheckState, "drift">> {
  const bfd = await gatewaysBfd(inputs);
  const bfdGateways = [...bfd.keys()].sort();
  if (!inputs.southbound) return { bfdGateways };
  return withRemoteOvsdb(inputs.southbound, async (sb) => {
    const view = await readPortsHealth(logicalPortsOf(inputs.vips), sb);
    const report = assessVips(inputs.vips, { monitors: view.monitors, bindings: view.bindings, bfd });
    if (enforce && inputs.enforce) await markOffline(sb, staleMonitors(report, inputs.vips, view.monitors), view.hasChassisName);
    return { health: report.backends, stale: report.stale, bfdGateways };
  });
}

/** Reads, plans (refusing before anything is written), commits, then observes health. */
async function converge(inputs: Inputs): Promise<HealthCheckState> {
  const d = withDefaults(inputs);
  await withRemoteOvsdb(d.northbound, async (nb) => {
    const { changes, refusals } = planRows(d, await readRows(d, nb));
    if (refusals.length > 0) throw new Error(`${healthCheckId(d)}: refused, nothing changed: ${refusals.join("; ")}`);
    await commit(d, nb, changes, "health checks of");
  });
  return { ...driftOutputs([]), ...(await observeHealth(d, true)) };
}

export const healthCheckHandler: ResourceHandler<Inputs, HealthCheckState> = {
  schema,
  withDefaults,
  checkRules,
  identity: (i) => ({ loadBalancer: i.loadBalancer }),

  async create(inputs) {
    return { id: healthCheckId(inputs), state: await converge(inputs) };
  },

  async read(_id, inputs) {
    const d = withDefaults(inputs);
    const nb = await withRemoteOvsdb(d.northbound, async (db) => {
      const observed = await readRows(d, db);
      return { present: anyOwned(d, observed), ...nbFindings(d, observed) };
    });
    if (!nb.present) return undefined;
    // A VIP whose rows are not as declared reads as not declared: the diff shows it and update puts it back.
    const actual = { ...d, vips: d.vips.filter((_, i) => !nb.driftedVips.has(i)) };
    return { inputs: actual, state: { ...driftOutputs(nb.findings), ...(await observeHealth(d, false)) } };
  },

  async update(_id, _old, news) {
    return converge(news);
  },

  async delete(_id, inputs) {
    const d = withDefaults(inputs);
    await withRemoteOvsdb(d.northbound, async (nb) => {
      const { changes } = planRows({ ...d, vips: [] }, await readRows(d, nb));
      await commit(d, nb, changes, "delete");
    });
  },
};
