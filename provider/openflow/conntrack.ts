/**
 * `ovs-appctl dpctl/dump-conntrack` output, parsed: one entry per line,
 * `tcp,orig=(src=..,dst=..,sport=..,dport=..),reply=(src=..,...),zone=5,protoinfo=(state=ESTABLISHED)`.
 */
export interface ConntrackEntry {
  protocol: string;
  orig: ConntrackEndpoints;
  reply: ConntrackEndpoints;
  zone: number;
  /** TCP state as OVS prints it (ESTABLISHED, TIME_WAIT, ...); undefined for protocols without one. */
  state?: string;
}

/** One direction of an entry; ports are 0 for protocols without them. */
export interface ConntrackEndpoints {
  src: string;
  dst: string;
  sport: number;
  dport: number;
}

const ENDPOINTS = /^src=([^,]+),dst=([^,]+)(?:,sport=([0-9]+),dport=([0-9]+))?/;

function endpoints(text: string): ConntrackEndpoints | undefined {
  const m = ENDPOINTS.exec(text);
  return m ? { src: m[1], dst: m[2], sport: Number(m[3] ?? 0), dport: Number(m[4] ?? 0) } : undefined;
}

export function parseConntrack(dump: string): ConntrackEntry[] {
  const entries: ConntrackEntry[] = [];
  for (const line of dump.split("\n")) {
    const m = /^(\w+),orig=\(([^)]*)\),reply=\(([^)]*)\)(?:,zone=([0-9]+))?(?:.*protoinfo=\(state=(\w+))?/.exec(line.trim());
    const orig = m && endpoints(m[2]);
    const reply = m && endpoints(m[3]);
    if (!m || !orig || !reply) continue;
    entries.push({ protocol: m[1], orig, reply, zone: Number(m[4] ?? 0), ...(m[5] ? { state: m[5] } : {}) });
  }
  return entries;
}

/** States in which a TCP connection no longer carries data. */
const ENDED = new Set(["TIME_WAIT", "CLOSED", "CLOSING", "LAST_ACK"]);

/** Live connections per backend ("address:port", the reply source) in a zone. */
export function liveConnections(entries: readonly ConntrackEntry[], zone: number): Map<string, number> {
  const n = new Map<string, number>();
  for (const e of entries) {
    if (e.zone !== zone || (e.state !== undefined && ENDED.has(e.state))) continue;
    const key = `${e.reply.src}:${e.reply.sport}`;
    n.set(key, (n.get(key) ?? 0) + 1);
  }
  return n;
}

/** One side of a conntrack entry, partially given: a flush matches every entry that has these fields. */
export interface ConntrackTuple {
  /** IP protocol number (6 tcp, 17 udp, 132 sctp). */
  proto: number;
  src?: string;
  dst?: string;
  sport?: number;
  dport?: number;
}

/** The entries of one zone whose original and reply directions match these partial tuples. */
export interface ConntrackFlush {
  zone: number;
  orig?: ConntrackTuple;
  reply?: ConntrackTuple;
}

const tupleText = (t: ConntrackTuple) =>
  [
    // IPv6 addresses go in ct_ipv6_* (ovs-dpctl(8)'s flush-conntrack tuple).
    ...(t.src === undefined ? [] : [`${t.src.includes(":") ? "ct_ipv6_src" : "ct_nw_src"}=${t.src}`]),
    ...(t.dst === undefined ? [] : [`${t.dst.includes(":") ? "ct_ipv6_dst" : "ct_nw_dst"}=${t.dst}`]),
    `ct_nw_proto=${t.proto}`,
    ...(t.sport === undefined ? [] : [`ct_tp_src=${t.sport}`]),
    ...(t.dport === undefined ? [] : [`ct_tp_dst=${t.dport}`]),
  ].join(",");

/**
 * `ovs-appctl dpctl/flush-conntrack` arguments for a flush: the zone alone,
 * or with partial tuples, which OVS 3.1+ matches entry by entry
 * (lib/ct-dpif.c). A reply tuple needs an original one before it.
 */
export function flushConntrackArgs(flush: ConntrackFlush): string[] {
  const args = ["dpctl/flush-conntrack", `zone=${flush.zone}`];
  if (flush.orig) args.push(tupleText(flush.orig));
  if (flush.reply) {
    if (!flush.orig) throw new Error("a conntrack flush by reply tuple needs an original tuple");
    args.push(tupleText(flush.reply));
  }
  return args;
}

/** A conntrack zone's limit and the entries it holds, as `dpctl/ct-get-limits` prints them. */
export interface ZoneLimit {
  zone: number;
  /** 0: no limit of its own (the datapath's default applies). */
  limit: number;
  count: number;
}

/** `dpctl/ct-set-limits zone=Z,limit=N`, `dpctl/ct-get-limits zone=Z`, `dpctl/ct-del-limits zone=Z`. */
export const zoneLimitArgs = {
  set: (zone: number, limit: number) => ["dpctl/ct-set-limits", `zone=${zone},limit=${limit}`],
  get: (zone: number) => ["dpctl/ct-get-limits", `zone=${zone}`],
  del: (zone: number) => ["dpctl/ct-del-limits", `zone=${zone}`],
};

/**
 * `dpctl/ct-get-limits` output: "default limit=N" then one
 * "zone=Z,limit=N,count=C" line per zone asked for. A zone with no limit of
 * its own prints the default's (OVS 3.1): `own` tells them apart as far as
 * the text can (a limit equal to the default reads as not its own).
 */
export function parseZoneLimits(text: string): (ZoneLimit & { own: boolean })[] {
  const fallback = Number(/^default limit=(\d+)$/m.exec(text)?.[1] ?? 0);
  return text.split("\n").flatMap((line) => {
    const m = /^zone=(\d+),limit=(\d+),count=(\d+)$/.exec(line.trim());
    return m ? [{ zone: Number(m[1]), limit: Number(m[2]), count: Number(m[3]), own: Number(m[2]) !== fallback }] : [];
  });
}

/** `ovs-appctl dpctl/dump-conntrack` arguments for one zone. */
export const dumpConntrackArgs = (zone: number) => ["dpctl/dump-conntrack", `zone=${zone}`];

const PROTOCOL_NUMBERS: Record<string, number> = { icmp: 1, tcp: 6, udp: 17, icmp6: 58, sctp: 132 };

const tupleMatches = (t: ConntrackTuple | undefined, e: ConntrackEndpoints, proto: number | undefined) =>
  t === undefined ||
  (t.proto === proto &&
    (t.src === undefined || t.src === e.src) &&
    (t.dst === undefined || t.dst === e.dst) &&
    (t.sport === undefined || t.sport === e.sport) &&
    (t.dport === undefined || t.dport === e.dport));

/** Whether a flush selects this entry (what OVS matches: zone, then each given field of each tuple). */
export function flushSelects(flush: ConntrackFlush, entry: ConntrackEntry): boolean {
  const proto = PROTOCOL_NUMBERS[entry.protocol];
  return entry.zone === flush.zone && tupleMatches(flush.orig, entry.orig, proto) && tupleMatches(flush.reply, entry.reply, proto);
}
