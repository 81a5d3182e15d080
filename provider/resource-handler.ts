import type { CheckFailure } from "./model/validate";

/** What a resource kind implements. Inputs are validated and defaulted before any method runs. */
export interface ResourceHandler<I extends object, S extends object> {
  readonly schema: { properties: Record<string, unknown> };
  withDefaults(inputs: I): I;
  /** Rules beyond the schema (cross-field, uniqueness, reserved names). */
  checkRules?(inputs: I): CheckFailure[];
  /** The input values that are the resource's identity: a change to any of them replaces it. */
  identity(inputs: I): Record<string, unknown>;
  create(inputs: I): Promise<{ id: string; state: S }>;
  /** The host's actual state as inputs and state; undefined when the resource is gone. */
  read(id: string, inputs: I, state: S): Promise<{ inputs: I; state: S } | undefined>;
  update(id: string, old: { inputs: I; state: S }, news: I): Promise<S>;
  /** Idempotent; removes only what the resource owns. */
  delete(id: string, inputs: I, state: S): Promise<void>;
}
