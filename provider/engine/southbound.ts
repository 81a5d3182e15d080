import { OVN_SOUTHBOUND, Transaction, where, type Condition, type ServiceMonitorRow } from "../ovsdb";
import type { OvsdbClient } from "../transport/ovsdb-client";
import type { BindingView, MonitorView } from "./health";

/**
 * The southbound side of a health check (DeferredNatLoadBalancer's
 * healthCheck, HealthCheck): reads the Service_Monitor rows of the backends'
 * logical ports and their Port_Binding, and (enforce) sets stale monitors
 * offline. It never writes "online": only a probe may say a backend serves.
 */

export interface SouthboundView {
  monitors: MonitorView[];
  bindings: Map<string, BindingView>;
  /** Whether Service_Monitor has chassis_name (OVN 24.03+; 23.03 has not). */
  hasChassisName: boolean;
}

async function hasChassisName(db: OvsdbClient): Promise<boolean> {
  const schema = await db.getSchema(OVN_SOUTHBOUND.name);
  return "chassis_name" in (schema.tables.Service_Monitor?.columns ?? {});
}

/** The monitors and bindings of these logical ports, in one read transaction. */
export async function readPortsHealth(ports: readonly string[], db: OvsdbClient): Promise<SouthboundView> {
  const withChassis = await hasChassisName(db);
  const t = new Transaction(OVN_SOUTHBOUND);
  const monitorColumns = ["logical_port", "ip", "port", "protocol", "status", ...(withChassis ? (["chassis_name"] as const) : [])] as const;
  const monitors = ports.map((p) => t.select("Service_Monitor", [where("logical_port", "==", p)], monitorColumns));
  const bindings = ports.map((p) => t.select("Port_Binding", [where("logical_port", "==", p)], ["logical_port", "chassis", "up"]));
  const r = await db.run(t);
  // Chassis are referenced by uuid: name them in a second read.
  const rows = bindings.map((b) => r.first(b));
  const names = new Map<string, string>();
  if (rows.some((row) => row?.chassis.length)) {
    const c = new Transaction(OVN_SOUTHBOUND);
    const chassis = rows.flatMap((row) => row?.chassis ?? []).map((u) => c.select("Chassis", [where("_uuid", "==", u)], ["_uuid", "name"]));
    const cr = await db.run(c);
    chassis.forEach((sel) => {
      const row = cr.first(sel);
      if (row) names.set(row._uuid.id, row.name);
    });
  }
  const view: SouthboundView = { monitors: [], bindings: new Map(), hasChassisName: withChassis };
  for (const sel of monitors) {
    for (const m of r.rows(sel)) {
      const chassis = (m as { chassis_name?: string }).chassis_name;
      view.monitors.push({
        logicalPort: m.logical_port,
        ip: m.ip,
        port: m.port,
        protocol: m.protocol[0] ?? "tcp",
        ...(m.status[0] ? { status: m.status[0] } : {}),
        ...(chassis ? { chassis } : {}),
      });
    }
  }
  for (const row of rows) {
    if (!row) continue;
    const chassis = row.chassis[0] ? (names.get(row.chassis[0].id) ?? row.chassis[0].id) : undefined;
    view.bindings.set(row.logical_port, { ...(chassis ? { chassis } : {}), up: row.up[0] ?? false });
  }
  return view;
}

/**
 * Sets the given monitors offline (and clears their chassis where the schema
 * has the column), each only if it is still online: a probe that wrote
 * another status since wins, and nothing fails for it. Refused by SB RBAC
 * when the connection is a chassis's; it needs write access to Service_Monitor.
 */
export async function markOffline(db: OvsdbClient, monitors: readonly MonitorView[], withChassis: boolean): Promise<void> {
  if (monitors.length === 0) return;
  const t = new Transaction(OVN_SOUTHBOUND);
  for (const m of monitors) {
    const row: Condition<ServiceMonitorRow>[] = [
      where("logical_port", "==", m.logicalPort),
      where("ip", "==", m.ip),
      where("port", "==", m.port),
      where("protocol", "==", [m.protocol as "tcp" | "udp"]),
      where("status", "==", ["online"]),
    ];
    t.update("Service_Monitor", row, { status: ["offline"], ...(withChassis ? { chassis_name: "" } : {}) });
  }
  t.comment(`ovslb: stale monitors set offline`);
  await db.run(t);
}
