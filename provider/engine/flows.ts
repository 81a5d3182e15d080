import { CT_STATE_FLAGS, toFlowEntry, type CtStateFlag, type Flow, type FlowEntry, type Match, type MatchText, type Modification, type Protocol } from "../openflow";

/**
 * The generic flow planner: desired flows (typed) against the flows a host
 * actually has (as dumped), to the flow mods that turn one into the other.
 * A flow is identified as OpenFlow identifies it in strict mods: table,
 * priority and match. Pure: nothing here talks to a host.
 */

/** The identity of a flow: table, priority and its match as OVS prints it (field order does not matter). */
export function flowKey(flow: Pick<FlowEntry, "table" | "priority" | "match">): string {
  const fields = Object.entries(flow.match)
    .map(([name, value]) => `${name}=${value}`)
    .sort();
  return `table=${flow.table},priority=${flow.priority},${fields.join(",")}`;
}

/** A flow as one line of text (for messages and tests): key, cookie and actions. */
export function describeFlow(flow: FlowEntry): string {
  return `${flowKey(flow)},cookie=0x${flow.cookie.toString(16)} actions=${flow.actions.join(",")}`;
}

const NUMBER_FIELDS = new Set(["in_port", "tp_src", "tp_dst", "arp_op", "ct_zone"]);
const TEXT_FIELDS = new Set(["dl_src", "dl_dst", "nw_src", "nw_dst", "arp_spa", "arp_tpa", "arp_sha", "arp_tha", "tun_src", "tun_dst"]);
const PROTOCOLS: readonly string[] = ["ip", "arp", "tcp", "udp", "sctp", "icmp"];

/** A match field of a dumped flow that ovslb does not write, so it cannot name the flow in a strict delete. */
export class UnplannableFlowError extends Error {
  constructor(readonly flow: FlowEntry, reason: string) {
    super(`cannot plan a change to flow ${describeFlow(flow)}: ${reason}`);
    this.name = "UnplannableFlowError";
  }
}

/** The typed match of a dumped flow (the inverse of rendering), so a strict delete can name it exactly. */
export function matchFromText(flow: FlowEntry): Match {
  const match: Record<string, unknown> = {};
  for (const [name, text] of Object.entries(flow.match as MatchText)) {
    if (name === "protocol") {
      if (!PROTOCOLS.includes(text)) throw new UnplannableFlowError(flow, `protocol ${text} is not one ovslb writes`);
      match.protocol = text as Protocol;
    } else if (NUMBER_FIELDS.has(name) && /^[0-9]+$/.test(text)) {
      match[name] = Number(text);
    } else if (name === "ct_mark" && /^0x[0-9a-f]+$/.test(text)) {
      match[name] = Number(text);
    } else if (name === "ct_state" && /^([+-][a-z]+)+$/.test(text)) {
      const state: Partial<Record<CtStateFlag, boolean>> = {};
      for (const [, sign, flag] of text.matchAll(/([+-])([a-z]+)/g)) {
        if (!(CT_STATE_FLAGS as readonly string[]).includes(flag)) throw new UnplannableFlowError(flow, `unknown ct_state flag ${flag}`);
        state[flag as CtStateFlag] = sign === "+";
      }
      match.ct_state = state;
    } else if (TEXT_FIELDS.has(name)) {
      match[name] = text;
    } else {
      throw new UnplannableFlowError(flow, `match field ${name}=${text} is not one ovslb writes`);
    }
  }
  return match as Match;
}

const sameActions = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((t, i) => t === b[i]);

/**
 * The modifications that turn `actual` into `desired`, in one order that is
 * valid inside a single bundle: deletes, then modifies, then adds.
 *
 * - `actual` must be flows the caller owns (dumped by its cookie/mask): each
 *   one not desired is deleted, strictly and only if it still has its cookie.
 * - A desired flow present with the same cookie and actions is left alone
 *   (its counters and connections are untouched); with other actions it is
 *   modified in place; with another cookie (of the caller's) it is deleted and
 *   added again in the same bundle; missing, it is added.
 * - Desired flows must have distinct keys (table, priority, match).
 */
export function diffFlows(desired: readonly Flow[], actual: readonly FlowEntry[]): Modification[] {
  const want = new Map<string, { flow: Flow; entry: FlowEntry }>();
  desired.forEach((flow, i) => {
    const entry = toFlowEntry(flow, `desired[${i}]`);
    const key = flowKey(entry);
    if (want.has(key)) throw new Error(`desired flows ${key} appear twice`);
    want.set(key, { flow, entry });
  });
  const have = new Map<string, FlowEntry>();
  const deletes: Modification[] = [];
  const deleteFlow = (e: FlowEntry): Modification => ({ op: "delete-flow", table: e.table, priority: e.priority, match: matchFromText(e), cookie: e.cookie });
  for (const entry of actual) {
    const key = flowKey(entry);
    // Two actual flows cannot share a key on one bridge; keep the first if a caller merged dumps.
    if (have.has(key)) continue;
    have.set(key, entry);
    if (!want.has(key)) deletes.push(deleteFlow(entry));
  }
  const modifies: Modification[] = [];
  const adds: Modification[] = [];
  for (const [key, { flow, entry }] of want) {
    const current = have.get(key);
    if (!current) adds.push({ op: "add-flow", flow });
    else if (current.cookie !== entry.cookie) {
      deletes.push(deleteFlow(current));
      adds.push({ op: "add-flow", flow });
    } else if (!sameActions(current.actions, entry.actions)) modifies.push({ op: "modify-flow", flow });
  }
  return [...deletes, ...modifies, ...adds];
}

/**
 * Flows of others that a desired flow would replace (an add with the same
 * table, priority and match overwrites whatever is there, whoever owns it).
 * Callers refuse to apply while this is non-empty.
 */
export function conflictingFlows(desired: readonly Flow[], others: readonly FlowEntry[]): Array<{ desired: Flow; other: FlowEntry }> {
  const byKey = new Map(others.map((o) => [flowKey(o), o]));
  const conflicts: Array<{ desired: Flow; other: FlowEntry }> = [];
  desired.forEach((flow, i) => {
    const other = byKey.get(flowKey(toFlowEntry(flow, `desired[${i}]`)));
    if (other && other.cookie !== flow.cookie) conflicts.push({ desired: flow, other });
  });
  return conflicts;
}
