import { EventEmitter } from "node:events";
import { connect, createServer, type Socket } from "node:net";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { runChecked } from "../../provider/transport/exec";
import { type TableUpdates, OvsdbClient, OvsdbNoReplyError, OvsdbRpcError } from "../../provider/transport/ovsdb-client";
import { OvsHostSession } from "../../provider/transport/ovs-host";
import { SshSession } from "../../provider/transport/ssh";
import {
  OPEN_VSWITCH,
  OvsdbTransactionError,
  OwnedTransaction,
  Transaction,
  Uuid,
  mutation,
  ownerMark,
  where,
  type UntypedDatabase,
} from "../../provider/ovsdb";
import { loadInventory, sshTo } from "../support/lab";
import { type OvsSandbox, startOvsSandbox } from "../support/sandbox";

const DB = "Open_vSwitch";

let sandbox: OvsSandbox;
let socket: Socket;
let client: OvsdbClient;

beforeAll(() => {
  sandbox = startOvsSandbox({ vswitchd: false });
});
afterAll(() => sandbox?.stop());

const SANDBOX_HOST = "sandbox";

function open(opts?: ConstructorParameters<typeof OvsdbClient>[1]): OvsdbClient {
  socket = connect(sandbox.dbSock);
  client = new OvsdbClient(socket, { host: SANDBOX_HOST, ...opts });
  return client;
}

/** Resolves once `condition` holds (checked on every `emitter` event and at once), or fails after `ms`, naming `what`. */
function when(emitter: NodeJS.EventEmitter, event: string, condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!condition()) return;
      clearTimeout(timer);
      emitter.off(event, check);
      resolve();
    };
    const timer = setTimeout(() => {
      emitter.off(event, check);
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    emitter.on(event, check);
    check();
  });
}

/** Everything the stream receives from now on, as text, for tests that wait for a given message. */
function received(stream: NodeJS.EventEmitter): { text: string } {
  const seen = { text: "" };
  stream.on("data", (chunk: Buffer) => (seen.text += chunk.toString()));
  return seen;
}
afterEach(() => client?.close());

/** Every Bridge row, as ovs-vsctl (not the client under test) sees it: name and external_ids. */
async function bridges(): Promise<string> {
  return runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "--columns=name,external_ids", "list", "Bridge"]);
}

/** The OvsdbTransactionError that `promise` must reject with. */
async function transactionError(promise: Promise<unknown>): Promise<OvsdbTransactionError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OvsdbTransactionError);
  return err as OvsdbTransactionError;
}

describe("OvsdbClient against ovsdb-server", () => {
  it("lists databases and reads a schema", async () => {
    open();
    expect(await client.listDbs()).toEqual(expect.arrayContaining([DB, "_Server"]));
    const schema = await client.getSchema(DB);
    expect(schema.name).toBe(DB);
    expect(schema.tables.Bridge.columns.ports).toEqual({ key: "uuid", min: 0, max: "unlimited" });
    expect(schema.tables.Bridge.columns.external_ids).toMatchObject({ key: "string", value: "string" });
    await expect(client.getSchema("Nope")).rejects.toThrow(OvsdbRpcError);
    await expect(client.getSchema("Nope")).rejects.toThrow(/^sandbox: Nope: ovsdb get_schema: unknown database/);
  });

  it("inserts a bridge, port and interface by named uuids, links it from the root, and reads it back", async () => {
    open();
    const tx = new Transaction();
    const iface = tx.insert("Interface", { name: "br0", type: "internal" });
    const port = tx.insert("Port", { name: "br0", interfaces: [iface] });
    const bridge = tx.insert("Bridge", { name: "br0", ports: [port], external_ids: { "ovslb:owner": "lb-1" } });
    tx.mutate(DB, [], [mutation("bridges", "insert", [bridge])]);
    const [ifaceResult, portResult, bridgeResult, mutateResult] = await client.transact(DB, tx.operations);
    expect(mutateResult).toEqual({ count: 1 });
    expect(bridgeResult.uuid).toBeInstanceOf(Uuid);

    const read = new Transaction();
    const bridgeRows = read.select("Bridge", [where("name", "==", "br0")], ["_uuid", "ports", "external_ids"]);
    const portRows = read.select("Port", [where("_uuid", "==", portResult.uuid!)], ["name", "interfaces"]);
    const results = await client.transact(DB, read.operations);
    // One-element sets come back bare on the wire; the schema turns them back into arrays.
    expect(results[bridgeRows].rows).toEqual([{ _uuid: bridgeResult.uuid, ports: [portResult.uuid], external_ids: new Map([["ovslb:owner", "lb-1"]]) }]);
    expect(results[portRows].rows).toEqual([{ name: "br0", interfaces: [ifaceResult.uuid] }]);
    expect(await runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "list-br"])).toBe("br0\n");
  });

  it("commits nothing when a wait precondition fails, and names the wait", async () => {
    open();
    const before = await bridges();
    const tx = new Transaction();
    tx.update("Bridge", [where("name", "==", "br0")], { external_ids: { "ovslb:owner": "lb-2" } });
    tx.wait("Bridge", [where("name", "==", "br0")], {
      columns: ["external_ids"],
      until: "==",
      rows: [{ external_ids: { "ovslb:owner": "someone-else" } }],
    });
    tx.insert("Bridge", { name: "br-new" });
    const err = await transactionError(client.transact(DB, tx.operations));
    expect(err.kind).toBe("conflict");
    expect(err.operation).toEqual({ index: 1, op: "wait", table: "Bridge" });
    expect(err.message).toMatch(/^sandbox: Open_vSwitch: op 1 \(wait on Bridge where name == "br0"\): precondition failed: timed out/);
    expect(await bridges()).toBe(before);

    // The same precondition, true this time, lets the transaction through.
    const ok = new Transaction();
    ok.wait("Bridge", [where("name", "==", "br0")], {
      columns: ["external_ids"],
      until: "==",
      rows: [{ external_ids: { "ovslb:owner": "lb-1" } }],
    });
    ok.update("Bridge", [where("name", "==", "br0")], { external_ids: { "ovslb:owner": "lb-1", rev: "2" } });
    expect(await client.transact(DB, ok.operations)).toEqual([{}, { count: 1 }]);
  });

  it("applies none of the operations when one in the middle fails", async () => {
    open();
    const before = await bridges();
    const tx = new Transaction();
    tx.insert("Bridge", { name: "br-a" });
    tx.update("Bridge", [where("name", "==", "br0")], { no_such_column: "x" });
    tx.insert("Bridge", { name: "br-b" });
    const err = await transactionError(client.transact(DB, tx.operations));
    expect(err).toMatchObject({ kind: "operation", error: "unknown column" });
    expect(err.operation).toEqual({ index: 1, op: "update", table: "Bridge" });
    expect(err.message).toMatch(/^sandbox: Open_vSwitch: op 1 \(update on Bridge where name == "br0"\): unknown column/);
    expect(await bridges()).toBe(before);
  });

  it("reports a commit-time failure: a second bridge named br0 breaks the name index", async () => {
    open();
    const before = await bridges();
    const tx = new Transaction();
    const bridge = tx.insert("Bridge", { name: "br0" });
    tx.mutate(DB, [], [mutation("bridges", "insert", [bridge])]);
    const err = await transactionError(client.transact(DB, tx.operations));
    expect(err).toMatchObject({ kind: "commit", error: "constraint violation", operation: undefined });
    expect(err.details).toMatch(/identical values \(br0\) for index on column "name"/);
    expect(err.message).toMatch(/^sandbox: Open_vSwitch: commit failed \(writes Bridge, Open_vSwitch\): constraint violation/);
    expect(await bridges()).toBe(before);
  });

  it("answers echo", async () => {
    open();
    await expect(client.echo()).resolves.toBeUndefined();
  });

  it("a lock is held by one client at a time, refused at once to another (which leaves the queue), and freed when its holder goes", async () => {
    const holder = open();
    const other = new OvsdbClient(connect(sandbox.dbSock), { host: SANDBOX_HOST });
    onTestFinished(() => other.close());
    expect(await holder.tryLock("ovslb_test")).toBe(true);
    expect(await other.tryLock("ovslb_test")).toBe(false);
    expect(await other.tryLock("ovslb_other")).toBe(true);
    holder.close();
    // Had the refused request stayed queued, the freed lock would go to `other`, and `third` could never take it.
    const third = new OvsdbClient(connect(sandbox.dbSock), { host: SANDBOX_HOST });
    onTestFinished(() => third.close());
    let taken = false;
    for (const deadline = Date.now() + 5_000; !taken && Date.now() < deadline;) {
      taken = await third.tryLock("ovslb_test");
      if (!taken) await new Promise((r) => setTimeout(r, 50));
    }
    expect(taken).toBe(true);
    expect(await other.tryLock("ovslb_test")).toBe(false);
  });

  it("an owned transaction commits only while its row is still owned as read", async () => {
    open();
    onTestFinished(() => runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "--if-exists", "del-br", "br-own"]).then(() => undefined));
    const mark = ownerMark("ovsdb-client-test/br-own");
    const create = new OwnedTransaction(OPEN_VSWITCH, mark, "ovslb: test owned create");
    create.requireAbsent("Bridge", [where("name", "==", "br-own")]);
    const bridge = create.insertOwned("Bridge", { name: "br-own", external_ids: { team: "net" } });
    create.mutate("Open_vSwitch", [], [mutation("bridges", "insert", [bridge])]);
    const uuid = (await client.run(create)).uuid(bridge);
    // The same create again: the name is taken now, so its precondition fails.
    const again = await transactionError(client.run(create));
    expect(again).toMatchObject({ kind: "conflict", operation: { index: 1, op: "wait", table: "Bridge" } });

    const read = new Transaction(OPEN_VSWITCH);
    const rows = read.select("Bridge", [where("_uuid", "==", uuid)], ["_uuid", "external_ids"]);
    const row = (await client.run(read)).first(rows)!;
    expect(row.external_ids).toEqual(
      new Map([
        ["team", "net"],
        ["ovslb:owner", "ovsdb-client-test/br-own"],
      ]),
    );

    // Someone else takes the row over between the read and the write: the guarded update commits nothing.
    await runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "set", "Bridge", "br-own", 'external_ids:"ovslb:owner"=someone-else']);
    const update = new OwnedTransaction(OPEN_VSWITCH, mark);
    update.updateOwned("Bridge", row, { fail_mode: ["secure"] }, ["external_ids"]);
    const err = await transactionError(client.run(update));
    expect(err.kind).toBe("conflict");
    expect(err.message).toMatch(
      /^sandbox: Open_vSwitch: op 0 \(wait on Bridge where _uuid == [0-9a-f-]+ and external_ids includes \{"ovslb:owner"="ovsdb-client-test\/br-own"\}\): precondition failed/,
    );
    expect(await runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "get", "Bridge", "br-own", "fail_mode"])).toBe("[]\n");

    // Given back, the same guard (owner and external_ids as read) holds again.
    await runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "set", "Bridge", "br-own", 'external_ids:"ovslb:owner"=ovsdb-client-test/br-own']);
    await client.run(update);
    expect(await runChecked(sandbox.runner, ["ovs-vsctl", "--no-wait", "get", "Bridge", "br-own", "fail_mode"])).toBe("secure\n");
    const remove = new OwnedTransaction(OPEN_VSWITCH, mark);
    remove.requireOwned("Bridge", row);
    remove.mutate("Open_vSwitch", [], [mutation("bridges", "delete", [row._uuid])]);
    await client.run(remove);
  });

  it("monitors a table: initial rows, then updates until cancelled", async () => {
    open();
    const updates: TableUpdates[] = [];
    const initial = await client.monitor(DB, "bridges", { Bridge: { columns: ["name", "ports"] } }, (u) => updates.push(u));
    const initialRows = Object.values(initial.Bridge).map((change) => change.new);
    expect(initialRows).toEqual([{ name: "br0", ports: [expect.any(Uuid)] }]);

    const tx = new Transaction();
    const bridge = tx.insert("Bridge", { name: "br-mon" });
    tx.mutate(DB, [], [mutation("bridges", "insert", [bridge])]);
    const [inserted] = await client.transact(DB, tx.operations);
    // The server sends the update before the reply of any later request.
    await client.echo();
    expect(updates).toEqual([{ Bridge: { [inserted.uuid!.id]: { new: { name: "br-mon", ports: [] } } } }]);

    await client.monitorCancel("bridges");
    const remove = new Transaction();
    remove.mutate(DB, [], [mutation("bridges", "delete", [inserted.uuid!])]);
    await client.transact(DB, remove.operations);
    await client.echo();
    expect(updates).toHaveLength(1);
  });

  it("fails a request still waiting when the socket is destroyed, and every later one", async () => {
    open();
    // A wait that cannot hold for 10 s keeps its reply pending on the server.
    const tx = new Transaction();
    tx.wait("Bridge", [where("name", "==", "br0")], { columns: ["name"], until: "==", rows: [], timeout: 10_000 });
    const pending = client.transact(DB, tx.operations);
    await client.echo();
    socket.destroy();
    await expect(pending).rejects.toThrow(OvsdbNoReplyError);
    await expect(pending).rejects.toThrow(/^sandbox: Open_vSwitch: ovsdb transact \(1 op on Bridge\): no reply: connection lost/);
    await expect(client.listDbs()).rejects.toThrow(/^sandbox: ovsdb list_dbs: no reply: connection is closed/);
  });

  it("times out one request and keeps the connection", async () => {
    open({ requestTimeoutMs: 300 });
    await client.getSchema(DB);
    const seen = received(socket);
    const tx = new Transaction();
    tx.wait("Bridge", [where("name", "==", "br0")], { columns: ["name"], until: "==", rows: [], timeout: 1_000 });
    await expect(client.transact(DB, tx.operations)).rejects.toThrow(/transact \(1 op on Bridge\): no reply: timed out after 300 ms/);
    await expect(client.listDbs()).resolves.toContain(DB);
    // The late reply (the wait's conflict, after its 1 s) arrives, and is dropped: the connection goes on.
    await when(socket, "data", () => seen.text.includes('"timed out"'), "the late reply of the timed-out transact");
    await expect(client.echo()).resolves.toBeUndefined();
  });

  it("answers the server's echo requests, so an idle connection with an inactivity probe stays up", async () => {
    // A TCP remote whose Manager row probes after 1 s idle and disconnects 1 s after an unanswered probe.
    const port = await freePort();
    open();
    const tx = new Transaction();
    const manager = tx.insert("Manager", { target: `ptcp:${port}:127.0.0.1`, inactivity_probe: [1000] });
    tx.mutate(DB, [], [mutation("manager_options", "insert", [manager])]);
    await client.transact(DB, tx.operations);
    client.close();
    const ctl = readdirSync(sandbox.rundir).find((f) => /^ovsdb-server\.\d+\.ctl$/.test(f));
    await runChecked(sandbox.runner, [
      "ovs-appctl",
      "-t",
      join(sandbox.rundir, ctl!),
      "ovsdb-server/add-remote",
      "db:Open_vSwitch,Open_vSwitch,manager_options",
    ]);

    await managerBound(port);
    const tcp = await connectTcp(port);
    const serverRequests: string[] = [];
    tcp.on("data", (chunk: Buffer) => serverRequests.push(...(chunk.toString().match(/"method":"echo"/g) ?? [])));
    client = new OvsdbClient(tcp);
    // The server probes after 1 s idle and drops the connection 1 s after an unanswered probe; a
    // second probe comes only if the first was answered, on a connection that stayed up.
    await when(tcp, "data", () => serverRequests.length >= 2, "a second inactivity probe from the server");
    await expect(client.listDbs()).resolves.toContain(DB);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * ovsdb-server opens a Manager's listener on a later main-loop pass and then
 * records it in the row's status (bound_port): wait for that update on a
 * monitor, rather than retrying the connect.
 */
async function managerBound(port: number): Promise<void> {
  const watcher = new OvsdbClient(connect(sandbox.dbSock), { host: SANDBOX_HOST });
  try {
    let bound = false;
    const seen = (updates: TableUpdates) => {
      for (const change of Object.values(updates.Manager ?? {})) {
        const status = change.new?.status;
        if (status instanceof Map && status.get("bound_port") === String(port)) bound = true;
      }
    };
    const events = new EventEmitter();
    seen(
      await watcher.monitor(DB, "managers", { Manager: { columns: ["target", "status"] } }, (u) => {
        seen(u);
        events.emit("update");
      }),
    );
    await when(events, "update", () => bound, `Manager ptcp:${port} to report bound_port`);
  } finally {
    watcher.close();
  }
}

function connectTcp(port: number): Promise<Socket> {
  return new Promise<Socket>((resolve, reject) => {
    const tcp = connect(port, "127.0.0.1", () => resolve(tcp));
    tcp.once("error", reject);
  });
}

/**
 * The same client over SSH to a lab host, as the providers use it: an error
 * names the host (its SSH address), the database, the table and the
 * failing operation, so with many gateways the failing one is plain.
 */
describe("OvsdbClient errors against a lab host", () => {
  let session: OvsHostSession;

  beforeAll(async () => {
    const inv = loadInventory();
    const gw1 = inv.hosts.gw1;
    const connection = sshTo(inv, gw1);
    session = new OvsHostSession({ connection, ovsRundir: gw1.ovsRundir }, await SshSession.connect(connection));
  });
  afterAll(() => session?.close());

  it("a failing wait names the host, the database, the table and the operation, and commits nothing", async () => {
    const db = await session.vswitchDb();
    expect(db.host).toBe(session.hostName);
    const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark("ovsdb-client-test"), "ovslb: test a failing precondition");
    txn.requirePresent("Bridge", [where("name", "==", "br-ovslb-absent")]);
    txn.insertOwned("Bridge", { name: "br-ovslb-never" });
    const err = await transactionError(db.run(txn));
    expect(err).toMatchObject({ kind: "conflict", db: "Open_vSwitch", host: session.hostName, error: "timed out" });
    expect(err.operation).toEqual({ index: 1, op: "wait", table: "Bridge" });
    expect(
      err.message.startsWith(`${session.hostName}: Open_vSwitch: op 1 (wait on Bridge where name == "br-ovslb-absent"): precondition failed: timed out`),
    ).toBe(true);
    expect(session.hostName).toMatch(/172\.30\.0\.11/);
    const check = new Transaction(OPEN_VSWITCH);
    const rows = check.select("Bridge", [where("name", "==", "br-ovslb-never")], ["name"]);
    expect((await db.run(check)).rows(rows)).toEqual([]);
  });

  it("a column the server's schema lacks is refused before anything is sent, naming the host and operation", async () => {
    const db = await session.vswitchDb();
    // A model generated from a newer schema, with a column this server does not have.
    const newer: UntypedDatabase = { name: "Open_vSwitch", version: "99.0.0", tables: {} };
    const txn = new Transaction(newer);
    txn.select("Bridge", [], ["name", "no_such_column"]);
    const err = await transactionError(db.run(txn));
    expect(err.message).toBe(
      `${session.hostName}: Open_vSwitch: op 0 (select on Bridge (all rows)): unknown column: this server's Open_vSwitch 8.3.1 has no column Bridge.no_such_column (not sent)`,
    );
  });
});
