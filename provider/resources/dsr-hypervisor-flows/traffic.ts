import type { DumpedFlow } from "../../openflow";
import { addInto, FlowCounters, zeroCounter, type Counter } from "../../model/traffic";
import type { DsrHypervisorFlowsOutputs } from "../../model/outputs.generated";
import { backendFlows, type Placement } from "./dataplane";
import {
  DELIVER_PRIORITY,
  ENTRY_TABLE,
  GRE_DROP_PRIORITY,
  HAND_ON_PRIORITY,
  HANDED_DROP_PRIORITY,
  HANDED_ON_PRIORITY,
  PATH_MTU_DROP_PRIORITY,
  PATH_MTU_TABLE,
  REQUEST_PRIORITY,
  SECOND_CHANCE_TABLE,
  vipKey,
  type DsrDefaulted,
} from "./ids";

/** DsrHypervisorFlows' traffic in a read: what its owned flows have counted (pure). */

export type HypervisorTraffic = NonNullable<DsrHypervisorFlowsOutputs["traffic"]>;

/**
 * Per VIP and backend, the requests its request flows took (every allowed
 * source, fragments too; with second chance, those the gateways sent it
 * directly); for the zone, what it dropped (gre: what came out of the GRE
 * port for no declared VIP, backend or source), with second chance what it
 * handed on, received handed on and dropped as unknown, and with pathMtu
 * the ICMP errors it accepted (related to a connection) and dropped.
 * Undefined in gre mode without a working GRE port: nothing arrives.
 */
export function hypervisorTraffic(inputs: DsrDefaulted, owned: readonly DumpedFlow[], p: Placement): HypervisorTraffic | undefined {
  if (inputs.mode === "gre" && p.greOfport === undefined) return undefined;
  const counters = new FlowCounters(owned);
  // A backend whose bridge port is gone still names its flows (their identity holds no output port).
  const ofports = new Map(p.ofports);
  for (const v of inputs.vips) for (const b of v.backends) if (!ofports.has(b.bridgePort)) ofports.set(b.bridgePort, 0xfeff);
  const placement = { ...p, ofports };
  const vips: HypervisorTraffic["vips"] = {};
  for (const vip of inputs.vips) {
    const total = zeroCounter();
    const backends: Record<string, Counter> = {};
    for (const b of vip.backends) {
      const requests = backendFlows(inputs, vip, b, placement, "read").requests.filter(
        (f) => f.table === ENTRY_TABLE && f.priority === REQUEST_PRIORITY && f.match.icmp_type === undefined,
      );
      const counted = counters.sum(requests, (backends[`${b.address}:${b.port}`] ??= zeroCounter()));
      addInto(total, counted);
    }
    vips[vipKey(vip)] = { ...total, backends };
  }
  const sum = (pick: (f: DumpedFlow) => boolean) => owned.filter(pick).reduce((c, f) => addInto(c, { packets: f.nPackets, bytes: f.nBytes }), zeroCounter());
  const at = (table: number, priority: number) => (f: DumpedFlow) => f.table === table && f.priority === priority;
  return {
    vips,
    ...(inputs.mode === "gre" ? { dropped: sum((f) => at(ENTRY_TABLE, GRE_DROP_PRIORITY)(f) && f.match.in_port === p.greOfport) } : {}),
    ...(inputs.gre?.secondChance
      ? {
          secondChance: {
            handedOn: sum(at(SECOND_CHANCE_TABLE, HAND_ON_PRIORITY)),
            received: sum(at(ENTRY_TABLE, HANDED_ON_PRIORITY)),
            dropped: sum(at(SECOND_CHANCE_TABLE, HANDED_DROP_PRIORITY)),
          },
        }
      : {}),
    ...(inputs.pathMtu ? { pathMtu: { accepted: sum(at(PATH_MTU_TABLE, DELIVER_PRIORITY)), dropped: sum(at(PATH_MTU_TABLE, PATH_MTU_DROP_PRIORITY)) } } : {}),
  };
}
