import { hash } from "node:crypto";
import { canonicalIpv6, ipv4Number } from "../openflow";

/**
 * Deterministic identifiers: derived from what a thing IS (the
 * resource, the VIP, the backend), never from a position, recorded in the
 * outputs once given, and probed past collisions.
 */

export const MAX_GROUP_ID = 0xffffff00;
export const MAX_BUCKET_ID = 0xffffff00;
export const MAX_CT_ZONE = 0xffff;
/** Linux interface names (and so OVS bridge and port names) have at most 15 characters. */
export const MAX_INTERFACE_NAME = 15;

/** The top 16 bits of every ovslb cookie, so ovslb's flows are recognisable in any dump. */
export const COOKIE_TAG = 0x0b5en;

function digest(parts: readonly string[]): Buffer {
  // One shot over the same bytes as updating a hash part by part: the same digest, at half the cost (100,000 bucket ids per plan).
  let text = "";
  for (const p of parts) text += `${p.length}:${p}`;
  return hash("sha256", text, "buffer");
}

/** Cookies derived so far, one per resource the process serves: a one-change update asks for its cookie several times, each a sha256 without this. */
const cookies = new Map<string, bigint>();

/** The cookie that names the owning resource on all of its flows: tag + 48 bits of its identity. */
export function ownerCookie(kind: string, resourceId: string): bigint {
  const key = `${kind.length}:${kind}${resourceId}`;
  let cookie = cookies.get(key);
  if (cookie === undefined) {
    cookie = (COOKIE_TAG << 48n) | (digest([kind, resourceId]).readBigUInt64BE(0) & 0xffff_ffff_ffffn);
    cookies.set(key, cookie);
  }
  return cookie;
}

/**
 * The ofport_request of a port ovslb creates, derived from parts: high above
 * the ports people number by hand, so a port re-created by hand keeps its
 * number and the flows that use it. Tunnel ports (and the flow-based GRE
 * port) take 60001-65000, BFD liveness ports 55001-60000.
 */
export const tunnelOfportRequest = (parts: readonly string[]) => 60000 + derivedId(parts, 5000);
export const bfdOfportRequest = (parts: readonly string[]) => 55000 + derivedId(parts, 5000);

/**
 * An id in [1, max] derived from parts. `taken(id)` says whether a candidate
 * is already used; candidates are probed in a fixed sequence (the same parts
 * always probe the same ids), so every host derives the same answer from the
 * same taken set.
 */
export function derivedId(parts: readonly string[], max: number, taken: (id: number) => boolean = () => false): number {
  for (let attempt = 0; attempt < 64; attempt++) {
    const d = digest(attempt === 0 ? parts : [...parts, `probe-${attempt}`]);
    const id = (d.readUInt32BE(0) % max) + 1;
    if (!taken(id)) return id;
  }
  throw new Error(`no free id for ${parts.join("/")} after 64 probes`);
}

/**
 * Second chance's GRE key: which hypervisor a moved slot's previous owner is
 * on, set by the gateways and read by the hypervisor that hands a packet on.
 * Over an IPv4 underlay the key is the previous owner's tunnel address itself
 * (the hypervisor moves it into tun_dst); an IPv6 address does not fit in 32
 * bits, so over IPv6 it is a derived id in [1, 2^32-1] of the address (in
 * RFC 5952 form), and the hypervisor has one hand-on flow per peer. 0 is
 * "no previous owner".
 */
export function handOnKey(tunnelAddress: string): number {
  if (!tunnelAddress.includes(":")) return ipv4Number(tunnelAddress);
  return derivedId(["second-chance-hand-on", canonicalIpv6(tunnelAddress) ?? tunnelAddress], 0xffffffff);
}

/**
 * A name of at most 15 characters: prefix + a hash of the identity, so two
 * identities never share a name by truncation (cdk8s-style). Refused when the
 * prefix leaves no room for 6 hash characters.
 */
export function interfaceName(prefix: string, identity: string): string {
  const room = MAX_INTERFACE_NAME - prefix.length;
  if (room < 6) throw new Error(`interface name prefix "${prefix}" leaves no room for a hash suffix`);
  return prefix + digest([identity]).toString("hex").slice(0, Math.min(room, 8));
}
