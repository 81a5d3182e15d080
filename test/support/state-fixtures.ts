import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * The state fixtures (test/fixtures/state/<Kind>.json, written by
 * test/fixtures/state/record.ts from the ovslb of commit 6c13b74): for one
 * resource of each kind, the engine's record of it: urn, id, type, the
 * checked inputs and the outputs, each with `__provider`.
 */

type Props = Record<string, any>;

export interface StateFixture {
  urn: string;
  custom: true;
  id: string;
  type: string;
  inputs: Props;
  outputs: Props;
  fixture: {
    kind: string;
    recordedWith: { ovslbCommit: string; pulumiSdk: string; node: string };
    note: string;
    lab: { labDir: string; clientKeyPath: string; hostKeys: Record<string, string> };
  };
}

/** Every resource kind, in the order they can be created (an attachment needs its device). */
export const FIXTURE_KINDS = ["OvsBridge", "DsrHypervisorFlows", "DeferredNatLoadBalancer", "DistributorDevice", "DistributorAttachment"] as const;
export type FixtureKind = (typeof FIXTURE_KINDS)[number];

export const FIXTURE_DIR = resolve(__dirname, "..", "fixtures", "state");

export function loadFixture(kind: FixtureKind): StateFixture {
  return JSON.parse(readFileSync(join(FIXTURE_DIR, `${kind}.json`), "utf8"));
}

/** What a lab is, for rebasing: its directory, client key and host keys by host name. */
export interface LabValues {
  labDir: string;
  clientKeyPath: string;
  hostKeys: Record<string, string>;
}

/**
 * The fixture moved onto the running lab: the lab's host keys and directory
 * are made anew by every `lab up`, so the recorded ones are replaced by the
 * current ones (host addresses, names, ids and everything derived from them
 * are fixed by the lab's topology and are left alone). On the lab the
 * fixture was recorded on, this changes nothing.
 */
export function rebase<T>(value: T, recorded: LabValues, current: LabValues): T {
  const keys = new Map<string, string>();
  for (const [name, key] of Object.entries(recorded.hostKeys)) {
    if (current.hostKeys[name] !== undefined) keys.set(key, current.hostKeys[name]);
  }
  const str = (s: string): string => {
    if (keys.has(s)) return keys.get(s)!;
    if (s === recorded.clientKeyPath) return current.clientKeyPath;
    return recorded.labDir === current.labDir ? s : s.split(recorded.labDir).join(current.labDir);
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return str(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}
