/**
 * `ovs-appctl dpctl/dump-conntrack` output, parsed: one entry per line,
 * `tcp,orig=(src=..,dst=..,sport=..,dport=..),reply=(src=..,...),zone=5,protoinfo=(state=ESTABLISHED)`.
 */
export interface ConntrackEntry {
  protocol: string;
  reply: { src: string; sport: number };
  zone: number;
  /** TCP state as OVS prints it (ESTABLISHED, TIME_WAIT, ...); undefined for protocols without one. */
  state?: string;
}

export function parseConntrack(dump: string): ConntrackEntry[] {
  const entries: ConntrackEntry[] = [];
  for (const line of dump.split("\n")) {
    const m = /^(\w+),orig=\([^)]*\),reply=\(src=([0-9.]+),dst=[0-9.]+(?:,sport=([0-9]+))?[^)]*\)(?:,zone=([0-9]+))?(?:.*protoinfo=\(state=(\w+))?/.exec(line.trim());
    if (!m) continue;
    entries.push({ protocol: m[1], reply: { src: m[2], sport: Number(m[3] ?? 0) }, zone: Number(m[4] ?? 0), ...(m[5] ? { state: m[5] } : {}) });
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
