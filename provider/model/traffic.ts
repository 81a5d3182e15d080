import { flowKey, type DumpedFlow, type Flow } from "../openflow";

/**
 * Traffic counters as a read reports them: observations of the datapath
 * (flows' and buckets' packet and byte counts), never drift. They are plain
 * numbers in state (JSON): 2^53 bytes is 9 PB, more than a counter of one
 * ovs-vswitchd run reaches in practice.
 */
export interface Counter {
  packets: number;
  bytes: number;
}

export const zeroCounter = (): Counter => ({ packets: 0, bytes: 0 });

/** Adds `more` into `into` (returned, for chaining). */
export function addInto(into: Counter, more: { packets: bigint | number; bytes: bigint | number }): Counter {
  into.packets += Number(more.packets);
  into.bytes += Number(more.bytes);
  return into;
}

/** The counters of the dumped flows, by their OpenFlow identity (table, priority, match): what a planned flow has counted so far. */
export class FlowCounters {
  private readonly byKey = new Map<string, DumpedFlow>();

  constructor(dumped: readonly DumpedFlow[]) {
    for (const f of dumped) if (!this.byKey.has(flowKey(f))) this.byKey.set(flowKey(f), f);
  }

  /** The sum over the planned flows (each counted once, however often it is listed; one not on the bridge counts 0). */
  sum(planned: readonly Flow[], into: Counter = zeroCounter()): Counter {
    for (const key of new Set(planned.map(flowKey))) {
      const f = this.byKey.get(key);
      if (f) addInto(into, { packets: f.nPackets, bytes: f.nBytes });
    }
    return into;
  }
}
