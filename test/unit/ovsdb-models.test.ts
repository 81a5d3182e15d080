import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NamedUuid, Uuid, parseDatabaseSchema, type DatabaseSchema } from "../../provider/ovsdb/encoding";
import { OPEN_VSWITCH, OVN_NORTHBOUND, OVN_SOUTHBOUND, type BridgeRow, type ServiceMonitorRow } from "../../provider/ovsdb/models.generated";
import type { DatabaseModel } from "../../provider/ovsdb/model";
import { type Condition, Transaction, TransactionResults, mutation, where } from "../../provider/ovsdb/transaction";

/**
 * The generated models against the .ovsschema files committed in
 * test/fixtures/ovsdb-schemas/ (copies of Debian 12's openvswitch-switch
 * 3.1.0 and ovn-central 23.03.1 files; nothing under /usr is read, so this
 * runs with neither installed), and the typed API built on them. The
 * @ts-expect-error lines are checked by `npm run typecheck`: each must be a
 * compile error.
 */

const ROOT = join(__dirname, "..", "..");
const SCHEMA_DIR = join(ROOT, "test", "fixtures", "ovsdb-schemas");
const SCHEMAS: [DatabaseModel, string][] = [
  [OPEN_VSWITCH, "vswitch.ovsschema"],
  [OVN_NORTHBOUND, "ovn-nb.ovsschema"],
  [OVN_SOUTHBOUND, "ovn-sb.ovsschema"],
];

function committed(file: string): DatabaseSchema {
  return parseDatabaseSchema(JSON.parse(readFileSync(join(SCHEMA_DIR, file), "utf8")));
}

const U1 = "98f32b2f-f9e6-4a4e-a593-73914dc3bef2";
const U2 = "252fc389-24c6-47a8-8d58-e5e66bd112d2";

describe("models.generated.ts", () => {
  it("is what tools/ovsdb-modelgen.js generates from the committed .ovsschema files", () => {
    let output = "";
    try {
      output = execFileSync(process.execPath, [join(ROOT, "tools", "ovsdb-modelgen.js"), "--check"], { encoding: "utf8", stdio: "pipe" });
    } catch (err) {
      const e = err as { stderr?: string; status?: number };
      throw new Error(`tools/ovsdb-modelgen.js --check failed (exit ${e.status}):\n${e.stderr}`);
    }
    expect(output).toBe("");
  });

  it.each(SCHEMAS)("holds each table's columns exactly as %s's committed schema types them", (model, file) => {
    const schema = committed(file);
    expect(model.name).toBe(schema.name);
    expect(model.version).toBe(schema.version);
    for (const [table, { columns }] of Object.entries(model.tables)) {
      expect(schema.tables[table], `${schema.name}.${table}`).toBeDefined();
      expect(columns, `${schema.name}.${table}`).toEqual(schema.tables[table].columns);
    }
  });

  it("covers the tables ovslb touches", () => {
    expect(Object.keys(OPEN_VSWITCH.tables)).toEqual(["Open_vSwitch", "Bridge", "Port", "Interface"]);
    expect(Object.keys(OVN_NORTHBOUND.tables)).toEqual([
      "Load_Balancer",
      "Load_Balancer_Health_Check",
      "Logical_Router",
      "Logical_Switch",
      "Logical_Switch_Port",
    ]);
    expect(Object.keys(OVN_SOUTHBOUND.tables)).toEqual(["Service_Monitor", "Port_Binding", "Chassis"]);
  });

  it("types Service_Monitor.chassis_name as optional: OVN 23.03's schema lacks it, so it is not in the runtime schema", () => {
    expect(OVN_SOUTHBOUND.tables.Service_Monitor.columns).not.toHaveProperty("chassis_name");
    const onOld: ServiceMonitorRow = {
      _uuid: new Uuid(U1),
      _version: new Uuid(U2),
      ip: "10.0.0.5",
      port: 80,
      protocol: ["tcp"],
      logical_port: "lsp1",
      src_mac: "02:00:00:00:00:01",
      src_ip: "10.0.0.1",
      status: ["online"],
      options: new Map(),
      external_ids: new Map(),
    };
    const newer: ServiceMonitorRow = { ...onOld, chassis_name: "hv1" };
    expect(onOld.chassis_name).toBeUndefined();
    expect(newer.chassis_name).toBe("hv1");
  });
});

describe("a Transaction typed by a model", () => {
  it("encodes as the untyped one does, and returns typed rows", () => {
    const tx = new Transaction(OPEN_VSWITCH);
    const bridges = tx.select("Bridge", [where("name", "==", "br0")], ["_uuid", "ports", "fail_mode", "external_ids"]);
    const iface = tx.insert("Interface", { name: "p0", type: "internal", ofport_request: [10] });
    tx.mutate("Bridge", [where("_uuid", "==", new Uuid(U1))], [mutation("external_ids", "delete", ["stale"]), mutation("flood_vlans", "insert", [10])]);
    tx.wait("Bridge", [where("external_ids", "includes", { "ovslb:owner": "x" })], { columns: ["_uuid"], until: "==", rows: [{ _uuid: new Uuid(U1) }] });
    expect(tx.operations).toEqual([
      { op: "select", table: "Bridge", where: [["name", "==", "br0"]], columns: ["_uuid", "ports", "fail_mode", "external_ids"] },
      { op: "insert", table: "Interface", row: { name: "p0", type: "internal", ofport_request: ["set", [10]] }, "uuid-name": "row0" },
      {
        op: "mutate",
        table: "Bridge",
        where: [["_uuid", "==", ["uuid", U1]]],
        mutations: [
          ["external_ids", "delete", ["set", ["stale"]]],
          ["flood_vlans", "insert", ["set", [10]]],
        ],
      },
      {
        op: "wait",
        table: "Bridge",
        where: [["external_ids", "includes", ["map", [["ovslb:owner", "x"]]]]],
        columns: ["_uuid"],
        until: "==",
        rows: [{ _uuid: ["uuid", U1] }],
        timeout: 0,
      },
    ]);

    const results = new TransactionResults(
      [
        { rows: [{ _uuid: new Uuid(U1), ports: [new Uuid(U2)], fail_mode: ["secure"], external_ids: new Map([["a", "b"]]) }] },
        { uuid: new Uuid(U2) },
        { count: 1 },
        {},
      ],
      tx,
    );
    const [row] = results.rows(bridges);
    // Typed: each of these assignments is checked by the compiler.
    const ports: Uuid[] = row.ports;
    const failMode: "secure" | "standalone" | undefined = row.fail_mode[0];
    const ids: Map<string, string> = row.external_ids;
    expect([ports[0].id, failMode, ids.get("a")]).toEqual([U2, "secure", "b"]);
    expect(results.first(bridges)).toBe(row);
    expect(results.uuid(iface)).toEqual(new Uuid(U2));
    expect(results.count(2)).toBe(1);
    // @ts-expect-error a column the select did not ask for
    void row.name;
    // The index is still a number: results[ref] works as before.
    expect(results.results[bridges]).toBe(results.results[0]);
  });

  it("checks tables, columns and values at compile time", () => {
    const tx = new Transaction(OPEN_VSWITCH);
    // @ts-expect-error no such table
    tx.select("Brdge", []);
    // @ts-expect-error no such column
    tx.select("Bridge", [where("nme", "==", "br0")]);
    // @ts-expect-error a column of another table
    tx.select("Port", [where("datapath_type", "==", "netdev")]);
    // @ts-expect-error name is a string
    tx.select("Bridge", [where("name", "==", 7)]);
    // @ts-expect-error not a fail_mode
    tx.update("Bridge", [], { fail_mode: ["open"] });
    // @ts-expect-error _uuid is never written
    tx.insert("Bridge", { _uuid: new Uuid(U1), name: "br0" });
    // @ts-expect-error no such column to return
    tx.select("Bridge", [], ["nope"]);
    // @ts-expect-error ports holds uuids
    tx.mutate("Bridge", [], [mutation("ports", "insert", ["p0"])]);
    // @ts-expect-error the wait row must give exactly the columns compared
    tx.wait("Bridge", [], { columns: ["_uuid"], until: "==", rows: [{ name: "br0" }] });
    const loose = where("name", "==", "br0");
    // @ts-expect-error a condition built untyped is refused: type it or build it in place
    tx.select("Bridge", [loose]);
    const typed: Condition<BridgeRow> = where("name", "==", "br0");
    tx.select("Bridge", [typed]);
    // Named uuids stand for uuids; a row read may be written back.
    const port = tx.insert("Port", { name: "p0" });
    tx.mutate("Bridge", [where("name", "==", "br0")], [mutation("ports", "insert", [port, new Uuid(U1)])]);
    expect(port).toBeInstanceOf(NamedUuid);
    expect(tx.operations).toHaveLength(13);
  });

  it("leaves the untyped Transaction as it was: any table, any column", () => {
    const tx = new Transaction();
    const i = tx.select("Anything", [where("whatever", "==", 1)], ["x"]);
    tx.update("Bridge", [where("name", "==", "br0")], { no_such_column: "x" });
    expect(i).toBe(0);
    expect(tx.model).toBeUndefined();
  });
});
