/**
 * Builds the operations of one OVSDB `transact` (RFC 7047 section 5.2) and
 * reads its results. Nothing here does I/O: `OvsdbClient.run(txn)` (or
 * `OvsdbClient.transact(db, txn.operations)`) sends the operations, and
 * `readTransactResults` turns the reply into decoded results or an
 * OvsdbTransactionError.
 *
 * A Transaction built on a database model (`new Transaction(OPEN_VSWITCH)`)
 * checks table names, column names and values at compile time, and its
 * select results are typed rows (see model.ts). `new Transaction()` checks
 * nothing, as before.
 */
import {
  type DatabaseSchema,
  type Row,
  type WireAtom,
  type WireRow,
  type WireValue,
  NamedUuid,
  Uuid,
  decodeAtom,
  decodeRow,
  encodeRow,
  encodeValue,
  isRecord,
} from "./encoding";
import type { ColumnInput, ColumnOf, DatabaseModel, MutationInput, RowInputOf, RowOf, TableName, UntypedDatabase, WaitRowOf } from "./model";

export type ConditionFunction = "<" | "<=" | "==" | "!=" | ">=" | ">" | "includes" | "excludes";
export type Mutator = "+=" | "-=" | "*=" | "/=" | "%=" | "insert" | "delete";

/** A condition on rows of type R (the wire tuple; R exists for the compiler only). */
export type Condition<R = Row> = [column: string, fn: ConditionFunction, value: WireValue] & { readonly __rowType?: R };
/** A mutation of a column of rows of type R. */
export type Mutation<R = Row> = [column: string, mutator: Mutator, value: WireValue] & { readonly __rowType?: R };

export type Operation =
  | { op: "insert"; table: string; row: WireRow; "uuid-name": string }
  | { op: "select"; table: string; where: Condition[]; columns?: string[] }
  | { op: "update"; table: string; where: Condition[]; row: WireRow }
  | { op: "mutate"; table: string; where: Condition[]; mutations: Mutation[] }
  | { op: "delete"; table: string; where: Condition[] }
  | { op: "wait"; table: string; where: Condition[]; columns: string[]; until: "==" | "!="; rows: WireRow[]; timeout: number }
  | { op: "comment"; comment: string };

/**
 * `where("name", "==", "br0")`; on a map or set column `includes`/`excludes`
 * test for a subset, e.g. `where("external_ids", "includes", { "ovslb:owner": id })`.
 * Inside a typed transaction's call the row type comes from the table, so
 * the column and the value are checked; a condition built on its own is
 * untyped unless given one: `const c: Condition<BridgeRow> = where(...)`.
 */
export function where<R = Row, C extends ColumnOf<R> = ColumnOf<R>>(column: C, fn: ConditionFunction, value: ColumnInput<R, C>): Condition<R> {
  return [column, fn, encodeValue(value as Parameters<typeof encodeValue>[0])] as Condition<R>;
}

/** `mutation("bridges", "insert", [bridge])`; `delete` on a map takes keys (an array) or key-value pairs. */
export function mutation<R = Row, C extends ColumnOf<R> = ColumnOf<R>>(column: C, mutator: Mutator, value: MutationInput<R, C>): Mutation<R> {
  return [column, mutator, encodeValue(value as Parameters<typeof encodeValue>[0])] as Mutation<R>;
}

export interface WaitOptions<R = Row, C extends ColumnOf<R> = ColumnOf<R>> {
  columns: readonly C[];
  /** "==": the selected rows, restricted to `columns`, must be exactly `rows`; "!=": must differ. */
  until: "==" | "!=";
  rows: readonly WaitRowOf<R, NoInfer<C>>[];
  /**
   * Milliseconds the server may wait for the condition to hold. 0 (the
   * default) fails at once: a precondition. Without a timeout the server
   * would wait forever.
   */
  timeout?: number;
}

/**
 * A select's operation index, which also carries the type of the rows it
 * returns: `results.rows(ref)` gives them typed. It is a plain number at run
 * time, so `results[ref]` works as before.
 */
export type Select<R> = number & { readonly __selectRows: R };

/**
 * The operations of one transaction, in order. Each method returns the
 * operation's index, which is also the index of its result, except `insert`,
 * which returns the new row's named uuid for use in later operations (and
 * `results.uuid(ref)` for the uuid it got).
 */
export class Transaction<D extends DatabaseModel = UntypedDatabase> {
  private readonly ops: Operation[] = [];
  private readonly uuidNames = new Map<string, number>();

  /** With a model, the transaction is typed by its tables and `OvsdbClient.run` knows its database. */
  constructor(readonly model?: D) {}

  get operations(): readonly Operation[] {
    return this.ops;
  }

  /** `uuidName` defaults to `row<N>`; it only has to be unique within this transaction. */
  insert<T extends TableName<D>>(table: T, row: RowInputOf<RowOf<D, T>>, uuidName = `row${this.uuidNames.size}`): NamedUuid {
    const ref = new NamedUuid(uuidName);
    if (this.uuidNames.has(ref.name)) throw new Error(`uuid-name ${ref.name} is already used in this transaction`);
    this.uuidNames.set(ref.name, this.ops.length);
    this.ops.push({ op: "insert", table, row: encodeRow(row as Parameters<typeof encodeRow>[0]), "uuid-name": ref.name });
    return ref;
  }

  /** Without `columns`, all columns are returned, including `_uuid` and `_version`. */
  select<T extends TableName<D>, C extends ColumnOf<RowOf<D, T>> = ColumnOf<RowOf<D, T>>>(
    table: T,
    conditions: readonly Condition<RowOf<D, T>>[],
    columns?: readonly C[],
  ): Select<Pick<RowOf<D, T>, C>> {
    return this.add({ op: "select", table, where: [...conditions], ...(columns && { columns: [...columns] }) }) as Select<Pick<RowOf<D, T>, C>>;
  }

  update<T extends TableName<D>>(table: T, conditions: readonly Condition<RowOf<D, T>>[], row: RowInputOf<RowOf<D, T>>): number {
    return this.add({ op: "update", table, where: [...conditions], row: encodeRow(row as Parameters<typeof encodeRow>[0]) });
  }

  mutate<T extends TableName<D>>(table: T, conditions: readonly Condition<RowOf<D, T>>[], mutations: readonly Mutation<RowOf<D, T>>[]): number {
    return this.add({ op: "mutate", table, where: [...conditions], mutations: [...mutations] });
  }

  delete<T extends TableName<D>>(table: T, conditions: readonly Condition<RowOf<D, T>>[]): number {
    return this.add({ op: "delete", table, where: [...conditions] });
  }

  /** An optimistic-concurrency precondition when `timeout` is 0: if it does not hold, nothing is committed. */
  wait<T extends TableName<D>, C extends ColumnOf<RowOf<D, T>>>(
    table: T,
    conditions: readonly Condition<RowOf<D, T>>[],
    opts: WaitOptions<RowOf<D, T>, C>,
  ): number {
    return this.add({
      op: "wait",
      table,
      where: [...conditions],
      columns: [...opts.columns],
      until: opts.until,
      rows: opts.rows.map((row) => encodeRow(row as Parameters<typeof encodeRow>[0])),
      timeout: opts.timeout ?? 0,
    });
  }

  /** Written to the database log with the commit, for whoever reads it later. */
  comment(text: string): number {
    return this.add({ op: "comment", comment: text });
  }

  /** The index of the insert that named `ref`. */
  indexOf(ref: NamedUuid): number {
    const index = this.uuidNames.get(ref.name);
    if (index === undefined) throw new Error(`uuid-name ${ref.name} is not inserted by this transaction`);
    return index;
  }

  private add(op: Operation): number {
    return this.ops.push(op) - 1;
  }
}

/** One operation's result: `uuid` for insert, `rows` for select, `count` for update, mutate and delete. */
export interface OperationResult {
  uuid?: Uuid;
  rows?: Row[];
  count?: number;
}

/** A transaction's results, read through the references its builder returned. */
export class TransactionResults {
  constructor(
    readonly results: readonly OperationResult[],
    private readonly txn: Transaction<DatabaseModel>,
  ) {}

  /** The rows a select returned, typed by its table and columns. */
  rows<R>(ref: Select<R>): R[] {
    return (this.results[ref].rows ?? []) as R[];
  }

  /** The first row a select returned (for a select by name or uuid), or undefined. */
  first<R>(ref: Select<R>): R | undefined {
    return this.rows(ref)[0];
  }

  /** The uuid the server gave the row inserted as `ref`. */
  uuid(ref: NamedUuid): Uuid {
    const uuid = this.results[this.txn.indexOf(ref)].uuid;
    if (!uuid) throw new Error(`the insert of ${ref.name} returned no uuid`);
    return uuid;
  }

  /** How many rows an update, mutate or delete touched. */
  count(index: number): number {
    return this.results[index].count ?? 0;
  }
}

/**
 * Why a transaction failed: `conflict` when a `wait` precondition did not hold,
 * `operation` when an operation was refused (nothing was committed), `commit`
 * when all operations succeeded but the commit broke a constraint.
 */
export type TransactionFailure = "conflict" | "operation" | "commit";

/**
 * The message names the host (when the client knows it), the database, and
 * the failing operation: its index, kind, table and which rows it selects,
 * e.g. `root@172.30.0.11:22: Open_vSwitch: op 3 (wait on Bridge where
 * name == "br-lb1"): precondition failed: timed out: "where" clause test
 * failed`. A commit failure names the tables the transaction writes.
 */
export class OvsdbTransactionError extends Error {
  constructor(
    readonly db: string,
    readonly kind: TransactionFailure,
    /** OVSDB's error name, e.g. "timed out", "constraint violation", "referential integrity violation". */
    readonly error: string,
    readonly details: string | undefined,
    /** The failing operation, absent for a commit failure. */
    readonly operation: { index: number; op: Operation["op"]; table?: string } | undefined,
    /** The host whose database refused, e.g. `root@172.30.0.11:22`. */
    readonly host?: string,
    /** What the failing operation was, as the message gives it, e.g. `wait on Bridge where name == "br0"`. */
    readonly target?: string,
  ) {
    super(`${host ? `${host}: ` : ""}${db}: ${describeFailure(kind, error, operation, target)}${details ? `: ${details}` : ""}`);
    this.name = "OvsdbTransactionError";
  }
}

function describeFailure(kind: TransactionFailure, error: string, operation: OvsdbTransactionError["operation"], target: string | undefined): string {
  if (!operation) return `commit failed${target ? ` (${target})` : ""}: ${error}`;
  const what = `op ${operation.index} (${target ?? `${operation.op}${operation.table ? ` on ${operation.table}` : ""}`})`;
  return kind === "conflict" ? `${what}: precondition failed: ${error}` : `${what}: ${error}`;
}

const MAX_VALUE_TEXT = 60;

function atomText(atom: WireAtom): string {
  if (Array.isArray(atom)) return atom[1];
  return typeof atom === "string" ? JSON.stringify(atom) : String(atom);
}

function valueText(value: WireValue): string {
  let text: string;
  if (Array.isArray(value) && value[0] === "set") text = `[${value[1].map(atomText).join(", ")}]`;
  else if (Array.isArray(value) && value[0] === "map") {
    text = `{${(value[1] as [WireAtom, WireAtom][]).map(([k, v]) => `${atomText(k)}=${atomText(v)}`).join(", ")}}`;
  } else text = atomText(value);
  return text.length > MAX_VALUE_TEXT ? `${text.slice(0, MAX_VALUE_TEXT - 3)}...` : text;
}

/** `wait on Bridge where name == "br0"`, `insert into Port "p1"`, `mutate on Open_vSwitch (all rows)`. */
export function describeOperation(op: Operation): string {
  if (op.op === "comment") return `comment ${JSON.stringify(op.comment)}`;
  if (op.op === "insert") {
    const name = op.row.name;
    return `insert into ${op.table}${typeof name === "string" ? ` ${JSON.stringify(name)}` : ""}`;
  }
  const conditions = op.where.map(([column, fn, value]) => `${column} ${fn} ${valueText(value)}`).join(" and ");
  return `${op.op} on ${op.table}${conditions ? ` where ${conditions}` : " (all rows)"}`;
}

/** `writes Bridge, Open_vSwitch`: the tables a commit failure may be about. */
function describeWrites(ops: readonly Operation[]): string | undefined {
  const tables = [...new Set(ops.flatMap((op) => (op.op === "insert" || op.op === "update" || op.op === "mutate" || op.op === "delete" ? [op.table] : [])))];
  return tables.length > 0 ? `writes ${tables.sort().join(", ")}` : undefined;
}

/**
 * Reads a `transact` reply. RFC 7047 gives one result per operation; a
 * failed operation's result is `{error, details}` and those after it are
 * null; a commit failure is an extra `{error, details}` after them all.
 * Select rows are decoded with the database schema so sets keep their shape.
 */
export function readTransactResults(db: string, ops: readonly Operation[], reply: unknown, schema: DatabaseSchema, host?: string): OperationResult[] {
  const prefix = `${host ? `${host}: ` : ""}${db}`;
  if (!Array.isArray(reply) || reply.length < ops.length) {
    throw new Error(`${prefix}: transact reply is not one result per operation: ${JSON.stringify(reply)}`);
  }
  reply.forEach((result: unknown, index) => {
    if (!isRecord(result) || result.error === undefined) return;
    const error = typeof result.error === "string" ? result.error : JSON.stringify(result.error);
    const details = typeof result.details === "string" ? result.details : undefined;
    const op = ops[index];
    if (!op) throw new OvsdbTransactionError(db, "commit", error, details, undefined, host, describeWrites(ops));
    // ovsdb-server reports a wait whose condition never held as "timed out".
    const kind = op.op === "wait" && error === "timed out" ? "conflict" : "operation";
    const table = op.op === "comment" ? undefined : op.table;
    throw new OvsdbTransactionError(db, kind, error, details, { index, op: op.op, table }, host, describeOperation(op));
  });
  return ops.map((op, index) => {
    try {
      return readResult(op, reply[index], schema);
    } catch (err) {
      throw new Error(`${prefix}: op ${index} (${describeOperation(op)}): ${(err as Error).message}`);
    }
  });
}

function readResult(op: Operation, result: unknown, schema: DatabaseSchema): OperationResult {
  if (!isRecord(result)) throw new Error(`result of ${op.op} is not an object: ${JSON.stringify(result)}`);
  const read: OperationResult = {};
  if (result.uuid !== undefined) {
    const uuid = decodeAtom(result.uuid);
    if (!(uuid instanceof Uuid)) throw new Error(`result of ${op.op} has a bad uuid: ${JSON.stringify(result.uuid)}`);
    read.uuid = uuid;
  }
  if (typeof result.count === "number") read.count = result.count;
  if (Array.isArray(result.rows) && op.op !== "comment") {
    const table = schema.tables[op.table];
    read.rows = result.rows.map((row: unknown) => decodeRow(row, table));
  }
  return read;
}

/**
 * Checks the operations against the server's schema before they are sent,
 * as libovsdb's Transact does: every table and column must exist there. A
 * typed transaction names only columns of the model, but the server may be
 * older than the model (a column added later) or newer (one dropped).
 */
export function checkOperations(db: string, ops: readonly Operation[], schema: DatabaseSchema, host?: string): void {
  ops.forEach((op, index) => {
    if (op.op === "comment") return;
    const refuse = (error: string, details: string): never => {
      throw new OvsdbTransactionError(db, "operation", error, `${details} (not sent)`, { index, op: op.op, table: op.table }, host, describeOperation(op));
    };
    const table = schema.tables[op.table];
    if (!table) refuse("unknown table", `this server's ${db} ${schema.version} has no table ${op.table}`);
    const columns = [
      ...("where" in op ? op.where.map((c) => c[0]) : []),
      ...("row" in op ? Object.keys(op.row) : []),
      ...(op.op === "mutate" ? op.mutations.map((m) => m[0]) : []),
      ...(op.op === "select" ? (op.columns ?? []) : []),
      ...(op.op === "wait" ? [...op.columns, ...op.rows.flatMap((r) => Object.keys(r))] : []),
    ];
    const unknown = columns.find((c) => c !== "_uuid" && c !== "_version" && !(c in table.columns));
    if (unknown) refuse("unknown column", `this server's ${db} ${schema.version} has no column ${op.table}.${unknown}`);
  });
}
