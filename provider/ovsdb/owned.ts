/**
 * Owned OVSDB transactions: the one place that writes ownership marks and
 * the `wait` preconditions that guard them: one OVSDB transaction per
 * database per apply, with wait preconditions on the rows it owns, and no
 * write to a row it does not own.
 *
 * A row is owned when its external_ids hold the owner's mark, by default
 * `ovslb:owner` = the resource id. The pattern, for every resource:
 *
 *   // 1. read (one transaction of selects), refuse foreign rows by ownerOf()
 *   // 2. build one owned transaction against what was read:
 *   const txn = new OwnedTransaction(OPEN_VSWITCH, ownerMark(id), `ovslb: ensure bridge ${name}`);
 *   txn.requireAbsent("Bridge", [where("name", "==", name)]);  // create: the name is still free
 *   const br = txn.insertOwned("Bridge", { name, ... });         // external_ids gets the mark
 *   txn.requireOwned("Bridge", row, ["fail_mode"]);              // change: same row, still ours,
 *   txn.update("Bridge", [where("_uuid", "==", row._uuid)], ...) //   and fail_mode as read
 *   txn.deleteOwned("Load_Balancer", lb);                        // delete: guarded the same way
 *   // 3. commit: a precondition that no longer holds fails the whole
 *   //    transaction as OvsdbTransactionError kind "conflict"; read again and replan.
 *   const results = await client.run(txn);
 *
 * Nothing here does I/O.
 */
import type { Row, Uuid } from "./encoding";
import type { ColumnInput, ColumnOf, DatabaseModel, RowInputOf, RowOf, TableName, UntypedDatabase } from "./model";
import { type Condition, Transaction, mutation, where } from "./transaction";

/** The external_ids key that names a row's owning resource. */
export const OWNER_KEY = "ovslb:owner";

/*
 * ovslb's other external_ids keys, all starting with MARK_PREFIX. Hosts and
 * stacks hold their values: never change one.
 */
export const MARK_PREFIX = "ovslb:";
/** What an owned port is for (a tunnel, a BFD port), so an owner's ports of different roles are kept apart. */
export const ROLE_KEY = "ovslb:role";
/** The hypervisor a gateway's tunnel or BFD port leads to. */
export const HYPERVISOR_KEY = "ovslb:hypervisor";
/** The gateway (address/key) a hypervisor's BFD port peers with. */
export const PEER_KEY = "ovslb:peer";
/** On the root row: the distributor device the host is registered as. */
export const DISTRIBUTOR_DEVICE_KEY = "ovslb:distributor-device";
/** On an attachment's bridge and ports: the distributor device it is attached to. */
export const DEVICE_KEY = "ovslb:device";
/** On an attachment's bridge and ports: its attachment id. */
export const ATTACHMENT_KEY = "ovslb:attachment";
/** On an attached health check: the owner of the Load_Balancer row it is attached to. */
export const LOAD_BALANCER_KEY = "ovslb:load-balancer";
/** On an attached health check: the ip_port_mappings keys (backend addresses) its owner inserted, comma-separated. */
export const MAPPINGS_KEY = "ovslb:ip-port-mappings";

/** The mark in a row's external_ids that makes it owned: key and value. */
export interface OwnerMark {
  readonly key: string;
  readonly value: string;
}

/** `ovslb:owner` = owner, or another key (e.g. the distributor device's registration on the root row). */
export const ownerMark = (owner: string, key: string = OWNER_KEY): OwnerMark => ({ key, value: owner });

/** Anything with external_ids as read: a typed row, or an untyped Row. */
type WithExternalIds = { readonly external_ids: Map<string, string> } | Pick<Row, "external_ids">;

/** The value of `key` (default `ovslb:owner`) in a row's external_ids, or undefined. */
export function ownerOf(row: WithExternalIds, key: string = OWNER_KEY): string | undefined {
  const ids: unknown = row.external_ids;
  if (!(ids instanceof Map)) return undefined;
  const value: unknown = ids.get(key);
  return typeof value === "string" ? value : undefined;
}

/** `owned by X` or `not owned by ovslb`, for refusals. */
export function describeOwner(row: WithExternalIds, key: string = OWNER_KEY): string {
  const owner = ownerOf(row, key);
  return owner ? `owned by ${owner}` : "not owned by ovslb";
}

/** The tables of D whose rows have external_ids: the ones that can be owned. */
export type OwnableTable<D extends DatabaseModel> = {
  [T in TableName<D>]: RowOf<D, T> extends { external_ids: Map<string, string> } ? T : never;
}[TableName<D>];

/** A row as read, by uuid, with the columns a guard compares (as they were read). */
export type RowRef<R, C extends ColumnOf<R> = never> = { readonly _uuid: Uuid } & { readonly [K in C]: ColumnInput<R, K> };

/**
 * A Transaction that knows its owner mark and builds the preconditions that
 * keep it to the rows it owns. Every method adds operations to this one
 * transaction; plain Transaction methods (update, mutate, ...) are there too.
 */
export class OwnedTransaction<D extends DatabaseModel> extends Transaction<D> {
  constructor(
    model: D,
    readonly mark: OwnerMark,
    /** Written to the database log with the commit, e.g. `ovslb: ensure bridge br0`. */
    comment?: string,
  ) {
    super(model);
    if (comment) this.comment(comment);
  }

  /** The condition "carries this transaction's mark", for selects and waits. */
  ownedBy<R = Row>(): Condition<R> {
    return where<Row>("external_ids", "includes", { [this.mark.key]: this.mark.value }) as Condition<R>;
  }

  /** Inserts a row carrying the mark in its external_ids (added to any it is given). */
  insertOwned<T extends OwnableTable<D>>(table: T, row: RowInputOf<RowOf<D, T>>, uuidName?: string) {
    const given = (row as { external_ids?: ReadonlyMap<string, string> | Readonly<Record<string, string>> }).external_ids;
    const ids = given instanceof Map ? Object.fromEntries(given as ReadonlyMap<string, string>) : { ...given };
    return this.untyped().insert(table, { ...(row as object), external_ids: { ...ids, [this.mark.key]: this.mark.value } }, uuidName);
  }

  /** Precondition: no row matches the conditions (e.g. a name is still free when this commits). */
  requireAbsent<T extends TableName<D>>(table: T, conditions: readonly Condition<RowOf<D, T>>[]): number {
    return this.untyped().wait(table, conditions, { columns: ["_uuid"], until: "==", rows: [] });
  }

  /** Precondition: at least one row matches (a mutate or update on no row would silently do nothing). */
  requirePresent<T extends TableName<D>>(table: T, conditions: readonly Condition<RowOf<D, T>>[]): number {
    return this.untyped().wait(table, conditions, { columns: ["_uuid"], until: "!=", rows: [] });
  }

  /**
   * Precondition: the row read (by its uuid) still exists and still carries
   * this mark, and each of `columns` still holds the value read. Guard every
   * update, mutate or delete of an owned row with it.
   */
  requireOwned<T extends OwnableTable<D>, C extends ColumnOf<RowOf<D, T>> = never>(table: T, row: RowRef<RowOf<D, T>, C>, columns: readonly C[] = []): number {
    return this.guard(table, row, columns, true);
  }

  /** Precondition: the row read still exists with each of `columns` as read (it need not be owned, e.g. the root row). */
  requireUnchanged<T extends TableName<D>, C extends ColumnOf<RowOf<D, T>>>(table: T, row: RowRef<RowOf<D, T>, C>, columns: readonly C[]): number {
    return this.guard(table, row, columns, false);
  }

  /** requireOwned, then update the row; new external_ids keep the mark. */
  updateOwned<T extends OwnableTable<D>, C extends ColumnOf<RowOf<D, T>> = never>(
    table: T,
    row: RowRef<RowOf<D, T>, C>,
    changes: RowInputOf<RowOf<D, T>>,
    columns: readonly C[] = [],
  ): number {
    this.requireOwned(table, row, columns);
    let update = changes as Record<string, unknown>;
    const ids = update.external_ids as ReadonlyMap<string, string> | Readonly<Record<string, string>> | undefined;
    if (ids !== undefined) update = { ...update, external_ids: { ...(ids instanceof Map ? Object.fromEntries(ids) : ids), [this.mark.key]: this.mark.value } };
    return this.untyped().update(table, [where("_uuid", "==", row._uuid)], update as RowInputOf<Row>);
  }

  /** requireOwned, then delete the row (root tables; a non-root row goes when its last reference does). */
  deleteOwned<T extends OwnableTable<D>, C extends ColumnOf<RowOf<D, T>> = never>(table: T, row: RowRef<RowOf<D, T>, C>, columns: readonly C[] = []): number {
    this.requireOwned(table, row, columns);
    return this.untyped().delete(table, [where("_uuid", "==", row._uuid)]);
  }

  /** Writes the mark into an existing row's external_ids (a claim: guard it with requireUnchanged). */
  addMark<T extends OwnableTable<D>>(table: T, row: { readonly _uuid: Uuid }): number {
    return this.untyped().mutate(table, [where("_uuid", "==", row._uuid)], [mutation<Row>("external_ids", "insert", { [this.mark.key]: this.mark.value })]);
  }

  /** Removes the mark (only if it still has this value) from a row's external_ids. */
  removeMark<T extends OwnableTable<D>>(table: T, row: { readonly _uuid: Uuid }): number {
    return this.untyped().mutate(table, [where("_uuid", "==", row._uuid)], [mutation<Row>("external_ids", "delete", { [this.mark.key]: this.mark.value })]);
  }

  private guard(table: string, row: { readonly _uuid: Uuid }, columns: readonly string[], owned: boolean): number {
    const values = row as unknown as Record<string, unknown>;
    const expected: Record<string, unknown> = { _uuid: row._uuid };
    for (const c of columns) {
      if (!(c in values)) throw new Error(`${table} row ${row._uuid.id}: column ${c} was not read, so it cannot be guarded`);
      expected[c] = values[c];
    }
    const conditions = [where<Row>("_uuid", "==", row._uuid), ...(owned ? [this.ownedBy()] : [])];
    return this.untyped().wait(table, conditions, {
      columns: ["_uuid", ...columns.filter((c) => c !== "_uuid")],
      until: "==",
      rows: [expected as Row],
    });
  }

  private untyped(): Transaction<UntypedDatabase> {
    return this as unknown as Transaction<UntypedDatabase>;
  }
}
