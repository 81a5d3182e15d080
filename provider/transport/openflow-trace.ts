import { OpenFlowValueError, checkUint } from "../openflow/render";
import { chosenBucket, slotChoice, splitTraces, traceFlow, type SlotChoice } from "../openflow/trace";
import { type Match } from "../openflow/types";
import { type CommandRunner, runChecked } from "./exec";

/**
 * Which bucket of a select group a packet takes, from `ovs-appctl
 * ofproto/trace BR FLOW` (`-> using bucket N`). ovs-appctl runs one command
 * per process, so a batch goes to `xargs -0 -n 1 ovs-appctl ofproto/trace BR`
 * with the flows on stdin: one remote command per chunk instead of one per
 * packet, and no shell. Chunks run concurrently.
 */

export interface TraceOptions {
  /** Concurrent ovs-appctl pipelines (default 4). */
  concurrency?: number;
  /** The host's OVS run directory, where ovs-appctl finds ovs-vswitchd (default: the runner's environment, else OVS's own default). */
  ovsRundir?: string;
}

const RUNDIR = /^\/[A-Za-z0-9_./-]+$/;

const BRIDGE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;
/**
 * Per-trace budget for the command timeout. One trace took about 5 ms on
 * a quiet lab machine and 15-28 ms on a loaded 2-core one (four chunks
 * sharing two cores): the budget leaves room for several times that.
 */
const TRACE_MS = 200;

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
  const env = opts.ovsRundir === undefined ? [] : ["env", `OVS_RUNDIR=${opts.ovsRundir}`];
  const flows = packets.map((packet, i) => traceFlow(packet, `packets[${i}]`));
  if (flows.length === 0) return [];
  const size = Math.ceil(flows.length / checkUint("concurrency", opts.concurrency ?? 4, 64, 1));
  const chunks: string[][] = [];
  for (let i = 0; i < flows.length; i += size) chunks.push(flows.slice(i, i + size));

  const outputs = await Promise.all(
    chunks.map((chunk) =>
      runChecked(runner, [...env, "xargs", "-0", "-n", "1", "ovs-appctl", "ofproto/trace", bridgeName], {
        stdin: chunk.join("\0"),
        timeoutMs: 30_000 + TRACE_MS * chunk.length,
      }),
    ),
  );
  const each = outputs.flatMap(splitTraces);
  if (each.length !== flows.length) {
    throw new Error(`${runner.hostName}: bridge ${bridgeName}: ${flows.length} packets traced, ${each.length} traces read`);
  }
  return each;
}

export { chosenBucket, splitTraces };

export async function traceBucket(runner: CommandRunner, bridgeName: string, packet: Match): Promise<number | undefined> {
  return (await traceBuckets(runner, bridgeName, [packet]))[0];
}
