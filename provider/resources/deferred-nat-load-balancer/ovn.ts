import type { DeferredNatDefaulted as Inputs } from "./plan";
import { isDeepStrictEqual } from "node:util";
import type { DeferredNatVip, OvnProbe } from "../../model/inputs.generated";
import { withRemoteOvsdb, type OvsdbClient } from "../../transport/ovsdb-client";
import {
  OVN_NORTHBOUND,
  OWNER_KEY,
  OwnedTransaction,
  Transaction,
  describeOwner,
  mutation,
  ownerMark,
  ownerOf,
  where,
  type LoadBalancerRow,
  type NamedUuid,
  type Uuid,
} from "../../ovsdb";
import { attachedHealthChecks, attachedMappings, withHealthCheckRows, type HealthCheckColumns } from "../../engine/attached-health-checks";
import type { DriftFinding } from "../../model/drift";
import { lbId } from "./plan";

/**
 * The optional OVN side: one northbound Load_Balancer row per protocol
 * (OVN keeps one protocol per row), with deferred NAT asked for in its
 * options, written (and, with ovn.attach, attached to the logical router) in
 * ONE transaction, and owned through external_ids. Unattached by default: a
 * stock OVN (no release has the deferred-NAT series) ignores the option and
 * would balance an attached row's VIPs statefully itself, behind the
 * gateways' back; an unattached row still carries the health checks (northd
 * monitors every Load_Balancer's backends, attached or not). With healthCheck.probe, each VIP of a row
 * has its own Load_Balancer_Health_Check (non-root: it lives as long as the
 * row's health_check references it), written in that same transaction.
 */

export interface NbLoadBalancer {
  name: string;
  protocol: DeferredNatVip["protocol"];
  vips: Record<string, string>;
  selectionFields: LoadBalancerRow["selection_fields"];
  ipPortMappings: Record<string, string>;
  options: Record<string, string>;
  /** healthCheck.probe: vips key (exactly "IP:PORT", as OVN matches it) -> Load_Balancer_Health_Check options. */
  healthChecks: Record<string, Record<string, string>>;
}

/** ovn-controller's defaults (controller/pinctrl.c; the man pages give none), written out so that a read compares like with like. */
export const PROBE_DEFAULTS: Required<OvnProbe> = { interval: 5, timeout: 3, successCount: 1, failureCount: 1 };

export function probeOptions(probe: OvnProbe): Record<string, string> {
  const p = { ...PROBE_DEFAULTS, ...probe };
  return { interval: String(p.interval), timeout: String(p.timeout), success_count: String(p.successCount), failure_count: String(p.failureCount) };
}

/** The rows the inputs want, keyed by row name. Pure. */
export function desiredNbRows(inputs: Inputs): NbLoadBalancer[] {
  const d = inputs;
  const byProtocol = new Map<string, NbLoadBalancer>();
  for (const vip of d.vips) {
    let row = byProtocol.get(vip.protocol);
    if (!row) {
      row = {
        name: `ovslb-${d.name}-${vip.protocol}`,
        protocol: vip.protocol,
        vips: {},
        selectionFields: [...d.selectionFields].sort(),
        ipPortMappings: {},
        options: { "deferred-nat": "true" },
        healthChecks: {},
      };
      byProtocol.set(vip.protocol, row);
    }
    // OVN writes an IPv6 VIP or backend with its port as [addr]:port (ovn-nb(5), Load_Balancer vips).
    const key = endpoint(vip);
    row.vips[key] = vip.backends.map(endpoint).join(",");
    if (d.healthCheck?.probe) row.healthChecks[key] = probeOptions(d.healthCheck.probe);
    for (const b of vip.backends) {
      const source = probeSource(b.address, d.ovn?.healthCheckSourceIp, d.ovn?.healthCheckSourceIpv6);
      if (b.logicalPort && source) row.ipPortMappings[ovnAddress(b.address)] = `${b.logicalPort}:${ovnAddress(source)}`;
    }
  }
  return [...byProtocol.values()];
}

/**
 * An address as OVN's northbound writes it beside a port or in
 * ip_port_mappings: IPv6 in brackets (ovn-nb(5), Load_Balancer vips and
 * ip_port_mappings: `[2001::1]=sw0-p1:[2002::1]`; northd looks a backend's
 * mapping up by that key since OVN 23.03, northd/northd.c).
 */
export const ovnAddress = (address: string) => (address.includes(":") ? `[${address}]` : address);
/** "IP:PORT", IPv6 as [IP]:PORT: the key of Load_Balancer vips and of a health check's vip. */
export const endpoint = (e: { address: string; port: number }) => `${ovnAddress(e.address)}:${e.port}`;
/** The probes' source address for a backend: of its family. */
export const probeSource = (backend: string, ipv4: string | undefined, ipv6: string | undefined) => (backend.includes(":") ? ipv6 : ipv4);

const asRecord = (m: ReadonlyMap<string, string>): Record<string, string> => Object.fromEntries(m);

/** The Load_Balancer columns ovslb reads. */
const LB_COLUMNS = ["_uuid", "name", "protocol", "vips", "selection_fields", "ip_port_mappings", "options", "health_check", "external_ids"] as const;
type LoadBalancerRead = Pick<LoadBalancerRow, (typeof LB_COLUMNS)[number]>;
type HealthCheckRead = HealthCheckColumns;

/** An owned Load_Balancer row with the health-check rows its health_check references (any owner). */
interface OwnedRow extends LoadBalancerRead {
  healthCheckRows: HealthCheckRead[];
}

/**
 * Of a row's health checks, the ones ovslb counts as its own: owned by the
 * load balancer, the first per VIP. The rest are reported and dropped.
 */
function ownHealthChecks(row: OwnedRow, owner: string): Map<string, HealthCheckRead> {
  const own = new Map<string, HealthCheckRead>();
  for (const hc of row.healthCheckRows) if (ownerOf(hc) === owner && !own.has(hc.vip)) own.set(hc.vip, hc);
  return own;
}

/** The row as ovslb compares it, from what the database holds (a row with no protocol is tcp, as OVN reads it). */
export function readNbRow(
  row: Omit<LoadBalancerRead, "_uuid" | "external_ids" | "health_check">,
  healthChecks: readonly Pick<HealthCheckRead, "vip" | "options">[] = [],
): NbLoadBalancer {
  return {
    name: row.name,
    protocol: row.protocol[0] ?? "tcp",
    vips: asRecord(row.vips),
    selectionFields: [...row.selection_fields].sort(),
    ipPortMappings: asRecord(row.ip_port_mappings),
    options: asRecord(row.options),
    healthChecks: Object.fromEntries(healthChecks.map((hc) => [hc.vip, asRecord(hc.options)])),
  };
}

/** One connection to the NB database for a whole operation; fn gets none when the inputs have no OVN part. */
export async function withNorthbound<R>(inputs: Inputs, fn: (db: OvsdbClient | undefined) => Promise<R>): Promise<R> {
  return inputs.ovn ? withRemoteOvsdb(inputs.ovn.northbound, fn) : fn(undefined);
}

/** `root@172.30.0.10:22: OVN ` for refusals about this database. */
const prefix = (db: OvsdbClient) => `${db.host ? `${db.host}: ` : ""}OVN `;

async function ownedRows(db: OvsdbClient, owner: string): Promise<OwnedRow[]> {
  const t = new Transaction(OVN_NORTHBOUND);
  const sel = t.select("Load_Balancer", [where("external_ids", "includes", { [OWNER_KEY]: owner })], LB_COLUMNS);
  // The health checks by uuid: a second read, guarded at write time by the rows' health_check as read.
  return withHealthCheckRows(db, (await db.run(t)).rows(sel));
}

/**
 * Refuses, before anything is changed anywhere, row names held by rows
 * ovslb does not own and a router that does not exist.
 */
export async function preflightNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const want = desiredNbRows(inputs);
  const t = new Transaction(OVN_NORTHBOUND);
  const byName = want.map((row) => t.select("Load_Balancer", [where("name", "==", row.name)], ["name", "external_ids"]));
  const router = t.select("Logical_Router", [where("name", "==", inputs.ovn!.router)], ["name"]);
  const results = await db.run(t);
  want.forEach((row, i) => {
    const found = results.first(byName[i]);
    if (found && ownerOf(found) !== lbId(inputs)) {
      throw new Error(`${prefix(db)}Load_Balancer ${row.name} exists and is ${describeOwner(found)}; refusing to take it over`);
    }
  });
  if (!results.first(router)) throw new Error(`${prefix(db)}logical router ${inputs.ovn!.router} does not exist`);
}

/**
 * Writes the rows, attaches them to the router and drops rows no longer
 * wanted, in one transaction guarded by waits: new names still free, rows
 * changed or dropped still this load balancer's, the router still there.
 */
export async function applyNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const want = desiredNbRows(inputs);
  const ovn = inputs.ovn!;
  const existing = await ownedRows(db, lbId(inputs));
  const t = new OwnedTransaction(OVN_NORTHBOUND, ownerMark(lbId(inputs)), `ovslb: ${lbId(inputs)}`);
  // Names must be free of rows ovslb does not own.
  for (const row of want) {
    if (!existing.some((e) => e.name === row.name)) t.requireAbsent("Load_Balancer", [where("name", "==", row.name)]);
  }
  // The router must exist: a mutate on no row would silently do nothing.
  t.requirePresent("Logical_Router", [where("name", "==", ovn.router)]);
  const refs: (Uuid | NamedUuid)[] = [];
  for (const row of want) {
    const current = existing.find((e) => e.name === row.name);
    // Health checks ovslb already has are kept (same uuid), others inserted; those no longer
    // referenced (undeclared, or not ovslb's) are garbage-collected by the server.
    const own = current ? ownHealthChecks(current, lbId(inputs)) : new Map<string, HealthCheckRead>();
    // A HealthCheck's rows and mappings on this row are kept as they are (engine/attached-health-checks.ts).
    const attached = current ? attachedHealthChecks(current.healthCheckRows, lbId(inputs)) : [];
    const taken = attached.find((a) => row.healthChecks[a.vip]);
    if (taken)
      throw new Error(`${prefix(db)}Load_Balancer ${row.name}: healthCheck.probe of VIP ${taken.vip} refused: its health check is ${describeOwner(taken)}`);
    const healthChecks = Object.entries(row.healthChecks).map(([vip, options]) => {
      const have = own.get(vip);
      if (!have) return t.insertOwned("Load_Balancer_Health_Check", { vip, options, external_ids: {} });
      t.updateOwned("Load_Balancer_Health_Check", have, { options, external_ids: {} }, ["vip"]);
      return have._uuid;
    });
    const columns = {
      name: row.name,
      protocol: [row.protocol],
      vips: row.vips,
      selection_fields: row.selectionFields,
      ip_port_mappings: { ...(current ? attachedMappings(current.ip_port_mappings, attached) : {}), ...row.ipPortMappings },
      options: row.options,
      health_check: [...healthChecks, ...attached.map((a) => a._uuid)],
      // Only the owner mark, which insertOwned and updateOwned add.
      external_ids: {},
    };
    if (current) {
      // Still this load balancer's row, under the name read, referencing the health checks read.
      t.updateOwned("Load_Balancer", current, columns, ["name", "health_check"]);
      refs.push(current._uuid);
    } else {
      refs.push(t.insertOwned("Load_Balancer", columns));
    }
  }
  const stale = existing.filter((e) => !want.some((w) => w.name === e.name));
  // Detach everything ovslb owns from every router, then attach what is wanted to the one router (with ovn.attach only).
  if (existing.length > 0)
    t.mutate(
      "Logical_Router",
      [],
      [
        mutation(
          "load_balancer",
          "delete",
          existing.map((e) => e._uuid),
        ),
      ],
    );
  if (ovn.attach && refs.length > 0) t.mutate("Logical_Router", [where("name", "==", ovn.router)], [mutation("load_balancer", "insert", refs)]);
  for (const row of stale) t.deleteOwned("Load_Balancer", { _uuid: row._uuid });
  await db.run(t);
}

/** What the northbound holds for the load balancer: whether any of its rows is there, and where they differ from the inputs (empty when they match). */
export async function readNorthbound(inputs: Inputs, db: OvsdbClient): Promise<{ present: boolean; findings: DriftFinding[] }> {
  const want = desiredNbRows(inputs);
  const rows = await ownedRows(db, lbId(inputs));
  const t = new Transaction(OVN_NORTHBOUND);
  const routers = t.select("Logical_Router", [where("name", "==", inputs.ovn!.router)], ["load_balancer"]);
  const router = (await db.run(t)).first(routers);
  const attached = new Set((router?.load_balancer ?? []).map((u) => u.id));
  const findings: DriftFinding[] = [];
  const rowDiffers = (name: string, detail: string) =>
    findings.push({ host: "northbound", kind: "northbound-row", object: `OVN Load_Balancer ${name}`, detail });
  const columnDiffers = (name: string, detail: string) =>
    findings.push({ host: "northbound", kind: "northbound-column", object: `OVN Load_Balancer ${name}`, detail });
  for (const w of want) {
    const row = rows.find((r) => r.name === w.name);
    if (!row) {
      rowDiffers(w.name, "missing");
      continue;
    }
    const own = ownHealthChecks(row, lbId(inputs));
    const have = readNbRow(row, [...own.values()]);
    const others = attachedHealthChecks(row.healthCheckRows, lbId(inputs));
    const expected = { ...w, ipPortMappings: { ...attachedMappings(row.ip_port_mappings, others), ...w.ipPortMappings } };
    for (const k of ["vips", "selectionFields", "ipPortMappings", "options", "protocol"] as const) {
      if (!isDeepStrictEqual(have[k], expected[k])) columnDiffers(w.name, `${k} differs`);
    }
    for (const [vip, options] of Object.entries(w.healthChecks)) {
      if (!have.healthChecks[vip]) columnDiffers(w.name, `health check of VIP ${vip} missing`);
      else if (!isDeepStrictEqual(have.healthChecks[vip], options)) columnDiffers(w.name, `health check of VIP ${vip} differs`);
    }
    for (const hc of row.healthCheckRows) {
      if ((own.get(hc.vip) === hc && w.healthChecks[hc.vip]) || others.includes(hc)) continue;
      columnDiffers(w.name, `health check of VIP ${hc.vip} not declared${ownerOf(hc) === lbId(inputs) ? "" : ` (${describeOwner(hc)})`}`);
    }
    if (inputs.ovn!.attach && !attached.has(row._uuid.id)) rowDiffers(w.name, `not attached to router ${inputs.ovn!.router}`);
    if (!inputs.ovn!.attach && attached.has(row._uuid.id))
      rowDiffers(w.name, `attached to router ${inputs.ovn!.router} while ovn.attach is not true (a stock OVN balances an attached row's VIPs itself)`);
  }
  for (const r of rows) if (!want.some((w) => w.name === r.name)) rowDiffers(r.name, "not declared");
  return { present: rows.length > 0, findings };
}

/** Detaches and deletes every row this load balancer owns, each guarded as still its own; their health checks go with them (non-root). Idempotent. */
export async function deleteNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const rows = await ownedRows(db, lbId(inputs));
  if (rows.length === 0) return;
  const t = new OwnedTransaction(OVN_NORTHBOUND, ownerMark(lbId(inputs)), `ovslb: delete ${lbId(inputs)}`);
  t.mutate(
    "Logical_Router",
    [],
    [
      mutation(
        "load_balancer",
        "delete",
        rows.map((r) => r._uuid),
      ),
    ],
  );
  for (const row of rows) t.deleteOwned("Load_Balancer", { _uuid: row._uuid });
  await db.run(t);
}
