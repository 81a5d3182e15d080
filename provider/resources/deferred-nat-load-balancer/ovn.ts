import type { DeferredNatLoadBalancerInputs as Inputs, DeferredNatVip } from "../../model/inputs.generated";
import { OvsdbClient } from "../../transport/ovsdb-client";
import { Transaction, Uuid, mutation, where, type Row } from "../../ovsdb";
import { SshSession } from "../../transport/ssh";
import { backendKey, lbId, withDefaults } from "./plan";

/**
 * The optional OVN side: one northbound Load_Balancer row per protocol
 * (OVN keeps one protocol per row), with deferred NAT asked for in its
 * options, written and attached to the logical router in ONE transaction,
 * and owned through external_ids.
 */

const NB = "OVN_Northbound";
const OWNER_KEY = "ovslb:owner";

export interface NbLoadBalancer {
  name: string;
  protocol: DeferredNatVip["protocol"];
  vips: Record<string, string>;
  selectionFields: string[];
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

const asRecord = (v: unknown): Record<string, string> =>
  v instanceof Map ? Object.fromEntries([...v].map(([k, x]) => [String(k), String(x)])) : {};
const asList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : v === undefined || v === "" ? [] : [String(v)]);

/** The row as ovslb compares it, from what the database holds. */
export function readNbRow(row: Row): NbLoadBalancer {
  return {
    name: String(row.name),
    protocol: (asList(row.protocol)[0] ?? "tcp") as NbLoadBalancer["protocol"],
    vips: asRecord(row.vips),
    selectionFields: asList(row.selection_fields).sort(),
    ipPortMappings: asRecord(row.ip_port_mappings),
    options: asRecord(row.options),
  };
}

/** One connection to the NB database for a whole operation; fn gets none when the inputs have no OVN part. */
export async function withNorthbound<R>(inputs: Inputs, fn: (db: OvsdbClient | undefined) => Promise<R>): Promise<R> {
  if (!inputs.ovn) return fn(undefined);
  const nb = inputs.ovn.northbound;
  const ssh = await SshSession.connect(nb.connection);
  const db = new OvsdbClient(await ssh.openUnixStream(nb.socket));
  try {
    return await fn(db);
  } finally {
    db.close();
    ssh.close();
  }
}

async function ownedRows(db: OvsdbClient, owner: string): Promise<Row[]> {
  const t = new Transaction();
  t.select("Load_Balancer", [where("external_ids", "includes", { [OWNER_KEY]: owner })]);
  return (await db.transact(NB, t.operations))[0].rows ?? [];
}

/**
 * Refuses, before anything is changed anywhere, row names held by rows
 * ovslb does not own and a router that does not exist.
 */
export async function preflightNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const want = desiredNbRows(inputs);
  const t = new Transaction();
  for (const row of want) t.select("Load_Balancer", [where("name", "==", row.name)], ["name", "external_ids"]);
  t.select("Logical_Router", [where("name", "==", inputs.ovn!.router)], ["name"]);
  const results = await db.transact(NB, t.operations);
  want.forEach((row, i) => {
    const found = results[i].rows?.[0];
    const owner = found ? asRecord(found.external_ids)[OWNER_KEY] : undefined;
    if (found && owner !== lbId(inputs)) {
      throw new Error(`OVN Load_Balancer ${row.name} exists and is ${owner ? `owned by ${owner}` : "not owned by ovslb"}; refusing to take it over`);
    }
  });
  if (!results[want.length].rows?.length) throw new Error(`OVN logical router ${inputs.ovn!.router} does not exist`);
}

/** Writes the rows, attaches them to the router and drops rows no longer wanted, in one transaction. */
export async function applyNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const want = desiredNbRows(inputs);
  const ovn = inputs.ovn!;
  const existing = await ownedRows(db, lbId(inputs));
  const t = new Transaction();
  t.comment(`ovslb: ${lbId(inputs)}`);
  // Names must be free of rows ovslb does not own.
  for (const row of want) {
    if (!existing.some((e) => e.name === row.name)) {
      t.wait("Load_Balancer", [where("name", "==", row.name)], { columns: ["name"], until: "==", rows: [] });
    }
  }
  // The router must exist: a mutate on no row would silently do nothing.
  t.wait("Logical_Router", [where("name", "==", ovn.router)], { columns: ["name"], until: "!=", rows: [] });
  const refs: (Uuid | ReturnType<Transaction["insert"]>)[] = [];
  for (const row of want) {
    const columns = {
      name: row.name,
      protocol: [row.protocol],
      vips: row.vips,
      selection_fields: row.selectionFields,
      ip_port_mappings: row.ipPortMappings,
      options: row.options,
      external_ids: { [OWNER_KEY]: lbId(inputs) },
    };
    const current = existing.find((e) => e.name === row.name);
    if (current) {
      const uuid = current._uuid as Uuid;
      t.wait("Load_Balancer", [where("_uuid", "==", uuid)], { columns: ["name"], until: "==", rows: [{ name: row.name }] });
      t.update("Load_Balancer", [where("_uuid", "==", uuid)], columns);
      refs.push(uuid);
    } else {
      refs.push(t.insert("Load_Balancer", columns));
    }
  }
  const stale = existing.filter((e) => !want.some((w) => w.name === e.name)).map((e) => e._uuid as Uuid);
  // Detach everything ovslb owns from every router, then attach what is wanted to the one router.
  const all = existing.map((e) => e._uuid as Uuid);
  if (all.length > 0) t.mutate("Logical_Router", [], [mutation("load_balancer", "delete", all)]);
  if (refs.length > 0) t.mutate("Logical_Router", [where("name", "==", ovn.router)], [mutation("load_balancer", "insert", refs)]);
  for (const uuid of stale) t.delete("Load_Balancer", [where("_uuid", "==", uuid)]);
  await db.transact(NB, t.operations);
}

/** Findings where the northbound rows differ from the inputs; empty when they match. */
export async function readNorthbound(inputs: Inputs, db: OvsdbClient): Promise<string[]> {
  const want = desiredNbRows(inputs);
  const rows = await ownedRows(db, lbId(inputs));
  const t = new Transaction();
  t.select("Logical_Router", [where("name", "==", inputs.ovn!.router)], ["load_balancer"]);
  const router = (await db.transact(NB, t.operations))[0].rows?.[0];
  const attached = new Set(((router?.load_balancer ?? []) as Uuid[]).map((u) => u.id));
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
    if (!attached.has((row._uuid as Uuid).id)) findings.push(`OVN Load_Balancer ${w.name} not attached to router ${inputs.ovn!.router}`);
  }
  for (const r of rows) if (!want.some((w) => w.name === r.name)) findings.push(`OVN Load_Balancer ${String(r.name)} not declared`);
  return findings;
}

/** Detaches and deletes every row this load balancer owns. Idempotent. */
export async function deleteNorthbound(inputs: Inputs, db: OvsdbClient): Promise<void> {
  const rows = await ownedRows(db, lbId(inputs));
  if (rows.length === 0) return;
  const uuids = rows.map((r) => r._uuid as Uuid);
  const t = new Transaction();
  t.mutate("Logical_Router", [], [mutation("load_balancer", "delete", uuids)]);
  for (const u of uuids) t.delete("Load_Balancer", [where("_uuid", "==", u)]);
  await db.transact(NB, t.operations);
}
