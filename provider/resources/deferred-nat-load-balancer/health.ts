import type { DeferredNatDefaulted as Inputs } from "./plan";
import { assessVips, staleMonitors, type HealthObservations, type HealthReport, type MonitorView } from "../../engine/health";

/**
 * The load balancer's healthCheck, assessed: the shared assessment
 * (provider/engine/health.ts, also HealthCheck's) on its VIPs.
 */

export type { BackendHealth, BfdView, BindingView, HealthObservations, HealthReport, MonitorView, StaleBackend } from "../../engine/health";
export { monitorKey } from "../../engine/health";

/** Per backend, what was observed, and the stale ones (see assessVips). */
export const assessHealth = (inputs: Inputs, obs: HealthObservations): HealthReport => assessVips(inputs.vips, obs);

/** The monitors to set offline: each stale backend's, once (a monitor serves every VIP with that backend). */
export const monitorsToMarkOffline = (report: HealthReport, inputs: Inputs, monitors: readonly MonitorView[]): MonitorView[] =>
  staleMonitors(report, inputs.vips, monitors);
