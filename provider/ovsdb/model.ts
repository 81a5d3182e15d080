/**
 * Typed rows: a database model names the tables of one database and the
 * type of each table's rows (generated into models.generated.ts by
 * tools/ovsdb-modelgen.js from the .ovsschema files), so a Transaction built
 * on it checks table and column names, and the values given for them, at
 * compile time, and its select results come back as typed rows.
 *
 * A row holds its columns by their OVSDB names, as decoding gives them:
 * - a scalar column (min 1, max 1) is its atom: string, number, boolean, Uuid;
 * - an optional column (min 0, max 1) is `[] | [atom]`;
 * - a set column is an array, a map column a Map;
 * - string columns with an enum are unions of its values.
 * Enums and columns are those of the installed schema; a newer server may
 * hold enum values not listed, and columns added later are optional
 * properties (see LATER_COLUMNS in tools/ovsdb-modelgen.js).
 */
import type { NamedUuid, Row, RowInput, TableSchema, Uuid, ValueInput } from "./encoding";

/** One database: its name, the version the model was generated from, and per table its column types. */
export interface DatabaseModel<N extends string = string, T extends object = Record<string, Row>> {
  readonly name: N;
  readonly version: string;
  readonly tables: { readonly [K in keyof T]: TableSchema };
  /** Never set: carries the row types for the compiler. */
  readonly rowTypes?: T;
}

/** A model that checks nothing: what `new Transaction()` builds on. */
export type UntypedDatabase = DatabaseModel<string, Record<string, Row>>;

export type TablesOf<D extends DatabaseModel> = NonNullable<D["rowTypes"]>;
export type TableName<D extends DatabaseModel> = keyof TablesOf<D> & string;
export type RowOf<D extends DatabaseModel, T extends TableName<D>> = TablesOf<D>[T];
export type ColumnOf<R> = keyof R & string;

/** True for the untyped Row (any column name), so the untyped API keeps its old types exactly. */
export type IsUntyped<R> = string extends keyof R ? true : false;

type AtomInputOf<A> = A extends Uuid ? Uuid | NamedUuid : A;

/**
 * What may be written where a column holds V: an optional or set column takes
 * an array, a map column a Map or (string keys) a plain object, and a uuid may
 * be a NamedUuid of a row inserted earlier in the same transaction. Every row
 * read is also valid input, so a row read can be written back (e.g. in a wait).
 */
export type InputOf<V> =
  V extends Map<infer K, infer W>
    ? ReadonlyMap<AtomInputOf<K>, AtomInputOf<W>> | (K extends string ? Readonly<Record<string, AtomInputOf<W>>> : never)
    : V extends readonly (infer E)[]
      ? readonly AtomInputOf<E>[]
      : AtomInputOf<V>;

/** The value a condition or wait row gives for column C of R. */
export type ColumnInput<R, C extends keyof R> = IsUntyped<R> extends true ? ValueInput : InputOf<Exclude<R[C], undefined>>;

/** The columns an insert or update may set: any of R's, never `_uuid` or `_version`. */
export type RowInputOf<R> =
  IsUntyped<R> extends true ? RowInput : { readonly [C in Exclude<keyof R, "_uuid" | "_version">]?: InputOf<Exclude<R[C], undefined>> };

/** A row as a wait compares it: exactly the columns C (which may include `_uuid`). */
export type WaitRowOf<R, C extends keyof R> = IsUntyped<R> extends true ? RowInput : { readonly [K in C]: ColumnInput<R, K> };

/** A mutation's value: as the column takes it, plus keys alone to delete from a map. */
export type MutationInput<R, C extends keyof R> =
  IsUntyped<R> extends true ? ValueInput : InputOf<Exclude<R[C], undefined>> | (Exclude<R[C], undefined> extends Map<infer K, unknown> ? readonly K[] : never);
