import { OPEN_VSWITCH, Transaction, type OpenVSwitchRow } from "../ovsdb";
import { describeVersion, parseOvsVersion, type HostOvsVersion } from "../model/ovs-versions";
import type { OvsHostSession } from "../transport/ovs-host";

/**
 * The host's Open vSwitch version: the root row's ovs_version, which
 * distribution start-up scripts fill, else what the running ovs-vswitchd
 * says (`ovs-appctl version`). Undefined when neither tells.
 */
export async function readOvsVersion(s: OvsHostSession): Promise<string | undefined> {
  const db = await s.vswitchDb();
  const txn = new Transaction(OPEN_VSWITCH);
  const root = txn.select("Open_vSwitch", [], ["ovs_version"]);
  return ovsVersionOf(s, (await db.run(txn)).first(root));
}

/** readOvsVersion for a root row already read (its ovs_version column). */
export async function ovsVersionOf(s: OvsHostSession, root: Pick<OpenVSwitchRow, "ovs_version"> | undefined): Promise<string | undefined> {
  const recorded = root?.ovs_version[0];
  if (recorded) return recorded;
  return s.vswitchdVersion().then(parseOvsVersion, () => undefined);
}

/** What read reports of each host it read: `ovsVersions`, by host. */
export async function observeOvsVersion(s: OvsHostSession): Promise<Record<string, HostOvsVersion>> {
  return { [s.host.connection.host]: describeVersion(await readOvsVersion(s)) };
}

/**
 * `state` with the host's `ovsVersions`, as every apply reports it: the same
 * observation read makes, so a refresh right after an apply reads no change.
 */
export async function withOvsVersion<S extends object>(s: OvsHostSession, state: S): Promise<S & { ovsVersions: Record<string, HostOvsVersion> }> {
  return { ...state, ovsVersions: await observeOvsVersion(s) };
}

/** What read reports of all the hosts it read: each host's version, by host. */
export async function observeOvsVersions(sessions: readonly OvsHostSession[]): Promise<Record<string, HostOvsVersion>> {
  const each = await Promise.all(sessions.map(observeOvsVersion));
  return Object.fromEntries(each.flatMap((r) => Object.entries(r)));
}
