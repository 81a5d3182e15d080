import { isDeepStrictEqual } from "node:util";
import { sameBucket, toGroupEntry, type Group, type GroupEntry, type InsertPosition, type Modification, type SelectBucket } from "../openflow";

/**
 * The one group differ. A select group whose type, selection method and
 * fields already match changes only by bucket, so no other connection moves
 * (OVS's hash selection is rendezvous hashing keyed on bucket ids: a change
 * moves only the flows of the buckets it touches):
 * - a bucket no longer wanted is removed;
 * - a bucket whose weight, liveness or actions changed keeps its id AND its
 *   position: it is removed and re-inserted right after its predecessor, in
 *   the same bundle (an in-place takeover of a slot looks like nothing else
 *   happened);
 * - a missing bucket (new, or deleted by hand) is inserted right after its
 *   predecessor in desired order, so every gateway holds the same order;
 * - where buckets watch a port or group, inserts become one modify of the
 *   same buckets in the same order (OVS refuses an insert with liveness).
 * Anything else that differs (type, method, fields) rewrites the group whole:
 * that re-hashes every connection anyway.
 */
export function diffGroup(desired: Group, actual: GroupEntry | undefined): Modification[] {
  const want = toGroupEntry(desired);
  if (!actual) return [{ op: "add-group", group: desired }];
  const sameSelection =
    actual.type === want.type &&
    actual.selectionMethod === want.selectionMethod &&
    actual.selectionMethodParam === undefined &&
    isDeepStrictEqual([...actual.fields], [...want.fields]);
  if (!sameSelection || desired.type !== "select") {
    const same = sameSelection && actual.buckets.length === want.buckets.length && actual.buckets.every((b, i) => sameBucket(b, want.buckets[i]));
    return same ? [] : [{ op: "modify-group", group: desired }];
  }

  const groupId = desired.groupId;
  const wanted = new Map(want.buckets.map((b, i) => [b.bucketId, { entry: b, bucket: desired.buckets[i] }]));
  const mods: Modification[] = [];
  let order = actual.buckets.map((b) => b.bucketId);
  for (const b of actual.buckets) {
    if (wanted.has(b.bucketId)) continue;
    mods.push({ op: "remove-buckets", groupId, commandBucketId: b.bucketId });
    order = order.filter((id) => id !== b.bucketId);
  }
  for (const b of actual.buckets) {
    const w = wanted.get(b.bucketId);
    if (!w || sameBucket(b, w.entry)) continue;
    const at = order.indexOf(b.bucketId);
    const after: InsertPosition = at === 0 ? "first" : order[at - 1];
    mods.push({ op: "remove-buckets", groupId, commandBucketId: b.bucketId });
    mods.push({ op: "insert-buckets", groupId, commandBucketId: after, buckets: [w.bucket] });
  }
  const inserts = missingBucketInserts(groupId, desired.buckets, order);
  mods.push(...inserts);
  if (mods.some((m) => m.op === "insert-buckets") && desired.buckets.some(hasLiveness)) {
    // OVS (3.1 checked) refuses an insert_bucket that carries watch_port or watch_group: ofp-group.c checks
    // liveness against the message's group type, which an insert leaves as "all". The same buckets as one
    // modify: selection is a function of the live bucket ids, so still no other connection moves.
    return [{ op: "modify-group", group: { ...desired, buckets: bucketsInOrder(desired.buckets, order) } }];
  }
  return mods;
}

/**
 * Inserts for the desired buckets the group lacks, each right after its
 * predecessor in desired order (a run of missing buckets is one insert; one
 * that follows the last present bucket goes "last"). So a bucket put back
 * after a hand edit takes its old place, and a gateway that rebuilt the
 * group whole holds the same order as one that got the same buckets one by
 * one: selection breaks score ties by position, so gateways that must pick
 * the same backend must hold the same order.
 */
function missingBucketInserts(groupId: number, desired: readonly SelectBucket[], order: readonly number[]): Modification[] {
  const present = new Set(order);
  const lastPresent = order[order.length - 1];
  const mods: Modification[] = [];
  let prev: number | undefined;
  let run: { after: InsertPosition; buckets: SelectBucket[] } | undefined;
  for (const b of desired) {
    if (present.has(b.bucketId)) {
      if (run) mods.push({ op: "insert-buckets", groupId, commandBucketId: run.after, buckets: run.buckets });
      run = undefined;
    } else if (run) run.buckets.push(b);
    else run = { after: prev === undefined ? (order.length === 0 ? "last" : "first") : prev === lastPresent ? "last" : prev, buckets: [b] };
    prev = b.bucketId;
  }
  if (run) mods.push({ op: "insert-buckets", groupId, commandBucketId: run.after, buckets: run.buckets });
  return mods;
}

/** The group's buckets once the missing ones are inserted where missingBucketInserts puts them. */
function bucketsInOrder(desired: readonly SelectBucket[], order: readonly number[]): SelectBucket[] {
  const byId = new Map(desired.map((b) => [b.bucketId, b]));
  const result = order.filter((id) => byId.has(id));
  let prev: number | undefined;
  for (const b of desired) {
    if (!result.includes(b.bucketId)) result.splice(prev === undefined ? 0 : result.indexOf(prev) + 1, 0, b.bucketId);
    prev = b.bucketId;
  }
  return result.map((id) => byId.get(id)!);
}

const hasLiveness = (b: { watchPort?: number; watchGroup?: number }) => b.watchPort !== undefined || b.watchGroup !== undefined;
