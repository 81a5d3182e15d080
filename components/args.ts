import * as pulumi from "@pulumi/pulumi";
import common from "../schema/common.json";
import deferredNatLoadBalancer from "../schema/deferred-nat-load-balancer.json";
import distributorAttachment from "../schema/distributor-attachment.json";
import dsrHypervisorFlows from "../schema/dsr-hypervisor-flows.json";
import { joinProperty, validateAgainstSchema, type CheckFailure } from "../provider/model/validate";

/**
 * A component's arguments as a program gives them: every scalar (string,
 * number, boolean) may be a `pulumi.Input` (a plain value, a Promise or an
 * Output of another resource); the lists and objects that hold them are
 * plain, since what a component registers follows from them.
 */
export type Leaves<T> = [T] extends [string | number | boolean]
  ? pulumi.Input<T>
  : [T] extends [readonly (infer E)[]]
    ? readonly Leaves<E>[]
    : { [K in keyof T]: Leaves<NonNullable<T[K]>> };

/**
 * A component's refused arguments: each failure names the property
 * (`args.vips[0].backends[2].hypervisor`) and why. A RunError: the program
 * fails with the message alone, no stack trace.
 */
export class ComponentArgsError extends pulumi.RunError {
  constructor(
    /** The component, as `Kind "name"`. */
    readonly component: string,
    readonly failures: readonly CheckFailure[],
  ) {
    super(`${component}: ${failures.map((f) => `${f.property === "" ? "args" : `args.${f.property}`}: ${f.reason}`).join("; ")}`);
    this.name = "ComponentArgsError";
    // What the program runner prints for a failure after the program's body ran: the refusal, no stack (a bad input, not a bug).
    this.stack = this.message;
  }
}

/** Resolved later: an Output, or a Promise. */
export function isUnresolved(v: unknown): boolean {
  return pulumi.Output.isInstance(v) || v instanceof Promise;
}

/** Walks plain lists and objects (never into a resource), calling `leaf` with each unresolved value and its property path. */
function walk(v: unknown, path: string, leaf: (path: string) => unknown): unknown {
  if (isUnresolved(v)) return leaf(path);
  if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`, leaf));
  if (v === null || typeof v !== "object" || pulumi.Resource.isInstance(v)) return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, joinProperty(path, k), leaf)]));
}

/** No Output or Promise anywhere in it: a child given it gets exactly this value. */
export function isPlain(v: unknown): boolean {
  let plain = true;
  walk(v, "", () => (plain = false));
  return plain;
}

/** `f(value)` now when the value is plain (the child gets exactly that), else an Output of it once the value resolves. */
export function derive<T, R>(value: T, f: (resolved: pulumi.Unwrap<T>) => R): R | pulumi.Output<R> {
  return isPlain(value) ? f(value as pulumi.Unwrap<T>) : pulumi.output(value).apply<R>((v) => f(v));
}

/** `value`, held back until the arguments are checked (`gate`, from checkArgs): a child's input that fails with the refusal. */
export function gated<T>(gate: pulumi.Output<true> | undefined, value: T): T {
  return (gate ? pulumi.all([gate, value]).apply(([, v]) => v) : value) as T;
}

/** A failure for a value that must be plain (it decides which child resources exist), or none; a list's or object's own values are not looked at. */
export function mustBePlain(value: unknown, property: string, why: string): CheckFailure[] {
  return isUnresolved(value) ? [{ property, reason: `must be a plain value, not an Output or a Promise: ${why}` }] : [];
}

const DOCUMENTS: Record<string, object> = {
  "deferred-nat-load-balancer.json": deferredNatLoadBalancer,
  "distributor-attachment.json": distributorAttachment,
  "dsr-hypervisor-flows.json": dsrHypervisorFlows,
};

/**
 * A component schema (schema/components/) made self-contained for the
 * resources' validator: what it takes from a resource schema is copied in
 * (with that schema's own references), and common.json is referred to by
 * its id, which the validator knows. The resource schemas stay the one
 * source of the values' grammar.
 */
export function componentSchema(schema: object): object {
  const bundle = (node: unknown, doc: string, depth: number): unknown => {
    if (depth > 64) throw new Error("schema: $ref nesting too deep");
    if (Array.isArray(node)) return node.map((n) => bundle(n, doc, depth + 1));
    if (node === null || typeof node !== "object") return node;
    const { $ref, ...rest } = node as Record<string, unknown>;
    const own = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, bundle(v, doc, depth + 1)]));
    if (typeof $ref !== "string") return own;
    const [file, pointer = ""] = $ref.split("#");
    const target = file === "" ? doc : file.replace(/^\.\.\//, "");
    if (target === "common.json") return { $ref: `${common.$id}#${pointer}`, ...own };
    let resolved: unknown = DOCUMENTS[target];
    for (const step of pointer.split("/").filter(Boolean)) resolved = (resolved as Record<string, unknown> | undefined)?.[step];
    if (!resolved || typeof resolved !== "object") throw new Error(`schema: cannot resolve $ref ${$ref}`);
    return { ...(bundle(resolved, target, depth + 1) as object), ...own };
  };
  return bundle(schema, "", 0) as object;
}

/** A component's rules besides its schema. */
export interface ArgsRules<A> {
  /** Rules on what must be plain (names, placements, the lists): checked at construction. */
  structural(args: A): CheckFailure[];
  /** Rules on values that may come from Outputs: checked at construction when plain, else once they resolve. */
  resolved(args: pulumi.Unwrap<A>): CheckFailure[];
}

/**
 * Checks a component's arguments against its schema and rules. Plain
 * values are checked at construction: a refusal throws a ComponentArgsError
 * before anything is registered. When some are Outputs, what can be checked
 * is checked at construction, and the rest once they resolve: the returned
 * gate is an Output that fails with the ComponentArgsError (the children's
 * inputs held back by it fail, and so the program, with that message); while
 * values are unknown (a preview) it is unknown and refuses nothing.
 */
export function checkArgs<A extends object>(component: string, schema: object, args: A, rules: ArgsRules<A>): pulumi.Output<true> | undefined {
  const unresolved: string[] = [];
  const known = walk(args, "", (path) => (unresolved.push(path), UNRESOLVED));
  const resolvedLater = (f: CheckFailure) => unresolved.some((p) => f.property === p || f.property.startsWith(`${p}.`) || f.property.startsWith(`${p}[`));
  const refuse = (failures: CheckFailure[]) => {
    if (failures.length > 0) throw new ComponentArgsError(component, failures);
  };
  refuse(validateAgainstSchema(schema, known).filter((f) => !resolvedLater(f)));
  refuse(rules.structural(args));
  if (unresolved.length === 0) {
    refuse(rules.resolved(args as pulumi.Unwrap<A>));
    return undefined;
  }
  const checked = pulumi.output(args).apply((resolved) => {
    refuse([...validateAgainstSchema(schema, resolved), ...rules.resolved(resolved)]);
    return true as const;
  });
  // The result is a yes or a refusal that never echoes a value: no secret in it.
  return pulumi.unsecret(checked);
}

/** Stands for a value not known yet in the check at construction. */
const UNRESOLVED = Object.freeze({ unresolved: true });

/**
 * A component's value passed on as a child resource's argument, unchanged.
 * The resources' argument types spread a union over Input
 * (`Input<"tcp"> | Input<"udp">`), which does not admit the
 * `Output<"tcp" | "udp">` a component is given; at run time they are one.
 */
export function childInput<T>(value: unknown): T {
  return value as T;
}
