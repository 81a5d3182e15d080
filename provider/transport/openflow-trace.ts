import { OpenFlowValueError } from "../openflow/render";
import { chosenBucket, slotChoice, traceFlow, type SlotChoice } from "../openflow/trace";
import { type Match } from "../openflow/types";
import { type CommandRunner } from "./exec";
import { connectVswitchd } from "./unixctl";

/**
 * Which bucket of a select group a packet takes, and what else a gateway did
 * with it, from ovs-vswitchd's `ofproto/trace BR FLOW` (`-> using bucket N`).
 * The traces go over one connection to its control socket (the unixctl
 * JSON-RPC that ovs-appctl speaks), not one ovs-appctl process per packet.
 */

export interface TraceOptions {
  /** The host's OVS run directory, where its ovs-vswitchd's control socket is (default: the runner's OVS_RUNDIR, else OVS's own default). */
  ovsRundir?: string;
}

const RUNDIR = /^\/[A-Za-z0-9_./-]+$/;

const BRIDGE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;

/** The bucket each packet takes on bridge `bridgeName`, in the order given. */
export async function traceBuckets(
  runner: CommandRunner,
  bridgeName: string,
  packets: readonly Match[],
  opts: TraceOptions = {},
): Promise<Array<number | undefined>> {
  return (await traces(runner, bridgeName, packets, opts)).map(chosenBucket);
}

/** The slot, second-chance key and output each packet gets (secondChance gateways). */
export async function traceSlots(runner: CommandRunner, bridgeName: string, packets: readonly Match[], opts: TraceOptions = {}): Promise<SlotChoice[]> {
  return (await traces(runner, bridgeName, packets, opts)).map(slotChoice);
}

/** Each packet's whole trace, in order. */
async function traces(runner: CommandRunner, bridgeName: string, packets: readonly Match[], opts: TraceOptions): Promise<string[]> {
  if (typeof bridgeName !== "string" || !BRIDGE_NAME.test(bridgeName)) {
    throw new OpenFlowValueError("bridgeName", `${JSON.stringify(bridgeName)} is not a bridge name`);
  }
  if (opts.ovsRundir !== undefined && !RUNDIR.test(opts.ovsRundir)) {
    throw new OpenFlowValueError("ovsRundir", `${JSON.stringify(opts.ovsRundir)} is not an absolute path of [A-Za-z0-9_./-]`);
  }
  const flows = packets.map((packet, i) => traceFlow(packet, `packets[${i}]`));
  if (flows.length === 0) return [];
  const vswitchd = await connectVswitchd(runner, opts.ovsRundir);
  try {
    return await Promise.all(flows.map((flow) => vswitchd.call("ofproto/trace", [bridgeName, flow])));
  } finally {
    vswitchd.close();
  }
}

export { chosenBucket };

export async function traceBucket(runner: CommandRunner, bridgeName: string, packet: Match): Promise<number | undefined> {
  return (await traceBuckets(runner, bridgeName, [packet]))[0];
}
