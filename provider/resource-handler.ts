import type { CheckFailure } from "./model/validate";

/**
 * What a resource kind implements. Inputs are validated against the schema,
 * then defaulted once (`withDefaults`, I -> D), and only then checked by the
 * rules and handed to the methods: a method or plan never defaults a value.
 */
export interface ResourceHandler<I extends object, S extends object, D extends object = I> {
  readonly schema: { properties: Record<string, unknown> };
  /** The inputs with every default applied; idempotent (recorded inputs are defaulted already). */
  withDefaults(inputs: I): D;
  /** Rules beyond the schema (cross-field, uniqueness, reserved names). */
  checkRules?(inputs: D): CheckFailure[];
  /** The input values that are the resource's identity: a change to any of them replaces it. */
  identity(inputs: I): Record<string, unknown>;
  create(inputs: D): Promise<{ id: string; state: S }>;
  /** The host's actual state as inputs and state; undefined when the resource is gone. */
  read(id: string, inputs: D, state: S): Promise<{ inputs: I; state: S } | undefined>;
  update(id: string, old: { inputs: D; state: S }, news: D): Promise<S>;
  /** Idempotent; removes only what the resource owns. */
  delete(id: string, inputs: D, state: S): Promise<void>;
}

/**
 * A create or update that changed some hosts and not others, or cannot tell
 * whether it did: `state` says only what is true after it (the ids of
 * anything that may now be on a host, lastApply only where a change was
 * applied, drift naming the hosts that were not or may not have been). The
 * engine records `inputs` and `state` as the resource's outputs together with
 * the error (Pulumi's partial state: ErrorResourceInitFailed) and updates the
 * resource on the next run, which converges from there.
 */
export class PartialApplyError<S extends object = object> extends Error {
  constructor(
    message: string,
    readonly id: string,
    readonly state: S,
    /** The inputs to record, when not the ones the call was given (e.g. with gateways still to clean up). */
    readonly inputs?: object,
  ) {
    super(message);
    this.name = "PartialApplyError";
  }
}
