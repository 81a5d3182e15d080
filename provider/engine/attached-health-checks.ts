import { ownerOf } from "../ovsdb/owned";
import type { Uuid } from "../ovsdb";

/**
 * Health checks one resource attaches to another's OVN Load_Balancer row (a
 * HealthCheck to its DeferredNatLoadBalancer's): Load_Balancer_Health_Check
 * rows owned by the attacher that name the load balancer, and the
 * ip_port_mappings entries the attacher inserted, listed on those rows. The
 * load balancer keeps both when it rewrites its row, and reports neither as
 * undeclared.
 */

/** external_ids key on an attached health check: the owner of the Load_Balancer row it is attached to. */
export const LOAD_BALANCER_KEY = "ovslb:load-balancer";
/** external_ids key on an attached health check: the ip_port_mappings keys (backend addresses) its owner inserted, comma-separated. */
export const MAPPINGS_KEY = "ovslb:ip-port-mappings";

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
