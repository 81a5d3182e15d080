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
