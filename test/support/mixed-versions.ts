import { join } from "node:path";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DeferredNatVip } from "../../provider/model/inputs.generated";
import { chosenBucket, slotChoice } from "../../provider/openflow/trace";
import { traceFlow } from "../../provider/openflow/trace";
import type { Match } from "../../provider/openflow/types";
import { SshSession } from "../../provider/transport/ssh";
import { connectVswitchd } from "../../provider/transport/unixctl";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver } from "./deferred-nat";
import { FaultHost } from "./fault-host";

/**
 * A fleet mid-upgrade (issue 19): two gateways, one on this machine's Open
 * vSwitch (Debian 12's 3.1.0), one on the Debian 13 root's (3.5.0), each a
 * host of its own (FaultHost, the newer one chrooted into the root), given
 * the same DeferredNatLoadBalancer through the provider's handlers. Every
 * tuple is traced on both (ofproto/trace over each ovs-vswitchd's unixctl
 * socket) and the backend each chose is compared, for each way ovslb
 * selects: a select group (selection_method=hash, its fields) and
 * secondChance's multipath (modulo_n over the field set of the selection
 * fields).
 */

/** Where tools/trixie-root.sh builds the Debian 13 root. */
export const TRIXIE_ROOT = join(process.env.OVSLB_CACHE_DIR ?? "/var/cache/ovslb", "roots", "trixie");

export interface GatewayPair {
  older: FaultHost;
  newer: FaultHost;
}

/** Brings up both gateways (subnets `subnet` and `subnet + 1` of 172.31.N.0/30). */
export async function gatewayPair(inv: LabInventory, tag: string, subnet: number): Promise<GatewayPair> {
  const older = await new FaultHost(inv, `${tag}o`, subnet).up();
  const newer = await new FaultHost(inv, `${tag}n`, subnet + 1, { root: TRIXIE_ROOT }).up().catch((e: unknown) => {
    older.down();
    throw e;
  });
  return { older, newer };
}

/** One load balancer the pair is given, and what it exercises. */
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

/** The load balancer of a case on both gateways of the pair. */
export function caseInputs(pair: GatewayPair, c: SelectionCase): DeferredNatLoadBalancerInputs {
  const gre = c.extra.delivery === "gre";
  return {
    name: `mixed-${c.key}`,
    gateways: [
      ["gw-older", pair.older, 1],
      ["gw-newer", pair.newer, 2],
    ].map(([name, h, i]) => {
      const host = h as FaultHost;
      return {
        name: name as string,
        host: host.ovsHost,
        bridge: host.bridge,
        segmentPort: host.segmentPort,
        mac: `02:00:1e:ff:00:0${i as number}`,
        ...(gre ? { tunnelAddress: tunnelAddressOf(i as number) } : {}),
      };
    }),
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

/** One VIP's comparison: how many tuples chose the same on both, and how many chose no backend at all (a broken trace). */
export interface VipAgreement {
  vip: string;
  tuples: number;
  same: number;
  /** Tuples for which either gateway chose no backend MAC. */
  unchosen: number;
  /** Distinct backends the older gateway chose: a selection that spreads. */
  backendsUsed: number;
  /** The first tuples that differed (tuple index, each gateway's choice). */
  firstDifferences: { index: number; older: Choice; newer: Choice }[];
}

/** A case's result: each VIP's agreement, and each gateway's Open vSwitch version as the provider's read reports it (ovsVersions). */
export interface CaseResult {
  versions: { older?: string; newer?: string };
  vips: VipAgreement[];
}

/** Applies a case to the pair, traces every VIP's tuples on both, deletes it again. */
export async function measureCase(pair: GatewayPair, c: SelectionCase, tuples: number): Promise<CaseResult> {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  await lb.create(caseInputs(pair, c));
  try {
    const seen = ((await lb.read()).props.ovsVersions ?? {}) as Record<string, { version?: string }>;
    const versions = { older: seen[pair.older.address]?.version, newer: seen[pair.newer.address]?.version };
    const out: VipAgreement[] = [];
    for (const v of c.vips) {
      const ts = tuplesFor(v, tuples);
      const [older, newer] = await Promise.all([traceChoices(pair.older, ts), traceChoices(pair.newer, ts)]);
      const differences = ts.map((_, i) => i).filter((i) => !sameChoice(older[i], newer[i]));
      out.push({
        vip: `${v.protocol} ${v.address.includes(":") ? `[${v.address}]` : v.address}:${v.port}${v.backends.some((b) => b.weight && b.weight > 1) ? " (weighted)" : ""}`,
        tuples: ts.length,
        same: ts.length - differences.length,
        unchosen: ts.filter((_, i) => older[i].mac === undefined || newer[i].mac === undefined).length,
        backendsUsed: new Set(older.map((o) => o.mac)).size,
        firstDifferences: differences.slice(0, 3).map((index) => ({ index, older: older[index], newer: newer[index] })),
      });
    }
    return { versions, vips: out };
  } finally {
    await lb.delete();
  }
}
