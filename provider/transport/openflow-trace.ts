import { CommandRunner, runChecked } from "./exec";
import { OpenFlowValueError, checkUint, renderMatch } from "../openflow/render";
import { Match } from "../openflow/types";

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
}

const BRIDGE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;
/** Per-trace budget for the command timeout; one trace takes about 5 ms locally. */
const TRACE_MS = 50;

/**
 * Cuts concatenated trace outputs apart. Each starts with `Flow: `; after a
 * recirculation (ct), a trace goes on with a `====` banner and its own
 * `Flow: ` line, which belongs to the same packet.
 */
export function splitTraces(output: string): string[] {
  const traces: string[][] = [];
  let resumed = false;
  for (const line of output.split("\n")) {
    if (line.startsWith("=====")) resumed = true;
    if (line.startsWith("Flow: ")) {
      if (!resumed) traces.push([]);
      resumed = false;
    }
    traces.at(-1)?.push(line);
  }
  return traces.map((lines) => lines.join("\n"));
}

/** The first select-group bucket the trace chose, or undefined if it met none (or none was live). */
export function chosenBucket(trace: string): number | undefined {
  const used = /-> using bucket (\d+)/.exec(trace);
  return used ? Number(used[1]) : undefined;
}

/**
 * The packet in ofproto/trace's flow syntax. Unlike flow mods, it reads
 * tp_src/tp_dst as TCP fields only ("prerequisites not met" for udp), so they
 * are named by protocol.
 */
function microflow(packet: Match, path: string): string {
  const flow = renderMatch(packet, path);
  if (!flow) throw new OpenFlowValueError(path, "is empty");
  return flow
    .split(",")
    .map((token) => token.replace(/^tp_(src|dst)=/, `${packet.protocol}_$1=`))
    .join(",");
}

/** The bucket each packet takes on bridge `bridgeName`, in the order given. */
export async function traceBuckets(
  runner: CommandRunner,
  bridgeName: string,
  packets: readonly Match[],
  opts: TraceOptions = {},
): Promise<Array<number | undefined>> {
  if (typeof bridgeName !== "string" || !BRIDGE_NAME.test(bridgeName)) {
    throw new OpenFlowValueError("bridgeName", `${JSON.stringify(bridgeName)} is not a bridge name`);
  }
  const flows = packets.map((packet, i) => microflow(packet, `packets[${i}]`));
  if (flows.length === 0) return [];
  const size = Math.ceil(flows.length / checkUint("concurrency", opts.concurrency ?? 4, 64, 1));
  const chunks: string[][] = [];
  for (let i = 0; i < flows.length; i += size) chunks.push(flows.slice(i, i + size));

  const outputs = await Promise.all(
    chunks.map((chunk) =>
      runChecked(runner, ["xargs", "-0", "-n", "1", "ovs-appctl", "ofproto/trace", bridgeName], {
        stdin: chunk.join("\0"),
        timeoutMs: 30_000 + TRACE_MS * chunk.length,
      }),
    ),
  );
  const traces = outputs.flatMap(splitTraces);
  if (traces.length !== flows.length) {
    throw new Error(`${runner.hostName}: bridge ${bridgeName}: ${flows.length} packets traced, ${traces.length} traces read`);
  }
  return traces.map(chosenBucket);
}

export async function traceBucket(runner: CommandRunner, bridgeName: string, packet: Match): Promise<number | undefined> {
  return (await traceBuckets(runner, bridgeName, [packet]))[0];
}
