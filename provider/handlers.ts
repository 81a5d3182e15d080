import { isDeepStrictEqual } from "node:util";
import { sameInputs, mapConnections, validateAgainstSchema, type CheckFailure } from "./model/validate";
import { UNKNOWN, keyedInputs, listedInputs } from "./model/keyed";
import { PartialApplyError, type ResourceHandler } from "./resource-handler";
import { deferredNatLoadBalancerHandler } from "./resources/deferred-nat-load-balancer/handler";
import { distributorAttachmentHandler } from "./resources/distributor-attachment/handler";
import { distributorDeviceHandler } from "./resources/distributor-device/handler";
import { dsrHypervisorFlowsHandler } from "./resources/dsr-hypervisor-flows/handler";
import { healthCheckHandler } from "./resources/health-check/handler";
import { ovsBridgeHandler } from "./resources/ovs-bridge/handler";
import { CREDENTIALS_OUTPUT, liftCredentials, restoreCredentials, type Credentials } from "./secrets";
import { configureStackSsh, stackSshFailures, withStackSsh } from "./stack-ssh";
import { loginsToVerify } from "./model/reach";
import { HOST_CONNECT_PARALLELISM } from "./transport/ovs-host";
import { SshError, mapBounded, verifyLogin } from "./transport/ssh";

/**
 * The implementation behind every dynamic provider: the serialized provider
 * object in state calls `handle(kind, method, args)` of the INSTALLED package,
 * so refresh and destroy run current code. This is the one stable entry point.
 */

type Props = Record<string, unknown>;
const PROVIDER_KEY = "__provider";

// Handler methods are declared with method syntax, so each kind's handler is a ResourceHandler of objects.
const registry: Record<string, ResourceHandler<object, object, object>> = {
  OvsBridge: ovsBridgeHandler,
  DsrHypervisorFlows: dsrHypervisorFlowsHandler,
  DeferredNatLoadBalancer: deferredNatLoadBalancerHandler,
  DistributorDevice: distributorDeviceHandler,
  DistributorAttachment: distributorAttachmentHandler,
  HealthCheck: healthCheckHandler,
};

export type ResourceKind = keyof typeof registry;
/** Every resource kind the entry point serves. */
export const RESOURCE_KINDS: readonly string[] = Object.keys(registry);
export type Method = "configure" | "check" | "diff" | "create" | "read" | "update" | "delete";

function handlerFor(kind: string): ResourceHandler<object, object> {
  const handler = registry[kind];
  if (!handler) throw new Error(`ovslb: unknown resource kind "${kind}"; is the installed ovslb older than the state?`);
  return handler;
}

function withoutProvider(props: Props): Props {
  const { [PROVIDER_KEY]: _ignored, ...rest } = props;
  return rest;
}

function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true;
  if (v === null || typeof v !== "object") return false;
  // for...in, not Object.values: no array per object of a load balancer's 100,000 backends.
  for (const k in v) if (Object.hasOwn(v, k) && containsUnknown((v as Props)[k])) return true;
  return false;
}

function valueAt(root: unknown, property: string): unknown {
  let v = root;
  for (const step of property.match(/[^.[\]]+/g) ?? []) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Props)[step];
  }
  return v;
}

/** Splits outputs into the inputs they record (schema properties, credentials restored) and the observed state. */
function splitOutputs(handler: ResourceHandler<object, object>, outs: Props): { inputs: Props; state: Props } {
  const inputs: Props = {};
  const state: Props = {};
  for (const [k, v] of Object.entries(withoutProvider(outs))) {
    if (k === CREDENTIALS_OUTPUT) continue;
    if (k in handler.schema.properties) inputs[k] = v;
    else state[k] = v;
  }
  // Outputs record lists; listing again costs one walk and accepts outputs written keyed by hand.
  return { inputs: listedInputs(handler.schema, restoreCredentials(inputs, outs[CREDENTIALS_OUTPUT] as Credentials | undefined)), state };
}

function joinOutputs(handler: ResourceHandler<object, object>, inputs: Props, state: object): Props {
  const { value, credentials } = liftCredentials(inputs, handler.schema);
  return { ...value, ...state, [CREDENTIALS_OUTPUT]: credentials };
}

/** Replaces any credential value that leaks into an error message. */
function redacted(e: unknown, inputs: Props | undefined): Error {
  const err = e instanceof Error ? e : new Error(String(e));
  if (!inputs) return err;
  for (const fields of Object.values(liftCredentials(inputs).credentials)) {
    for (const secret of Object.values(fields)) {
      if (secret.length >= 4 && err.message.includes(secret)) err.message = err.message.split(secret).join("[secret]");
    }
  }
  return err;
}

/**
 * The error a create or update throws: a PartialApplyError carries the id and
 * the outputs to record with it (Pulumi's partial state), so the next run
 * updates from what is really on the hosts.
 */
function failure(handler: ResourceHandler<object, object>, e: unknown, inputs: Props, provider: unknown): Error {
  const err = redacted(e, inputs);
  if (!(e instanceof PartialApplyError)) return err;
  const partial = e as PartialApplyError<object>;
  const recorded = (partial.inputs ?? inputs) as Props;
  return Object.assign(new Error(err.message), {
    id: partial.id,
    properties: { ...joinOutputs(handler, recorded, partial.state), [PROVIDER_KEY]: provider },
    reasons: [err.message],
  });
}

/**
 * Refuses inputs before any host is contacted, whoever calls (a caller that
 * skipped check, state edited by hand): new inputs as check would (schema and
 * rules); recorded ones by the schema's grammar alone (every value placed
 * in a flow or command well formed, though a read may have recorded less
 * than the schema asks for), so a rule added later never blocks a refresh,
 * a repair or a delete.
 */
async function refuseUnchecked(kind: string, handler: ResourceHandler<object, object>, inputs: Props, rules: boolean): Promise<void> {
  const failures: CheckFailure[] = rules ? (await checkInputs(kind, inputs)).failures : validateAgainstSchema(handler.schema, inputs, true);
  if (failures.length === 0) return;
  throw new Error(`ovslb: ${kind} inputs refused before contacting any host: ${failures.map((f) => `${f.property}: ${f.reason}`).join("; ")}`);
}

/**
 * Check: the schema, the stack's SSH settings, then (all values known) the
 * defaults and the resource's rules. Takes lists or keyed lists (the engine
 * may hand back what check returned); returns lists, defaulted.
 */
async function checkInputs(kind: string, news: Props): Promise<{ inputs: Props; failures: CheckFailure[] }> {
  const handler = handlerFor(kind);
  const inputs = listedInputs(handler.schema, withoutProvider(news));
  let failures = validateAgainstSchema(handler.schema, inputs).filter((f) => !containsUnknown(valueAt(inputs, f.property)));
  // A bad `ovslb:ssh` is refused here, by every resource, before any host is reached.
  failures = [...stackSshFailures(), ...failures];
  if (failures.length > 0 || containsUnknown(inputs)) return { inputs, failures };
  // Defaults once, here: the engine records the defaulted inputs, and the rules and every method see only them.
  const defaulted = handler.withDefaults(inputs);
  // Connections are checked as the transport will use them: with the stack's SSH settings.
  failures = handler.checkRules?.(mapConnections(handler.schema, defaulted, withStackSsh)) ?? [];
  return { inputs: failures.length === 0 ? (defaulted as Props) : inputs, failures };
}

/** Checked inputs as every method but check takes them: keyed lists listed again, in key order. */
export function asLists(kind: string, inputs: Props): Props {
  return listedInputs(handlerFor(kind).schema, withoutProvider(inputs));
}

/** Inputs as check returns them: each set keyed by identity (model/keyed.ts). */
export function asKeyed(kind: string, inputs: Props): Props {
  return keyedInputs(handlerFor(kind).schema, inputs);
}

/** What the engine records and diffs (and a preview shows): the checked inputs, their sets keyed by identity (model/keyed.ts). */
export async function check(kind: string, _olds: Props, news: Props) {
  const checked = await checkInputs(kind, news);
  return { inputs: asKeyed(kind, checked.inputs), failures: checked.failures };
}

export async function diff(kind: string, _id: string, olds: Props, news: Props) {
  const handler = handlerFor(kind);
  // Lists whose order means nothing ("x-unordered" in schema/) compare as sets: reordering
  // backends, VIPs, gateways or amphorae (or a read that lists them in another order) is no change.
  const before = splitOutputs(handler, olds).inputs;
  const after = listedInputs(handler.schema, withoutProvider(news), before);
  if (sameInputs(handler.schema, before, after)) return { changes: false };
  // Identities are scalars, which canonical order does not touch.
  const oldId = handler.identity(before);
  const newId = handler.identity(after);
  const replaces = Object.keys(newId).filter((k) => !containsUnknown(newId[k]) && !isDeepStrictEqual(oldId[k], newId[k]));
  return { changes: true, replaces, deleteBeforeReplace: replaces.length > 0 };
}

export async function create(kind: string, inputs: Props) {
  const handler = handlerFor(kind);
  const clean = listedInputs(handler.schema, withoutProvider(inputs));
  await refuseUnchecked(kind, handler, clean, true);
  try {
    const { id, state } = await handler.create(handler.withDefaults(clean));
    return { id, outs: joinOutputs(handler, clean, state) };
  } catch (e) {
    throw failure(handler, e, clean, inputs[PROVIDER_KEY]);
  }
}

export async function read(kind: string, id: string, props: Props): Promise<{ id: string; props: Props; inputs: Props }> {
  const handler = handlerFor(kind);
  const { inputs, state } = splitOutputs(handler, props);
  await refuseUnchecked(kind, handler, inputs, false);
  try {
    const actual = await handler.read(id, handler.withDefaults(inputs), state);
    // An empty id tells the engine the resource is gone.
    if (!actual) return { id: "", props: {}, inputs: {} };
    const outs = joinOutputs(handler, actual.inputs as Props, actual.state);
    return { id, props: outs, inputs: keyedInputs(handler.schema, liftCredentials(actual.inputs as Props, handler.schema).value) };
  } catch (e) {
    throw redacted(e, inputs);
  }
}

/**
 * Proves a new way of reaching the hosts before it is recorded: logs in to
 * each distinct login of `inputs` as the transport would (the stack's
 * `ovslb:ssh` under it; host keys verified against the new pins, the new
 * credentials, the jump hosts too) and out again; nothing else is sent.
 * Refused: a plain error (nothing recorded), each refusal starting with the
 * host and the resource, its secrets redacted.
 */
async function verifyReach(kind: string, id: string, handler: ResourceHandler<object, object>, inputs: Props): Promise<void> {
  const logins = loginsToVerify(handler.schema, inputs, withStackSsh);
  const settled = await mapBounded(logins, HOST_CONNECT_PARALLELISM, (c) =>
    verifyLogin(c).then(
      () => undefined,
      (e: unknown) => e,
    ),
  );
  const refused = settled.filter((e): e is Error => e !== undefined).map((e) => (e instanceof Error ? e : new Error(String(e))));
  if (refused.length === 0) return;
  const described = refused.map((e) => {
    const host = e instanceof SshError ? e.hostName : undefined;
    const why = host && e.message.startsWith(`${host}: `) ? e.message.slice(host.length + 2) : e.message;
    return host ? `${host}: ${kind} ${id}: ${why}` : `${kind} ${id}: ${why}`;
  });
  const message = `${described.join("; ")} (only how the hosts are reached changed; this new way was refused, so nothing was recorded and nothing sent)`;
  throw redacted(new Error(message), inputs);
}

export async function update(kind: string, id: string, olds: Props, news: Props) {
  const handler = handlerFor(kind);
  const old = splitOutputs(handler, olds);
  const clean = listedInputs(handler.schema, withoutProvider(news), old.inputs);
  await refuseUnchecked(kind, handler, old.inputs, false);
  await refuseUnchecked(kind, handler, clean, true);
  // Only how the hosts are reached changed (a rotated key, a new user,
  // host-key pin, jump host or timeout): log in to every host the new way
  // (verifyReach), send nothing else, and record it.
  // Not after a partial apply or a read that found drift: the hosts are not what the recorded inputs say.
  // (Identical inputs are no such change: an update the engine would not ask for, so it is done in full.)
  const drifted = Array.isArray(old.state.drift) && old.state.drift.length > 0;
  // The compare with connections reduced to their hosts first: any other change (most updates) fails it, and each compare
  // walks all the inputs (102,400 backends at the largest), so the plain one runs only when it could matter.
  const reachOnly = () => sameInputs(handler.schema, old.inputs, clean, { reach: (c) => ({ host: c.host }) });
  const identical = () => sameInputs(handler.schema, old.inputs, clean);
  if (!drifted && reachOnly() && !identical()) {
    await verifyReach(kind, id, handler, clean);
    return { outs: joinOutputs(handler, clean, old.state) };
  }
  try {
    const state = await handler.update(id, { inputs: handler.withDefaults(old.inputs), state: old.state }, handler.withDefaults(clean));
    return { outs: joinOutputs(handler, clean, state) };
  } catch (e) {
    throw failure(handler, e, clean, news[PROVIDER_KEY]);
  }
}

export async function remove(kind: string, id: string, props: Props) {
  const handler = handlerFor(kind);
  const { inputs, state } = splitOutputs(handler, props);
  await refuseUnchecked(kind, handler, inputs, false);
  try {
    await handler.delete(id, handler.withDefaults(inputs), state);
  } catch (e) {
    throw redacted(e, inputs);
  }
}

/** The stack config the engine hands the provider: `ovslb:ssh`. */
export async function configure(stackSsh: unknown): Promise<void> {
  configureStackSsh(stackSsh);
}

/** The one entry point the serialized provider calls. */
export function handle(kind: string, method: Method, args: unknown[]): Promise<unknown> {
  switch (method) {
    case "configure":
      return configure(args[0]);
    case "check":
      return check(kind, args[0] as Props, args[1] as Props);
    case "diff":
      return diff(kind, args[0] as string, args[1] as Props, args[2] as Props);
    case "create":
      return create(kind, args[0] as Props);
    case "read":
      return read(kind, args[0] as string, args[1] as Props);
    case "update":
      return update(kind, args[0] as string, args[1] as Props, args[2] as Props);
    case "delete":
      return remove(kind, args[0] as string, args[1] as Props);
  }
}
