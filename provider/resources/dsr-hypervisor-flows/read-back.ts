import { flowPresent } from "../../engine/flows";
import type { DsrBackend } from "../../model/inputs.generated";
import { bucketMac, dstAddressOf, l4Of, type DumpedFlow } from "../../openflow";
import { backendFlows, type Placement, zoneFlows } from "./dataplane";
import { type DefaultedDsrVip, DELIVER_TABLE, ENTRY_TABLE, REQUEST_PRIORITY, SECOND_CHANCE_TABLE, SYN_PRIORITY, vipKey, type DsrDefaulted } from "./ids";

/** DsrHypervisorFlows read back: the inputs the flows on a bridge amount to (pure). */

type Inputs = DsrDefaulted;

/**
 * The inputs that the owned flows actually on the host amount to, so a
 * refresh shows drift. A (VIP, backend) counts only when every flow it needs
 * is there and right (its request flow, its backend's delivery and reply
 * flows, the zone's forward flow); a VIP with no backend left is missing.
 * Declared VIPs and backends keep their declared order; ones found but not
 * declared follow.
 */
export function actualInputs(inputs: Inputs, owned: readonly DumpedFlow[], p: Placement & { portNames: ReadonlyMap<number, string> }): Inputs {
  const present = flowPresent(owned);
  // gre mode with the GRE port gone: nothing can arrive, whatever flows are left.
  if (inputs.mode === "gre" && p.greOfport === undefined) return { ...inputs, vips: [] };
  const candidates = new Map<string, { vip: DefaultedDsrVip; backends: Map<string, DsrBackend> }>();
  // The flows that commit a backend's connections: the request flows, or with second chance the SYN flows (which deliver too).
  const sc = !!inputs.gre?.secondChance;
  const [commitTable, commitPriority] = sc ? [SECOND_CHANCE_TABLE, SYN_PRIORITY] : [ENTRY_TABLE, REQUEST_PRIORITY];
  const deliveries = new Map(
    owned
      .filter((f) => f.table === DELIVER_TABLE && f.match.ct_zone === p.zone)
      .map((f) => [`${f.match.protocol}:${dstAddressOf(f.match)}:${f.match.tp_dst}`, f]),
  );
  for (const f of owned) {
    if (f.table !== commitTable || f.priority !== commitPriority) continue;
    const ct = f.actions.find((a) => a.type === "ct");
    const { tp_dst } = f.match;
    const nw_dst = dstAddressOf(f.match);
    const protocol = l4Of(f.match.protocol);
    if (ct?.type !== "ct" || !ct.commit || ct.zone !== p.zone || ct.nat?.kind !== "dst" || ct.nat.port === undefined) continue;
    const delivery = sc ? f : deliveries.get(`${f.match.protocol}:${ct.nat.ip}:${ct.nat.port}`);
    const out = delivery?.actions.find((a) => a.type === "output");
    if (out?.type !== "output" || !nw_dst || tp_dst === undefined) continue;
    if (!protocol) continue;
    const bridgePort = p.portNames.get(out.port);
    if (bridgePort === undefined) continue; // delivers to a port that is gone: not a working backend
    const mac = f.match.dl_dst ?? bucketMac(delivery!.actions);
    if (!mac) continue;
    const vip: DefaultedDsrVip = { address: nw_dst, port: tp_dst, protocol, backends: [] };
    const backend: DsrBackend = { address: ct.nat.ip, port: ct.nat.port, mac, bridgePort };
    const entry = candidates.get(vipKey(vip)) ?? { vip, backends: new Map() };
    entry.backends.set(JSON.stringify(backend), backend);
    candidates.set(vipKey(vip), entry);
  }
  // A (VIP, backend) counts only when every flow it needs is there and right.
  const found: Array<{ vip: DefaultedDsrVip; backend: DsrBackend }> = [];
  const declaredVips = new Map(inputs.vips.map((v) => [vipKey(v), v]));
  for (const { vip, backends } of candidates.values()) {
    // fragments: as declared, and then its later fragments' flows must be there too.
    const whole = { ...vip, ...(declaredVips.get(vipKey(vip))?.fragments ? { fragments: true } : {}), backends: [...backends.values()] };
    for (const backend of whole.backends) {
      const flows = backendFlows(inputs, whole, backend, p, "read");
      if ([...flows.requests, ...flows.backend, ...zoneFlows(inputs, p)].every(present)) found.push({ vip, backend });
    }
  }

  const vips = new Map<string, DefaultedDsrVip>();
  const declared = new Map<string, DsrBackend[]>(inputs.vips.map((v) => [vipKey(v), v.backends]));
  for (const v of inputs.vips) vips.set(vipKey(v), { ...v, backends: [] });
  for (const { vip } of found) {
    if (!vips.has(vipKey(vip))) vips.set(vipKey(vip), { ...vip, backends: [] });
  }
  const sameBackend = (a: DsrBackend, b: DsrBackend) => a.address === b.address && a.port === b.port && a.mac === b.mac && a.bridgePort === b.bridgePort;
  for (const [key, vip] of vips) {
    const here = found.filter((f) => vipKey(f.vip) === key).map((f) => f.backend);
    const order = declared.get(key) ?? [];
    const known = order.filter((d) => here.some((h) => sameBackend(d, h)));
    const extra = here.filter((h) => !order.some((d) => sameBackend(d, h)));
    vip.backends = [...known, ...extra];
  }
  return { ...inputs, vips: [...vips.values()].filter((v) => v.backends.length > 0) };
}
