export {
  type Atom,
  type AtomInput,
  type AtomicType,
  type ColumnType,
  type DatabaseSchema,
  type Row,
  type RowInput,
  type TableSchema,
  type Value,
  type ValueInput,
  NamedUuid,
  Uuid,
} from "./encoding";
export type { ColumnInput, ColumnOf, DatabaseModel, InputOf, RowInputOf, RowOf, TableName, TablesOf, UntypedDatabase } from "./model";
export {
  type Condition,
  type ConditionFunction,
  type Mutation,
  type Mutator,
  type Operation,
  type OperationResult,
  type Select,
  type TransactionFailure,
  type WaitOptions,
  OvsdbTransactionError,
  Transaction,
  TransactionResults,
  describeOperation,
  mutation,
  where,
} from "./transaction";
export * from "./models.generated";
export * from "./owned";
