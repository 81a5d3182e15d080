import { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { type DatabaseSchema, NamedUuid, Uuid } from "../../provider/ovsdb/encoding";
import { OPEN_VSWITCH } from "../../provider/ovsdb/models.generated";
import { OwnedTransaction, ownerMark } from "../../provider/ovsdb/owned";
import { OvsdbTransactionError, Transaction, checkOperations, describeOperation, mutation, readTransactResults, where } from "../../provider/ovsdb/transaction";
import { OvsdbClient, OvsdbNoReplyError, OvsdbRpcError } from "../../provider/transport/ovsdb-client";

/**
 * Errors name the host, the database, the table and the failing operation:
 * with 64 gateways, the message alone says which one refused and what.
 */

const HOST = "root@172.30.0.11:22";
const U1 = "98f32b2f-f9e6-4a4e-a593-73914dc3bef2";

const schema: DatabaseSchema = {
  name: "Open_vSwitch",
  version: "8.3.1",
  tables: {
    Open_vSwitch: { columns: { bridges: { key: "uuid", min: 0, max: "unlimited" } } },
    Bridge: {
      columns: {
        name: { key: "string", min: 1, max: 1 },
        ports: { key: "uuid", min: 0, max: "unlimited" },
        external_ids: { key: "string", value: "string", min: 0, max: "unlimited" },
      },
    },
  },
};

function owned(): OwnedTransaction<typeof OPEN_VSWITCH> {
  const tx = new OwnedTransaction(OPEN_VSWITCH, ownerMark("ovs-bridge/gw1/br0"), "ovslb: ensure bridge br0");
  tx.requireAbsent("Bridge", [where("name", "==", "br-new")]);
  const br = tx.insertOwned("Bridge", { name: "br-new" }, "br");
  tx.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [br])]);
  tx.requireOwned("Bridge", { _uuid: new Uuid(U1) });
  return tx;
}

function failure(fn: () => unknown): OvsdbTransactionError {
  try {
    fn();
  } catch (err) {
    if (err instanceof OvsdbTransactionError) return err;
    throw err;
  }
  throw new Error("expected an OvsdbTransactionError");
}

describe("OvsdbTransactionError", () => {
  it("names the host, database, op index, kind, table and the rows the wait selects", () => {
    const reply = [{}, {}, { uuid: ["uuid", U1] }, { count: 1 }, { error: "timed out", details: '"wait" timed out' }];
    const err = failure(() => readTransactResults("Open_vSwitch", owned().operations, reply, schema, HOST));
    expect(err).toMatchObject({ host: HOST, db: "Open_vSwitch", kind: "conflict", operation: { index: 4, op: "wait", table: "Bridge" } });
    expect(err.message).toBe(
      `${HOST}: Open_vSwitch: op 4 (wait on Bridge where _uuid == ${U1} and external_ids includes {"ovslb:owner"="ovs-bridge/gw1/br0"}): ` +
        'precondition failed: timed out: "wait" timed out',
    );
  });

  it("names the refused operation", () => {
    const reply = [{}, {}, { error: "constraint violation", details: "bad name" }, null, null];
    expect(failure(() => readTransactResults("Open_vSwitch", owned().operations, reply, schema, HOST)).message).toBe(
      `${HOST}: Open_vSwitch: op 2 (insert into Bridge "br-new"): constraint violation: bad name`,
    );
  });

  it("names the tables a failed commit writes", () => {
    const reply = [{}, {}, { uuid: ["uuid", U1] }, { count: 1 }, {}, { error: "referential integrity violation", details: "x" }];
    const err = failure(() => readTransactResults("Open_vSwitch", owned().operations, reply, schema, HOST));
    expect(err.kind).toBe("commit");
    expect(err.message).toBe(`${HOST}: Open_vSwitch: commit failed (writes Bridge, Open_vSwitch): referential integrity violation: x`);
  });

  it("names host and database when a result cannot be read", () => {
    const tx = new Transaction(OPEN_VSWITCH);
    tx.insert("Bridge", { name: "br0" });
    expect(() => readTransactResults("Open_vSwitch", tx.operations, [{ uuid: "nope" }], schema, HOST)).toThrow(
      `${HOST}: Open_vSwitch: op 0 (insert into Bridge "br0"): result of insert has a bad uuid: "nope"`,
    );
  });
});

describe("describeOperation", () => {
  it("renders conditions as a reader writes them, and keeps long values short", () => {
    const tx = new Transaction();
    tx.select("Bridge", []);
    tx.delete("Port", [where("name", "!=", "br0"), where("tag", "==", [10, 20]), where("_uuid", "==", new NamedUuid("p0"))]);
    tx.mutate("Bridge", [where("external_ids", "includes", { k: "x".repeat(100) })], []);
    tx.comment("ovslb: x");
    expect(tx.operations.map(describeOperation)).toEqual([
      "select on Bridge (all rows)",
      'delete on Port where name != "br0" and tag == [10, 20] and _uuid == p0',
      `mutate on Bridge where external_ids includes {"k"="${"x".repeat(51)}...`,
      'comment "ovslb: x"',
    ]);
  });
});

describe("checkOperations", () => {
  it("refuses a table or column the server's schema lacks, before sending, naming host and operation", () => {
    const tx = new Transaction();
    tx.select("Bridge", [where("name", "==", "br0")], ["_uuid", "name"]);
    tx.update("Bridge", [where("name", "==", "br0")], { chassis_name: "x" });
    expect(failure(() => checkOperations("Open_vSwitch", tx.operations, schema, HOST)).message).toBe(
      `${HOST}: Open_vSwitch: op 1 (update on Bridge where name == "br0"): unknown column: ` +
        "this server's Open_vSwitch 8.3.1 has no column Bridge.chassis_name (not sent)",
    );
    const other = new Transaction();
    other.wait("Interface", [], { columns: ["name"], until: "==", rows: [] });
    expect(failure(() => checkOperations("Open_vSwitch", other.operations, schema)).message).toBe(
      "Open_vSwitch: op 0 (wait on Interface (all rows)): unknown table: this server's Open_vSwitch 8.3.1 has no table Interface (not sent)",
    );
  });
});

/** A server on the other end of an in-memory stream: it answers each request with `answer`. */
function fakeServer(answer: (request: { id: number; method: string; params: unknown[] }) => object | undefined) {
  const requests: { id: number; method: string; params: unknown[] }[] = [];
  const stream: Duplex = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, done) {
      const request = JSON.parse(chunk.toString());
      requests.push(request);
      const reply = answer(request);
      if (reply) setImmediate(() => stream.push(JSON.stringify({ id: request.id, ...reply })));
      done();
    },
  });
  return { stream, requests };
}

const wireSchema = {
  name: "Open_vSwitch",
  version: "8.3.1",
  tables: { Bridge: { columns: { name: { type: "string" }, ports: { type: { key: "uuid", min: 0, max: "unlimited" } } } } },
};

describe("OvsdbClient", () => {
  it("runs a typed transaction in its model's database and reads typed rows", async () => {
    const { stream, requests } = fakeServer((r) =>
      r.method === "get_schema" ? { result: wireSchema, error: null } : { result: [{ rows: [{ name: "br0", ports: ["uuid", U1] }] }], error: null },
    );
    const client = new OvsdbClient(stream, { host: HOST });
    const tx = new Transaction(OPEN_VSWITCH);
    const bridges = tx.select("Bridge", [where("name", "==", "br0")], ["name", "ports"]);
    const [row] = (await client.run(tx)).rows(bridges);
    expect(row).toEqual({ name: "br0", ports: [new Uuid(U1)] });
    expect(requests.map((r) => [r.method, r.params[0]])).toEqual([
      ["get_schema", "Open_vSwitch"],
      ["transact", "Open_vSwitch"],
    ]);
    client.close();
  });

  it("monitors typed by a model: the requests name its tables and columns, the rows come back typed", async () => {
    const { stream, requests } = fakeServer((r) =>
      r.method === "get_schema"
        ? { result: wireSchema, error: null }
        : { result: { Bridge: { [U1]: { new: { name: "br0", ports: ["set", []] } } } }, error: null },
    );
    const client = new OvsdbClient(stream, { host: HOST });
    const seen: string[] = [];
    const initial = await client.monitor(OPEN_VSWITCH, "m1", { Bridge: { columns: ["name", "ports"] } }, (u) => {
      for (const change of Object.values(u.Bridge ?? {})) seen.push(change.new?.name ?? "(deleted)");
    });
    const first = initial.Bridge?.[U1].new;
    const ports: Uuid[] | undefined = first?.ports;
    expect([first?.name, ports]).toEqual(["br0", []]);
    expect(requests[1]).toMatchObject({ method: "monitor", params: ["Open_vSwitch", "m1", { Bridge: { columns: ["name", "ports"] } }] });
    stream.push(JSON.stringify({ id: null, method: "update", params: ["m1", { Bridge: { [U1]: { new: { name: "br1", ports: ["set", []] } } } }] }));
    await client.echo(); // the update, pushed before the echo's reply, is read first
    expect(seen).toEqual(["br1"]);
    // @ts-expect-error not a Bridge column
    void client.monitor(OPEN_VSWITCH, "m2", { Bridge: { columns: ["nme"] } }, () => {}).catch(() => undefined);
    client.close();
  });

  it("refuses to run a transaction without a model", async () => {
    const client = new OvsdbClient(fakeServer(() => undefined).stream);
    await expect(client.run(new Transaction())).rejects.toThrow(/no database model; use transact\(db, txn.operations\)/);
    client.close();
  });

  it("names host and database in a JSON-RPC error", async () => {
    const client = new OvsdbClient(fakeServer(() => ({ result: null, error: { error: "unknown database", details: "Nope" } })).stream, { host: HOST });
    const err = await client.getSchema("Nope").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OvsdbRpcError);
    expect((err as Error).message).toBe(`${HOST}: Nope: ovsdb get_schema: unknown database: Nope`);
    client.close();
  });

  it("names host, database and the transaction's tables when a transact gets no reply", async () => {
    const { stream } = fakeServer((r) => (r.method === "get_schema" ? { result: wireSchema, error: null } : undefined));
    const client = new OvsdbClient(stream, { host: HOST, requestTimeoutMs: 50 });
    const tx = new Transaction(OPEN_VSWITCH);
    tx.select("Bridge", []);
    tx.insert("Port", { name: "p0" });
    const err = await client.transact("Open_vSwitch", tx.operations).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OvsdbNoReplyError);
    expect((err as Error).message).toBe(`${HOST}: Open_vSwitch: ovsdb transact (2 ops on Bridge, Port): no reply: timed out after 50 ms`);
    client.close();
    await expect(client.listDbs()).rejects.toThrow(`${HOST}: ovsdb list_dbs: no reply: connection is closed: closed by the client`);
  });
});
