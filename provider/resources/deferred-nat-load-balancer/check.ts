import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DeferredNatVip } from "../../model/inputs.generated";
import type { Defaulted } from "../../model/defaulted";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { addressFamily, canonicalAddress, checkFamilies, handOnKeyCollisions, underlayFamily } from "../../model/addresses";
import { deliveryOf } from "./dataplane";
import { backendKey, DEFAULT_SELECTION_FIELDS, MAX_BUCKETS_PER_GROUP, vipKey } from "./ids";
import { checkSecondChance } from "./second-chance";

/** DeferredNatLoadBalancer inputs: defaults (applied once, at check) and the rules the schema cannot say (pure). */

/** A backend with its weight given and its MAC in lower case (OVS prints MACs so). */
export type DefaultedBackend = Defaulted<DeferredNatBackend, "weight">;

export type DefaultedVip = Omit<DeferredNatVip, "backends"> & { backends: DefaultedBackend[] };

/** DeferredNatLoadBalancer inputs as withDefaults returns them: the only form the plans take. */
export type DeferredNatDefaulted = Omit<Defaulted<DeferredNatLoadBalancerInputs, "selectionMethod" | "selectionFields" | "delivery">, "vips"> & {
  vips: DefaultedVip[];
};

type Inputs = DeferredNatDefaulted;

export function withDefaults(inputs: DeferredNatLoadBalancerInputs): Inputs {
  return {
    ...inputs,
    selectionMethod: inputs.selectionMethod ?? "hash",
    selectionFields: inputs.selectionFields ?? [...DEFAULT_SELECTION_FIELDS],
    delivery: inputs.delivery ?? "mac",
    // IPv6 tunnel addresses recorded canonical, as OVS prints them; IPv4 ones (and their objects) kept as they are.
    ...(inputs.gateways.some((g) => g.tunnelAddress?.includes(":"))
      ? { gateways: inputs.gateways.map((g) => (g.tunnelAddress ? { ...g, tunnelAddress: canonicalAddress(g.tunnelAddress) } : g)) }
      : {}),
    ...(inputs.hypervisors.some((h) => h.tunnelAddress?.includes(":"))
      ? { hypervisors: inputs.hypervisors.map((h) => (h.tunnelAddress ? { ...h, tunnelAddress: canonicalAddress(h.tunnelAddress) } : h)) }
      : {}),
    ...(inputs.ovn?.healthCheckSourceIpv6 ? { ovn: { ...inputs.ovn, healthCheckSourceIpv6: canonicalAddress(inputs.ovn.healthCheckSourceIpv6) } } : {}),
    // A VIP already defaulted (recorded inputs are) is kept as it is, not copied: 100,000 backends add up.
    vips: inputs.vips.map((v) => (isDefaultedVip(v) ? v : { ...v, address: canonicalAddress(v.address), backends: v.backends.map(defaultedBackend) })),
  };
}

/**
 * The weight first, then the backend's own fields: every defaulted backend
 * gets one object shape whether or not it gave a weight, so comparing
 * 100,000 of them (an update's scope) stays fast in V8.
 */
export function defaultedBackend(b: DeferredNatBackend): DefaultedBackend {
  if (isDefaulted(b)) return b;
  const out = { weight: 1, ...b, address: canonicalAddress(b.address), mac: b.mac.toLowerCase() };
  out.weight ??= 1;
  return out;
}

// toLowerCase returns the very string when nothing changes: no copy for a MAC already in lower case. Only IPv6 addresses have a canonical form to check.
export const isDefaulted = (b: DeferredNatBackend): b is DefaultedBackend =>
  b.weight !== undefined && b.mac === b.mac.toLowerCase() && (!b.address.includes(":") || canonicalAddress(b.address) === b.address);

export const isDefaultedVip = (v: DeferredNatVip): v is DefaultedVip =>
  (!v.address.includes(":") || canonicalAddress(v.address) === v.address) && v.backends.every(isDefaulted);

export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (inputs.selectionMethod === "dp_hash") {
    fail(
      "selectionMethod",
      "dp_hash remaps most connections whenever the bucket count changes (and OVS 3.1 corrupts dp_hash groups on bucket insert/remove); use hash",
    );
  }
  if (inputs.selectionFields && inputs.selectionFields.length === 0) {
    fail("selectionFields", "give at least one field: with none, every packet hashes alike and one backend takes all");
  }
  inputs.gateways.forEach((g, i) => failures.push(...checkConnection(g.host.connection, `gateways[${i}].host.connection`)));
  duplicates(inputs.gateways.map((g) => g.name)).forEach((i) => fail(`gateways[${i}].name`, "is used by another gateway"));
  duplicates(inputs.hypervisors.map((h) => h.name)).forEach((i) => fail(`hypervisors[${i}].name`, "is listed twice"));
  const hypervisors = new Set(inputs.hypervisors.map((h) => h.name));
  duplicates(inputs.vips.map(vipKey)).forEach((i) => fail(`vips[${i}]`, "is the same address, port and protocol as another VIP"));
  inputs.vips.forEach((vip, v) => {
    const buckets = vip.backends.reduce((n, b) => n + b.weight, 0);
    // secondChance has no group: its own limit is the slot table's (checkSecondChance).
    if (!inputs.secondChance && buckets > MAX_BUCKETS_PER_GROUP) {
      fail(
        `vips[${v}].backends`,
        `needs ${buckets} buckets (one per backend and unit of weight); a group holds at most ${MAX_BUCKETS_PER_GROUP}, the most OVS can send or report in one OpenFlow message`,
      );
    }
    duplicates(vip.backends.map(backendKey)).forEach((b) => fail(`vips[${v}].backends[${b}]`, "is listed twice in this VIP"));
    vip.backends.forEach((b, i) => {
      // Built only on a failure: 100,000 backends' paths add up.
      const at = () => `vips[${v}].backends[${i}]`;
      if (b.address === vip.address) fail(`${at()}.address`, "equals the VIP's address: a backend cannot be its own VIP");
      if (!hypervisors.has(b.hypervisor))
        fail(`${at()}.hypervisor`, `names a hypervisor the load balancer does not know (known: ${[...hypervisors].join(", ")})`);
      if (b.logicalPort && !inputs.ovn?.[sourceProperty(b.address)]) {
        const source = sourceProperty(b.address);
        fail(`${at()}.logicalPort`, `needs ovn.${source}: OVN's ip_port_mappings pair a logical port with the health checks' source address of its family`);
      }
    });
  });
  const gre = inputs.hypervisors.filter((h) => deliveryOf(inputs, h.name) === "gre");
  inputs.hypervisors.forEach((h, i) => {
    if (deliveryOf(inputs, h.name) === "gre" && !h.tunnelAddress) {
      fail(`hypervisors[${i}].tunnelAddress`, "is required for gre delivery: the gateways' tunnels to this hypervisor end there");
    }
  });
  if (gre.length > 0) {
    inputs.gateways.forEach((g, i) => {
      if (!g.tunnelAddress)
        fail(`gateways[${i}].tunnelAddress`, "is required for gre delivery: the hypervisors accept GRE only from the gateways' tunnel addresses");
    });
  }
  const underlay = underlayFamily(
    [
      ...inputs.gateways.flatMap((g, i) => (g.tunnelAddress ? [{ property: `gateways[${i}].tunnelAddress`, address: g.tunnelAddress }] : [])),
      ...inputs.hypervisors.flatMap((h, i) => (h.tunnelAddress ? [{ property: `hypervisors[${i}].tunnelAddress`, address: h.tunnelAddress }] : [])),
    ],
    failures,
  );
  inputs.gateways.forEach((g, i) => g.tunnelAddress?.includes(":") && addressFamily(g.tunnelAddress, `gateways[${i}].tunnelAddress`, failures));
  inputs.hypervisors.forEach((h, i) => h.tunnelAddress?.includes(":") && addressFamily(h.tunnelAddress, `hypervisors[${i}].tunnelAddress`, failures));
  if (underlay === 6 && inputs.secondChance) {
    failures.push(
      ...handOnKeyCollisions(
        inputs.hypervisors.flatMap((h, i) => (h.tunnelAddress ? [{ property: `hypervisors[${i}].tunnelAddress`, address: h.tunnelAddress }] : [])),
      ),
    );
  }
  duplicates(gre.flatMap((h) => (h.tunnelAddress ? [h.tunnelAddress] : []))).forEach((k) => {
    fail(`hypervisors[${inputs.hypervisors.indexOf(gre.filter((h) => h.tunnelAddress)[k])}].tunnelAddress`, "is another hypervisor's tunnel address");
  });
  inputs.vips.forEach((vip, v) => {
    if (!vip.fragments) return;
    if (vip.protocol !== "udp") fail(`vips[${v}].fragments`, "is for udp VIPs: TCP does not fragment (path MTU discovery sizes its segments)");
    else if (inputs.secondChance) fail(`vips[${v}].fragments`, "cannot be used with secondChance yet: its slot flows hash ports, which fragments do not show");
    else if (inputs.vips.some((o, w) => w !== v && o.protocol === "udp" && o.address === vip.address)) {
      fail(`vips[${v}].fragments`, "needs the VIP to be the only udp VIP of its address: fragments show no port, so they cannot be told apart");
    }
  });
  if (inputs.ovn) failures.push(...checkConnection(inputs.ovn.northbound.connection, "ovn.northbound.connection"));
  const source6 = inputs.ovn?.healthCheckSourceIpv6;
  if (source6 !== undefined && addressFamily(source6, "ovn.healthCheckSourceIpv6", failures) === 4)
    fail("ovn.healthCheckSourceIpv6", "is an IPv4 address: the IPv4 probes' source is ovn.healthCheckSourceIp");
  failures.push(...checkHealthCheck(inputs), ...checkSecondChance(inputs), ...checkFamilies(inputs.vips));
  return failures;
}

/** The ovn property that holds the probes' source address for a backend or VIP of this address's family. */
const sourceProperty = (address: string) => (address.includes(":") ? "healthCheckSourceIpv6" : "healthCheckSourceIp");

/** What the health check needs of the rest of the inputs, each refusal naming the property that is missing. */
export function checkHealthCheck(inputs: Inputs): CheckFailure[] {
  const hc = inputs.healthCheck;
  if (!hc) return [];
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  if (hc.probe) {
    if (!inputs.ovn) fail("healthCheck.probe", "needs ovn: OVN's probes are Load_Balancer_Health_Check rows of the northbound load balancer");
    else {
      for (const source of new Set(inputs.vips.map((v) => sourceProperty(v.address)))) {
        if (!inputs.ovn[source]) {
          fail(
            `ovn.${source}`,
            `is required by healthCheck.probe with ${source === "healthCheckSourceIp" ? "IPv4" : "IPv6"} VIPs: every VIP's probes need a source address of its family (ip_port_mappings BACKEND_IP -> LSP:SRC_IP); without a mapping OVN silently drops the backend`,
          );
        }
      }
    }
    inputs.vips.forEach((vip, v) =>
      vip.backends.forEach((b, i) => {
        if (!b.logicalPort) {
          fail(
            `vips[${v}].backends[${i}].logicalPort`,
            "is required by healthCheck.probe: OVN probes a backend from the chassis its logical port is bound to, and silently drops a monitored VIP's backend that has no port mapping",
          );
        }
      }),
    );
  }
  if (hc.bfd) {
    inputs.hypervisors.forEach((h, i) => {
      if (deliveryOf(inputs, h.name) !== "gre") {
        fail(
          `hypervisors[${i}].delivery`,
          "must be gre with healthCheck.bfd: BFD runs on the gateways' tunnel to each hypervisor, and mac delivery has none to watch",
        );
      }
    });
  }
  if (hc.southbound) {
    if (!hc.probe) fail("healthCheck.southbound", "is only read with healthCheck.probe: the southbound's Service_Monitor rows exist only for probed VIPs");
    failures.push(...checkConnection(hc.southbound.connection, "healthCheck.southbound.connection"));
  }
  if (hc.enforce && !(hc.probe && hc.southbound)) {
    fail("healthCheck.enforce", "needs healthCheck.probe and healthCheck.southbound: enforcing sets stale Service_Monitor rows offline in the southbound");
  }
  return failures;
}

export function duplicates(keys: readonly string[]): number[] {
  const seen = new Set<string>();
  const repeated: number[] = [];
  keys.forEach((k, i) => (seen.has(k) ? repeated.push(i) : seen.add(k)));
  return repeated;
}
