import * as handlers from "../../provider/handlers";
import { derivedFrontendMac, attachmentNames } from "../../provider/resources/distributor-attachment/plan";
import { bucketMac, dstAddressOf, ipFamily, ipMatch, type Match } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import type { SshSession } from "../../provider/transport/ssh";
import type { LabBackend, LabInventory } from "../lab/topology";
import { sshTo } from "./lab";

/**
 * One load balancer on several distributor devices, as the tests and the
 * failover benchmarks declare it: the load balancer's ids on every device,
 * each device with its own next hop and frontend MAC; the amphorae are lab
 * VMs (`amp-1`, `amp-2`, ...), slot i+1 for the i-th unless a standby.
 */
export interface SharedLoadBalancer {
  id: string;
  vip: string;
  nextHop: Record<string, string>;
}

export type AmphoraRole = "active" | "standby" | "failed";

export function deviceAttachment(inv: LabInventory, device: string, lb: SharedLoadBalancer, amphorae: readonly LabBackend[], roles: readonly AmphoraRole[]) {
  return {
    host: { connection: sshTo(inv, device), ovsRundir: inv.hosts[device].ovsRundir },
    deviceId: device,
    uplinkBridge: "br-seg",
    attachmentId: lb.id,
    loadBalancerId: lb.id,
    nextHop: lb.nextHop[device],
    frontendMac: derivedFrontendMac(`${lb.id}/${lb.nextHop[device]}`),
    vip: lb.vip,
    amphorae: amphorae.map((b, i) => {
      const role = roles[i] ?? "active";
      return { name: `amp-${i + 1}`, mac: b.mac, role, ...(role === "standby" ? {} : { slot: i + 1 }) };
    }),
  };
}

/** `count` TCP 5-tuples from the client's side into an attachment's frontend port, in the VIP's family. */
export function frontendTuples(count: number, frontendMac: string, vip: string, port: number): Match[] {
  const v6 = ipFamily(vip) === 6;
  return Array.from({ length: count }, (_, i) => {
    const [high, low] = [1 + Math.floor(i / 250), (i % 250) + 1];
    const source = v6 ? `fd00:30::${high.toString(16)}:${low.toString(16)}` : `10.0.${high}.${low}`;
    return {
      ...ipMatch("tcp", "src", source),
      ...ipMatch("tcp", "dst", vip),
      in_port: 1,
      dl_dst: frontendMac,
      tp_src: 10000 + ((i * 7919) % 50000),
      tp_dst: port,
    };
  });
}

/** Where an attachment's select group sends each tuple: the amphora MAC of its bucket (ofproto/trace), undefined for none. */
export async function tracedAmphorae(ssh: SshSession, inv: LabInventory, device: string, lbId: string, groupId: number, tuples: readonly Match[]) {
  const bridge = attachmentNames({ attachmentId: lbId }).bridge;
  const ovsRundir = inv.hosts[device].ovsRundir;
  const group = await new OpenFlowBridge(ssh, `unix:${ovsRundir}/${bridge}.mgmt`).dumpGroup(groupId);
  const macs = new Map(group!.buckets.map((b) => [b.bucketId, bucketMac(b.actions)]));
  const buckets = await traceBuckets(ssh, bridge, tuples, { ovsRundir });
  return buckets.map((b) => (b === undefined ? undefined : macs.get(b)));
}

/** Packets of the VIP a device's attachment has forwarded (its VIP flow's counter, after a revalidator pass): where the traffic really went. */
export async function vipPacketsForwarded(ssh: SshSession, inv: LabInventory, device: string, lbId: string, vip: string): Promise<bigint> {
  await runChecked(ssh, ["ovs-appctl", "revalidator/wait"]);
  const bridge = attachmentNames({ attachmentId: lbId }).bridge;
  const flows = await new OpenFlowBridge(ssh, `unix:${inv.hosts[device].ovsRundir}/${bridge}.mgmt`).dumpFlows();
  return flows.filter((f) => f.priority === 100 && dstAddressOf(f.match) === vip).reduce((n, f) => n + f.nPackets, 0n);
}

/** A resource as the handlers left it: its id and outputs. */
export interface Applied {
  id: string;
  outs: Record<string, any>;
}

/** The inputs `check` makes of `news`; throws, naming each failure, if check refuses them (no vitest here: the benchmarks use this module too). */
export async function checkedInputs(kind: string, news: Record<string, any>): Promise<Record<string, any>> {
  const { inputs, failures } = await handlers.check(kind, {}, news);
  if (failures.length > 0) throw new Error(`check refused the ${kind}: ${failures.map((f) => `${f.property}: ${f.reason}`).join("; ")}`);
  return inputs;
}

/** `news` applied as the engine does: checked, then created, or updated from `current`'s outputs. */
export async function applied(kind: string, current: Applied | undefined, news: Record<string, any>): Promise<Applied> {
  const inputs = await checkedInputs(kind, news);
  if (!current) return handlers.create(kind, inputs);
  return { id: current.id, outs: (await handlers.update(kind, current.id, current.outs, inputs)).outs };
}
