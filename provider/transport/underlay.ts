import { canonicalAddress } from "../model/addresses";
import type { SshSession } from "./ssh";

/**
 * The underlay a host's GRE tunnels leave by: which interface holds each
 * tunnel address and its MTU. GRE delivery adds 42 bytes to every frame on
 * an IPv4 underlay (outer IPv4 20, GRE with key 8, inner Ethernet 14), 62 on
 * an IPv6 one (outer IPv6 40), so a full-size client frame needs an underlay
 * MTU of 1500 + that; below it the userspace datapath drops the frame
 * without a word. `ovslb doctor` checks it, and an apply of gre delivery
 * warns of it.
 */

export const GRE_OVERHEAD = 42;
/** What GRE adds to a frame over an underlay of this address's family. */
export const greOverhead = (tunnelAddress: string) => (tunnelAddress.includes(":") ? GRE_OVERHEAD + 20 : GRE_OVERHEAD);
/** The largest IPv4 packet clients send on an Ethernet segment. */
export const FULL_SIZE = 1500;

export interface UnderlayFacts {
  tunnelAddress: string;
  /** The interface holding that address on the host; undefined: none does. */
  iface?: string;
  mtu?: number;
}

/** The interface holding an address, from `ip -o addr show` (`5: br-phy    inet 172.16.11.2/24 ...`, `inet6 fd00:16:11::2/64`). */
export function interfaceOf(ipAddrOutput: string, address: string): string | undefined {
  for (const line of ipAddrOutput.split("\n")) {
    const m = /^\d+:\s+(\S+?)(?:@\S+)?\s+inet6?\s+([0-9a-fA-F.:]+)\//.exec(line.trim());
    if (m && canonicalAddress(m[2]) === canonicalAddress(address)) return m[1];
  }
  return undefined;
}

/** Each tunnel address's interface and MTU on the host (no shell: the interface name is checked before it goes into a path). */
export async function readUnderlay(ssh: SshSession, addresses: readonly string[]): Promise<UnderlayFacts[]> {
  if (addresses.length === 0) return [];
  const ip = await ssh.run(["ip", "-o", "addr", "show"]);
  const facts: UnderlayFacts[] = [];
  for (const a of addresses) {
    const iface = ip.exitCode === 0 ? interfaceOf(ip.stdout, a) : undefined;
    if (!iface || !/^[A-Za-z0-9_.:-]+$/.test(iface)) {
      facts.push({ tunnelAddress: a });
      continue;
    }
    const mtu = await ssh.run(["cat", `/sys/class/net/${iface}/mtu`]);
    facts.push({ tunnelAddress: a, iface, ...(mtu.exitCode === 0 && /^\d+$/.test(mtu.stdout.trim()) ? { mtu: Number(mtu.stdout.trim()) } : {}) });
  }
  return facts;
}

/** What an apply of gre delivery says of a host whose underlay is too small for full-size frames; nothing when it is not. */
export function underlayMtuWarnings(host: string, facts: readonly UnderlayFacts[]): string[] {
  return facts.flatMap((f) => {
    const overhead = greOverhead(f.tunnelAddress);
    const need = FULL_SIZE + overhead;
    return f.mtu !== undefined && f.mtu < need
      ? [
          `${host}: the underlay interface ${f.iface} (tunnel address ${f.tunnelAddress}) has MTU ${f.mtu}, below ${need}: gre delivery adds ${overhead} bytes to each frame (${overheadParts(f.tunnelAddress)}), so a client's full-size ${FULL_SIZE}-byte packet is dropped without a word. Raise the underlay MTU to ${need} or more on every link of the path, or lower the clients' MTU (or MSS) to fit ${f.mtu - overhead} bytes`,
        ]
      : [];
  });
}

/** The parts of GRE's overhead, as the messages say them. */
export const overheadParts = (tunnelAddress: string) => `outer ${tunnelAddress.includes(":") ? "IPv6 40" : "IPv4 20"}, GRE with key 8, inner Ethernet 14`;
