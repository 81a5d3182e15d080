import type { OvnChassis } from "../lab/ovn-chassis";

/**
 * ovn-controller's select group for a load balancer's VIP, as installed on a
 * chassis's br-int: each bucket's id and the backend it translates to
 * (ct(commit,...,nat(dst=ADDRESS:PORT))).
 */

export interface OvnSelectGroup {
  groupId: number;
  selectionMethod: string;
  buckets: { id: number; dst: string }[];
}

/** The group on `host`'s br-int whose buckets translate to exactly `backends` (ADDRESS:PORT), or undefined while there is none. */
export function ovnSelectGroup(chassis: OvnChassis, host: string, backends: readonly string[]): OvnSelectGroup | undefined {
  const want = [...backends].sort().join(",");
  for (const line of chassis.onLabHost(host, ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-int"]).split("\n")) {
    const id = /group_id=(\d+),type=select/.exec(line);
    if (!id) continue;
    const buckets = [...line.matchAll(/bucket=bucket_id:(\d+),[^]*?nat\(dst=([^)]+)\)/g)].map((m) => ({ id: Number(m[1]), dst: m[2] }));
    if (
      buckets
        .map((b) => b.dst)
        .sort()
        .join(",") !== want
    )
      continue;
    return { groupId: Number(id[1]), selectionMethod: /selection_method=([a-z_]+)/.exec(line)?.[1] ?? "", buckets };
  }
  return undefined;
}
