import { ipFamily, ipv6Number } from "./address";
import { OpenFlowValueError } from "./render";

/** Packets ovslb itself sends (packet-out), built from validated values. */

const macBytes = (field: string, mac: string) => {
  if (!/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(mac)) throw new OpenFlowValueError(field, `${JSON.stringify(mac)} is not a MAC address`);
  return Buffer.from(mac.split(":").map((x) => parseInt(x, 16)));
};
const ipBytes = (field: string, ip: string) => {
  const octets = ip.split(".").map(Number);
  if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255))
    throw new OpenFlowValueError(field, `${JSON.stringify(ip)} is not an IPv4 address`);
  return Buffer.from(octets);
};
const ipv6Bytes = (field: string, ip: string) => {
  if (ipFamily(ip) !== 6) throw new OpenFlowValueError(field, `${JSON.stringify(ip)} is not an IPv6 address`);
  return Buffer.from(ipv6Number(ip).toString(16).padStart(32, "0"), "hex");
};

/**
 * A gratuitous ARP reply, broadcast: "`ip` is at `mac`". A neighbour that
 * holds an entry for `ip` (even a failed one) takes it as stale, hence usable
 * again, without waiting for its own resolution.
 */
export function arpAnnouncement(mac: string, ip: string): string {
  const m = macBytes("mac", mac);
  const a = ipBytes("ip", ip);
  const arp = Buffer.concat([Buffer.from([0, 1, 8, 0, 6, 4, 0, 2]), m, a, Buffer.alloc(6), a]);
  return Buffer.concat([Buffer.alloc(6, 0xff), m, Buffer.from([0x08, 0x06]), arp]).toString("hex");
}

/** The 16-bit ones' complement sum of the Internet checksum (RFC 1071). */
function internetChecksum(data: Buffer): number {
  let sum = 0;
  for (let i = 0; i < data.length; i += 2) sum += (data[i] << 8) | (data[i + 1] ?? 0);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/**
 * IPv6's gratuitous ARP: an unsolicited neighbour advertisement (RFC 4861
 * 4.4, 7.2.6) to all nodes (ff02::1), Override set, Solicited clear, with the
 * target link-layer address option. A neighbour holding an entry for `ip`
 * takes the MAC and marks it stale, as with the ARP announcement.
 */
export function ndAnnouncement(mac: string, ip: string): string {
  const m = macBytes("mac", mac);
  const target = ipv6Bytes("ip", ip);
  const allNodes = ipv6Bytes("ip", "ff02::1");
  // ICMPv6 type 136 code 0, checksum (filled below), flags O (0x20000000), target, option 2 (length 1 = 8 bytes): the MAC.
  const icmp = Buffer.concat([Buffer.from([136, 0, 0, 0, 0x20, 0, 0, 0]), target, Buffer.from([2, 1]), m]);
  const pseudo = Buffer.concat([target, allNodes, Buffer.from([0, 0, 0, icmp.length, 0, 0, 0, 58]), icmp]);
  icmp.writeUInt16BE(internetChecksum(pseudo), 2);
  // Hop limit 255: a receiver drops ND from anything that crossed a router.
  const ip6 = Buffer.concat([Buffer.from([0x60, 0, 0, 0, 0, icmp.length, 58, 255]), target, allNodes]);
  return Buffer.concat([Buffer.from([0x33, 0x33, 0, 0, 0, 1]), m, Buffer.from([0x86, 0xdd]), ip6, icmp]).toString("hex");
}

/** "`ip` is at `mac`" in the address's family: a gratuitous ARP for IPv4, an unsolicited neighbour advertisement for IPv6. */
export const neighbourAnnouncement = (mac: string, ip: string): string => (ipFamily(ip) === 6 ? ndAnnouncement(mac, ip) : arpAnnouncement(mac, ip));
