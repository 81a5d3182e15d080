import { describe, expect, it } from "vitest";
import { KNOWN_ISSUES, describeVersion, isAffected, issuesOn, parseVersion, versionRefusal } from "../../provider/model/ovs-versions";

const dpHash = KNOWN_ISSUES.find((i) => i.id === "dp-hash-buckets")!;
const race = KNOWN_ISSUES.find((i) => i.id === "group-modify-race")!;

describe("OVS versions and their known issues", () => {
  it("reads versions as ovs-vswitchd and distributions print them", () => {
    expect(parseVersion("3.1.0")).toEqual([3, 1, 0]);
    expect(parseVersion("3.1.0-1ubuntu2")).toEqual([3, 1, 0]);
    expect(parseVersion("3.3.5.dirty")).toEqual([3, 3, 5]);
    expect(parseVersion("3.10.12")).toEqual([3, 10, 12]);
    expect(parseVersion("3.1")).toBeUndefined();
    expect(parseVersion("")).toBeUndefined();
    expect(parseVersion(undefined)).toBeUndefined();
  });

  it("dp_hash bucket changes are broken on 3.1 and each branch below its fix (3.2.6, 3.3.5, 3.4.3, 3.5.1, 3.6.0)", () => {
    for (const v of ["2.17.9", "3.0.7", "3.1.0", "3.1.6", "3.2.5", "3.3.4", "3.4.2", "3.5.0"]) expect(isAffected(v, dpHash), v).toBe(true);
    for (const v of ["3.2.6", "3.3.5", "3.3.6", "3.4.3", "3.5.1", "3.6.0", "3.6.2", "3.7.0", "4.0.0"]) expect(isAffected(v, dpHash), v).toBe(false);
    expect(isAffected("garbage", dpHash)).toBeUndefined();
  });

  it("the group-modify race has its own fixed releases (3.2.6, 3.3.6, 3.4.4, 3.5.2, 3.6.0)", () => {
    expect(isAffected("3.3.5", race)).toBe(true);
    expect(isAffected("3.3.5", dpHash)).toBe(false);
    expect(isAffected("3.4.3", race)).toBe(true);
    expect(isAffected("3.5.1", race)).toBe(true);
    expect(isAffected("3.5.2", race)).toBe(false);
    expect(issuesOn("3.1.0").map((i) => i.id)).toEqual(["dp-hash-buckets", "group-modify-race"]);
    expect(issuesOn("3.3.5").map((i) => i.id)).toEqual(["group-modify-race"]);
    expect(issuesOn("3.6.0")).toEqual([]);
    expect(describeVersion("3.1.0")).toEqual({ version: "3.1.0", knownIssues: ["dp-hash-buckets", "group-modify-race"] });
    expect(describeVersion(undefined)).toEqual({ knownIssues: [] });
  });

  it("refuses dp_hash bucket changes where they are broken, naming the version, the bug and the fixes; allows them where fixed", () => {
    const refusal = versionRefusal("3.1.0", { dpHashBucketChanges: true });
    expect(refusal).toBe(
      "Open vSwitch 3.1.0: inserting or removing buckets of a dp_hash select group corrupts the group's hash table (fixed in 3.2.6, 3.3.5, 3.4.3, 3.5.1, 3.6.0); refusing to change a dp_hash group's buckets there",
    );
    expect(versionRefusal("3.2.6", { dpHashBucketChanges: true })).toBeUndefined();
    // A version that cannot be read is not assumed fixed.
    expect(versionRefusal(undefined, { dpHashBucketChanges: true })).toMatch(/^an unknown version of Open vSwitch: /);
    // Nothing refused when the feature is not used, nor for the reported-only race.
    expect(versionRefusal("3.1.0", {})).toBeUndefined();
  });
});
