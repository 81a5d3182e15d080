/**
 * Builds the operations of one OVSDB `transact` (RFC 7047 section 5.2) and
 * reads its results. Nothing here does I/O: `OvsdbClient.transact` sends
 * `Transaction.operations`, and `readTransactResults` turns the reply into
 * decoded results or an OvsdbTransactionError.
 */
import {type DatabaseSchema, type Row, type RowInput, type ValueInput, type WireRow, type WireValue, NamedUuid, Uuid, decodeAtom, decodeRow, encodeRow, encodeValue, isRecord,} from "./encoding";

export type ConditionFunction = "<" | "<=" | "==" | "!=" | ">=" | ">" | "includes" | "excludes";
export type Mutator = "+=" | "-=" | "*=" | "/=" | "%=" | "insert" | "delete";

export type Condition = [column: string, fn: ConditionFunction, value: WireValue];
export type Mutation = [column: string, mutator: Mutator, value: WireValue];

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
 */
export function where(column: string, fn: ConditionFunction, value: ValueInput): Condition {
  return [column, fn, encodeValue(value)];
}

/** `mutation("bridges", "insert", [bridge])`; `delete` on a map takes keys (an array) or key-value pairs. */
export function mutation(column: string, mutator: Mutator, value: ValueInput): Mutation {
  return [column, mutator, encodeValue(value)];
}

export interface WaitOptions {
  columns: readonly string[];
  /** "==": the selected rows, restricted to `columns`, must be exactly `rows`; "!=": must differ. */
  until: "==" | "!=";
  rows: readonly RowInput[];
  /**
   * Milliseconds the server may wait for the condition to hold. 0 (the
   * default) fails at once: a precondition. Without a timeout the server
   * would wait forever.
   */
  timeout?: number;
}

/**
 * The operations of one transaction, in order. Each method returns the
 * operation's index, which is also the index of its result, except `insert`,
 * which returns the new row's named uuid for use in later operations.
 */
export class Transaction {
  private readonly ops: Operation[] = [];
  private readonly uuidNames = new Set<string>();

  get operations(): readonly Operation[] {
    return this.ops;
  }

  /** `uuidName` defaults to `row<N>`; it only has to be unique within this transaction. */
  insert(table: string, row: RowInput, uuidName = `row${this.uuidNames.size}`): NamedUuid {
    const ref = new NamedUuid(uuidName);
    if (this.uuidNames.has(ref.name)) throw new Error(`uuid-name ${ref.name} is already used in this transaction`);
    this.uuidNames.add(ref.name);
    this.ops.push({ op: "insert", table, row: encodeRow(row), "uuid-name": ref.name });
    return ref;
  }

  /** Without `columns`, all columns are returned, including `_uuid` and `_version`. */
  select(table: string, conditions: readonly Condition[], columns?: readonly string[]): number {
    return this.add({ op: "select", table, where: [...conditions], ...(columns && { columns: [...columns] }) });
  }

  update(table: string, conditions: readonly Condition[], row: RowInput): number {
    return this.add({ op: "update", table, where: [...conditions], row: encodeRow(row) });
  }

  mutate(table: string, conditions: readonly Condition[], mutations: readonly Mutation[]): number {
    return this.add({ op: "mutate", table, where: [...conditions], mutations: [...mutations] });
  }

  delete(table: string, conditions: readonly Condition[]): number {
    return this.add({ op: "delete", table, where: [...conditions] });
  }

  /** An optimistic-concurrency precondition when `timeout` is 0: if it does not hold, nothing is committed. */
  wait(table: string, conditions: readonly Condition[], opts: WaitOptions): number {
    return this.add({
      op: "wait",
      table,
      where: [...conditions],
      columns: [...opts.columns],
      until: opts.until,
      rows: opts.rows.map(encodeRow),
      timeout: opts.timeout ?? 0,
    });
  }

  /** Written to the database log with the commit, for whoever reads it later. */
  comment(text: string): number {
    return this.add({ op: "comment", comment: text });
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

/**
 * Why a transaction failed: `conflict` when a `wait` precondition did not hold,
 * `operation` when an operation was refused (nothing was committed), `commit`
 * when all operations succeeded but the commit broke a constraint.
 */
export type TransactionFailure = "conflict" | "operation" | "commit";

export class OvsdbTransactionError extends Error {
  constructor(
    readonly db: string,
    readonly kind: TransactionFailure,
    /** OVSDB's error name, e.g. "timed out", "constraint violation", "referential integrity violation". */
    readonly error: string,
    readonly details: string | undefined,
    /** The failing operation, absent for a commit failure. */
    readonly operation: { index: number; op: Operation["op"]; table?: string } | undefined,
  ) {
    super(`${db}: ${describe(kind, error, operation)}${details ? `: ${details}` : ""}`);
    this.name = "OvsdbTransactionError";
  }
}

function describe(kind: TransactionFailure, error: string, operation: OvsdbTransactionError["operation"]): string {
  if (!operation) return `transaction commit failed: ${error}`;
  const what = `${operation.op}${operation.table ? ` on table ${operation.table}` : ""} (operation ${operation.index})`;
  return kind === "conflict" ? `precondition failed: ${what} ${error}` : `${what} failed: ${error}`;
}

/**
 * Reads a `transact` reply. RFC 7047 gives one result per operation; a
 * failed operation's result is `{error, details}` and those after it are
 * null; a commit failure is an extra `{error, details}` after them all.
 * Select rows are decoded with the database schema so sets keep their shape.
 */
export function readTransactResults(
  db: string,
  ops: readonly Operation[],
  reply: unknown,
  schema: DatabaseSchema,
): OperationResult[] {
  if (!Array.isArray(reply) || reply.length < ops.length) {
    throw new Error(`${db}: transact reply is not one result per operation: ${JSON.stringify(reply)}`);
  }
  reply.forEach((result: unknown, index) => {
    if (!isRecord(result) || result.error === undefined) return;
    const error = String(result.error);
    const details = typeof result.details === "string" ? result.details : undefined;
    const op = ops[index];
    if (!op) throw new OvsdbTransactionError(db, "commit", error, details, undefined);
    // ovsdb-server reports a wait whose condition never held as "timed out".
    const kind = op.op === "wait" && error === "timed out" ? "conflict" : "operation";
    const table = op.op === "comment" ? undefined : op.table;
    throw new OvsdbTransactionError(db, kind, error, details, { index, op: op.op, table });
  });
  return ops.map((op, index) => readResult(op, reply[index], schema));
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
