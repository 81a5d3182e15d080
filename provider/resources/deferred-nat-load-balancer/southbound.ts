import type { DeferredNatDefaulted as Inputs } from "./plan";
import { withRemoteOvsdb, type OvsdbClient } from "../../transport/ovsdb-client";
import { logicalPortsOf } from "../../engine/health";
import { readPortsHealth, type SouthboundView } from "../../engine/southbound";

/**
 * The load balancer's healthCheck on the southbound: the shared read and
 * enforce (provider/engine/southbound.ts, also HealthCheck's) for its backends.
 */

export { markOffline, type SouthboundView } from "../../engine/southbound";

/** One connection to the SB database for a whole operation; fn gets none when the health check does not read it. */
export async function withSouthbound<R>(inputs: Inputs, fn: (db: OvsdbClient | undefined) => Promise<R>): Promise<R> {
  const sb = inputs.healthCheck?.probe ? inputs.healthCheck.southbound : undefined;
  return sb ? withRemoteOvsdb(sb, fn) : fn(undefined);
}

/** The monitors and bindings of the backends' logical ports, in one read transaction. */
export const readSouthbound = (inputs: Inputs, db: OvsdbClient): Promise<SouthboundView> => readPortsHealth(logicalPortsOf(inputs.vips), db);
