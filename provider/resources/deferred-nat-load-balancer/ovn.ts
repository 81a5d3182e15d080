import type { DeferredNatLoadBalancerInputs as Inputs, DeferredNatVip } from "../../model/inputs.generated";
import { OvsdbClient } from "../../transport/ovsdb-client";
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
import { SshSession } from "../../transport/ssh";
import { backendKey, lbId, withDefaults } from "./plan";

/**
 * The optional OVN side: one northbound Load_Balancer row per protocol
 * (OVN keeps one protocol per row), with deferred NAT asked for in its
 * options, written and attached to the logical router in ONE transaction,
 * and owned through external_ids.
 */

export interface NbLoadBalancer {
  name: string;
  protocol: DeferredNatVip["protocol"];
  vips: Record<string, string>;
  selectionFields: LoadBalancerRow["selection_fields"];
  ipPortMappings: Record<string, string>;
  options: Record<string, string>;
}

/** The rows the inputs want, keyed by row name. Pure. */
export function desiredNbRows(inputs: Inputs): NbLoadBalancer[] {
  const d = withDefaults(inputs);
  const byProtocol = new Map<string, NbLoadBalancer>();
  for (const vip of d.vips) {
    let row = byProtocol.get(vip.protocol);
    if (!row) {
      row = {
        name: `ovslb-${d.name}-${vip.protocol}`,
        protocol: vip.protocol,
        vips: {},
        selectionFields: [...d.selectionFields!].sort(),
        ipPortMappings: {},
        options: { "deferred-nat": "true" },
      };
      byProtocol.set(vip.protocol, row);
    }
    row.vips[`${vip.address}:${vip.port}`] = vip.backends.map(backendKey).join(",");
    for (const b of vip.backends) {
      if (b.logicalPort && d.ovn?.healthCheckSourceIp) row.ipPortMappings[b.address] = `${b.logicalPort}:${d.ovn.healthCheckSourceIp}`;
    }
  }
  return [...byProtocol.values()];
}

const asRecord = (m: ReadonlyMap<string, string>): Record<string, string> => Object.fromEntries(m);

/** The Load_Balancer columns ovslb reads. */
const LB_COLUMNS = ["_uuid", "name", "protocol", "vips", "selection_fields", "ip_port_mappings", "options", "external_ids"] as const;
type LoadBalancerRead = Pick<LoadBalancerRow, (typeof LB_COLUMNS)[number]>;

/** The row as ovslb compares it, from what the database holds (a row with no protocol is tcp, as OVN reads it). */
export function readNbRow(row: Omit<LoadBalancerRead, "_uuid" | "external_ids">): NbLoadBalancer {
  return {
    name: row.name,
    protocol: row.protocol[0] ?? "tcp",
    vips: asRecord(row.vips),
    selectionFields: [...row.selection_fields].sort(),
    ipPortMappings: asRecord(row.ip_port_mappings),
    options: asRecord(row.options),
  };
}

/** One connection to the NB database for a whole operation; fn gets none when the inputs have no OVN part. */
export async function withNorthbound<R>(inputs: Inputs, fn: (db: OvsdbClient | undefined) => Promise<R>): Promise<R> {
  if (!inputs.ovn) return fn(undefined);
  const nb = inputs.ovn.northbound;
  const ssh = await SshSession.connect(nb.connection);
  const db = new OvsdbClient(await ssh.openUnixStream(nb.socket), { host: ssh.hostName });
  try {
    return await fn(db);
  } finally {
    db.close();
    ssh.close();
  }
}

/** `root@172.30.0.10:22: OVN ` for refusals about this database. */
const prefix = (db: OvsdbClient) => `${db.host ? `${db.host}: ` : ""}OVN `;

async function ownedRows(db: OvsdbClient, owner: string): Promise<LoadBalancerRead[]> {
  const t = new Transaction(OVN_NORTHBOUND);
  const lbs = t.select("Load_Balancer", [where("external_ids", "includes", { [OWNER_KEY]: owner })], LB_COLUMNS);
  return (await db.run(t)).rows(lbs);
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
    const columns = {
      name: row.name,
      protocol: [row.protocol],
      vips: row.vips,
      selection_fields: row.selectionFields,
      ip_port_mappings: row.ipPortMappings,
      options: row.options,
      // Only the owner mark, which insertOwned and updateOwned add.
      external_ids: {},
    };
    const current = existing.find((e) => e.name === row.name);
    if (current) {
      // Still this load balancer's row, under the name read.
      t.updateOwned("Load_Balancer", current, columns, ["name"]);
      refs.push(current._uuid);
    } else {
      refs.push(t.insertOwned("Load_Balancer", columns));
    }
  }
  const stale = existing.filter((e) => !want.some((w) => w.name === e.name));
  // Detach everything ovslb owns from every router, then attach what is wanted to the one router.
  if (existing.length > 0) t.mutate("Logical_Router", [], [mutation("load_balancer", "delete", existing.map((e) => e._uuid))]);
  if (refs.length > 0) t.mutate("Logical_Router", [where("name", "==", ovn.router)], [mutation("load_balancer", "insert", refs)]);
  for (const row of stale) t.deleteOwned("Load_Balancer", row);
  await db.run(t);
}

/** What the northbound holds for the load balancer: whether any of its rows is there, and where they differ from the inputs (empty when they match). */
export async function readNorthbound(inputs: Inputs, db: OvsdbClient): Promise<{ present: boolean; findings: string[] }> {
  const want = desiredNbRows(inputs);
  const rows = await ownedRows(db, lbId(inputs));
  const t = new Transaction(OVN_NORTHBOUND);
  const routers = t.select("Logical_Router", [where("name", "==", inputs.ovn!.router)], ["load_balancer"]);
  const router = (await db.run(t)).first(routers);
  const attached = new Set((router?.load_balancer ?? []).map((u) => u.id));
  const findings: string[] = [];
  for (const w of want) {
    const row = rows.find((r) => r.name === w.name);
    if (!row) {
      findings.push(`OVN Load_Balancer ${w.name} missing`);
      continue;
    }
    const have = readNbRow(row);
    for (const k of ["vips", "selectionFields", "ipPortMappings", "options", "protocol"] as const) {
      if (JSON.stringify(have[k]) !== JSON.stringify(w[k])) findings.push(`OVN Load_Balancer ${w.name}: ${k} differs`);
    }
    if (!attached.has(row._uuid.id)) findings.push(`OVN Load_Balancer ${w.name} not attached to router ${inputs.ovn!.router}`);
  }
  for (const r of rows) if (!want.some((w) => w.name === r.name)) findings.push(`OVN Load_Balancer ${r.name} not declared`);
  return { present: rows.length > 0, findings };
}

/** Detaches and deletes every row this load balancer owns, each guarded as still its own. Idempotent. */
export async function deleteNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const rows = await ownedRows(db, lbId(inputs));
  if (rows.length === 0) return;
  const t = new OwnedTransaction(OVN_NORTHBOUND, ownerMark(lbId(inputs)), `ovslb: delete ${lbId(inputs)}`);
  t.mutate("Logical_Router", [], [mutation("load_balancer", "delete", rows.map((r) => r._uuid))]);
  for (const row of rows) t.deleteOwned("Load_Balancer", row);
  await db.run(t);
}
