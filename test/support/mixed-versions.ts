import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DeferredNatVip } from "../../provider/model/inputs.generated";
import { chosenBucket, slotChoice } from "../../provider/openflow/trace";
import { traceFlow } from "../../provider/openflow/trace";
import type { Match } from "../../provider/openflow/types";
import { SshSession } from "../../provider/transport/ssh";
import { connectVswitchd } from "../../provider/transport/unixctl";
import { distroRoot, type Release } from "../lab/root";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver } from "./deferred-nat";
import { FaultHost } from "./fault-host";

/**
 * A fleet mid-upgrade (issue 19): gateways on the Open vSwitch releases users
 * run, each a host of its own (FaultHost; the others chrooted into the roots
 * tools/distro-root.sh builds): this machine's (Debian 12, 3.1.0), Ubuntu
 * 24.04 LTS's (3.3, the OVS LTS) and Debian 13's (3.5.0), given the same
 * DeferredNatLoadBalancer through the provider's handlers. Every tuple is
 * traced on each (ofproto/trace over each ovs-vswitchd's unixctl socket) and
 * the backend each chose is compared with the first's, for each way ovslb
 * selects: a select group (selection_method=hash, its fields) and
 * secondChance's multipath (modulo_n over the field set of the selection
 * fields).
 */

/** One gateway of the fleet: its distribution, the Open vSwitch it must run and its host. */
export interface VersionedGateway {
  /** The gateway's name in the load balancer (e.g. "gw-debian-12"). */
  name: string;
  /** e.g. "Debian 12". */
  distribution: string;
  /** The Open vSwitch branch it runs (e.g. "3.1"): what the tests expect it to report. */
  branch: string;
  /** The root it runs from; undefined for this machine's. */
  release?: Release;
  host: FaultHost;
}

const FLEET: readonly Omit<VersionedGateway, "host">[] = [
  { name: "gw-debian-12", distribution: "Debian 12", branch: "3.1" },
  { name: "gw-ubuntu-2404", distribution: "Ubuntu 24.04", branch: "3.3", release: "noble" },
  { name: "gw-debian-13", distribution: "Debian 13", branch: "3.5", release: "trixie" },
];

/** The fleet's gateways, this machine's first (the one every other is compared with). */
export type MixedFleet = VersionedGateway[];

/** Brings up every gateway of the fleet (subnets `subnet`, `subnet + 1`, ... of 172.31.N.0/30). */
export async function mixedFleet(inv: LabInventory, tag: string, subnet: number): Promise<MixedFleet> {
  const fleet: MixedFleet = [];
  try {
    for (const [i, g] of FLEET.entries()) {
      const host = await new FaultHost(inv, `${tag}${i}`, subnet + i, g.release ? { root: distroRoot(g.release) } : {}).up();
      fleet.push({ ...g, host });
    }
  } catch (e) {
    for (const g of fleet) g.host.down();
    throw e;
  }
  return fleet;
}

/** One load balancer the fleet is given, and what it exercises. */
export interface SelectionCase {
  key: string;
  /** The method in OVS's words, as the gateways run it. */
  method: string;
  /** The VIPs (one tuple set each) and the load balancer's other inputs. */
  vips: DeferredNatVip[];
  extra: Partial<DeferredNatLoadBalancerInputs>;
}

// VIPs and backends outside the lab's ranges: these gateways are not on its segment, and no packet is sent.
const PORT = 80;
const HYPERVISORS = ["hv1", "hv2", "hv3", "hv4"];
/** TEST-NET-2 (RFC 5737): tunnel addresses no host here holds; traces only. */
const tunnelAddressOf = (i: number) => `198.51.100.${i}`;

function backends(count: number, v6: boolean, weights?: readonly number[]): DeferredNatBackend[] {
  return Array.from({ length: count }, (_, i) => ({
    address: v6 ? `fd00:30::${i + 1}` : `10.30.0.${i + 1}`,
    port: 8080,
    mac: `02:00:1e:00:00:${(i + 1).toString(16).padStart(2, "0")}`,
    hypervisor: HYPERVISORS[i % HYPERVISORS.length],
    ...(weights ? { weight: weights[i % weights.length] } : {}),
  }));
}

const vip = (address: string, protocol: "tcp" | "udp", count: number, weights?: readonly number[]): DeferredNatVip => ({
  address,
  port: PORT,
  protocol,
  backends: backends(count, address.includes(":"), weights),
});

const greDelivery = (secondChance: boolean): Partial<DeferredNatLoadBalancerInputs> => ({
  delivery: "gre",
  hypervisors: HYPERVISORS.map((name, i) => ({ name, tunnelAddress: tunnelAddressOf(21 + i) })),
  ...(secondChance ? { secondChance: {} } : {}),
});

/** Every way ovslb selects, each on the field sets it accepts and on both families and protocols where it differs. */
export const SELECTION_CASES: readonly SelectionCase[] = [
  {
    key: "group-l3l4",
    method: "select group, selection_method=hash, fields(ip_src,ip_dst,tcp_src,tcp_dst) (udp_*, ipv6_* by VIP)",
    vips: [vip("10.31.0.10", "tcp", 8), vip("10.31.0.10", "udp", 8), vip("fd00:31::10", "tcp", 8), vip("10.31.0.11", "tcp", 6, [1, 2, 3])],
    extra: {},
  },
  {
    key: "group-l3",
    method: "select group, selection_method=hash, fields(ip_src,ip_dst)",
    vips: [vip("10.31.0.12", "tcp", 8)],
    extra: { selectionFields: ["ip_src", "ip_dst"] },
  },
  {
    key: "group-src",
    method: "select group, selection_method=hash, fields(ip_src)",
    vips: [vip("10.31.0.13", "tcp", 8)],
    extra: { selectionFields: ["ip_src"] },
  },
  {
    key: "multipath-l3l4",
    method: "multipath(symmetric_l3l4 / symmetric_l3l4+udp, modulo_n) into 1,024 slots (secondChance)",
    vips: [vip("10.31.0.14", "tcp", 8), vip("10.31.0.14", "udp", 8), vip("fd00:31::14", "tcp", 8)],
    extra: greDelivery(true),
  },
  {
    key: "multipath-l3",
    method: "multipath(symmetric_l3, modulo_n) (secondChance, fields ip_src,ip_dst)",
    vips: [vip("10.31.0.15", "tcp", 8)],
    extra: { ...greDelivery(true), selectionFields: ["ip_src", "ip_dst"] },
  },
  {
    key: "multipath-src",
    method: "multipath(nw_src, modulo_n) (secondChance, fields ip_src)",
    vips: [vip("10.31.0.16", "tcp", 8)],
    extra: { ...greDelivery(true), selectionFields: ["ip_src"] },
  },
];

/** The load balancer of a case on every gateway of the fleet. */
export function caseInputs(fleet: MixedFleet, c: SelectionCase): DeferredNatLoadBalancerInputs {
  const gre = c.extra.delivery === "gre";
  return {
    name: `mixed-${c.key}`,
    gateways: fleet.map(({ name, host }, i) => ({
      name,
      host: host.ovsHost,
      bridge: host.bridge,
      segmentPort: host.segmentPort,
      mac: `02:00:1e:ff:00:0${i + 1}`,
      ...(gre ? { tunnelAddress: tunnelAddressOf(i + 1) } : {}),
    })),
    hypervisors: HYPERVISORS.map((name) => ({ name })),
    vips: c.vips,
    ...c.extra,
  };
}

/** `count` client tuples toward a VIP, the same on every run: sources over a /16 (or its IPv6 twin), ports spread. */
export function tuplesFor(v: DeferredNatVip, count: number): Match[] {
  const v6 = v.address.includes(":");
  return Array.from({ length: count }, (_, i) => ({
    protocol: v6 ? (v.protocol === "tcp" ? "tcp6" : "udp6") : v.protocol,
    ...(v6
      ? { ipv6_src: `fd00:40::${(i >> 8).toString(16)}:${(i & 255).toString(16)}`, ipv6_dst: v.address }
      : { nw_src: `10.40.${i >> 8}.${i & 255}`, nw_dst: v.address }),
    tp_src: 1024 + ((i * 7919) % 64000),
    tp_dst: v.port,
  }));
}

/** What a gateway chose for one tuple: the backend's MAC, and the bucket or slot (and second-chance key) that led there. */
export interface Choice {
  mac?: string;
  bucket?: number;
  slot?: number;
  key?: number;
}

export const sameChoice = (a: Choice, b: Choice) => a.mac === b.mac && a.bucket === b.bucket && a.slot === b.slot && a.key === b.key;

/** Each tuple traced on `host`'s bridge, entering by its segment port: what it chose. */
export async function traceChoices(host: FaultHost, tuples: readonly Match[]): Promise<Choice[]> {
  const ssh = await SshSession.connect(host.connection);
  try {
    const ofport = Number(host.vsctl("get", "interface", host.segmentPort, "ofport").trim());
    const vswitchd = await connectVswitchd(ssh, host.rundir);
    try {
      const traces = await Promise.all(
        tuples.map((t, i) => vswitchd.call("ofproto/trace", [host.bridge, traceFlow({ in_port: ofport, ...t }, `tuples[${i}]`)])),
      );
      return traces.map((trace) => {
        const s = slotChoice(trace);
        const bucket = chosenBucket(trace);
        return {
          ...(s.mac !== undefined ? { mac: s.mac } : {}),
          ...(bucket !== undefined ? { bucket } : {}),
          ...(s.slot !== undefined ? { slot: s.slot } : {}),
          ...(s.key !== undefined ? { key: s.key } : {}),
        };
      });
    } finally {
      vswitchd.close();
    }
  } finally {
    ssh.close();
  }
}

/** One VIP's comparison: how many tuples chose the same on every gateway, and how many chose no backend at all (a broken trace). */
export interface VipAgreement {
  vip: string;
  tuples: number;
  /** Tuples whose choice was the same on every gateway. */
  same: number;
  /** Tuples for which some gateway chose no backend MAC. */
  unchosen: number;
  /** Distinct backends the first gateway chose: a selection that spreads. */
  backendsUsed: number;
  /** The first tuples that differed (tuple index, each gateway's choice in the fleet's order). */
  firstDifferences: { index: number; choices: Choice[] }[];
}

/** A case's result: each VIP's agreement, and each gateway's Open vSwitch version (by gateway name) as the provider's read reports it (ovsVersions). */
export interface CaseResult {
  versions: Record<string, string | undefined>;
  vips: VipAgreement[];
}

/** Each tuple traced on every gateway of the fleet: choices[gateway][tuple]. */
export const traceFleet = (fleet: MixedFleet, tuples: readonly Match[]) => Promise.all(fleet.map((g) => traceChoices(g.host, tuples)));

/** The tuples (by index) whose choice differs between some gateway and the first. */
export const differingTuples = (choices: Choice[][]) =>
  choices[0].map((_, i) => i).filter((i) => choices.some((perGateway) => !sameChoice(perGateway[i], choices[0][i])));

/** Applies a case to the fleet, traces every VIP's tuples on each gateway, deletes it again. */
export async function measureCase(fleet: MixedFleet, c: SelectionCase, tuples: number): Promise<CaseResult> {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  await lb.create(caseInputs(fleet, c));
  try {
    const seen = ((await lb.read()).props.ovsVersions ?? {}) as Record<string, { version?: string }>;
    const versions = Object.fromEntries(fleet.map((g) => [g.name, seen[g.host.address]?.version]));
    const out: VipAgreement[] = [];
    for (const v of c.vips) {
      const ts = tuplesFor(v, tuples);
      const choices = await traceFleet(fleet, ts);
      const differences = differingTuples(choices);
      out.push({
        vip: `${v.protocol} ${v.address.includes(":") ? `[${v.address}]` : v.address}:${v.port}${v.backends.some((b) => b.weight && b.weight > 1) ? " (weighted)" : ""}`,
        tuples: ts.length,
        same: ts.length - differences.length,
        unchosen: ts.filter((_, i) => choices.some((perGateway) => perGateway[i].mac === undefined)).length,
        backendsUsed: new Set(choices[0].map((o) => o.mac)).size,
        firstDifferences: differences.slice(0, 3).map((index) => ({ index, choices: choices.map((perGateway) => perGateway[index]) })),
      });
    }
    return { versions, vips: out };
  } finally {
    await lb.delete();
  }
}
