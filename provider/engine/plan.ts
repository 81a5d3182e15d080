import { describeFlow, flowKey, toFlowEntry, type DumpedFlow, type Flow, type Group, type GroupEntry, type Modification } from "../openflow";
import { conflictingFlows, diffFlows } from "./flows";
import type { ApplySummary } from "../model/outputs.generated";
import { diffGroup } from "./groups";

/**
 * The bridge convergence plan, shared by every resource that owns flows and
 * groups on a bridge. A resource only says what it wants (its intent) and
 * what it owns (its cookie, and the group ids it recorded); this module
 * checks ownership against what the bridge has and plans the one bundle.
 */

/** What one bridge has, as observed before planning. */
export interface ObservedBridge {
  /** OpenFlow port number of each of the bridge's interfaces that has one, by name. */
  ports: ReadonlyMap<string, number>;
  /** The flows in the observed scope (see FlowScope): the owner's and, for conflict checks, everyone else's. */
  flows: readonly DumpedFlow[];
  groups: readonly GroupEntry[];
}

/** What a resource wants on one bridge. */
export interface BridgeIntent {
  /** Names the owner on every flow it has: ovslb changes only flows carrying its owner's cookie. */
  cookie: bigint;
  flows: readonly Flow[];
  groups: readonly Group[];
  /**
   * Groups carry no cookie: besides those its flows reference, a group is the
   * owner's when its id is recorded here and every bucket it holds has an id
   * the owner gave (group id -> bucket ids).
   */
  recordedGroups?: ReadonlyMap<number, ReadonlySet<number>>;
  /** Who the owner is, for refusals ("load balancer web"). */
  owner: string;
  /** What a desired flow or group is for, for refusals ("VIP tcp:10.0.0.1:80"). */
  purpose?: (item: { flow: Flow } | { group: Group }) => string | undefined;
}

/** Something the bridge holds that is not the owner's and that the intent would overwrite. */
export class OwnershipConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OwnershipConflictError";
  }
}

export const ownedFlows = (observed: Pick<ObservedBridge, "flows">, cookie: bigint) => observed.flows.filter((f) => f.cookie === cookie);

/** The groups an owned flow sends to. */
export function referencedGroups(flows: readonly Pick<Flow, "actions">[]): Set<number> {
  return new Set(flows.flatMap((f) => f.actions.flatMap((a) => (a.type === "group" ? [a.groupId] : []))));
}

/** The owner's groups on the bridge: referenced by its flows, or recorded and holding only bucket ids it gave. */
export function ownedGroupIds(observed: ObservedBridge, intent: Pick<BridgeIntent, "cookie" | "recordedGroups">): Set<number> {
  const owned = referencedGroups(ownedFlows(observed, intent.cookie));
  for (const g of observed.groups) {
    const buckets = intent.recordedGroups?.get(g.groupId);
    if (buckets && g.buckets.every((b) => buckets.has(b.bucketId))) owned.add(g.groupId);
  }
  return new Set([...owned].filter((id) => observed.groups.some((g) => g.groupId === id)));
}

/** Group ids on the bridge that are not the owner's. */
export function foreignGroupIds(observed: ObservedBridge, intent: Pick<BridgeIntent, "cookie" | "recordedGroups">): Set<number> {
  const owned = ownedGroupIds(observed, intent);
  return new Set(observed.groups.map((g) => g.groupId).filter((id) => !owned.has(id)));
}

/**
 * The one bundle that takes the bridge from `observed` to `intent`, in an
 * order valid inside it: group changes (new groups exist before flows use
 * them), then flow changes, then deletes of the owner's groups nobody wants
 * any more (after the flows that used them). Refuses, before anything is
 * sent, to overwrite a flow or a group that is not the owner's.
 * `where` prefixes refusals ("gw1 (172.30.0.11): bridge br-seg").
 */
export function planBridge(where: string, intent: BridgeIntent, observed: ObservedBridge): Modification[] {
  intent.flows.forEach((flow, i) => toFlowEntry(flow, `flows[${i}]`)); // every value checked before any comparison
  const owned = ownedGroupIds(observed, intent);
  const groupsById = new Map(observed.groups.map((g) => [g.groupId, g]));
  const purpose = (item: { flow: Flow } | { group: Group }, fallback: string) => intent.purpose?.(item) ?? fallback;

  const mine = ownedFlows(observed, intent.cookie);
  const others = observed.flows.filter((f) => f.cookie !== intent.cookie);
  const [conflict] = conflictingFlows(intent.flows, others);
  if (conflict) {
    const { desired, other } = conflict;
    throw new OwnershipConflictError(
      `${where}: a flow of cookie 0x${other.cookie.toString(16)} already matches ${purpose({ flow: desired }, flowKey(desired))} at priority ${desired.priority}; refusing to replace it (${describeFlow(other)})`,
    );
  }

  const groupMods: Modification[] = [];
  for (const group of intent.groups) {
    const have = groupsById.get(group.groupId);
    if (have && !owned.has(have.groupId)) {
      const what = purpose({ group }, "");
      throw new OwnershipConflictError(
        `${where}: group ${have.groupId}${what ? ` (for ${what})` : ""} exists and is not owned by ${intent.owner}; refusing to overwrite it`,
      );
    }
    groupMods.push(...diffGroup(group, have));
  }
  const wanted = new Set(intent.groups.map((g) => g.groupId));
  const groupDeletes: Modification[] = [...owned].filter((id) => !wanted.has(id)).map((groupId) => ({ op: "delete-group", groupId }));
  return [...groupMods, ...diffFlows(intent.flows, mine), ...groupDeletes];
}

/**
 * How many flows the owner holds on the bridge once `mods` (a planned
 * bundle, which adds and deletes only the owner's flows) is applied to a
 * bridge that held `before`: recorded, it lets a later partial read notice
 * a bridge that lost flows (a restart, a re-created bridge, a hand edit)
 * with one dump-aggregate.
 */
export function ownedFlowCountAfter(before: number, mods: readonly Modification[]): number {
  let n = before;
  for (const m of mods) {
    if (m.op === "add-flow") n++;
    else if (m.op === "delete-flow") n--;
    else if (m.op === "delete-flows") throw new Error("ownedFlowCountAfter: a bulk delete-flows cannot be counted");
  }
  return n;
}

/** What an apply sent to one bridge, as resources record it in their `lastApply` output (schema/common.json, applySummary). */
export type { ApplySummary };

export function summarizeApply(mods: readonly Modification[], sent: { messages: number; bytes: number } | undefined): ApplySummary {
  const operations: Record<string, number> = {};
  for (const m of mods) operations[m.op] = (operations[m.op] ?? 0) + (m.op === "insert-buckets" ? m.buckets.length : 1);
  return { messages: sent?.messages ?? 0, bytes: sent?.bytes ?? 0, operations };
}
