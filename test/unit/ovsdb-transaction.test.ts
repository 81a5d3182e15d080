import { describe, expect, it } from "vitest";
import { type DatabaseSchema, Uuid } from "../../provider/ovsdb/encoding";
import { OvsdbTransactionError, Transaction, mutation, readTransactResults, where } from "../../provider/ovsdb/transaction";

const U1 = "98f32b2f-f9e6-4a4e-a593-73914dc3bef2";
const U2 = "252fc389-24c6-47a8-8d58-e5e66bd112d2";

describe("Transaction", () => {
  it("builds a bridge, port and interface, referenced by named uuids, in one transaction", () => {
    const tx = new Transaction();
    const iface = tx.insert("Interface", { name: "br0", type: "internal" }, "iface");
    const port = tx.insert("Port", { name: "br0", interfaces: [iface] }, "port");
    const bridge = tx.insert("Bridge", { name: "br0", ports: [port], external_ids: { "ovslb:owner": "lb-1" } }, "br");
    expect(tx.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [bridge])])).toBe(3);
    expect(JSON.stringify(tx.operations)).toBe(
      JSON.stringify([
        { op: "insert", table: "Interface", row: { name: "br0", type: "internal" }, "uuid-name": "iface" },
        { op: "insert", table: "Port", row: { name: "br0", interfaces: ["set", [["named-uuid", "iface"]]] }, "uuid-name": "port" },
        {
          op: "insert",
          table: "Bridge",
          row: { name: "br0", ports: ["set", [["named-uuid", "port"]]], external_ids: ["map", [["ovslb:owner", "lb-1"]]] },
          "uuid-name": "br",
        },
        { op: "mutate", table: "Open_vSwitch", where: [], mutations: [["bridges", "insert", ["set", [["named-uuid", "br"]]]]] },
      ]),
    );
  });

  it("names inserted rows row<N> unless told, and refuses a name used twice", () => {
    const tx = new Transaction();
    expect(tx.insert("Port", { name: "p0" }).name).toBe("row0");
    expect(tx.insert("Port", { name: "p1" }).name).toBe("row1");
    expect(() => tx.insert("Port", { name: "p2" }, "row1")).toThrow(/row1 is already used/);
    expect(tx.operations).toHaveLength(2);
  });

  it("builds select, update, mutate, delete and comment, returning each operation's index", () => {
    const tx = new Transaction();
    const owned = where("external_ids", "includes", { "ovslb:owner": "lb-1" });
    expect(tx.comment("ovslb: lb-1")).toBe(0);
    expect(tx.select("Bridge", [where("name", "==", "br0")], ["_uuid", "ports"])).toBe(1);
    expect(tx.select("Bridge", [])).toBe(2);
    expect(tx.update("Bridge", [owned], { other_config: new Map([["hwaddr", "02:00:00:00:00:01"]]) })).toBe(3);
    expect(
      tx.mutate("Bridge", [where("_uuid", "==", new Uuid(U1))], [mutation("external_ids", "delete", ["stale"]), mutation("flood_vlans", "insert", [10, 20])]),
    ).toBe(4);
    expect(tx.mutate("Interface", [where("name", "==", "p0")], [mutation("ofport_request", "+=", 1)])).toBe(5);
    expect(tx.delete("Port", [where("name", "!=", "br0"), owned])).toBe(6);
    expect(tx.operations).toEqual([
      { op: "comment", comment: "ovslb: lb-1" },
      { op: "select", table: "Bridge", where: [["name", "==", "br0"]], columns: ["_uuid", "ports"] },
      { op: "select", table: "Bridge", where: [] },
      {
        op: "update",
        table: "Bridge",
        where: [["external_ids", "includes", ["map", [["ovslb:owner", "lb-1"]]]]],
        row: { other_config: ["map", [["hwaddr", "02:00:00:00:00:01"]]] },
      },
      {
        op: "mutate",
        table: "Bridge",
        where: [["_uuid", "==", ["uuid", U1]]],
        mutations: [
          ["external_ids", "delete", ["set", ["stale"]]],
          ["flood_vlans", "insert", ["set", [10, 20]]],
        ],
      },
      { op: "mutate", table: "Interface", where: [["name", "==", "p0"]], mutations: [["ofport_request", "+=", 1]] },
      {
        op: "delete",
        table: "Port",
        where: [
          ["name", "!=", "br0"],
          ["external_ids", "includes", ["map", [["ovslb:owner", "lb-1"]]]],
        ],
      },
    ]);
    expect(Object.keys(tx.operations[2])).not.toContain("columns");
  });

  it("builds a wait that fails at once unless given a timeout", () => {
    const tx = new Transaction();
    tx.wait("Bridge", [where("name", "==", "br0")], {
      columns: ["external_ids"],
      until: "==",
      rows: [{ external_ids: { "ovslb:owner": "lb-1" } }],
    });
    tx.wait("Bridge", [], { columns: ["name"], until: "!=", rows: [], timeout: 500 });
    expect(tx.operations).toEqual([
      {
        op: "wait",
        table: "Bridge",
        where: [["name", "==", "br0"]],
        columns: ["external_ids"],
        until: "==",
        rows: [{ external_ids: ["map", [["ovslb:owner", "lb-1"]]] }],
        timeout: 0,
      },
      { op: "wait", table: "Bridge", where: [], columns: ["name"], until: "!=", rows: [], timeout: 500 },
    ]);
  });
});

describe("readTransactResults", () => {
  const schema: DatabaseSchema = {
    name: "Open_vSwitch",
    version: "8.3.1",
    tables: {
      Bridge: {
        columns: {
          name: { key: "string", min: 1, max: 1 },
          ports: { key: "uuid", min: 0, max: "unlimited" },
        },
      },
    },
  };

  function bridgeTransaction(): Transaction {
    const tx = new Transaction();
    tx.wait("Bridge", [where("name", "==", "br0")], { columns: ["name"], until: "==", rows: [] });
    tx.insert("Bridge", { name: "br0" });
    tx.select("Bridge", []);
    tx.comment("done");
    return tx;
  }

  function failure(reply: unknown[]): OvsdbTransactionError {
    try {
      readTransactResults("Open_vSwitch", bridgeTransaction().operations, reply, schema);
    } catch (err) {
      if (err instanceof OvsdbTransactionError) return err;
      throw err;
    }
    throw new Error("expected an OvsdbTransactionError");
  }

  it("decodes insert uuids, counts and select rows by the schema", () => {
    const results = readTransactResults(
      "Open_vSwitch",
      bridgeTransaction().operations,
      [
        {},
        { uuid: ["uuid", U1] },
        {
          rows: [
            { _uuid: ["uuid", U1], name: "br0", ports: ["uuid", U2] },
            { name: "br1", ports: ["set", []] },
          ],
        },
        {},
      ],
      schema,
    );
    expect(results).toEqual([
      {},
      { uuid: new Uuid(U1) },
      {
        rows: [
          { _uuid: new Uuid(U1), name: "br0", ports: [new Uuid(U2)] },
          { name: "br1", ports: [] },
        ],
      },
      {},
    ]);
  });

  it("reports a wait that timed out as a conflict naming the wait", () => {
    const err = failure([{ error: "timed out", details: '"where" clause test failed' }, null, null, null]);
    expect(err.kind).toBe("conflict");
    expect(err.operation).toEqual({ index: 0, op: "wait", table: "Bridge" });
    expect(err.message).toBe('Open_vSwitch: op 0 (wait on Bridge where name == "br0"): precondition failed: timed out: "where" clause test failed');
  });

  it("reports another error on a wait as a failed operation, not a conflict", () => {
    const err = failure([{ error: "unknown column", details: "No column nosuch in table Bridge." }, null, null, null]);
    expect(err.kind).toBe("operation");
  });

  it("names the operation that failed in the middle", () => {
    const err = failure([{}, { error: "constraint violation", details: "bad name" }, null, null]);
    expect(err).toMatchObject({ kind: "operation", error: "constraint violation", details: "bad name" });
    expect(err.operation).toEqual({ index: 1, op: "insert", table: "Bridge" });
    expect(err.message).toBe('Open_vSwitch: op 1 (insert into Bridge "br0"): constraint violation: bad name');
  });

  it("reports a failure appended after the results as a commit failure", () => {
    const err = failure([{}, { uuid: ["uuid", U1] }, { rows: [] }, {}, { error: "referential integrity violation" }]);
    expect(err).toMatchObject({ kind: "commit", error: "referential integrity violation", operation: undefined });
    expect(err.message).toBe("Open_vSwitch: commit failed (writes Bridge): referential integrity violation");
  });

  it("refuses a reply with fewer results than operations", () => {
    expect(() => readTransactResults("Open_vSwitch", bridgeTransaction().operations, [{}], schema)).toThrow(/not one result per operation/);
  });
});
