import * as os from "node:os";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs as Inputs, OvsHost } from "../provider/model/inputs.generated";
import { derivedId, ownerCookie, MAX_GROUP_ID } from "../provider/model/ids";
import {
  BUCKET_WEIGHT,
  DEFAULT_SELECTION_FIELDS,
  MAX_BUCKETS_PER_GROUP,
  VIP_FLOW_PRIORITY,
  assignIds,
  cookieOf,
  desiredDataplane,
  foreignGroupsOn,
  mergeIds,
  hashFields,
  planGateway,
  replicaKey,
  vipKey,
  withDefaults,
  type GatewayPort,
  type RecordedIds,
} from "../provider/resources/deferred-nat-load-balancer/plan";
import { referencedGroups, type ObservedBridge } from "../provider/engine/plan";
import { check } from "../provider/handlers";
import { runChecked, type CommandRunner } from "../provider/transport/exec";
import { OpenFlowBridge, type BundleSent } from "../provider/transport/openflow-bridge";
import {
  ipMatch,
  ipv4Number,
  ipv6Number,
  renderBundle,
  type Action,
  type Flow,
  type Group,
  type Match,
  type Modification,
  type SelectBucket,
} from "../provider/openflow";
import { traceBuckets } from "../provider/transport/openflow-trace";
import { bridgeSocket } from "../provider/transport/ovs-host";
import { SshSession } from "../provider/transport/ssh";
import { type UnixctlClient, connectVswitchd } from "../provider/transport/unixctl";
import { loadInventory, sshTo } from "../test/support/lab";
import {
  OFPT_BUNDLE_ADD_MESSAGE,
  RundirRunner,
  WireTapRunner,
  type Invariant,
  fmtInt,
  fmtMs,
  fmtPct,
  labRun,
  machineNote,
  median,
  timed,
  type BenchContext,
  type BenchReport,
  type Benchmark,
  type LabRunOptions,
  type WireMessage,
} from "./common";

/**
 * Issue 3's benchmark for the deferred-NAT load balancer, on the lab's
 * gateway gw1 (bridge br-seg), side by side in one run:
 *
 * 1. Flows moved by one backend add and one backend remove, for ovslb's
 *    stable bucket ids (incremental insert/remove), positional bucket ids
 *    (the group rebuilt with ids 0..n-1, as OVN numbers them) and dp_hash.
 * 2. Bytes and OpenFlow messages to add one backend to a VIP of 64 backends
 *    and to the largest VIP check accepts (999 -> 1,000 backends, one bucket
 *    each): ovslb's incremental bundle vs a full re-push of the group.
 *
 * With --smoke it runs the same steps on small sizes (100 5-tuples, VIPs of
 * 8 and 32, one timed apply) and checks the same invariants; the full run's
 * inputs still go through the provider's check, so a size check would refuse
 * is caught without the lab spending a minute on it.
 *
 * Everything it creates carries its own cookies and group ids and is removed
 * at the end, also on failure or Ctrl-C. It never touches anything else.
 */

const GATEWAY = "gw1";
const BRIDGE = "br-seg";
const SEGMENT_PORT = "seg0";
export interface Sizes {
  /** Distinct 5-tuples traced per selection. */
  tuples: number;
  /** Timed applies per figure (the median is reported). */
  timingRuns: number;
  /** VIP sizes (backends before the add) for "what adding one backend sends": a small one and a large one. */
  apply: readonly [number, number];
}
/** The full run: the large VIP ends at the most backends check accepts (one bucket each). */
export const FULL: Sizes = { tuples: 2000, timingRuns: 5, apply: [64, MAX_BUCKETS_PER_GROUP - 1] };
export const SMOKE: Sizes = { tuples: 100, timingRuns: 1, apply: [8, 32] };
/** This run's sizes (set by run()). */
let SIZES: Sizes = FULL;
const VIP_PORT = 80;
const VIPS = { stable: "10.0.0.203", positional: "10.0.0.204", dpHash: "10.0.0.205", apply: "10.0.0.206" } as const;
/**
 * The IPv6 rows' VIPs (the lab's IPv6 VIP range; no traffic is sent) and
 * their own names, cookies and group ids. dp_hash has no IPv6 row: its slot
 * table depends on the bucket count alone, not on the packet's fields.
 */
const VIPS6 = { stable: "fd00:20::203", positional: "fd00:20::204", apply: "fd00:20::206" } as const;
export type Family = 4 | 6;
const FAMILIES: readonly Family[] = [4, 6];
/** OpenFlow's length field is 16 bits: no message can be longer. */
const OPENFLOW_MAX_MESSAGE = 0xffff;
const ALL = (1n << 64n) - 1n;

const LB_MOVES = "bench-dnat-moves";
const LB_APPLY = "bench-dnat-apply";
const LB_MOVES6 = "bench-dnat-moves6";
const LB_APPLY6 = "bench-dnat-apply6";
const lbMoves = (f: Family) => (f === 6 ? LB_MOVES6 : LB_MOVES);
const lbApply = (f: Family) => (f === 6 ? LB_APPLY6 : LB_APPLY);
const POSITIONAL_COOKIE = ownerCookie("ovslb-bench", "deferred-nat/positional");
const POSITIONAL6_COOKIE = ownerCookie("ovslb-bench", "deferred-nat/positional6");
const DP_HASH_COOKIE = ownerCookie("ovslb-bench", "deferred-nat/dp_hash");

// ---------------------------------------------------------------- the gateway

interface Gateway {
  ssh: SshSession;
  /** The SSH session with the host's run directory in the environment: every command of this benchmark goes through it. */
  runner: CommandRunner;
  host: OvsHost;
  socket: string;
  bridge: OpenFlowBridge;
  /** The same bridge through a WireTapRunner (undefined when the host has no strace). */
  tapped?: { bridge: OpenFlowBridge; tap: WireTapRunner };
  unixctl: UnixctlClient;
  port: GatewayPort;
  gatewayInput: Inputs["gateways"][number];
}

async function connectGateway(): Promise<Gateway> {
  const inv = loadInventory();
  const h = inv.hosts[GATEWAY];
  if (!h?.segment) throw new Error(`lab host ${GATEWAY} has no segment`);
  const host: OvsHost = { connection: sshTo(inv, h), ovsRundir: h.ovsRundir };
  if (!h.ovsRundir) throw new Error(`lab host ${GATEWAY} has no ovsRundir`);
  const ssh = await SshSession.connect(host.connection);
  try {
    const runner = new RundirRunner(ssh, h.ovsRundir);
    const socket = bridgeSocket(host, BRIDGE);
    const ofport = Number((await runChecked(runner, ["ovs-vsctl", "get", "interface", SEGMENT_PORT, "ofport"])).trim());
    if (!Number.isInteger(ofport) || ofport <= 0) throw new Error(`${GATEWAY}: ${SEGMENT_PORT} has no ofport`);
    const unixctl = await connectVswitchd(ssh, h.ovsRundir);
    const tap = (await WireTapRunner.available(runner)) ? new WireTapRunner(runner) : undefined;
    return {
      ssh,
      runner,
      host,
      socket,
      bridge: new OpenFlowBridge(runner, socket),
      tapped: tap && { bridge: new OpenFlowBridge(tap, socket), tap },
      unixctl,
      port: { segmentOfport: ofport, mac: h.segment.mac },
      gatewayInput: { name: GATEWAY, host, bridge: BRIDGE, segmentPort: SEGMENT_PORT, mac: h.segment.mac },
    };
  } catch (e) {
    ssh.close();
    throw e;
  }
}

/** The gateway as DeferredNatLoadBalancer's handler observes it before planning: table 0 and the groups. */
async function readGateway(gw: Gateway): Promise<ObservedBridge> {
  const [flows, groups] = await Promise.all([gw.bridge.dumpFlows({ cookie: 0n, mask: 0n, table: 0 }), gw.bridge.dumpGroups()]);
  return { ports: new Map(), flows, groups };
}

/**
 * What this run owns on the gateway: flows by cookie, and groups referenced
 * by those flows or created by this run. Removed at the end whatever happens.
 */
class Owned {
  readonly cookies = new Set<bigint>([
    ...[LB_MOVES, LB_APPLY, LB_MOVES6, LB_APPLY6].map((name) => cookieOf({ name })),
    POSITIONAL_COOKIE,
    POSITIONAL6_COOKIE,
    DP_HASH_COOKIE,
  ]);
  readonly groups = new Set<number>();
  /** Every group this run made or found referenced by its flows, kept after removal: to check none is left. */
  readonly made = new Set<number>();

  async removeAll(gw: Gateway): Promise<string[]> {
    const mods: Modification[] = [];
    const groups = new Set(this.groups);
    for (const cookie of this.cookies) {
      const flows = await gw.bridge.dumpFlows({ cookie, mask: ALL });
      for (const id of referencedGroups(flows)) groups.add(id);
      if (flows.length > 0) mods.push({ op: "delete-flows", cookie, mask: ALL });
    }
    const present = new Set((await gw.bridge.dumpGroups()).map((g) => g.groupId));
    for (const id of groups) if (present.has(id)) mods.push({ op: "delete-group", groupId: id });
    if (mods.length > 0) await gw.bridge.applyBundle(mods);
    for (const id of groups) this.made.add(id);
    this.groups.clear();
    return renderBundle(mods);
  }
}

/** What is left on the gateway of this run: flows with its cookies, and the groups it made. */
async function leftBehind(gw: Gateway, owned: Owned): Promise<{ flows: number; groups: number[] }> {
  let flows = 0;
  for (const cookie of owned.cookies) flows += (await gw.bridge.dumpFlows({ cookie, mask: ALL })).length;
  const present = new Set((await gw.bridge.dumpGroups()).map((g) => g.groupId));
  return { flows, groups: [...owned.made, ...owned.groups].filter((id) => present.has(id)) };
}

/**
 * Pure, no lab: the full run's VIP sizes pass the provider's check, and the
 * next size up is refused for its bucket count. So the full run measures the
 * largest input ovslb accepts, and a smoke run catches a size it would refuse.
 */
export async function acceptanceInvariants(gatewayInput: Inputs["gateways"][number]): Promise<Invariant[]> {
  const out: Invariant[] = [];
  const vip = (n: number, f: Family = 4) =>
    rawInputs(
      gatewayInput,
      lbApply(f),
      f === 6 ? VIPS6.apply : VIPS.apply,
      443,
      Array.from({ length: n }, (_, i) => applyBackend(i, f)),
    );
  for (const f of FAMILIES) {
    for (const n of FULL.apply) {
      for (const size of [n, n + 1]) {
        const refused = await refusals(vip(size, f));
        out.push({
          name: `check accepts the full run's IPv${f} VIP of ${fmtInt(size)} backends`,
          ok: refused.length === 0,
          detail: refused.join("; ") || undefined,
        });
      }
    }
  }
  const over = MAX_BUCKETS_PER_GROUP + 1;
  const refused = await refusals(vip(over));
  out.push({
    name: `check refuses a VIP of ${fmtInt(over)} backends for its bucket count (at most ${fmtInt(MAX_BUCKETS_PER_GROUP)} per group)`,
    ok: refused.length === 1 && refused[0].startsWith("vips[0].backends ") && refused[0].includes(`needs ${over} buckets`),
    detail: refused.join("; ") || "accepted",
  });
  return out;
}

/** A group id for a baseline: derived from its name, probed past every id on the bridge. */
async function baselineGroupId(gw: Gateway, name: string): Promise<number> {
  const taken = new Set((await gw.bridge.dumpGroups()).map((g) => g.groupId));
  return derivedId(["ovslb-bench", "deferred-nat", name], MAX_GROUP_ID, (id) => taken.has(id));
}

// ---------------------------------------------------------------- ovslb, through its planner

const rawInputs = (gatewayInput: Inputs["gateways"][number], name: string, vip: string, port: number, backends: DeferredNatBackend[]): Inputs => ({
  name,
  gateways: [gatewayInput],
  hypervisors: ["hv1", "hv2", "hv3"].map((n) => ({ name: n })),
  vips: [{ address: vip, port, protocol: "tcp", backends }],
});

/** What the provider's own check (schema and rules, as `pulumi preview` runs it) says of these inputs. */
async function refusals(inputs: Inputs): Promise<string[]> {
  const { failures } = await check("DeferredNatLoadBalancer", {}, inputs as unknown as Record<string, unknown>);
  return failures.map((f) => `${f.property} ${f.reason}`);
}

/** Inputs for one VIP, refused here exactly as the provider's check would refuse them: the benchmark never measures an input ovslb would not accept. */
async function lbInputs(gw: Gateway, name: string, vip: string, port: number, backends: DeferredNatBackend[]): Promise<Inputs> {
  const inputs = rawInputs(gw.gatewayInput, name, vip, port, backends);
  const refused = await refusals(inputs);
  if (refused.length > 0) throw new Error(`bench inputs refused by check: ${refused.join("; ")}`);
  return inputs;
}

interface OvslbApplied {
  ids: RecordedIds;
  mods: Modification[];
  sent: BundleSent;
  readMs: number;
  applyMs: number;
  wire?: WireMessage[];
}

/**
 * One DeferredNatLoadBalancer update on one gateway, as the handler's
 * converge() does it: read, assign ids (recorded ones kept), plan against
 * what is there, apply the plan as one bundle.
 */
async function ovslbApply(gw: Gateway, owned: Owned, inputs: Inputs, recorded: RecordedIds, tap = false): Promise<OvslbApplied> {
  const d = withDefaults(inputs);
  const { value: actual, ms: readMs } = await timed(() => readGateway(gw));
  const ids = assignIds(d, recorded, foreignGroupsOn(d, actual, recorded));
  const merged = mergeIds(recorded, ids);
  const mods = planGateway(GATEWAY, d, merged, gw.port, actual);
  const bridge = tap && gw.tapped ? gw.tapped.bridge : gw.bridge;
  const { value: sent, ms: applyMs } = await timed(() => bridge.applyBundle(mods));
  Object.values(ids.groupIds).forEach((id) => owned.groups.add(id));
  return { ids: merged, mods, sent, readMs, applyMs, ...(tap && gw.tapped ? { wire: gw.tapped.tap.last } : {}) };
}

function opsOf(mods: readonly Modification[]): string {
  const names: Record<string, string> = { "insert-buckets": "insert_bucket", "remove-buckets": "remove_bucket" };
  const counts = new Map<string, number>();
  for (const m of mods) {
    const n = names[m.op] ?? m.op;
    counts.set(n, (counts.get(n) ?? 0) + (m.op === "insert-buckets" ? m.buckets.length : 1));
  }
  return [...counts].map(([op, n]) => `${op} ×${n}`).join(", ") || "nothing";
}

/** The bucket actions every strategy uses: ovslb's own (MACs rewritten, out the port it came in on). */
const bucketActions = (gw: Gateway, b: DeferredNatBackend): Action[] => [
  { type: "set_field", field: "eth_src", value: gw.port.mac },
  { type: "set_field", field: "eth_dst", value: b.mac },
  { type: "in_port" },
];

const vipFlow = (gw: Gateway, cookie: bigint, vip: string, groupId: number): Flow => ({
  table: 0,
  priority: VIP_FLOW_PRIORITY,
  cookie,
  match: { ...ipMatch("tcp", "dst", vip), in_port: gw.port.segmentOfport, tp_dst: VIP_PORT },
  actions: [{ type: "group", groupId }],
});

/** OVN numbers buckets in the order of its backend list; the positional baseline keeps that list sorted by address. */
const addressOrder = (a: string, b: string) => {
  if (a.includes(":") !== b.includes(":")) return a.includes(":") ? 1 : -1;
  if (!a.includes(":")) return ipv4Number(a) - ipv4Number(b);
  const [x, y] = [ipv6Number(a), ipv6Number(b)];
  return x < y ? -1 : x > y ? 1 : 0;
};
export const byAddress = (list: readonly DeferredNatBackend[]) => [...list].sort((a, b) => addressOrder(a.address, b.address) || a.port - b.port);
const keyOf = (b: DeferredNatBackend) => `${b.address}:${b.port}`;

// ---------------------------------------------------------------- 1. flows moved

/** Deterministic, distinct client 5-tuples toward a VIP, arriving on the segment port. */
function tuples(gw: Gateway, vip: string): Match[] {
  const v6 = vip.includes(":");
  return Array.from({ length: SIZES.tuples }, (_, i) => ({
    ...ipMatch("tcp", "src", v6 ? `fd00:8::${(i >> 8).toString(16)}:${(i & 255).toString(16)}` : `10.8.${i >> 8}.${i & 255}`),
    ...ipMatch("tcp", "dst", vip),
    in_port: gw.port.segmentOfport,
    tp_src: 1024 + ((i * 7919) % 64000),
    tp_dst: VIP_PORT,
  }));
}

/** Which backend each sample (a 5-tuple, or a dp_hash slot) goes to. */
type Selection = string[];

interface MoveStrategy {
  key: string;
  family: Family;
  label: string;
  /** What a sample is: "flows" (traced 5-tuples) or "hash slots". */
  unit: string;
  setUp(backends: DeferredNatBackend[]): Promise<void>;
  /** Changes the VIP to `backends`; returns what was sent, in words. */
  change(backends: DeferredNatBackend[]): Promise<string>;
  select(): Promise<Selection>;
  note?(): string;
}

/** ovslb: bucket ids derived from the backend, recorded and kept; changes are insert/remove_bucket. */
function stableStrategy(gw: Gateway, owned: Owned, family: Family): MoveStrategy {
  const vip = family === 6 ? VIPS6.stable : VIPS.stable;
  const key = vipKey({ protocol: "tcp", address: vip, port: VIP_PORT });
  let recorded: RecordedIds = { groupIds: {}, bucketIds: {} };
  let current: DeferredNatBackend[] = [];
  const apply = async (backends: DeferredNatBackend[]) => {
    const r = await ovslbApply(gw, owned, await lbInputs(gw, lbMoves(family), vip, VIP_PORT, backends), recorded);
    recorded = r.ids;
    current = backends;
    return `${opsOf(r.mods)} (${r.sent.messages} message${r.sent.messages === 1 ? "" : "s"}, ${fmtInt(r.sent.bytes)} B)`;
  };
  return {
    key: "stable",
    family,
    label: "ovslb: stable ids, incremental",
    unit: "flows",
    setUp: async (b) => void (await apply(b)),
    change: apply,
    async select() {
      const owner = new Map(current.map((b) => [recorded.bucketIds[key][replicaKey(b, 0)], keyOf(b)]));
      const chosen = await traceBuckets(gw.runner, BRIDGE, tuples(gw, vip));
      return chosen.map((id, i) => {
        const b = id === undefined ? undefined : owner.get(id);
        if (!b) throw new Error(`stable: tuple ${i} took bucket ${id}, which no backend holds`);
        return b;
      });
    },
  };
}

/**
 * Baseline (a), OVN 23.03's numbering: bucket ids 0..n-1 in the order of the
 * backend list (kept sorted by address), the whole group re-sent on every
 * change (modify-group, ovslb's typed mods), same hash fields and actions.
 */
function positionalStrategy(gw: Gateway, owned: Owned, family: Family): MoveStrategy {
  const vip = family === 6 ? VIPS6.positional : VIPS.positional;
  const cookie = family === 6 ? POSITIONAL6_COOKIE : POSITIONAL_COOKIE;
  let groupId = 0;
  let order: DeferredNatBackend[] = [];
  const group = (backends: DeferredNatBackend[]): Group => ({
    groupId,
    type: "select",
    selectionMethod: "hash",
    fields: hashFields(DEFAULT_SELECTION_FIELDS, "tcp", vip),
    buckets: byAddress(backends).map((b, i): SelectBucket => ({ bucketId: i, weight: BUCKET_WEIGHT, actions: bucketActions(gw, b) })),
  });
  return {
    key: "positional",
    family,
    label: "(a) positional ids, group rebuilt",
    unit: "flows",
    async setUp(backends) {
      groupId = await baselineGroupId(gw, family === 6 ? "positional6" : "positional");
      await gw.bridge.applyBundle([
        { op: "add-group", group: group(backends) },
        { op: "add-flow", flow: vipFlow(gw, cookie, vip, groupId) },
      ]);
      owned.groups.add(groupId);
      order = byAddress(backends);
    },
    async change(backends) {
      const sent = await gw.bridge.applyBundle([{ op: "modify-group", group: group(backends) }]);
      order = byAddress(backends);
      return `modify-group, ${backends.length} buckets (${sent.messages} message, ${fmtInt(sent.bytes)} B)`;
    },
    async select() {
      const chosen = await traceBuckets(gw.runner, BRIDGE, tuples(gw, vip));
      return chosen.map((id, i) => {
        const b = id === undefined ? undefined : order[id];
        if (!b) throw new Error(`positional: tuple ${i} took bucket ${id}`);
        return keyOf(b);
      });
    },
  };
}

/**
 * Baseline (b): selection_method=dp_hash, rebuilt with n buckets. ovslb's
 * renderer refuses dp_hash on purpose, so THIS BASELINE'S GROUP LINES ARE
 * WRITTEN HERE, raw, for ovs-ofctl (every value in them is this file's own
 * constant or the lab's gateway MAC, checked below).
 *
 * ofproto/trace of a dp_hash group stops at `hash(l4(0)),recirc(0xN)`. The
 * recirculated stage is traced directly instead: `recirc_id=0xN,dp_hash=H`
 * picks a bucket from the group's hash table, and the Megaflow shows the
 * table's mask. Every slot H in 0..mask is traced and its bucket read from
 * the datapath actions (each bucket sets a distinct eth_dst). A recirculation
 * context lives only briefly after the first-stage trace, so all traces go
 * over one unixctl connection, milliseconds apart, and are retried whole if
 * the context was gone.
 */
function dpHashStrategy(gw: Gateway, owned: Owned): MoveStrategy {
  const vip = VIPS.dpHash;
  const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
  let groupId = 0;
  let byMac = new Map<string, string>();
  const masks: number[] = [];
  const groupSpec = (backends: DeferredNatBackend[]) => {
    const buckets = byAddress(backends).map((b, i) => {
      if (!MAC.test(b.mac) || !MAC.test(gw.port.mac)) throw new Error(`dp_hash baseline: bad MAC ${b.mac}`);
      return `bucket=bucket_id:${i},weight:${BUCKET_WEIGHT},actions=set_field:${gw.port.mac}->eth_src,set_field:${b.mac}->eth_dst,IN_PORT`;
    });
    return `group_id=${groupId},type=select,selection_method=dp_hash,${buckets.join(",")}`;
  };
  const packet = (extra: string, src: string) => `in_port=${gw.port.segmentOfport},${extra}tcp,nw_src=${src},nw_dst=${vip},tcp_src=40000,tcp_dst=${VIP_PORT}`;
  const trace = (flow: string) => gw.unixctl.call("ofproto/trace", [BRIDGE, flow]);

  async function slots(src: string): Promise<{ mask: number; macs: string[] } | undefined> {
    const first = await trace(packet("", src));
    const actions = /^Datapath actions: (.*)$/m.exec(first)?.[1] ?? "";
    const recirc = /^hash\(.*\),recirc\((0x[0-9a-f]+)\)$/.exec(actions)?.[1];
    if (!recirc) throw new Error(`dp_hash: the first stage did not hash and recirculate: ${actions}`);
    // dp_hash 0 means "not computed yet" (a computed hash is never 0): slot H is traced as 0x10000+H.
    const slot = (h: number) => trace(packet(`recirc_id=${recirc},dp_hash=0x${(0x10000 + h).toString(16)},`, src));
    const probe = await slot(0);
    const mask = /dp_hash=(?:0x)?[0-9a-f]+\/(0x[0-9a-f]+)/.exec(probe)?.[1];
    if (!mask) return undefined; // the recirculation context is gone (or never matched): retry
    const m = Number(mask);
    if (m >= 0x10000) throw new Error(`dp_hash: mask ${mask} is wider than the slots traced`);
    const outs = await Promise.all(Array.from({ length: m + 1 }, (_, h) => slot(h)));
    const macs: string[] = [];
    for (const out of outs) {
      const mac = /^Datapath actions: .*eth\((?:src=[0-9a-f:]{17},)?dst=([0-9a-f:]{17})\)/m.exec(out)?.[1];
      const seen = /dp_hash=(?:0x)?[0-9a-f]+\/(0x[0-9a-f]+)/.exec(out)?.[1];
      if (!mac || seen !== mask) return undefined;
      macs.push(mac);
    }
    return { mask: m, macs };
  }

  return {
    key: "dp_hash",
    family: 4,
    label: "(b) dp_hash, group rebuilt",
    unit: "hash slots",
    async setUp(backends) {
      groupId = await baselineGroupId(gw, "dp_hash");
      const flowLine = renderBundle([{ op: "add-flow", flow: vipFlow(gw, DP_HASH_COOKIE, vip, groupId) }])[0];
      // Group and flow in one bundle, so the group is never left without the flow that marks it as ours.
      await runChecked(gw.runner, ["ovs-ofctl", "-O", "OpenFlow15", "bundle", gw.socket, "-"], { stdin: `group add ${groupSpec(backends)}\n${flowLine}\n` });
      owned.groups.add(groupId);
      byMac = new Map(backends.map((b) => [b.mac, keyOf(b)]));
    },
    async change(backends) {
      const spec = groupSpec(backends);
      await runChecked(gw.runner, ["ovs-ofctl", "-O", "OpenFlow15", "mod-group", gw.socket, spec]);
      byMac = new Map(backends.map((b) => [b.mac, keyOf(b)]));
      return `mod-group, ${backends.length} buckets (raw ovs-ofctl argv, ${fmtInt(spec.length)} B)`;
    },
    async select() {
      for (let attempt = 1; attempt <= 5; attempt++) {
        const a = await slots("10.8.0.1");
        const b = a && (await slots("10.8.200.7"));
        if (!a || !b) continue;
        // The slot table must not depend on the 5-tuple: the fraction of slots moved is then the fraction of flows moved.
        if (a.mask !== b.mask || a.macs.some((m, i) => m !== b.macs[i])) throw new Error("dp_hash: two 5-tuples read different slot tables");
        masks.push(a.mask);
        return a.macs.map((mac) => {
          const k = byMac.get(mac);
          if (!k) throw new Error(`dp_hash: a slot chose ${mac}, which no backend has`);
          return k;
        });
      }
      throw new Error("dp_hash: the recirculation context expired on 5 attempts");
    },
    note: () => {
      const seen = [...new Set(masks)];
      return `${seen.map((m) => m + 1).join(" or ")} slots, mask ${seen.map((m) => `0x${m.toString(16)}`).join(", ")}`;
    },
  };
}

const movesBackend = (octet: number, family: Family): DeferredNatBackend => ({
  address: family === 6 ? `fd00:1::${octet}` : `10.0.1.${octet}`,
  port: 8080,
  mac: `02:00:00:01:00:${octet.toString(16).padStart(2, "0")}`,
  hypervisor: "hv1",
});

interface Scenario {
  key: string;
  label: string;
  backends: DeferredNatBackend[];
  added?: DeferredNatBackend;
  removed?: DeferredNatBackend;
}

interface MoveResult {
  strategy: string;
  family: Family;
  label: string;
  unit: string;
  scenario: string;
  sent: string;
  samples: number;
  moved: number;
  /** Moved but not to the added backend, or not from the removed one. */
  needless: number;
  /** Samples the change had to move: those the new backend now takes, or the removed one had. */
  required: number;
  /** Whether returning to the 4 backends restored the very first selection. */
  baseRestored: boolean;
}

function scenarios(family: Family = 4): { base: DeferredNatBackend[]; list: Scenario[] } {
  const base = [10, 20, 30, 40].map((o) => movesBackend(o, family));
  const middle = movesBackend(25, family);
  const last = movesBackend(50, family);
  return {
    base,
    list: [
      { key: "add-middle", label: `add a 5th backend that sorts 3rd (${middle.address})`, backends: byAddress([...base, middle]), added: middle },
      { key: "remove-2nd", label: `remove the 2nd of 4 (${base[1].address})`, backends: base.filter((b) => b !== base[1]), removed: base[1] },
      { key: "add-last", label: `add a 5th backend that sorts last (${last.address})`, backends: [...base, last], added: last },
    ],
  };
}

async function measureMoves(s: MoveStrategy, ctx: BenchContext): Promise<MoveResult[]> {
  const { base, list } = scenarios(s.family);
  await s.setUp(base);
  const first = await s.select();
  const results: MoveResult[] = [];
  for (const [i, sc] of list.entries()) {
    let before = first;
    let restored = true;
    if (i > 0) {
      await s.change(base);
      before = await s.select();
      restored = before.every((b, j) => b === first[j]);
    }
    const sent = await s.change(sc.backends);
    const after = await s.select();
    const moved = after.filter((b, j) => b !== before[j]).length;
    const needless = after.filter((b, j) => b !== before[j] && (sc.added ? b !== keyOf(sc.added) : before[j] !== keyOf(sc.removed!))).length;
    const required = sc.added ? after.filter((b) => b === keyOf(sc.added!)).length : before.filter((b) => b === keyOf(sc.removed!)).length;
    results.push({
      strategy: s.key,
      family: s.family,
      label: s.label,
      unit: s.unit,
      scenario: sc.key,
      sent,
      samples: after.length,
      moved,
      needless,
      required,
      baseRestored: restored,
    });
    ctx.log(`  ${s.key} IPv${s.family} ${sc.key}: ${moved}/${after.length} ${s.unit} moved, ${needless} needlessly`);
  }
  return results;
}

// ---------------------------------------------------------------- 2. what one backend add sends

const applyBackend = (i: number, family: Family = 4): DeferredNatBackend => {
  // Up to 1,000 distinct backends (and more MACs for the limit probe) from 250 addresses in each of 10.0.1.0/24 and 10.0.2.0/24 (fd00:1::1:0/112 and fd00:1::2:0/112), on a few ports.
  const block = Math.floor(i / 250);
  return {
    address: family === 6 ? `fd00:1::${1 + (block % 2)}:${(i % 250) + 1}` : `10.0.${1 + (block % 2)}.${(i % 250) + 1}`,
    port: 8080 + Math.floor(block / 2),
    mac: `02:00:00:02:${((i >> 8) & 255).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
    hypervisor: ["hv1", "hv2", "hv3"][i % 3],
  };
};

interface Sent {
  /** Flow and group mods in the bundle. */
  mods: number;
  /** The bundle file fed to ovs-ofctl over SSH. */
  bytes: number;
  ops: string;
  /** What ovs-ofctl wrote to ovs-vswitchd, when strace was there to see it. */
  wire?: { modBytes: number; largest: number; totalBytes: number; messages: number };
  error?: string;
}

interface ApplyCost {
  backends: number;
  family: Family;
  create: Sent;
  ovslb?: Sent & { applyMs: number[]; readMs: number[]; groupDumpBytes: number };
  repush?: Sent & { applyMs: number[] };
  limit?: { perBucket: number; fixed: number; maxBuckets: number; probe?: Sent };
}

function wireOf(messages: readonly WireMessage[] | undefined): Sent["wire"] {
  if (!messages) return undefined;
  const mods = messages.filter((m) => m.type === OFPT_BUNDLE_ADD_MESSAGE);
  return {
    modBytes: mods.reduce((n, m) => n + m.bytes, 0),
    largest: Math.max(0, ...messages.map((m) => m.bytes)),
    totalBytes: messages.reduce((n, m) => n + m.bytes, 0),
    messages: messages.length,
  };
}

async function sendGroup(gw: Gateway, mods: Modification[], tap: boolean): Promise<Sent & { ms: number }> {
  const bridge = tap && gw.tapped ? gw.tapped.bridge : gw.bridge;
  const lines = renderBundle(mods);
  try {
    const { value: sent, ms } = await timed(() => bridge.applyBundle(mods));
    return { mods: sent.messages, bytes: sent.bytes, ops: opsOf(mods), ms, ...(tap && gw.tapped ? { wire: wireOf(gw.tapped.tap.last) } : {}) };
  } catch (e) {
    const bytes = Buffer.byteLength(`${lines.join("\n")}\n`);
    return {
      mods: lines.length,
      bytes,
      ops: opsOf(mods),
      ms: NaN,
      error: (e as Error).message.slice(0, 400),
      ...(tap && gw.tapped ? { wire: wireOf(gw.tapped.tap.last) } : {}),
    };
  }
}

async function measureApply(
  gw: Gateway,
  owned: Owned,
  n: number,
  vipPort: number,
  ctx: BenchContext,
  invariants: Invariant[],
  smaller?: ApplyCost,
  family: Family = 4,
): Promise<ApplyCost> {
  const all = Array.from({ length: n + 1 }, (_, i) => applyBackend(i, family));
  const vip = family === 6 ? VIPS6.apply : VIPS.apply;
  const inputsN = await lbInputs(gw, lbApply(family), vip, vipPort, all.slice(0, n));
  const inputsN1 = await lbInputs(gw, lbApply(family), vip, vipPort, all);
  const key = vipKey({ protocol: "tcp", address: vip, port: vipPort });
  const fam = family === 6 ? "IPv6: " : "";

  // Create the VIP with n backends (one add-group of n buckets, and its flow).
  let created: OvslbApplied;
  try {
    created = await ovslbApply(gw, owned, inputsN, { groupIds: {}, bucketIds: {} }, true);
  } catch (e) {
    // Reported, not hidden: the numbers below need the VIP to exist.
    ctx.log(`  ${fam}${n}: ovslb could not create the VIP: ${(e as Error).message}`);
    invariants.push({ name: `${fam}ovslb creates a VIP of ${fmtInt(n)} backends check accepted`, ok: false, detail: (e as Error).message.slice(0, 200) });
    return {
      backends: n,
      family,
      create: { mods: 2, bytes: NaN, ops: "add-group ×1, add-flow ×1", error: (e as Error).message.slice(0, 400), wire: wireOf(gw.tapped?.tap.last) },
    };
  }
  const result: ApplyCost = {
    backends: n,
    family,
    create: { mods: created.sent.messages, bytes: created.sent.bytes, ops: opsOf(created.mods), wire: wireOf(created.wire) },
  };
  let recorded = created.ids;
  const groupId = recorded.groupIds[key];

  // ovslb: read, plan, apply; the first add under strace for the wire figures, then timed runs.
  const add = await ovslbApply(gw, owned, inputsN1, recorded, true);
  recorded = add.ids;
  const groupDumpBytes = Buffer.byteLength(
    await runChecked(gw.runner, ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-groups", gw.socket, `${groupId}`]),
  );
  const applyMs: number[] = [];
  const readMs: number[] = [];
  const planned = [opsOf(add.mods)];
  for (let r = 0; r < SIZES.timingRuns; r++) {
    await ovslbApply(gw, owned, inputsN, recorded);
    const again = await ovslbApply(gw, owned, inputsN1, recorded);
    planned.push(opsOf(again.mods));
    applyMs.push(again.applyMs);
    readMs.push(again.readMs);
  }
  const odd = planned.filter((p) => p !== "insert_bucket ×1");
  invariants.push({
    name: `${fam}adding one backend to a VIP of ${fmtInt(n)} makes ovslb send exactly one insert_bucket, every time`,
    ok: odd.length === 0,
    detail: odd.length === 0 ? `${planned.length} adds` : `planned: ${planned.join("; ")}`,
  });
  const afterAdd = await gw.bridge.dumpGroup(groupId);
  invariants.push({
    name: `${fam}after the add the VIP's group holds ${fmtInt(n + 1)} buckets`,
    ok: afterAdd?.buckets.length === n + 1,
    detail: `${afterAdd?.buckets.length ?? "no group"}`,
  });
  result.ovslb = { mods: add.sent.messages, bytes: add.sent.bytes, ops: opsOf(add.mods), wire: wireOf(add.wire), applyMs, readMs, groupDumpBytes };
  ctx.log(`  ${fam}${n}: ovslb ${result.ovslb.ops}, ${add.sent.bytes} B, median apply ${fmtMs(median(applyMs))}`);

  // Full re-push: the same final group (same ids) sent whole, as one modify-group.
  const groupOf = (inputs: Inputs) => desiredDataplane(withDefaults(inputs), recorded, gw.port)[0].group;
  const full = groupOf(inputsN1);
  await ovslbApply(gw, owned, inputsN, recorded);
  const first = await sendGroup(gw, [{ op: "modify-group", group: full }], true);
  const repushMs: number[] = [];
  invariants.push({ name: `${fam}a full re-push of ${fmtInt(n + 1)} buckets fits one OpenFlow message and is applied`, ok: !first.error, detail: first.error });
  if (!first.error) {
    const dumped = await gw.bridge.dumpGroup(groupId);
    const same = dumped?.buckets.length === n + 1 && full.buckets.every((b) => dumped.buckets.some((d) => d.bucketId === b.bucketId));
    invariants.push({
      name: `${fam}the re-push left the same ${fmtInt(n + 1)} bucket ids ovslb's add did`,
      ok: same,
      detail: `${dumped?.buckets.length ?? "no group"} buckets`,
    });
    for (let r = 0; r < SIZES.timingRuns; r++) {
      await gw.bridge.applyBundle([{ op: "modify-group", group: groupOf(inputsN) }]);
      const again = await sendGroup(gw, [{ op: "modify-group", group: full }], false);
      if (again.error) throw new Error(`re-push failed on run ${r}: ${again.error}`);
      repushMs.push(again.ms);
    }
  }
  result.repush = { ...first, applyMs: repushMs };
  ctx.log(`  ${fam}${n}: re-push ${first.bytes} B${first.error ? ` FAILED: ${first.error}` : `, median apply ${fmtMs(median(repushMs))}`}`);

  if (gw.tapped) {
    // The wire figures (and the limit probe below) need them: a tap that sees nothing must not pass as "nothing sent".
    invariants.push({
      name: `${fam}strace saw the OpenFlow messages of ovslb's add and of the re-push at ${fmtInt(n)} backends`,
      ok: (result.ovslb.wire?.largest ?? 0) > 0 && (result.repush.wire?.largest ?? 0) > 0,
      detail: `largest message ${result.ovslb.wire?.largest ?? "-"} B and ${result.repush.wire?.largest ?? "-"} B`,
    });
  }

  // Where a whole group stops fitting in one OpenFlow message, from the two re-push sizes on the wire.
  const small = smaller?.repush?.wire;
  const large = result.repush.wire;
  if (smaller && small && large && !first.error && !smaller.repush?.error) {
    const perBucket = (large.largest - small.largest) / (n + 1 - (smaller.backends + 1));
    const fixed = large.largest - perBucket * (n + 1);
    if (Number.isInteger(perBucket) && perBucket > 0) {
      const maxBuckets = Math.floor((OPENFLOW_MAX_MESSAGE - fixed) / perBucket);
      result.limit = { perBucket, fixed, maxBuckets };
      // Probe the largest group that fits (never a larger one: an oversized message desynchronises the OpenFlow stream).
      const extra: SelectBucket[] = [];
      const usedIds = new Set(full.buckets.map((b) => b.bucketId));
      for (let id = 1; full.buckets.length + extra.length < maxBuckets; id++) {
        if (usedIds.has(id)) continue;
        extra.push({ bucketId: id, weight: BUCKET_WEIGHT, actions: bucketActions(gw, applyBackend(2000 + extra.length)) });
      }
      if (full.type !== "select") throw new Error("not a select group");
      const probe = await sendGroup(gw, [{ op: "modify-group", group: { ...full, buckets: [...full.buckets, ...extra] } }], true);
      result.limit.probe = probe;
      invariants.push({
        name: `${fam}the largest group that fits (${fmtInt(maxBuckets)} buckets, computed from the two re-push sizes) is applied`,
        ok: !probe.error && (probe.wire?.largest ?? 0) <= OPENFLOW_MAX_MESSAGE,
        detail: probe.error ?? `largest message ${fmtInt(probe.wire?.largest ?? NaN)} B`,
      });
      // Back to ovslb's own group straight away.
      await gw.bridge.applyBundle([{ op: "modify-group", group: full }]);
      ctx.log(
        `  limit: ${perBucket} B per bucket, at most ${maxBuckets} buckets; probe ${probe.error ? `FAILED: ${probe.error}` : `ok, largest message ${probe.wire?.largest} B`}`,
      );
    }
  }

  // Delete as ovslb does (its flow, then its group), so nothing is left.
  const actual = await readGateway(gw);
  await gw.bridge.applyBundle(planGateway(GATEWAY, { ...withDefaults(inputsN1), vips: [] }, recorded, gw.port, actual));
  invariants.push({
    name: `${fam}ovslb's delete of the ${fmtInt(n + 1)}-backend VIP removes its group`,
    ok: (await gw.bridge.dumpGroup(groupId)) === undefined,
  });
  return result;
}

// ---------------------------------------------------------------- the report

function movesTable(results: readonly MoveResult[]): string {
  const labels = Object.fromEntries(FAMILIES.map((f) => [f, Object.fromEntries(scenarios(f).list.map((s) => [s.key, s.label]))]));
  const strategyOrder = [...new Set(results.map((r) => r.strategy))];
  const scenarioOrder = scenarios().list.map((s) => s.key);
  // Each change's IPv4 row with its IPv6 row beneath it.
  const sorted = [...results].sort(
    (a, b) =>
      strategyOrder.indexOf(a.strategy) - strategyOrder.indexOf(b.strategy) ||
      scenarioOrder.indexOf(a.scenario) - scenarioOrder.indexOf(b.scenario) ||
      a.family - b.family,
  );
  const rows = sorted.map((r) => {
    const moved = `${fmtInt(r.moved)} of ${fmtInt(r.samples)} ${r.unit} (${fmtPct(r.moved, r.samples)})`;
    const needless = r.needless === 0 ? "0" : `${fmtInt(r.needless)} (${fmtPct(r.needless, r.samples)})`;
    const minimal = `${fmtPct(r.required, r.samples)}`;
    return `| ${r.label} | IPv${r.family} | ${labels[r.family][r.scenario]} | ${r.sent} | ${moved} | ${needless} | ${minimal} |`;
  });
  return [
    "| Strategy | VIP and backends | Change (VIP of 4 backends) | Sent to the gateway | Moved | Moved needlessly | Least possible |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

function applyTable(costs: readonly ApplyCost[], floorMs: number): string {
  const wire = (s: Sent) => (s.wire ? `${fmtInt(s.wire.modBytes)} B` : "n/a");
  const largest = (s: Sent) => (s.wire ? `${fmtPct(s.wire.largest, OPENFLOW_MAX_MESSAGE)}` : "n/a");
  const rows: string[] = [];
  for (const c of costs) {
    const size = `${fmtInt(c.backends)} → ${fmtInt(c.backends + 1)}, IPv${c.family}`;
    if (c.ovslb) {
      const o = c.ovslb;
      rows.push(
        `| ${size} | ovslb: ${o.ops} | ${o.mods} | ${fmtInt(o.bytes)} B | ${wire(o)} | ${largest(o)} | ${fmtMs(median(o.applyMs))} | ${fmtMs(median(o.readMs))} |`,
      );
    } else {
      rows.push(`| ${size} | ovslb: could not create the VIP (${c.create.error}) | | | | | | |`);
    }
    if (c.repush) {
      const r = c.repush;
      const ms = r.error ? `FAILED: ${r.error}` : fmtMs(median(r.applyMs));
      rows.push(
        `| ${size} | full re-push: modify-group, ${fmtInt(c.backends + 1)} buckets | ${r.mods} | ${fmtInt(r.bytes)} B | ${wire(r)} | ${largest(r)} | ${ms} | none |`,
      );
    }
  }
  return [
    `| VIP size, family | What is sent | OpenFlow mods | Bundle text (over SSH) | OpenFlow bytes (mods) | Largest message / 65,535 B | Apply, median of ${SIZES.timingRuns} | Read before plan, median |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    `Apply is the wall clock of one \`ovs-ofctl bundle\` over an open SSH connection; a no-op command (\`true\`) on the same connection took ${fmtMs(floorMs)} (median), ` +
      "so on this local lab the exec round trip, not the bytes, sets the apply time. ovslb also reads the gateway before it plans " +
      "(dump-flows of table 0 and dump-groups, in parallel), which a blind re-push does not.",
  ].join("\n");
}

/** What the IPv6 VIP changes in what is sent: the bucket's actions name MACs only, so only the group's hash fields and the VIP's flow grow. */
function ipv6Note(v4: readonly ApplyCost[], v6: readonly ApplyCost[]): string {
  const diff = (a?: number, b?: number) => (a === undefined || b === undefined ? "n/a" : `${b - a >= 0 ? "+" : "−"}${fmtInt(Math.abs(b - a))} B`);
  const parts = v4.map((c4, i) => {
    const c6 = v6[i];
    return (
      `at ${fmtInt(c4.backends)} backends the insert's bundle text ${diff(c4.ovslb?.bytes, c6.ovslb?.bytes)} and its OpenFlow bytes ${diff(c4.ovslb?.wire?.modBytes, c6.ovslb?.wire?.modBytes)}, ` +
      `the re-push's text ${diff(c4.repush?.bytes, c6.repush?.bytes)} and OpenFlow bytes ${diff(c4.repush?.wire?.modBytes, c6.repush?.wire?.modBytes)}, the create's text ${diff(c4.create.bytes, c6.create.bytes)}`
    );
  });
  const [l4, l6] = [v4.at(-1)?.limit, v6.at(-1)?.limit];
  const limit =
    l4 && l6
      ? ` A group mod's fixed part is ${fmtInt(l4.fixed)} B for IPv4 and ${fmtInt(l6.fixed)} B for IPv6 (${fmtInt(l4.perBucket)} and ${fmtInt(l6.perBucket)} B per bucket), so one message holds at most ${fmtInt(l4.maxBuckets)} and ${fmtInt(l6.maxBuckets)} buckets; check's ${fmtInt(MAX_BUCKETS_PER_GROUP)} fits both.`
      : "";
  return (
    "IPv6 VIP and backends against IPv4 (the same sizes, MACs and ports): " +
    `${parts.join("; ")}. An inserted bucket carries the backend's MACs and port, not its address, so its size does not change (a byte or two of bundle text is the group id's digits); ` +
    `the group's hash fields (ipv6_src, ipv6_dst against ip_src, ip_dst) are in every whole-group message, and the VIP's flow (\`tcp6,ipv6_dst=\`) is sent once, at create.${limit}`
  );
}

export const deferredNatBenchmark: Benchmark = {
  name: "deferred-nat",
  description: "issue 3: flows moved on backend add/remove (stable ids vs positional vs dp_hash); bytes to add one backend (incremental vs re-push)",
  async run(ctx) {
    SIZES = ctx.smoke ? SMOKE : FULL;
    const [small, large] = SIZES.apply;
    const gw = await connectGateway();
    const owned = new Owned();
    const run: LabRunOptions = {
      locks: [],
      interrupted: "removing this run's flows and groups",
      teardown: async () => (await owned.removeAll(gw), []),
      close: () => {
        gw.unixctl.close();
        gw.ssh.close();
      },
    };
    return labRun(ctx, run, async () => {
      const invariants = await acceptanceInvariants(gw.gatewayInput);
      const machine = await machineNote(gw.runner);
      const leftovers = await owned.removeAll(gw);
      if (leftovers.length > 0) ctx.log(`removed leftovers of an earlier run: ${leftovers.length} mods`);

      ctx.log(`1. flows moved (${SIZES.tuples} 5-tuples; dp_hash by hash slot)`);
      const moves: MoveResult[] = [];
      const dpHash = dpHashStrategy(gw, owned);
      for (const s of [
        stableStrategy(gw, owned, 4),
        positionalStrategy(gw, owned, 4),
        dpHash,
        stableStrategy(gw, owned, 6),
        positionalStrategy(gw, owned, 6),
      ]) {
        const { value, ms } = await timed(() => measureMoves(s, ctx));
        moves.push(...value);
        ctx.log(`  ${s.key} IPv${s.family}: ${(ms / 1000).toFixed(1)} s${s.note ? `, ${s.note()}` : ""}`);
      }

      ctx.log(`2. what adding one backend sends (VIPs of ${small} and ${large})`);
      const floor: number[] = [];
      for (let r = 0; r < SIZES.timingRuns; r++) floor.push((await timed(() => runChecked(gw.runner, ["true"]))).ms);
      const cSmall = await measureApply(gw, owned, small, 80, ctx, invariants);
      const cLarge = await measureApply(gw, owned, large, 443, ctx, invariants, cSmall);
      // The same with an IPv6 VIP and IPv6 backends, its limit computed and probed from its own re-push sizes.
      const cSmall6 = await measureApply(gw, owned, small, 80, ctx, invariants, undefined, 6);
      const cLarge6 = await measureApply(gw, owned, large, 443, ctx, invariants, cSmall6, 6);

      const stable = moves.filter((m) => m.strategy === "stable");
      const dpMasks = dpHash.note?.() ?? "";
      const stableChecks = {
        addsMovedOnlyToNewBackend: stable.filter((m) => m.scenario.startsWith("add")).every((m) => m.needless === 0),
        removeMovedOnlyRemovedBackendsFlows: stable.filter((m) => m.scenario.startsWith("remove")).every((m) => m.needless === 0 && m.moved === m.required),
        baseRestoredExactly: stable.every((m) => m.baseRestored),
      };
      invariants.push(
        {
          name: "ovslb (stable ids): every flow that moved on an add went to the new backend",
          ok: stable.length === 6 && stableChecks.addsMovedOnlyToNewBackend,
        },
        { name: "ovslb (stable ids): on the remove, exactly the removed backend's flows moved", ok: stableChecks.removeMovedOnlyRemovedBackendsFlows },
        { name: "ovslb (stable ids): going back to the 4 backends restored every flow's first choice", ok: stableChecks.baseRestoredExactly },
        {
          name: "IPv6 rows: the IPv6 VIP's tuples hash on ipv6_src/ipv6_dst (both strategies spread them over every backend)",
          ok:
            FAMILIES.every((f) => moves.some((m) => m.family === f)) &&
            moves.filter((m) => m.family === 6).every((m) => m.required > 0 || m.scenario.startsWith("remove")),
        },
        {
          name: "every change moved at least the least possible share (and the added backend took some)",
          ok: moves.every((m) => m.moved >= m.required && (m.scenario.startsWith("remove") || m.required > 0)),
        },
      );

      // Leave nothing behind, and check it.
      await owned.removeAll(gw);
      const left = await leftBehind(gw, owned);
      invariants.push({
        name: "the run left nothing on the gateway (no flow with its cookies, none of its groups)",
        ok: left.flows === 0 && left.groups.length === 0,
        detail: `${left.flows} flows, ${left.groups.length} groups`,
      });

      const data = {
        machine,
        gateway: GATEWAY,
        bridge: BRIDGE,
        tuples: SIZES.tuples,
        timingRuns: SIZES.timingRuns,
        wireTap: gw.tapped ? "strace -e trace=sendto on ovs-ofctl" : "unavailable (no strace on the host)",
        moves,
        stableChecks,
        execFloorMs: floor,
        apply: [cSmall, cLarge, cSmall6, cLarge6],
      };
      const limit = cLarge.limit;
      const markdown = [
        `### Flows moved by one backend change`,
        "",
        movesTable(moves),
        "",
        `ovslb's stable ids: every flow that moved on an add went to the new backend: ${stableChecks.addsMovedOnlyToNewBackend ? "yes" : "NO"}; ` +
          `on the remove, exactly the removed backend's flows moved: ${stableChecks.removeMovedOnlyRemovedBackendsFlows ? "yes" : "NO"}; ` +
          `going back to the 4 backends restored every flow's first choice: ${stableChecks.baseRestoredExactly ? "yes" : "NO"}.`,
        "",
        "Least possible: the share the new backend takes after an add, or the removed backend had before a remove; any strategy must move at least that. " +
          "Moved needlessly: moved, but not to the added backend, or not away from the removed one. " +
          `dp_hash rows count the slots of its hash table (${dpMasks}), traced one by one: a uniformly hashed flow moves exactly when its slot changes bucket, so the share of slots moved is the expected share of flows moved.`,
        "",
        `### What adding one backend sends`,
        "",
        applyTable([cSmall, cLarge, cSmall6, cLarge6], median(floor)),
        "",
        ipv6Note([cSmall, cLarge], [cSmall6, cLarge6]),
        "",
        large + 1 === MAX_BUCKETS_PER_GROUP
          ? `The large VIP ends at the most backends check accepts: ${fmtInt(MAX_BUCKETS_PER_GROUP)} buckets per group (one per backend of weight 1); check refuses ${fmtInt(MAX_BUCKETS_PER_GROUP + 1)}, so no larger VIP is measured.`
          : `Small sizes (smoke run); the full run ends its large VIP at the most backends check accepts (${fmtInt(MAX_BUCKETS_PER_GROUP)}), and this run checked that check accepts it.`,
        "",
        ...(cLarge.ovslb
          ? [
              `What ovslb reads is not small either: the VIP's group alone dumps as ${fmtInt(cLarge.ovslb.groupDumpBytes)} B of text at ${fmtInt(large + 1)} backends (${fmtInt(cSmall.ovslb?.groupDumpBytes ?? NaN)} B at ${fmtInt(small + 1)}). ` +
                `Creating the ${fmtInt(large)}-backend VIP was itself one add-group of ${fmtInt(cLarge.create.bytes)} B of text${cLarge.create.wire ? `, a ${fmtInt(cLarge.create.wire.largest)} B OpenFlow message (${fmtPct(cLarge.create.wire.largest, OPENFLOW_MAX_MESSAGE)} of the limit)` : ""}.`,
              "",
            ]
          : []),
        ...(limit
          ? [
              `OpenFlow's 16-bit length caps one message at 65,535 B. Each bucket (eth_src, eth_dst, IN_PORT, weight) takes ${limit.perBucket} B on the wire, so one group mod holds at most ${fmtInt(limit.maxBuckets)} such buckets; ` +
                `a ${fmtInt(limit.maxBuckets)}-bucket re-push (built by hand: check would refuse it) ${limit.probe?.error ? `FAILED (${limit.probe.error})` : `was applied (largest message ${fmtInt(limit.probe?.wire?.largest ?? NaN)} B)`}.`,
              "",
            ]
          : []),
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} (${os.cpus().length} cores) as the run started; ${machine.date}.`,
      ].join("\n");
      return { name: "deferred-nat", markdown, data, invariants } satisfies BenchReport;
    });
  },
};
