/**
 * Open vSwitch releases with bugs that bear on what ovslb programs, and the
 * rules that follow (read in the OVS sources). Pure: the handlers
 * read each host's version and ask here before they change anything.
 */

import type { HostOvsVersion } from "./outputs.generated";

export interface KnownIssue {
  id: "dp-hash-buckets" | "group-modify-race";
  /** What goes wrong, in words for an error message. */
  what: string;
  /** The first fixed release of each maintained branch; a branch newer than all of them has the fix. */
  fixedIn: readonly string[];
  /** Refused when used on an affected version (true), or only reported (false). */
  refused: boolean;
}

export const KNOWN_ISSUES: readonly KnownIssue[] = [
  {
    id: "dp-hash-buckets",
    what: "inserting or removing buckets of a dp_hash select group corrupts the group's hash table",
    fixedIn: ["3.2.6", "3.3.5", "3.4.3", "3.5.1", "3.6.0"],
    refused: true,
  },
  {
    // ovslb modifies groups on every bucket change (insert/remove are group mods too), so
    // refusing would refuse these versions outright: it is reported for the operator to plan an upgrade.
    id: "group-modify-race",
    what: "a group modified while packets are being translated can race with them",
    fixedIn: ["3.2.6", "3.3.6", "3.4.4", "3.5.2", "3.6.0"],
    refused: false,
  },
];

export type Version = readonly [number, number, number];

/** `3.1.0`, `3.1.0-1ubuntu2`, `3.3.5.dirty` -> [3, 1, 0]; undefined when it is not a version. */
export function parseVersion(text: string | undefined): Version | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:$|[^\d])/.exec(text?.trim() ?? "");
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** `ovs-vswitchd (Open vSwitch) 3.1.0` (what `ovs-appctl version` prints) -> `3.1.0` */
export function parseOvsVersion(text: string): string | undefined {
  return /\(Open vSwitch\)\s+(\S+)/.exec(text)?.[1];
}

const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/**
 * Whether a version has the bug: a branch with a listed fix is affected below
 * it; a branch newer than every listed one has it fixed; an older branch
 * never got the fix. Undefined when the version cannot be read.
 */
export function isAffected(version: string | undefined, issue: Pick<KnownIssue, "fixedIn">): boolean | undefined {
  const v = parseVersion(version);
  if (!v) return undefined;
  const fixes = issue.fixedIn.map((f) => parseVersion(f)!).sort(compare);
  const sameBranch = fixes.find((f) => f[0] === v[0] && f[1] === v[1]);
  if (sameBranch) return compare(v, sameBranch) < 0;
  return compare(v, fixes[fixes.length - 1]) < 0;
}

/** The known issues a version has (none for a version that cannot be read). */
export const issuesOn = (version: string | undefined): KnownIssue[] => KNOWN_ISSUES.filter((i) => isAffected(version, i) === true);

/** What an apply would use of the features a known issue bears on. */
export interface FeatureUse {
  /** A dp_hash select group whose buckets are inserted or removed in place. */
  dpHashBucketChanges?: boolean;
}

/** Why an apply must not go to a host of this version, naming the version, the bug and the fixed releases; undefined when it may. */
export function versionRefusal(version: string | undefined, use: FeatureUse): string | undefined {
  const uses: Record<KnownIssue["id"], boolean> = { "dp-hash-buckets": use.dpHashBucketChanges === true, "group-modify-race": false };
  const issue = KNOWN_ISSUES.find((i) => i.refused && uses[i.id] && isAffected(version, i) !== false);
  if (!issue) return undefined;
  const which = version === undefined ? "an unknown version of Open vSwitch" : `Open vSwitch ${version}`;
  return `${which}: ${issue.what} (fixed in ${issue.fixedIn.join(", ")}); refusing to ${issue.id === "dp-hash-buckets" ? "change a dp_hash group's buckets" : "use it"} there`;
}

/** What read reports for one host: its version and the known issues it has (schema/common.json, hostOvsVersion). */
export type { HostOvsVersion };

export const describeVersion = (version: string | undefined): HostOvsVersion => ({
  ...(version ? { version } : {}),
  knownIssues: issuesOn(version).map((i) => i.id),
});
