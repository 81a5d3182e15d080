import { canonicalIpv6, canonicalPrefix, isIpv4Mapped, type IpFamily } from "../openflow";
import type { CheckFailure } from "./validate";
import { handOnKey } from "./ids";

/**
 * VIP and backend addresses in the inputs: IPv6 recorded in RFC 5952 form
 * (what OVS prints), so `2001:DB8:0::1` and `2001:db8::1` are one VIP and
 * never a diff; and the rules on families a schema cannot say.
 */

/** The address as recorded: IPv6 canonical (the very string when it already is), IPv4 as given; one check refuses stays as written, so its message quotes the user. */
export function canonicalAddress(address: string): string {
  if (!address.includes(":")) return address;
  const canonical = canonicalIpv6(address);
  return canonical === undefined || isIpv4Mapped(canonical) ? address : canonical;
}

/**
 * The family of a plain address, with the failure naming `property` when it
 * is not one (a prefix, a scoped or IPv4-mapped address). `property` may be
 * a function, called only on a failure (a load balancer checks 100,000 backends' addresses).
 */
export function addressFamily(address: string, property: string | (() => string), failures: CheckFailure[]): IpFamily | undefined {
  const parsed = canonicalPrefix(address);
  const named = () => (typeof property === "string" ? property : property());
  if ("reason" in parsed) failures.push({ property: named(), reason: `${JSON.stringify(address)}: ${parsed.reason}` });
  else if (parsed.text.includes("/")) failures.push({ property: named(), reason: `${JSON.stringify(address)}: a prefix where an address is needed` });
  else return parsed.family;
  return undefined;
}

/**
 * Each VIP's backends in the VIP's own family (a dual-stack service is an
 * IPv4 VIP and an IPv6 VIP of the backends' two addresses).
 */
export function checkFamilies(vips: readonly { address: string; backends: readonly { address: string }[] }[]): CheckFailure[] {
  const failures: CheckFailure[] = [];
  vips.forEach((vip, v) => {
    const family = addressFamily(vip.address, `vips[${v}].address`, failures);
    vip.backends.forEach((b, i) => {
      const own = addressFamily(b.address, () => `vips[${v}].backends[${i}].address`, failures);
      if (family !== undefined && own !== undefined && own !== family) {
        failures.push({
          property: `vips[${v}].backends[${i}].address`,
          reason: `is IPv${own} in an IPv${family} VIP: a VIP's backends are of its family (a dual-stack service is two VIPs, one of each family)`,
        });
      }
    });
  });
  return failures;
}

/**
 * The underlay's family: every tunnel end given (a gateway's or a
 * hypervisor's tunnel address, the sources a hypervisor accepts, its BFD
 * peers) of one family, since a GRE tunnel's two ends are (gre over IPv4,
 * ip6gre over IPv6). Undefined when none is given or one is not an address.
 */
export function underlayFamily(ends: readonly { property: string; address: string }[], failures: CheckFailure[]): IpFamily | undefined {
  let first: { property: string; family: IpFamily } | undefined;
  let ok = true;
  for (const end of ends) {
    const parsed = canonicalPrefix(end.address);
    if ("reason" in parsed) {
      // Said by the caller's own check of that property.
      ok = false;
      continue;
    }
    if (!first) first = { property: end.property, family: parsed.family };
    else if (parsed.family !== first.family) {
      ok = false;
      failures.push({
        property: end.property,
        reason: `is IPv${parsed.family} while ${first.property} is IPv${first.family}: the underlay is of one family (gre ports over IPv4, ip6gre over IPv6)`,
      });
    }
  }
  return ok ? first?.family : undefined;
}

/**
 * Over an IPv6 underlay second chance's GRE key is a 32-bit id derived from
 * each hypervisor's tunnel address (handOnKey): two hypervisors with the same
 * id could not be told apart, so such a pair is refused (about one pair in
 * 2^32; a different address for one of them resolves it).
 */
export function handOnKeyCollisions(ends: readonly { property: string; address: string }[]): CheckFailure[] {
  const seen = new Map<number, { property: string; address: string }>();
  const failures: CheckFailure[] = [];
  for (const end of ends) {
    if (!end.address.includes(":") || "reason" in canonicalPrefix(end.address)) continue;
    const key = handOnKey(end.address);
    const other = seen.get(key);
    if (other && canonicalIpv6(other.address) !== canonicalIpv6(end.address)) {
      failures.push({
        property: end.property,
        reason: `has the same second-chance hand-on key as ${other.property} (${key}): give one of them another address`,
      });
    } else seen.set(key, end);
  }
  return failures;
}
