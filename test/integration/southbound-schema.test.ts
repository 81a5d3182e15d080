import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { markOffline, readSouthbound } from "../../provider/resources/deferred-nat-load-balancer/southbound";
import { withDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { OvsdbClient } from "../../provider/transport/ovsdb-client";

/**
 * The southbound reader against real ovsdb-servers of two schema versions:
 * the installed OVN 23.03 SB (no Service_Monitor.chassis_name) and the same
 * schema with the column OVN 24.03 added. The schema is read, not assumed,
 * and markOffline writes only "offline", only over "online".
 */

const STOCK = "/usr/share/ovn/ovn-sb.ovsschema";
const servers: { dir: string; pid: number }[] = [];

function startSouthbound(withChassisName: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), "ovslb-sb-"));
  const schema = JSON.parse(readFileSync(STOCK, "utf8"));
  if (withChassisName) {
    schema.version = "20.31.0";
    schema.tables.Service_Monitor.columns.chassis_name = { type: "string" };
  }
  writeFileSync(join(dir, "sb.ovsschema"), JSON.stringify(schema));
  execFileSync("ovsdb-tool", ["create", join(dir, "sb.db"), join(dir, "sb.ovsschema")]);
  const sock = join(dir, "sb.sock");
  execFileSync("ovsdb-server", [
    join(dir, "sb.db"),
    `--remote=punix:${sock}`,
    `--unixctl=${join(dir, "ctl")}`,
    `--pidfile=${join(dir, "pid")}`,
    "--detach",
    "-vconsole:err",
    `--log-file=${join(dir, "log")}`,
  ]);
  servers.push({ dir, pid: Number(readFileSync(join(dir, "pid"), "utf8").trim()) });
  const monitor = (port: string, ip: string, status: string) => ({
    op: "insert",
    table: "Service_Monitor",
    row: {
      logical_port: port,
      ip,
      port: 8080,
      protocol: "tcp",
      src_ip: "10.0.0.250",
      src_mac: "02:00:00:00:00:fa",
      status,
      ...(withChassisName ? { chassis_name: "hv1" } : {}),
    },
  });
  execFileSync("ovsdb-client", [
    "transact",
    `unix:${sock}`,
    JSON.stringify([
      "OVN_Southbound",
      monitor("lsp-a", "10.0.0.101", "online"),
      monitor("lsp-b", "10.0.0.102", "online"),
      monitor("lsp-c", "10.0.0.103", "offline"),
    ]),
  ]);
  return sock;
}

afterAll(() => {
  for (const s of servers) {
    try {
      process.kill(s.pid, "SIGTERM");
    } catch {
      /* gone */
    }
    rmSync(s.dir, { recursive: true, force: true });
  }
});

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = { host: "172.30.0.10", user: "root", hostKey: KEY, privateKeyPath: "/k" };
const inputs: DeferredNatLoadBalancerInputs = {
  name: "sb",
  gateways: [{ name: "gw1", host: { connection: conn }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
  hypervisors: [{ name: "hv1" }],
  vips: [
    {
      address: "10.0.0.199",
      port: 80,
      protocol: "tcp",
      backends: ["a", "b", "c"].map((x, i) => ({
        address: `10.0.0.10${i + 1}`,
        port: 8080,
        mac: `02:00:0a:00:00:6${i + 1}`,
        hypervisor: "hv1",
        logicalPort: `lsp-${x}`,
      })),
    },
  ],
  ovn: { northbound: { connection: conn, socket: "/nb.sock" }, router: "lr", healthCheckSourceIp: "10.0.0.250" },
  healthCheck: { probe: {}, southbound: { connection: conn, socket: "/sb.sock" } },
};

async function withDb<R>(sock: string, fn: (db: OvsdbClient) => Promise<R>): Promise<R> {
  const db = new OvsdbClient(connect(sock), { host: "sb" });
  try {
    return await fn(db);
  } finally {
    db.close();
  }
}

describe.each([
  { schema: "OVN 23.03 (no chassis_name)", withChassisName: false },
  { schema: "with Service_Monitor.chassis_name (OVN 24.03+)", withChassisName: true },
])("southbound reader, $schema", ({ withChassisName }) => {
  const sock = startSouthbound(withChassisName);

  it("detects the column from the server's schema and reads each backend's monitor", async () => {
    const view = await withDb(sock, (db) => readSouthbound(withDefaults(inputs), db));
    expect(view.hasChassisName).toBe(withChassisName);
    const byPort = Object.fromEntries(view.monitors.map((m) => [m.logicalPort, m]));
    expect(byPort["lsp-a"]).toEqual({
      logicalPort: "lsp-a",
      ip: "10.0.0.101",
      port: 8080,
      protocol: "tcp",
      status: "online",
      ...(withChassisName ? { chassis: "hv1" } : {}),
    });
    expect(byPort["lsp-c"].status).toBe("offline");
    expect(view.bindings.size).toBe(0);
  });

  it("markOffline sets exactly the given online monitors offline (and clears chassis_name where it exists), and leaves the rest", async () => {
    await withDb(sock, async (db) => {
      const view = await readSouthbound(withDefaults(inputs), db);
      await markOffline(
        db,
        view.monitors.filter((m) => m.logicalPort !== "lsp-b"),
        view.hasChassisName,
      );
      const after = Object.fromEntries((await readSouthbound(withDefaults(inputs), db)).monitors.map((m) => [m.logicalPort, m]));
      expect(after["lsp-a"].status).toBe("offline");
      expect(after["lsp-a"].chassis).toBeUndefined();
      expect(after["lsp-b"]).toMatchObject({ status: "online", ...(withChassisName ? { chassis: "hv1" } : {}) });
      expect(after["lsp-c"].status).toBe("offline");
    });
  });
});
