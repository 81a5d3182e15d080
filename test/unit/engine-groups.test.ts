import { describe, expect, it } from "vitest";
import { diffGroup } from "../../provider/engine/groups";
import { renderBundle, toGroupEntry, type Group, type SelectBucket } from "../../provider/openflow";

/** The group differ: bucket-level changes, and the modify OVS needs where buckets watch a port. */

const bucket = (id: number, watchPort?: number): SelectBucket => ({
  bucketId: id,
  weight: 100,
  ...(watchPort === undefined ? {} : { watchPort }),
  actions: [{ type: "output", port: 10 + id }],
});
const group = (buckets: SelectBucket[]): Group => ({ groupId: 7, type: "select", selectionMethod: "hash", fields: ["ip_src"], buckets });

describe("diffGroup", () => {
  it("adds a bucket with insert_bucket and removes one with remove_bucket when no bucket watches anything", () => {
    const actual = toGroupEntry(group([bucket(1), bucket(2)]));
    expect(diffGroup(group([bucket(1), bucket(2), bucket(3)]), actual).map((m) => m.op)).toEqual(["insert-buckets"]);
    expect(diffGroup(group([bucket(2)]), actual).map((m) => m.op)).toEqual(["remove-buckets"]);
  });

  it("a missing bucket goes back right after its predecessor in desired order; a run of them is one insert; an append is 'last'", () => {
    const b = (id: number) => ({ bucketId: id, weight: 100, actions: [{ type: "output" as const, port: id }] });
    const g = (ids: number[]): Group => ({ type: "select", groupId: 9, selectionMethod: "hash", fields: ["ip_src"], buckets: ids.map(b) });
    const inserts = (desired: number[], actual: number[]) =>
      diffGroup(g(desired), toGroupEntry(g(actual))).map((m) => (m.op === "insert-buckets" ? [m.commandBucketId, m.buckets.map((x) => x.bucketId)] : m.op));
    expect(inserts([1, 2, 3, 4], [1, 2, 4])).toEqual([[2, [3]]]);
    expect(inserts([1, 2, 3, 4, 5], [1, 4])).toEqual([
      [1, [2, 3]],
      ["last", [5]],
    ]);
    expect(inserts([1, 2, 3], [2, 3])).toEqual([["first", [1]]]);
    expect(inserts([1, 2, 3], [1])).toEqual([["last", [2, 3]]]);
    expect(renderBundle(diffGroup(g([1, 2, 3]), toGroupEntry(g([1, 3]))))).toEqual([
      "group insert_bucket group_id=9,command_bucket_id=1,bucket=bucket_id:2,weight:100,actions=output:2",
    ]);
  });

  it("where buckets watch a port, an addition is one modify of the same buckets in the group's own order, a new one after its predecessor in desired order (OVS refuses insert_bucket with watch_port)", () => {
    // The group holds 2 before 1: the modify keeps that order, so ties in the hash go where they went; 3 follows 2, as in the desired list.
    const actual = toGroupEntry(group([bucket(2, 60), bucket(1, 61)]));
    const mods = diffGroup(group([bucket(1, 61), bucket(2, 60), bucket(3, 62)]), actual);
    expect(mods).toHaveLength(1);
    expect(mods[0].op).toBe("modify-group");
    expect(renderBundle(mods)[0]).toMatch(
      /^group modify group_id=7,type=select,selection_method=hash,fields\(ip_src\),bucket=bucket_id:2,weight:100,watch_port:60,.*bucket=bucket_id:3,weight:100,watch_port:62,.*bucket=bucket_id:1,weight:100,watch_port:61,/,
    );
    // A removal alone still goes bucket by bucket: remove_bucket carries no liveness.
    expect(diffGroup(group([bucket(2, 60)]), actual).map((m) => m.op)).toEqual(["remove-buckets"]);
    expect(diffGroup(group([bucket(1, 61), bucket(2, 60)]), actual)).toEqual([]);
  });
});
