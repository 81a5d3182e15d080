import { OpenFlowValueError, renderMatch } from "./render";
import type { Match } from "./types";

/** Reading `ovs-appctl ofproto/trace` output and writing its packets (pure; the transport runs the traces). */

/** The first select-group bucket the trace chose, or undefined if it met none (or none was live). */
export function chosenBucket(trace: string): number | undefined {
  const used = /-> using bucket (\d+)/.exec(trace);
  return used ? Number(used[1]) : undefined;
}

/** What a second-chance gateway did with a packet: its slot, the key it set (the previous owner's hypervisor, 0 for none), the backend's MAC, the port it left by. */
export interface SlotChoice {
  slot?: number;
  key?: number;
  mac?: string;
  output?: number;
}

export function slotChoice(trace: string): SlotChoice {
  const slot = /^Final flow: .*\breg12=(0x[0-9a-f]+|[0-9]+)/m.exec(trace);
  const keys = [...trace.matchAll(/set_field:(0x[0-9a-f]+|[0-9]+)->tun_id/g)];
  const outputs = [...trace.matchAll(/^\s+output:([0-9]+)$/gm)];
  const macs = [...trace.matchAll(/set_field:([0-9a-f:]{17})->eth_dst/g)];
  // The final flow omits a register that is 0: a packet that was hashed into reg12 and shows none is in slot 0.
  const hashed = /multipath\(/.test(trace);
  return {
    ...(slot ? { slot: Number(slot[1]) } : hashed ? { slot: 0 } : {}),
    ...(keys.length > 0 ? { key: Number(keys.at(-1)![1]) } : {}),
    ...(macs.length > 0 ? { mac: macs.at(-1)![1] } : {}),
    ...(outputs.length > 0 ? { output: Number(outputs.at(-1)![1]) } : {}),
  };
}

/**
 * The packet in ofproto/trace's flow syntax. Unlike flow mods, it reads
 * tp_src/tp_dst as TCP fields only ("prerequisites not met" for udp), so they
 * are named by protocol (tcp_src for tcp6 too).
 */
export function traceFlow(packet: Match, path: string): string {
  const flow = renderMatch(packet, path);
  if (!flow) throw new OpenFlowValueError(path, "is empty");
  return flow
    .split(",")
    .map((token) => token.replace(/^tp_(src|dst)=/, `${packet.protocol?.replace(/6$/, "")}_$1=`))
    .join(",");
}
