import { renderAction, renderMatchValue } from "./render";
import type { Action, BucketEntry, DumpedFlow, Flow } from "./types";

/**
 * Equality of flows and buckets as OVS sees it: by their printed text. A
 * parsed dump renders back to exactly what OVS printed (parse.ts keeps what
 * would not as text), so comparing renderings compares what is on the host.
 */

/** An action as OVS prints it. */
export function actionText(action: Action): string {
  return action.type === "other" ? action.text : renderAction(action);
}

export function actionsText(actions: readonly Action[]): string {
  return actions.map(actionText).join(",");
}

/** The identity of a flow in strict mods: table, priority and its match (field order does not matter). */
export function flowKey(flow: Flow | DumpedFlow): string {
  const fields = Object.entries(flow.match).map(([name, value]) =>
    name === "protocol" ? String(value) : `${name}=${renderMatchValue(name, value) ?? JSON.stringify(value)}`,
  );
  if ("otherMatch" in flow) fields.push(...flow.otherMatch);
  return `table=${flow.table},priority=${flow.priority},${fields.sort().join(",")}`;
}

/** A flow as one line of text (for messages): key, cookie and actions. */
export function describeFlow(flow: Flow | DumpedFlow): string {
  return `${flowKey(flow)},cookie=0x${flow.cookie.toString(16)} actions=${actionsText(flow.actions)}`;
}

/** The MAC a bucket's actions send to: the value of its set_field to eth_dst. */
export function bucketMac(actions: readonly Action[]): string | undefined {
  for (const a of actions) if (a.type === "set_field" && a.field === "eth_dst") return String(a.value);
  return undefined;
}

/** Two buckets that OVS would print alike. */
export function sameBucket(a: BucketEntry, b: BucketEntry): boolean {
  return (
    a.bucketId === b.bucketId &&
    a.weight === b.weight &&
    a.watchPort === b.watchPort &&
    a.watchGroup === b.watchGroup &&
    actionsText(a.actions) === actionsText(b.actions)
  );
}
