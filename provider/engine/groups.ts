import { isDeepStrictEqual } from "node:util";
import { sameBucket, toGroupEntry, type Group, type GroupEntry, type InsertPosition, type Modification, type SelectBucket } from "../openflow";

/**
 * The one group differ. A select group whose type, selection method and
 * fields already match changes only by bucket, so no other connection moves
 * (selection is rendezvous hashing on bucket ids, DESIGN §1):
 * - a bucket no longer wanted is removed;
 * - a bucket whose weight, liveness or actions changed keeps its id AND its
 *   position: it is removed and re-inserted right after its predecessor, in
 *   the same bundle (an in-place takeover of a slot looks like nothing else
 *   happened);
 * - a new bucket is inserted last, in desired order;
 * - where buckets watch a port or group, inserts become one modify of the
 *   same buckets in the same order (OVS refuses an insert with liveness).
 * Anything else that differs (type, method, fields) rewrites the group whole:
 * that re-hashes every connection anyway.
 */
export function diffGroup(desired: Group, actual: GroupEntry | undefined): Modification[] {
  const want = toGroupEntry(desired);
  if (!actual) return [{ op: "add-group", group: desired }];
  const sameSelection = actual.type === want.type && actual.selectionMethod === want.selectionMethod
    && actual.selectionMethodParam === undefined && isDeepStrictEqual([...actual.fields], [...want.fields]);
  if (!sameSelection || desired.type !== "select") {
    const same = sameSelection && actual.buckets.length === want.buckets.length && actual.buckets.every((b, i) => sameBucket(b, want.buckets[i]));
    return same ? [] : [{ op: "modify-group", group: desired }];
  }

  const groupId = desired.groupId;
  const wanted = new Map(want.buckets.map((b, i) => [b.bucketId, { entry: b, bucket: desired.buckets[i] as SelectBucket }]));
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
  const present = new Set(order);
  const added = (desired.buckets as readonly SelectBucket[]).filter((b) => !present.has(b.bucketId));
  if (added.length > 0) mods.push({ op: "insert-buckets", groupId, commandBucketId: "last", buckets: added });
  if (mods.some((m) => m.op === "insert-buckets") && desired.buckets.some(hasLiveness)) {
    // OVS (3.1 checked) refuses an insert_bucket that carries watch_port or watch_group: ofp-group.c checks
    // liveness against the message's group type, which an insert leaves as "all". The same buckets in the
    // same order as one modify: selection is a function of the live bucket ids, so still no other connection moves.
    const buckets = [...order.map((id) => wanted.get(id)!.bucket), ...added];
    return [{ op: "modify-group", group: { ...desired, buckets } }];
  }
  return mods;
}

const hasLiveness = (b: { watchPort?: number; watchGroup?: number }) => b.watchPort !== undefined || b.watchGroup !== undefined;
