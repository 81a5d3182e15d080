import { isIPv4, isIPv6 } from "node:net";
import type { HashField, Match } from "./types";

/**
 * IP addresses in the text OVS prints. IPv4 is dotted quad. IPv6 is RFC 5952:
 * lowercase, no leading zeros, the first longest run of two or more zero
 * groups compressed to `::` (glibc's inet_ntop, which OVS prints with, and
 * the WHATWG URL serializer, which Node implements, both write exactly that).
 * So `2001:DB8:0::1` and `2001:db8::1` are one address and one text.
 */

export type IpFamily = 4 | 6;

/** The family of a plain address (no prefix, no zone), or undefined when it is neither. */
export function ipFamily(text: string): IpFamily | undefined {
  if (isIPv4(text) && /^[0-9.]+$/.test(text)) return 4;
  if (isIPv6(text) && !text.includes("%")) return 6;
  return undefined;
}

/** An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`): the IPv4 address in IPv6 clothing. */
export const isIpv4Mapped = (canonical: string) => /^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(canonical) || /^::ffff:[0-9.]+$/.test(canonical);

/** The RFC 5952 text of an IPv6 address, or undefined when the text is not one (a zone `%eth0` included). */
export function canonicalIpv6(text: string): string | undefined {
  if (ipFamily(text) !== 6) return undefined;
  return new URL(`http://[${text}]/`).hostname.slice(1, -1);
}

/** An IPv6 address as the 128-bit number it spells. */
export function ipv6Number(text: string): bigint {
  const canonical = canonicalIpv6(text);
  if (canonical === undefined) throw new Error(`${JSON.stringify(text)} is not an IPv6 address`);
  const [head, tail] = canonical.split("::");
  const groups = (s: string | undefined) => (s ? s.split(":") : []);
  const all = tail === undefined ? groups(head) : [...groups(head), ...Array<string>(8 - groups(head).length - groups(tail).length).fill("0"), ...groups(tail)];
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** An IPv4 address as the 32-bit number it spells (a GRE key, a prefix's host bits, an order). */
export const ipv4Number = (address: string): number => address.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);

/**
 * An address or prefix as OVS prints it (the address canonical, a full-length
 * prefix bare), or a reason it is not one: a length beyond the family's, host
 * bits set, an IPv4-mapped or scoped IPv6 address.
 */
export function canonicalPrefix(text: string, family?: IpFamily): { family: IpFamily; text: string } | { reason: string } {
  const [address, length, ...rest] = text.split("/");
  if (rest.length > 0) return { reason: "more than one /" };
  if (address.includes("%")) return { reason: "a scoped address (%zone) names an interface of one host" };
  const found = ipFamily(address);
  if (found === undefined) return { reason: "not an IPv4 or IPv6 address" };
  if (family !== undefined && found !== family) return { reason: `an IPv${found} address where IPv${family} is needed` };
  const canonical = found === 4 ? address : canonicalIpv6(address)!;
  if (found === 6 && isIpv4Mapped(canonical)) return { reason: "an IPv4-mapped IPv6 address: write the IPv4 address itself" };
  if (length === undefined) return { family: found, text: canonical };
  const max = found === 4 ? 32 : 128;
  if (!/^(0|[1-9][0-9]{0,2})$/.test(length) || Number(length) > max || Number(length) === 0) return { reason: `a prefix length of 1-${max}` };
  const bits = Number(length);
  if (bits === max) return { family: found, text: canonical };
  const hostBits = found === 4 ? BigInt(ipv4Number(canonical)) % 2n ** BigInt(32 - bits) : ipv6Number(canonical) % 2n ** BigInt(128 - bits);
  if (hostBits !== 0n) return { reason: "host bits set (the prefix's address must end in zero bits)" };
  return { family: found, text: `${canonical}/${bits}` };
}

type L4 = "tcp" | "udp" | "sctp";
const V6_PROTOCOL = { tcp: "tcp6", udp: "udp6", sctp: "sctp6", icmp: "icmp6", ip: "ipv6" } as const;

/**
 * The match of an address's family: its protocol keyword (`tcp` or `tcp6`)
 * with the source or destination address in the family's field (`nw_dst` or
 * `ipv6_dst`). One place decides, so every flow of a VIP or backend speaks
 * its family.
 */
export function ipMatch(
  protocol: L4 | "icmp" | "ip",
  end: "src" | "dst",
  address: string,
): Pick<Match, "protocol" | "nw_src" | "nw_dst" | "ipv6_src" | "ipv6_dst"> {
  if (address.includes(":"))
    return end === "src" ? { protocol: V6_PROTOCOL[protocol], ipv6_src: address } : { protocol: V6_PROTOCOL[protocol], ipv6_dst: address };
  return end === "src" ? { protocol, nw_src: address } : { protocol, nw_dst: address };
}

/**
 * The ICMP error path MTU discovery lives on, addressed to `address`: IPv4's
 * "fragmentation needed" (type 3 code 4, RFC 1191) or ICMPv6's "packet too
 * big" (type 2 code 0, RFC 8201). OVS matches both with icmp_type/icmp_code.
 */
export function pathMtuErrorMatch(address: string): Pick<Match, "protocol" | "nw_dst" | "ipv6_dst" | "icmp_type" | "icmp_code"> {
  return { ...ipMatch("icmp", "dst", address), ...(address.includes(":") ? { icmp_type: 2, icmp_code: 0 } : { icmp_type: 3, icmp_code: 4 }) };
}

/**
 * A select group's hash field of an address, in the family of `address`:
 * OVS skips a field whose prerequisites a packet fails, so an IPv6 VIP's
 * group hashes ipv6_src/ipv6_dst, never ip_src/ip_dst. Other fields as given.
 */
export const familyHashField = (field: HashField, address: string): HashField =>
  ipFamily(address) === 6 && (field === "ip_src" || field === "ip_dst") ? (field === "ip_src" ? "ipv6_src" : "ipv6_dst") : field;

/** The destination address of a match, whatever its family. */
export const dstAddressOf = (m: Match) => m.nw_dst ?? m.ipv6_dst;
/** The source address of a match, whatever its family. */
export const srcAddressOf = (m: Match) => m.nw_src ?? m.ipv6_src;

/** The transport protocol of a match, whatever its family (`tcp6` -> `tcp`); undefined for one that is not tcp, udp or sctp. */
export function l4Of(protocol: string | undefined): L4 | undefined {
  const base = protocol?.replace(/6$/, "");
  return base === "tcp" || base === "udp" || base === "sctp" ? base : undefined;
}
