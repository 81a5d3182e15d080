import { actionsText, describeFlow, flowKey, toFlowEntry, type DumpedFlow, type Flow, type Modification } from "../openflow";

/**
 * The one flow differ: desired flows (typed) against the flows a bridge
 * actually has (parsed dumps), to the flow mods that turn one into the other.
 * A flow is identified as OpenFlow identifies it in strict mods: table,
 * priority and match. Pure: nothing here talks to a host.
 */

/** An owned flow that cannot be named in a strict delete: its match has fields ovslb does not write. */
export class UnplannableFlowError extends Error {
  constructor(
    readonly flow: DumpedFlow,
    reason: string,
  ) {
    super(`cannot plan a change to flow ${describeFlow(flow)}: ${reason}`);
    this.name = "UnplannableFlowError";
  }
}

function deleteFlow(flow: DumpedFlow): Modification {
  if (flow.otherMatch.length > 0) throw new UnplannableFlowError(flow, `match field ${flow.otherMatch[0]} is not one ovslb writes`);
  return { op: "delete-flow", table: flow.table, priority: flow.priority, match: flow.match, cookie: flow.cookie };
}

/**
 * The modifications that turn `owned` into `desired`, in one order that is
 * valid inside a single bundle: deletes, then modifies, then adds.
 *
 * - `owned` must be flows the caller owns (dumped by its cookie): each one
 *   not desired is deleted, strictly and only if it still has its cookie.
 * - A desired flow present with the same cookie and actions is left alone
 *   (its counters and connections are untouched); with other actions it is
 *   modified in place; with another cookie (of the caller's) it is deleted and
 *   added again in the same bundle; missing, it is added.
 * - Desired flows must have distinct keys (table, priority, match).
 */
export function diffFlows(desired: readonly Flow[], owned: readonly DumpedFlow[]): Modification[] {
  const want = new Map<string, Flow>();
  desired.forEach((flow, i) => {
    toFlowEntry(flow, `desired[${i}]`); // validates every value before anything is planned
    const key = flowKey(flow);
    if (want.has(key)) throw new Error(`desired flows ${key} appear twice`);
    want.set(key, flow);
  });
  const have = new Map<string, DumpedFlow>();
  const deletes: Modification[] = [];
  for (const flow of owned) {
    const key = flowKey(flow);
    // Two flows cannot share a key on one bridge; keep the first if a caller merged dumps.
    if (have.has(key)) continue;
    have.set(key, flow);
    if (!want.has(key)) deletes.push(deleteFlow(flow));
  }
  const modifies: Modification[] = [];
  const adds: Modification[] = [];
  for (const [key, flow] of want) {
    const current = have.get(key);
    if (!current) adds.push({ op: "add-flow", flow });
    else if (current.cookie !== flow.cookie) {
      deletes.push(deleteFlow(current));
      adds.push({ op: "add-flow", flow });
    } else if (actionsText(current.actions) !== actionsText(flow.actions)) modifies.push({ op: "modify-flow", flow });
  }
  return [...deletes, ...modifies, ...adds];
}

/**
 * Flows of others that a desired flow would replace (an add with the same
 * table, priority and match overwrites whatever is there, whoever owns it).
 * Callers refuse to apply while this is non-empty.
 */
export function conflictingFlows(desired: readonly Flow[], others: readonly DumpedFlow[]): Array<{ desired: Flow; other: DumpedFlow }> {
  const byKey = new Map(others.map((o) => [flowKey(o), o]));
  const conflicts: Array<{ desired: Flow; other: DumpedFlow }> = [];
  for (const flow of desired) {
    const other = byKey.get(flowKey(flow));
    if (other && other.cookie !== flow.cookie) conflicts.push({ desired: flow, other });
  }
  return conflicts;
}

/** Whether a flow with this key, cookie and actions is among `flows`. */
export function flowPresent(flows: readonly DumpedFlow[]): (flow: Flow) => boolean {
  const byKey = new Map(flows.map((f) => [flowKey(f), f]));
  return (flow) => {
    const have = byKey.get(flowKey(flow));
    return !!have && have.cookie === flow.cookie && actionsText(have.actions) === actionsText(flow.actions);
  };
}
