import { isDeepStrictEqual } from "node:util";
import { claimedBy } from "../../engine/attached-health-checks";
import { healthVipKey } from "../../engine/health";
import type { HealthCheckInputs as Inputs, HealthCheckVip } from "../../model/inputs.generated";
import { checkConnection, type CheckFailure } from "../../model/validate";
import type { DriftFinding } from "../../model/drift";
import { LOAD_BALANCER_KEY, MAPPINGS_KEY, OWNER_KEY, describeOwner, ownerOf, type Uuid } from "../../ovsdb";
import { lbId as deferredNatId } from "../deferred-nat-load-balancer/plan";
import { endpoint, ovnAddress, probeOptions, probeSource } from "../deferred-nat-load-balancer/ovn";
import { addressFamily, canonicalAddress, checkFamilies } from "../../model/addresses";

/**
 * HealthCheck as pure data: the northbound rows it wants on its load
 * balancer's Load_Balancer rows, what it must change (or refuse) given what
 * the northbound holds, and where the northbound differs from the inputs.
 */

export const KIND = "HealthCheck";
export const PROTOCOLS = ["tcp", "udp", "sctp"] as const;
type Protocol = (typeof PROTOCOLS)[number];

/** The resource id and the owner mark of its Load_Balancer_Health_Check rows. */
export const healthCheckId = (inputs: Pick<Inputs, "loadBalancer">) => `health-check/${inputs.loadBalancer}`;
/** The owner of the load balancer's rows (DeferredNatLoadBalancer's id). */
export const loadBalancerOwner = (inputs: Pick<Inputs, "loadBalancer">) => deferredNatId({ name: inputs.loadBalancer });
/** The load balancer's NB row of a protocol, as DeferredNatLoadBalancer names it (one protocol per row). */
export const rowName = (inputs: Pick<Inputs, "loadBalancer">, protocol: string) => `ovslb-${inputs.loadBalancer}-${protocol}`;
/** The key OVN matches a health check to a VIP by: exactly the vips key, "IP:PORT" ("[IP]:PORT" for IPv6). */
export const ovnVip = (v: Pick<HealthCheckVip, "address" | "port">) => endpoint(v);

/** Addresses as recorded: IPv6 in RFC 5952 form, as the load balancer records its VIPs and backends. */
export function withDefaults(inputs: Inputs): Inputs {
  return {
    enforce: false,
    ...inputs,
    ...(inputs.sourceIpv6 === undefined ? {} : { sourceIpv6: canonicalAddress(inputs.sourceIpv6) }),
    vips: inputs.vips.map((v) => ({
      ...v,
      address: canonicalAddress(v.address),
      backends: v.backends.map((b) => ({ ...b, address: canonicalAddress(b.address) })),
    })),
  };
}

/** The property that holds the probes' source address for an address of this family. */
const sourceProperty = (address: string) => (address.includes(":") ? "sourceIpv6" : "sourceIp");

const duplicates = (keys: readonly string[]) => {
  const seen = new Set<string>();
  return keys.flatMap((k, i) => (seen.has(k) ? [i] : (seen.add(k), [])));
};

export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  const fail = (property: string, reason: string) => failures.push({ property, reason });
  failures.push(...checkConnection(inputs.northbound.connection, "northbound.connection"));
  if (inputs.southbound) failures.push(...checkConnection(inputs.southbound.connection, "southbound.connection"));
  if (inputs.enforce && !inputs.southbound) fail("enforce", "needs southbound: enforcing sets stale Service_Monitor rows offline in the southbound");
  failures.push(...checkFamilies(inputs.vips));
  if (inputs.sourceIpv6 !== undefined && addressFamily(inputs.sourceIpv6, "sourceIpv6", failures) === 4)
    fail("sourceIpv6", "is an IPv4 address: the IPv4 probes' source is sourceIp");
  for (const source of new Set(inputs.vips.map((v) => sourceProperty(v.address)))) {
    if (inputs[source] === undefined)
      fail(source, `is required: a VIP is ${source === "sourceIp" ? "IPv4" : "IPv6"}, and its probes need a source address of that family`);
  }
  duplicates(inputs.vips.map(healthVipKey)).forEach((i) =>
    fail(`vips[${i}]`, "is the same address, port and protocol as another VIP: one health check per VIP"),
  );
  // OVN keys ip_port_mappings by backend address, one per Load_Balancer row (one row per protocol).
  const portOf = new Map<string, { at: string; logicalPort: string }>();
  inputs.vips.forEach((vip, v) => {
    duplicates(vip.backends.map((b) => `${b.address}:${b.port}`)).forEach((i) => fail(`vips[${v}].backends[${i}]`, "is listed twice in this VIP"));
    vip.backends.forEach((b, i) => {
      const at = `vips[${v}].backends[${i}]`;
      if (b.address === vip.address) fail(`${at}.address`, "equals the VIP's address: a backend cannot be its own VIP");
      if (b.address === inputs[sourceProperty(b.address)])
        fail(`${at}.address`, `equals ${sourceProperty(b.address)}: the probes' source address cannot be a backend's`);
      const key = `${vip.protocol}/${b.address}`;
      const first = portOf.get(key);
      if (!first) portOf.set(key, { at, logicalPort: b.logicalPort });
      else if (first.logicalPort !== b.logicalPort) {
        fail(
          `${at}.logicalPort`,
          `differs from ${first.at}.logicalPort for the same address: OVN's ip_port_mappings hold one logical port per backend address`,
        );
      }
      if (inputs.gateways?.length && !b.hypervisor) {
        fail(`${at}.hypervisor`, "is required with gateways: the gateways' BFD sessions are toward hypervisors, by the load balancer's names for them");
      }
    });
  });
  inputs.gateways?.forEach((g, i) => failures.push(...checkConnection(g.host.connection, `gateways[${i}].host.connection`)));
  duplicates((inputs.gateways ?? []).map((g) => g.name)).forEach((i) => fail(`gateways[${i}].name`, "is used by another gateway"));
  return failures;
}

/** What one of the load balancer's rows should carry for this health check. */
export interface WantedRow {
  name: string;
  /** OVN vip key ("IP:PORT") -> the Load_Balancer_Health_Check options, and the index of the VIP in the inputs. */
  checks: Record<string, { options: Record<string, string>; index: number; addresses: string[] }>;
  /** Backend address as OVN keys it (IPv6 in brackets) -> "LSP:SOURCE_IP". */
  mappings: Record<string, string>;
}

/** The rows the inputs want, by protocol. Pure. */
export function desiredRows(inputs: Inputs): Map<Protocol, WantedRow> {
  const out = new Map<Protocol, WantedRow>();
  const options = probeOptions(inputs.probe ?? {});
  inputs.vips.forEach((vip, index) => {
    let row = out.get(vip.protocol);
    if (!row) out.set(vip.protocol, (row = { name: rowName(inputs, vip.protocol), checks: {}, mappings: {} }));
    // Mappings and their claims are keyed as OVN keys ip_port_mappings: IPv6 in brackets.
    row.checks[ovnVip(vip)] = { options, index, addresses: vip.backends.map((b) => ovnAddress(b.address)) };
    for (const b of vip.backends) {
      const source = probeSource(b.address, inputs.sourceIp, inputs.sourceIpv6);
      if (source) row.mappings[ovnAddress(b.address)] = `${b.logicalPort}:${ovnAddress(source)}`;
    }
  });
  return out;
}

/** A Load_Balancer_Health_Check row as read. */
export interface HealthCheckRow {
  _uuid: Uuid;
  vip: string;
  options: Map<string, string>;
  external_ids: Map<string, string>;
}

/** One of the load balancer's Load_Balancer rows as read, with the health checks it references (any owner). */
export interface ObservedRow {
  _uuid: Uuid;
  name: string;
  vips: Map<string, string>;
  ip_port_mappings: Map<string, string>;
  health_check: Uuid[];
  external_ids: Map<string, string>;
  healthCheckRows: HealthCheckRow[];
}

/** What one transaction changes on one Load_Balancer row. */
export interface RowChange {
  row: ObservedRow;
  insert: { vip: string; options: Record<string, string>; externalIds: Record<string, string> }[];
  update: { row: HealthCheckRow; options: Record<string, string>; externalIds: Record<string, string> }[];
  /** This health check's rows to detach (the server garbage-collects them). */
  detach: HealthCheckRow[];
  /** ip_port_mappings keys to delete, then entries to insert. */
  deleteMappings: string[];
  insertMappings: Record<string, string>;
}

export const isEmpty = (c: RowChange) =>
  c.insert.length + c.update.length + c.detach.length + c.deleteMappings.length + Object.keys(c.insertMappings).length === 0;

/** This health check's rows on a load balancer row: the first per VIP; further ones are detached. */
function ownRows(row: ObservedRow, owner: string): { byVip: Map<string, HealthCheckRow>; extra: HealthCheckRow[] } {
  const byVip = new Map<string, HealthCheckRow>();
  const extra: HealthCheckRow[] = [];
  for (const hc of row.healthCheckRows) {
    if (ownerOf(hc) !== owner) continue;
    if (byVip.has(hc.vip)) extra.push(hc);
    else byVip.set(hc.vip, hc);
  }
  return { byVip, extra };
}

const sameMap = (have: ReadonlyMap<string, string>, want: Readonly<Record<string, string>>) => isDeepStrictEqual(Object.fromEntries(have), want);

/**
 * The changes that take the observed rows (by protocol; undefined: no row of
 * that name) to what the inputs want, or the refusals, each naming the
 * property and why: a row that is missing or not the load balancer's, a VIP
 * not on it, a VIP whose probe someone else owns (the load balancer's own
 * healthCheck.probe), a mapping someone else wrote otherwise. Inputs with no
 * VIPs (delete) want nothing and refuse nothing. Pure.
 */
export function planRows(inputs: Inputs, observed: ReadonlyMap<string, ObservedRow | undefined>): { changes: RowChange[]; refusals: string[] } {
  const want = desiredRows(inputs);
  const me = healthCheckId(inputs);
  const lb = loadBalancerOwner(inputs);
  const refusals: string[] = [];
  const changes: RowChange[] = [];
  for (const protocol of PROTOCOLS) {
    const w = want.get(protocol);
    const row = observed.get(protocol);
    if (w && !row) {
      refusals.push(
        `loadBalancer: OVN Load_Balancer ${w.name} does not exist: a HealthCheck attaches to the rows of DeferredNatLoadBalancer ${inputs.loadBalancer} (with ovn), which must exist first`,
      );
      continue;
    }
    if (!row) continue;
    if (w && ownerOf(row) !== lb) {
      refusals.push(`loadBalancer: OVN Load_Balancer ${w.name} is ${describeOwner(row)}, not ${lb}; refusing to attach to it`);
      continue;
    }
    const { byVip, extra } = ownRows(row, me);
    const change: RowChange = { row, insert: [], update: [], detach: [...extra], deleteMappings: [], insertMappings: {} };
    // Mappings: the ones this health check inserted are its own; others' are used when they say the same, refused when not.
    const claimed = new Set([...byVip.values()].flatMap(claimedBy));
    const claims = new Set<string>();
    for (const [address, value] of Object.entries(w?.mappings ?? {})) {
      const current = row.ip_port_mappings.get(address);
      if (current === value) {
        if (claimed.has(address)) claims.add(address);
      } else if (current === undefined || claimed.has(address)) {
        if (current !== undefined) change.deleteMappings.push(address);
        change.insertMappings[address] = value;
        claims.add(address);
      } else {
        const v = w!.checks[Object.keys(w!.checks).find((k) => w!.checks[k].addresses.includes(address))!].index;
        refusals.push(
          `vips[${v}].backends: OVN Load_Balancer ${row.name} maps backend address ${address} to ${current}, not ${value} (written by another owner: the load balancer's ovn.healthCheckSourceIp or by hand); refusing to overwrite it`,
        );
      }
    }
    for (const address of claimed)
      if (!claims.has(address) && !(address in (w?.mappings ?? {})) && row.ip_port_mappings.has(address)) change.deleteMappings.push(address);
    for (const [vip, { options, index, addresses }] of Object.entries(w?.checks ?? {})) {
      if (!row.vips.has(vip)) {
        refusals.push(
          `vips[${index}]: ${protocol} VIP ${vip} is not one of load balancer ${inputs.loadBalancer}'s (OVN Load_Balancer ${row.name} has ${[...row.vips.keys()].join(", ") || "none"})`,
        );
        continue;
      }
      const other = row.healthCheckRows.find((hc) => hc.vip === vip && ownerOf(hc) !== me);
      if (other) {
        const whose =
          ownerOf(other) === lb
            ? `DeferredNatLoadBalancer ${inputs.loadBalancer}'s own healthCheck.probe (owned by ${lb}): remove healthCheck.probe from the load balancer first`
            : `${describeOwner(other)}`;
        refusals.push(`vips[${index}]: the health check of ${protocol} VIP ${vip} on OVN Load_Balancer ${row.name} is ${whose}; refusing to take it over`);
        continue;
      }
      const mine = [...new Set(addresses)].filter((a) => claims.has(a)).sort();
      const externalIds = { [LOAD_BALANCER_KEY]: lb, ...(mine.length > 0 ? { [MAPPINGS_KEY]: mine.join(",") } : {}) };
      const have = byVip.get(vip);
      if (!have) change.insert.push({ vip, options, externalIds });
      else if (!sameMap(have.options, options) || !sameMap(withoutOwner(have.external_ids), externalIds))
        change.update.push({ row: have, options, externalIds });
    }
    for (const [vip, hc] of byVip) if (!w?.checks[vip]) change.detach.push(hc);
    if (!isEmpty(change)) changes.push(change);
  }
  return { changes, refusals };
}

const withoutOwner = (ids: ReadonlyMap<string, string>) => new Map([...ids].filter(([k]) => k !== OWNER_KEY));

/**
 * Where the northbound differs from the inputs, as findings, and the indexes
 * of the VIPs it concerns (a VIP whose row, health check or mappings are not
 * as declared reads as not declared, so a diff shows it and update puts it
 * back). Pure.
 */
export function nbFindings(inputs: Inputs, observed: ReadonlyMap<string, ObservedRow | undefined>): { findings: DriftFinding[]; driftedVips: Set<number> } {
  const want = desiredRows(inputs);
  const me = healthCheckId(inputs);
  const lb = loadBalancerOwner(inputs);
  const findings: DriftFinding[] = [];
  const rowDiffers = (name: string, detail: string) =>
    findings.push({ host: "northbound", kind: "northbound-row", object: `OVN Load_Balancer ${name}`, detail });
  const columnDiffers = (name: string, detail: string) =>
    findings.push({ host: "northbound", kind: "northbound-column", object: `OVN Load_Balancer ${name}`, detail });
  const driftedVips = new Set<number>();
  for (const protocol of PROTOCOLS) {
    const w = want.get(protocol);
    const row = observed.get(protocol);
    const all = Object.values(w?.checks ?? {}).map((c) => c.index);
    if (w && !row) {
      rowDiffers(w.name, "missing");
      all.forEach((i) => driftedVips.add(i));
      continue;
    }
    if (!row) continue;
    if (w && ownerOf(row) !== lb) {
      rowDiffers(w.name, `is ${describeOwner(row)}, not ${lb}`);
      all.forEach((i) => driftedVips.add(i));
      continue;
    }
    const { byVip, extra } = ownRows(row, me);
    for (const [vip, { options, index, addresses }] of Object.entries(w?.checks ?? {})) {
      const have = byVip.get(vip);
      const say = (what: string) => (columnDiffers(row.name, what), driftedVips.add(index));
      if (!row.vips.has(vip)) say(`VIP ${vip} is not one of its VIPs`);
      if (!have) say(`health check of VIP ${vip} missing`);
      else if (!sameMap(have.options, options)) say(`health check of VIP ${vip} differs`);
      for (const a of [...new Set(addresses)]) {
        const current = row.ip_port_mappings.get(a);
        if (current === undefined) say(`ip_port_mappings of backend address ${a} missing`);
        else if (current !== w!.mappings[a]) say(`ip_port_mappings of backend address ${a} differs`);
      }
    }
    for (const hc of [...byVip.values(), ...extra]) {
      if (!w?.checks[hc.vip] || extra.includes(hc)) columnDiffers(row.name, `health check of VIP ${hc.vip} not declared`);
    }
  }
  return { findings, driftedVips };
}

/** Whether any of this health check's rows is in the northbound. */
export const anyOwned = (inputs: Inputs, observed: ReadonlyMap<string, ObservedRow | undefined>) =>
  [...observed.values()].some((row) => row?.healthCheckRows.some((hc) => ownerOf(hc) === healthCheckId(inputs)));
