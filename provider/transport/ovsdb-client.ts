/**
 * An OVSDB JSON-RPC client (RFC 7047 section 4) over any Node Duplex stream:
 * a unix or TCP socket, or an SSH stream-local channel to the host's db.sock.
 * The caller opens the stream; the client owns it from then on.
 */
import type { Duplex } from "node:stream";
import { SshSession, type SshConnection } from "./ssh";
import { type DatabaseSchema, type Row, decodeRow, isRecord, parseDatabaseSchema } from "../ovsdb/encoding";
import type { ColumnOf, DatabaseModel, RowOf, TableName } from "../ovsdb/model";
import { JsonStreamParser } from "./json-stream";
import { type Operation, type OperationResult, type Transaction, TransactionResults, checkOperations, readTransactResults } from "../ovsdb/transaction";

/** `host: db: ` (or what of it is known): how every error of a connection starts. */
function prefixOf(host: string | undefined, db: string | undefined): string {
  return `${host ? `${host}: ` : ""}${db ? `${db}: ` : ""}`;
}

/** The server answered a request with a JSON-RPC error (e.g. "unknown database"). */
export class OvsdbRpcError extends Error {
  constructor(
    readonly method: string,
    readonly error: string,
    readonly details: string | undefined,
    readonly host?: string,
    readonly db?: string,
  ) {
    super(`${prefixOf(host, db)}ovsdb ${method}: ${error}${details ? `: ${details}` : ""}`);
    this.name = "OvsdbRpcError";
  }
}

/**
 * A request got no reply: the connection ended or the request timed out.
 * Whether a transaction committed is then unknown; read before retrying.
 */
export class OvsdbNoReplyError extends Error {
  constructor(
    readonly method: string,
    reason: string,
    cause?: Error,
    readonly host?: string,
    readonly db?: string,
    /** For a transact: what it was, e.g. `3 ops on Bridge, Port`. */
    readonly what?: string,
  ) {
    super(`${prefixOf(host, db)}ovsdb ${method}${what ? ` (${what})` : ""}: no reply: ${reason}${cause ? `: ${cause.message}` : ""}`, { cause });
    this.name = "OvsdbNoReplyError";
  }
}

export interface OvsdbClientOptions {
  /** How long each request may wait for its reply. Default 30 s. */
  requestTimeoutMs?: number;
  /** The host the stream reaches (e.g. `root@172.30.0.11:22`): every error of this client starts with it. */
  host?: string;
}

/** What a monitor reports for one table: which columns, and which kinds of change. */
export interface MonitorRequest {
  columns?: readonly string[];
  select?: { initial?: boolean; insert?: boolean; delete?: boolean; modify?: boolean };
}

/** A row's change: `new` alone is an insert, `old` alone a delete; on modify `old` holds only the changed columns. */
export interface RowUpdate {
  old?: Row;
  new?: Row;
}

/** Table name to row UUID to change. */
export type TableUpdates = Record<string, Record<string, RowUpdate>>;

/** What a typed monitor asks for: per table of the model, which of its columns. */
export type ModelMonitorRequests<D extends DatabaseModel> = {
  readonly [T in TableName<D>]?: {
    columns?: readonly ColumnOf<RowOf<D, T>>[];
    select?: MonitorRequest["select"];
  };
};

/**
 * A typed monitor's changes: per table, row UUID to change. Rows hold the
 * columns asked for (on modify, `old` only those that changed), so each is
 * typed as a part of the table's row.
 */
export type ModelTableUpdates<D extends DatabaseModel> = {
  [T in TableName<D>]?: Record<string, { old?: Partial<RowOf<D, T>>; new?: Partial<RowOf<D, T>> }>;
};

interface PendingRequest {
  method: string;
  db: string | undefined;
  what: string | undefined;
  resolve(result: unknown): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

interface Monitor {
  schema: DatabaseSchema;
  onUpdate(updates: TableUpdates): void;
}

export class OvsdbClient {
  private readonly parser = new JsonStreamParser();
  private readonly pending = new Map<number, PendingRequest>();
  private readonly schemas = new Map<string, Promise<DatabaseSchema>>();
  private readonly monitors = new Map<string, Monitor>();
  private readonly requestTimeoutMs: number;
  /** The host this client talks to, as errors name it; undefined when not told. */
  readonly host: string | undefined;
  private nextId = 1;
  /** Set once the connection is over; later requests fail with it. */
  private failure: Error | undefined;

  constructor(
    private readonly stream: Duplex,
    opts: OvsdbClientOptions = {},
  ) {
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.host = opts.host;
    stream.on("data", (chunk: Buffer | string) => this.onData(chunk));
    stream.on("error", (err: Error) => this.fail(err));
    stream.on("end", () => this.fail(new Error("connection closed by the server")));
    stream.on("close", () => this.fail(new Error("connection closed")));
  }

  async listDbs(): Promise<string[]> {
    const dbs = await this.request("list_dbs", []);
    if (!Array.isArray(dbs) || !dbs.every((db) => typeof db === "string")) {
      throw new Error(`${prefixOf(this.host, undefined)}ovsdb list_dbs: unexpected reply ${JSON.stringify(dbs)}`);
    }
    return dbs;
  }

  /** Fetched once per database and connection: results and updates are decoded with it. */
  getSchema(db: string): Promise<DatabaseSchema> {
    let schema = this.schemas.get(db);
    if (!schema) {
      schema = this.request("get_schema", [db]).then((wire) => {
        try {
          return parseDatabaseSchema(wire);
        } catch (err) {
          throw new Error(`${prefixOf(this.host, db)}${(err as Error).message}`);
        }
      });
      schema.catch(() => this.schemas.delete(db));
      this.schemas.set(db, schema);
    }
    return schema;
  }

  /** Runs the operations as one atomic transaction; throws OvsdbTransactionError if any fails. */
  async transact(db: string, ops: readonly Operation[]): Promise<OperationResult[]> {
    const schema = await this.getSchema(db);
    return readTransactResults(db, ops, await this.request("transact", [db, ...ops]), schema, this.host);
  }

  /**
   * Runs a transaction built on a database model (`new Transaction(OPEN_VSWITCH)`)
   * in that database, after checking its tables and columns against the
   * server's schema (nothing is sent if one is missing, e.g. a column newer
   * than the server). Its results are read typed: `results.rows(select)`,
   * `results.uuid(inserted)`. Throws OvsdbTransactionError if any operation fails.
   */
  async run<D extends DatabaseModel>(txn: Transaction<D>): Promise<TransactionResults> {
    const db = txn.model?.name;
    if (db === undefined) throw new Error("OvsdbClient.run: the transaction has no database model; use transact(db, txn.operations)");
    const schema = await this.getSchema(db);
    checkOperations(db, txn.operations, schema, this.host);
    const reply = await this.request("transact", [db, ...txn.operations]);
    return new TransactionResults(readTransactResults(db, txn.operations, reply, schema, this.host), txn);
  }

  async echo(): Promise<void> {
    await this.request("echo", []);
  }

  /**
   * Takes the server's lock `name` (RFC 7047 4.1.8) if no other client holds
   * it, and says whether it did. Never waits: a lock held elsewhere is left
   * at once (`unlock` takes the request off the server's queue). A lock lives
   * as long as this connection, so a client that dies releases it.
   */
  async tryLock(name: string): Promise<boolean> {
    const reply = await this.request("lock", [name]);
    if (isRecord(reply) && reply.locked === true) return true;
    await this.unlock(name);
    return false;
  }

  async unlock(name: string): Promise<void> {
    await this.request("unlock", [name]);
  }

  /**
   * Starts monitor `id` and returns the initial rows. `onUpdate` gets every
   * later change; it is registered before the request is sent, since an
   * update may follow the reply in the same read.
   */
  monitor<D extends DatabaseModel>(
    model: D,
    id: string,
    requests: ModelMonitorRequests<D>,
    onUpdate: (updates: ModelTableUpdates<D>) => void,
  ): Promise<ModelTableUpdates<D>>;
  monitor(db: string, id: string, requests: Readonly<Record<string, MonitorRequest>>, onUpdate: (updates: TableUpdates) => void): Promise<TableUpdates>;
  /** (A model instead of a database name types the requests and the updates by its tables.) */
  async monitor(
    dbOrModel: string | DatabaseModel,
    id: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    onUpdate: (updates: TableUpdates) => void,
  ): Promise<TableUpdates> {
    const db = typeof dbOrModel === "string" ? dbOrModel : dbOrModel.name;
    const schema = await this.getSchema(db);
    if (this.monitors.has(id)) throw new Error(`${prefixOf(this.host, db)}ovsdb monitor ${id} is already running`);
    this.monitors.set(id, { schema, onUpdate });
    try {
      return readTableUpdates(await this.request("monitor", [db, id, requests]), schema);
    } catch (err) {
      this.monitors.delete(id);
      throw err;
    }
  }

  async monitorCancel(id: string): Promise<void> {
    this.monitors.delete(id);
    await this.request("monitor_cancel", [id]);
  }

  /** Ends the connection; requests still waiting fail with OvsdbNoReplyError. */
  close(): void {
    this.fail(new Error("closed by the client"));
  }

  private request(method: string, params: unknown[]): Promise<unknown> {
    // Locks are the server's, not a database's: their one parameter is the lock's name.
    const lock = method === "lock" || method === "unlock";
    const db = method === "list_dbs" || method === "echo" || lock || typeof params[0] !== "string" ? undefined : params[0];
    const what = method === "transact" ? describeTransact(params.slice(1) as Operation[]) : lock ? String(params[0]) : undefined;
    if (this.failure) return Promise.reject(new OvsdbNoReplyError(method, "connection is closed", this.failure, this.host, db, what));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new OvsdbNoReplyError(method, `timed out after ${this.requestTimeoutMs} ms`, undefined, this.host, db, what));
      }, this.requestTimeoutMs);
      this.pending.set(id, { method, db, what, resolve, reject, timer });
      this.send({ id, method, params });
    });
  }

  private send(message: object): void {
    // A write to a stream that is already gone reports here, not always as an 'error' event.
    this.stream.write(JSON.stringify(message), (err) => err && this.fail(err));
  }

  private onData(chunk: Buffer | string): void {
    try {
      for (const message of this.parser.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))) {
        this.onMessage(message);
      }
    } catch (err) {
      // Unparseable input (or an update callback that threw) leaves the stream in an unknown state.
      this.fail(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private onMessage(message: unknown): void {
    if (!isRecord(message)) throw new Error(`OVSDB stream: not a JSON-RPC message: ${JSON.stringify(message)}`);
    const { id, method, params } = message;
    if (method === "echo" && id !== null && id !== undefined) {
      // The server's keepalive: it drops connections that do not answer.
      this.send({ id, result: params, error: null });
    } else if (method === "update" && Array.isArray(params)) {
      const monitor = this.monitors.get(String(params[0]));
      monitor?.onUpdate(readTableUpdates(params[1], monitor.schema));
    } else if (typeof id === "number" && method === undefined) {
      this.onReply(id, message.result, message.error);
    }
  }

  private onReply(id: number, result: unknown, error: unknown): void {
    const request = this.pending.get(id);
    if (!request) return; // its request timed out
    this.pending.delete(id);
    clearTimeout(request.timer);
    if (error === null || error === undefined) request.resolve(result);
    else if (isRecord(error)) {
      const details = typeof error.details === "string" ? error.details : undefined;
      request.reject(new OvsdbRpcError(request.method, String(error.error), details, this.host, request.db));
    } else request.reject(new OvsdbRpcError(request.method, typeof error === "string" ? error : JSON.stringify(error), undefined, this.host, request.db));
  }

  private fail(reason: Error): void {
    if (this.failure) return;
    this.failure = reason;
    for (const request of this.pending.values()) {
      clearTimeout(request.timer);
      request.reject(new OvsdbNoReplyError(request.method, "connection lost", reason, this.host, request.db, request.what));
    }
    this.pending.clear();
    this.monitors.clear();
    this.stream.destroy();
  }
}

/** `3 ops on Bridge, Port`: which transaction got no reply. */
function describeTransact(ops: readonly Operation[]): string {
  const tables = [...new Set(ops.flatMap((op) => (op.op === "comment" ? [] : [op.table])))].sort();
  return `${ops.length} op${ops.length === 1 ? "" : "s"}${tables.length ? ` on ${tables.join(", ")}` : ""}`;
}

function readTableUpdates(wire: unknown, schema: DatabaseSchema): TableUpdates {
  if (!isRecord(wire)) throw new Error(`OVSDB table-updates is not an object: ${JSON.stringify(wire)}`);
  const updates: TableUpdates = {};
  for (const [table, rows] of Object.entries(wire)) {
    if (!isRecord(rows)) throw new Error(`OVSDB table-update for ${table} is not an object`);
    const tableSchema = schema.tables[table];
    updates[table] = {};
    for (const [uuid, change] of Object.entries(rows)) {
      if (!isRecord(change)) throw new Error(`OVSDB row-update for ${table} ${uuid} is not an object`);
      const update: RowUpdate = {};
      if (change.old !== undefined) update.old = decodeRow(change.old, tableSchema);
      if (change.new !== undefined) update.new = decodeRow(change.new, tableSchema);
      updates[table][uuid] = update;
    }
  }
  return updates;
}

/** One OVSDB database reached over SSH (its unix socket on the host) for the whole of fn; closed after. */
export async function withRemoteOvsdb<R>(target: { connection: SshConnection; socket: string }, fn: (db: OvsdbClient) => Promise<R>): Promise<R> {
  const ssh = await SshSession.connect(target.connection);
  try {
    const db = new OvsdbClient(await ssh.openUnixStream(target.socket), { host: ssh.hostName, requestTimeoutMs: ssh.connection.commandTimeoutMs });
    try {
      return await fn(db);
    } finally {
      db.close();
    }
  } finally {
    ssh.close();
  }
}
