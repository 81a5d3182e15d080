import { LOAD_BALANCER_KEY, MAPPINGS_KEY, OVN_NORTHBOUND, Transaction, ownerOf, where, type LoadBalancerHealthCheckRow, type Uuid } from "../ovsdb";
import type { OvsdbClient } from "../transport/ovsdb-client";

/**
 * Health checks one resource attaches to another's OVN Load_Balancer row (a
 * HealthCheck to its DeferredNatLoadBalancer's): Load_Balancer_Health_Check
 * rows owned by the attacher that name the load balancer, and the
 * ip_port_mappings entries the attacher inserted, listed on those rows. The
 * load balancer keeps both when it rewrites its row, and reports neither as
 * undeclared.
 */

interface HealthCheckRead {
  readonly _uuid: Uuid;
  readonly vip: string;
  readonly external_ids: Map<string, string>;
}

/** The mapping keys a health check row claims. */
export const claimedBy = (row: Pick<HealthCheckRead, "external_ids">): string[] => (row.external_ids.get(MAPPINGS_KEY) ?? "").split(",").filter(Boolean);

/** Of the health checks a load balancer's row references, those another resource attached to it (`owner`: the load balancer's id). */
export function attachedHealthChecks<R extends HealthCheckRead>(rows: readonly R[], owner: string): R[] {
  return rows.filter((r) => {
    const by = ownerOf(r);
    return by !== undefined && by !== owner && r.external_ids.get(LOAD_BALANCER_KEY) === owner;
  });
}

/** The ip_port_mappings entries of `current` that attached health checks claim: kept as they are. */
export function attachedMappings(current: ReadonlyMap<string, string>, attached: readonly HealthCheckRead[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of attached.flatMap(claimedBy)) {
    const v = current.get(key);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** The Load_Balancer_Health_Check columns ovslb reads. */
export const HEALTH_CHECK_COLUMNS = ["_uuid", "vip", "options", "external_ids"] as const;
export type HealthCheckColumns = Pick<LoadBalancerHealthCheckRow, (typeof HEALTH_CHECK_COLUMNS)[number]>;

/**
 * Each Load_Balancer row with the health checks its health_check references
 * (any owner), read by uuid in one more transaction; a write guards on the
 * rows' health_check as read.
 */
export async function withHealthCheckRows<R extends { health_check: readonly Uuid[] }>(
  db: OvsdbClient,
  rows: readonly R[],
): Promise<(R & { healthCheckRows: HealthCheckColumns[] })[]> {
  const refs = rows.flatMap((row) => row.health_check);
  const byUuid = new Map<string, HealthCheckColumns>();
  if (refs.length > 0) {
    const h = new Transaction(OVN_NORTHBOUND);
    const sels = refs.map((u) => h.select("Load_Balancer_Health_Check", [where("_uuid", "==", u)], HEALTH_CHECK_COLUMNS));
    const r = await db.run(h);
    for (const sel of sels) for (const hc of r.rows(sel)) byUuid.set(hc._uuid.id, hc);
  }
  return rows.map((row) => ({ ...row, healthCheckRows: row.health_check.flatMap((u) => byUuid.get(u.id) ?? []) }));
}
