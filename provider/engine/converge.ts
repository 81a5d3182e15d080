import type { HostOvsVersion } from "../model/ovs-versions";
import { renderFinding, type DriftFinding } from "../model/drift";
import type { OvsHost } from "../model/inputs.generated";
import { PartialApplyError } from "../resource-handler";
import { OvsdbTransactionError } from "../ovsdb";
import { OpenFlowError } from "../transport/openflow-bridge";
import { operationLock, withAllOvsHosts, type OvsHostSession } from "../transport/ovs-host";
import { observeOvsVersions } from "./ovs-version";

/**
 * The one sequence every change of a resource follows, on all its hosts:
 * lock -> observe and plan every host -> apply every host at once ->
 * classify each host's outcome (applied / refused / unknown) -> the state
 * that is true (partial when not every host applied) -> the hosts' OVS
 * versions in the outputs. Creates, updates and deletes all go through it.
 *
 * A resource says only what is its own: how to plan a host (reading it
 * first), how to apply a plan, what to record once every host applied, and
 * what is true when some did not.
 */

/** How a resource names one of its hosts in messages ("root@172.30.0.11:22 (gw1)"). */
export const hostLabel = (session: OvsHostSession, role?: string) => (role ? `${session.hostName} (${role})` : session.hostName);

/**
 * The one error convention: every error of a change starts with the
 * resource (converge adds it) and then the host it is about, as hostLabel
 * names it. A host's reads and plans run through this, so a refusal that
 * does not name its host yet gets it.
 */
export async function onHost<R>(where: string, fn: () => R | Promise<R>): Promise<R> {
  try {
    return await fn();
  } catch (e) {
    const host = where.split(" ")[0];
    if (e instanceof Error && !e.message.startsWith(host)) e.message = `${where}: ${e.message}`;
    throw e;
  }
}

/** What became of one host's apply. */
export type HostOutcome<A> =
  | { applied: A }
  /** OVS answered and refused: the host holds none of the change. */
  | { refused: Error }
  /** The connection was cut or the command killed: the host holds all of the change or none of it, not known which. */
  | { unknown: Error };

/** A failed apply: refused (nothing applied) or unknown (may have been). */
export function classify<A>(e: unknown): HostOutcome<A> {
  const err = e instanceof Error ? e : new Error(String(e));
  // OVS answered and refused: a bundle or a transaction is applied whole or not at all. A withdrawn bundle was never committed.
  if ((err instanceof OpenFlowError && err.kind === "refused") || err instanceof OvsdbTransactionError || err instanceof WithdrawnError)
    return { refused: err };
  return { unknown: err };
}

/**
 * Holds a host's apply between sending its change and committing it until
 * every host of the change has sent its own, so that all commit together:
 * the window in which the hosts disagree is then the commits' spread, not
 * the sends'. A host that failed before it was staged withdraws the others'
 * changes, so a change that cannot reach every host reaches none.
 */
export interface CommitGate {
  /** Whether other hosts take part (staging first costs one more round trip, worth it only then). */
  readonly together: boolean;
  /** This host is staged: resolves once every host is (or finished without staging); rejects with WithdrawnError when one failed first. */
  staged(): Promise<void>;
}

/** A host's change withdrawn before its commit, because another host's failed first: nothing of it was applied. */
export class WithdrawnError extends Error {
  override name = "WithdrawnError";
}

/**
 * Whether a change on several hosts stages every host's bundle before any
 * commits (the default). false sends and commits each host's bundle as soon
 * as it is ready, as ovslb did before: the scale-fanout benchmark's baseline.
 */
export const fanOut = { commitTogether: true };

/** The gates of one change's hosts, and how each host's apply ended (which counts as staged for the others). */
function commitGates(wheres: readonly string[]): { gate: CommitGate; settled(failure?: unknown): void }[] {
  let waiting = wheres.length;
  let withdrawn = false;
  let release: () => void = () => undefined;
  let withdraw: (e: WithdrawnError) => void = () => undefined;
  const everyHost = new Promise<void>((resolve, reject) => {
    release = resolve;
    withdraw = reject;
  });
  everyHost.catch(() => undefined);
  const together = fanOut.commitTogether && wheres.length > 1;
  return wheres.map((where) => {
    let counted = false;
    const count = () => {
      counted = true;
      if (--waiting === 0 && !withdrawn) release();
    };
    return {
      gate: {
        together,
        staged() {
          if (!counted) count();
          return everyHost;
        },
      },
      settled(failure?: unknown) {
        if (counted) return;
        if (failure === undefined) return count();
        counted = true;
        withdrawn = true;
        const why = failure instanceof Error ? failure.message : JSON.stringify(failure);
        withdraw(new WithdrawnError(`withdrawn before its commit, because ${where} failed first: ${why}`));
      },
    };
  });
}

/** One host's part of the change: where it is and what its plan is. */
export interface HostPlan<P> {
  session: OvsHostSession;
  /** How messages name the host (hostLabel). */
  where: string;
  plan: P;
}

export interface Change<P, A, S extends object> {
  /** The resource's id: it keys the operation lock and starts every error. */
  resource: string;
  hosts: readonly OvsHost[];
  /**
   * Reads and plans every host (steps that must come first, such as ports a
   * plan needs the numbers of, go here too). A refusal throws before any
   * host is applied.
   */
  plan(sessions: readonly OvsHostSession[]): Promise<HostPlan<P>[]>;
  /** Applies one host's plan: one OpenFlow bundle and/or one OVSDB transaction, committed through `gate` where it can be staged. */
  apply(host: HostPlan<P>, gate: CommitGate): Promise<A>;
  /** Once every host applied: what the resource records (it may read back what it applied). */
  finish(hosts: readonly HostPlan<P>[], applied: readonly A[]): Promise<S>;
  /**
   * When some hosts applied and others did not (or may have): the state that
   * is true (ids of anything now on a host, what was applied where), with
   * `findings` naming the hosts that were not (not-applied, may-be-applied)
   * or, when a step after every host's apply failed, the resource
   * (failed-after-apply). Without it, such a change fails with a plain error.
   */
  partial?(hosts: readonly HostPlan<P>[], outcomes: readonly HostOutcome<A>[], findings: DriftFinding[]): S;
}

/** The state, with each host's Open vSwitch version as read reports it (so a refresh right after an apply reads no change). */
export type Converged<S> = S & { ovsVersions: Record<string, HostOvsVersion> };

/** "changed A, B; C: not changed: why; D: may or may not have been changed: why", and the failures alone. */
export function describeOutcomes(hosts: readonly { where: string }[], outcomes: readonly HostOutcome<unknown>[]): { message: string; failed: DriftFinding[] } {
  const changed = hosts.filter((_, i) => "applied" in outcomes[i]).map((h) => h.where);
  const failed = outcomes.flatMap((o, i): DriftFinding[] =>
    "refused" in o
      ? [{ host: hosts[i].where, kind: "not-applied", object: "this change", detail: o.refused.message }]
      : "unknown" in o
        ? [{ host: hosts[i].where, kind: "may-be-applied", object: "this change", detail: o.unknown.message }]
        : [],
  );
  return { message: `changed ${changed.length > 0 ? changed.join(", ") : "no host"}; ${failed.map(renderFinding).join("; ")}`, failed };
}

async function applyAll<P, A>(change: Change<P, A, object>, plans: readonly HostPlan<P>[]): Promise<HostOutcome<A>[]> {
  const gates = commitGates(plans.map((h) => h.where));
  return Promise.all(
    plans.map((h, i) =>
      change.apply(h, gates[i].gate).then(
        (applied): HostOutcome<A> => {
          gates[i].settled();
          return { applied };
        },
        (e: unknown) => {
          gates[i].settled(e);
          return classify<A>(e);
        },
      ),
    ),
  );
}

/** Runs a change on all its hosts (see the module comment). */
export async function converge<P, A, S extends object>(change: Change<P, A, S>): Promise<Converged<S>> {
  const { resource } = change;
  let plans: HostPlan<P>[] = [];
  let applied: A[] | undefined;
  try {
    return await withAllOvsHosts(
      change.hosts,
      async (sessions) => {
        plans = await change.plan(sessions);
        const outcomes = await applyAll(change, plans);
        if (!outcomes.every((o) => "applied" in o)) {
          const { message, failed } = describeOutcomes(plans, outcomes);
          const text = `${resource}: ${message}`;
          if (!change.partial || outcomes.every((o) => "refused" in o)) throw new ConvergeError(text);
          throw new PartialApplyError(text, resource, change.partial(plans, outcomes, failed));
        }
        applied = outcomes.flatMap((o) => ("applied" in o ? [o.applied] : []));
        const state = await change.finish(plans, applied);
        return { ...state, ovsVersions: await observeOvsVersions(sessions) };
      },
      operationLock(resource),
    );
  } catch (e) {
    if (e instanceof PartialApplyError || e instanceof ConvergeError) throw e;
    const err = e instanceof Error ? e : new Error(String(e));
    if (applied && change.partial) {
      // Every host took its change and a later step failed: the state must say what the hosts hold.
      const finding: DriftFinding = { host: resource, kind: "failed-after-apply", object: plans.map((h) => h.where).join(", "), detail: err.message };
      throw new PartialApplyError(
        renderFinding(finding),
        resource,
        change.partial(
          plans,
          applied.map((a) => ({ applied: a })),
          [finding],
        ),
      );
    }
    // A failure before anything was applied (a host unreachable, a bridge missing, a refusal while planning).
    if (applied) err.message = `${resource}: changed every host (${plans.map((h) => h.where).join(", ")}), then failed: ${err.message}`;
    else if (!err.message.startsWith(`${resource}: `)) err.message = `${resource}: no host was changed: ${err.message}`;
    throw err;
  }
}

/** A change that failed with every host's outcome already in its message. */
class ConvergeError extends Error {
  override name = "ConvergeError";
}

/** One host's part of a change, for a resource that lives on one host. */
export interface HostChange<P, A, S extends object> {
  /** Reads the host and plans it (prerequisites first); a refusal throws before anything is applied. */
  plan(session: OvsHostSession, where: string): Promise<P>;
  /** Applies the plan: one OpenFlow bundle and/or one OVSDB transaction. */
  apply(session: OvsHostSession, plan: P): Promise<A>;
  /** What the resource records once applied (nothing, for a delete). */
  finish?(session: OvsHostSession, plan: P, applied: A): Promise<S>;
}

/** converge for a resource on one host: the same lock, outcome and error convention, without the fan-out. */
export function convergeOn<P, A, S extends object = Record<never, never>>(resource: string, host: OvsHost, change: HostChange<P, A, S>): Promise<Converged<S>> {
  return converge<P, A, S>({
    resource,
    hosts: [host],
    plan: async ([session]) => {
      const where = hostLabel(session);
      return [{ session, where, plan: await change.plan(session, where) }];
    },
    apply: ({ session, plan }) => change.apply(session, plan),
    finish: async ([h], [applied]) => (change.finish ? change.finish(h.session, h.plan, applied) : ({} as S)),
  });
}
