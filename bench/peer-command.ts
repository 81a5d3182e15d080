import type { DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";
import { derivedId, ownerCookie, MAX_GROUP_ID } from "../provider/model/ids";
import { BUCKET_WEIGHT, VIP_FLOW_PRIORITY, vipKey } from "../provider/resources/deferred-nat-load-balancer/plan";
import { parseGroups } from "../provider/openflow";
import { runChecked, type CommandResult, type RunOptions } from "../provider/transport/exec";
import { SshSession } from "../provider/transport/ssh";
import { traceBuckets } from "../provider/transport/openflow-trace";
import type { LabBackend, LabInventory } from "../test/lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../test/support/deferred-nat";
import { inNamespace, labSsh, loadInventory, sshTo } from "../test/support/lab";
import { openLiveConnections, type LiveConnection, type LiveConnections } from "../test/support/tcp-clients";
import { fmtInt, fmtMs, labRun, machineNote, median, teardownSteps, type BenchContext, type BenchReport, type Benchmark, type Invariant } from "./common";

/**
 * Issue 13's peer benchmark: one backend change done by ovslb against what a
 * user would do without it, a `@pulumi/command`-style `remote.Command` per
 * gateway (one SSH connection and one exec of a shell script per host on
 * every change; emulated here, no @pulumi/command) that re-pushes the
 * whole group and its flow: `ovs-ofctl --may-create mod-group` with every
 * bucket, then `add-flows` from a here-doc. Side by side in one run, on the
 * lab's two gateways (gw1, gw2, br-seg, mac delivery) with real TCP from the
 * client namespace to the lab's backend VMs (the hypervisors' side is one
 * DsrHypervisorFlows per hypervisor, the same for both modes):
 *
 * - bytes over SSH (what this process wrote to and read from the gateways'
 *   TCP sockets, handshakes included);
 * - OpenFlow messages the gateways' ovs-vswitchd received and sent
 *   (`coverage/read-counter vconn_received` / `vconn_sent`, exact totals;
 *   idle windows around each change check that nobody else talked to them);
 * - wall time of the change (ovslb: check + update; the peer: both
 *   gateways' commands, in parallel as the engine runs two resources);
 * - connections broken: 60 long-lived connections per mode
 *   (test/support/tcp-clients.ts), two rounds after each change.
 *
 * Changes: 4 backends (hv1-vm3, hv1-vm4, hv2-vm3, hv2-vm4), add hv3-vm3 at the
 * end of the list, then remove hv1-vm4 (the second of the list). Bucket ids
 * on the gateways are dumped after each change: the peer gives none, so OVS
 * numbers them.
 *
 * Runs under the lab's hv1-gre lock (it changes gw1, gw2 and the
 * hypervisors); VIP 10.0.0.240 with a client route of its own (ECMP over
 * both gateways), removed at the end with everything else, also on failure
 * or Ctrl-C.
 */

export interface Sizes {
  connections: number;
  /** add + remove cycles per mode. */
  cycles: number;
}
export const FULL: Sizes = { connections: 60, cycles: 5 };
export const SMOKE: Sizes = { connections: 30, cycles: 1 };

const VIP = "10.0.0.240";
/**
 * The backends: the 3rd and 4th VMs of hv1 and hv2, and hv3's 3rd for the
 * add. A hypervisor's reply flow is per backend, so two resources cannot
 * hold one VM at once; the examples and most tests use the first VMs.
 */
const POOL = ["hv1-vm3", "hv1-vm4", "hv2-vm3", "hv2-vm4", "hv3-vm3"] as const;
const VPORT = 80;
const KEY = vipKey({ protocol: "tcp", address: VIP, port: VPORT });
const GATEWAYS = ["gw1", "gw2"] as const;
const HYPERVISORS = ["hv1", "hv2", "hv3"] as const;
const LB_NAME = "bench-peer-ovslb";
const HV_NAME = "bench-peer";
const PEER_COOKIE = ownerCookie("ovslb-bench", "peer-command");
const PEER_GROUP = derivedId(["ovslb-bench", "peer-command", "group"], MAX_GROUP_ID);
const FIELDS = "ip_src,ip_dst,tcp_src,tcp_dst";

type Mode = "ovslb" | "peer";
const MODES: readonly Mode[] = ["ovslb", "peer"];
const MODE_LABEL: Record<Mode, string> = {
  ovslb: "ovslb (DeferredNatLoadBalancer update: read, plan, one bundle per gateway)",
  peer: "remote.Command-style script (whole group re-pushed: mod-group + add-flows)",
};

interface Lab {
  inv: LabInventory;
  pool: LabBackend[];
  ssh: Record<string, SshSession>;
  segOfport: Record<string, number>;
  lb?: ProviderDriver;
  hv: Record<string, ProviderDriver>;
  live?: LiveConnections;
  usedPorts: Set<number>;
  routed: boolean;
  peerPushed: boolean;
  tornDown?: Promise<string[]>;
}

// ---------------------------------------------------------------- what each change costs

/** Every SSH session this process opens while `fn` runs, and the bytes of their TCP sockets. */
async function countingSshBytes<T>(fn: () => Promise<T>): Promise<{ value: T; sent: number; received: number; connections: number }> {
  const opened: SshSession[] = [];
  const original = SshSession.connect;
  SshSession.connect = async (c) => {
    const s = await original.call(SshSession, c);
    opened.push(s);
    return s;
  };
  try {
    const value = await fn();
    const socks = opened.map((s) => (s as unknown as { client: { _sock?: { bytesWritten: number; bytesRead: number } } }).client._sock);
    return {
      value,
      sent: socks.reduce((n, k) => n + (k?.bytesWritten ?? 0), 0),
      received: socks.reduce((n, k) => n + (k?.bytesRead ?? 0), 0),
      connections: opened.length,
    };
  } finally {
    SshSession.connect = original;
  }
}

/**
 * The OpenFlow messages in `strace -f -e trace=sendto -xx -s 8` output: one
 * per write that starts a message (a header whose length says more follows
 * is continued by the same process's next writes on that socket); writes to
 * fds 0-2 are not sockets. The other lines are kept (the command's stderr).
 */
export function openFlowWrites(stderr: string): { messages: number; bytes: number; kept: string[] } {
  let messages = 0;
  let bytes = 0;
  const kept: string[] = [];
  // Per process and socket: bytes still owed to a message whose header said more than one write carried.
  const owed = new Map<string, number>();
  for (const line of stderr.split("\n")) {
    const m = /^(?:\[pid\s+(\d+)\]\s+)?sendto\((\d+), "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, \d+, .*\) = (-?\d+)/.exec(line);
    if (!m) {
      if (!/^(?:\[pid\s+\d+\]\s+)?sendto\(/.test(line) && !/^\[pid\s+\d+\]\s+\+\+\+ /.test(line)) kept.push(line);
      continue;
    }
    const sent = Number(m[4]);
    if (Number(m[2]) <= 2 || sent <= 0) continue;
    const key = `${m[1] ?? ""}/${m[2]}`;
    const rest = owed.get(key) ?? 0;
    bytes += sent;
    if (rest > 0) {
      owed.set(key, Math.max(0, rest - sent));
      continue;
    }
    const head = Buffer.from(m[3].replace(/\\x/g, ""), "hex");
    if (head.length < 4) continue;
    messages++;
    owed.set(key, Math.max(0, head.readUInt16BE(2) - sent));
  }
  return { messages, bytes, kept };
}

/**
 * OpenFlow messages ovs-ofctl wrote to ovs-vswitchd, exactly: while `fn`
 * runs, every SSH command of this process that runs ovs-ofctl (directly or
 * through sh) runs under `strace -f -e trace=sendto` on the host, and each
 * write's OpenFlow header is read from the trace (as WireTapRunner in
 * common.ts does). strace's lines are taken out of stderr before the caller
 * sees it. Only for a counted pass: strace slows the commands.
 */
async function countingOpenFlow<T>(fn: () => Promise<T>): Promise<{ value: T; messages: number; bytes: number; commands: number }> {
  let messages = 0;
  let bytes = 0;
  let commands = 0;
  const original = SshSession.prototype.run;
  SshSession.prototype.run = async function (this: SshSession, argv: readonly string[], opts?: RunOptions): Promise<CommandResult> {
    const ofctl = argv.includes("ovs-ofctl") || argv.some((a) => /\bovs-ofctl\b/.test(a));
    if (!ofctl) return original.call(this, argv, opts);
    commands++;
    const r = await original.call(this, ["strace", "-f", "-qq", "-e", "trace=sendto", "-e", "signal=none", "-xx", "-s", "8", "--", ...argv], opts);
    const w = openFlowWrites(r.stderr);
    messages += w.messages;
    bytes += w.bytes;
    return { ...r, stderr: w.kept.join("\n") };
  };
  try {
    return { value: await fn(), messages, bytes, commands };
  } finally {
    SshSession.prototype.run = original;
  }
}

/** The peer's script for one gateway: the whole group (buckets in list order, no ids) and the VIP's flow, re-pushed. */
function peerScript(lab: Lab, gw: string, backends: readonly LabBackend[]): string {
  const h = lab.inv.hosts[gw];
  const mac = h.segment!.mac;
  const buckets = backends.map((b) => `bucket=weight:${BUCKET_WEIGHT},actions=set_field:${mac}->eth_src,set_field:${b.mac}->eth_dst,in_port`).join(",");
  const cookie = `0x${PEER_COOKIE.toString(16)}`;
  return [
    "set -e",
    `export OVS_RUNDIR=${h.ovsRundir}`,
    `ovs-ofctl -O OpenFlow15 --may-create mod-group br-seg 'group_id=${PEER_GROUP},type=select,selection_method=hash,fields(${FIELDS}),${buckets}'`,
    "ovs-ofctl -O OpenFlow15 add-flows br-seg - <<'EOF'",
    `cookie=${cookie},table=0,priority=${VIP_FLOW_PRIORITY},tcp,in_port=${lab.segOfport[gw]},nw_dst=${VIP},tp_dst=${VPORT},actions=group:${PEER_GROUP}`,
    "EOF",
    "",
  ].join("\n");
}

/** What remote.Command does on each change: connect, run the script through the login shell, disconnect; one per gateway, in parallel. */
async function peerPush(lab: Lab, backends: readonly LabBackend[]): Promise<void> {
  await Promise.all(
    GATEWAYS.map(async (g) => {
      const s = await SshSession.connect(sshTo(lab.inv, g));
      try {
        const r = await s.run(["sh", "-c", peerScript(lab, g, backends)]);
        if (r.exitCode !== 0) throw new Error(`peer script on ${g}: ${r.stderr.trim()}`);
      } finally {
        s.close();
      }
    }),
  );
  lab.peerPushed = true;
}

function lbInputs(lab: Lab, backends: readonly LabBackend[]): Inputs {
  return labLoadBalancer(lab.inv, LB_NAME, [{ address: VIP, port: VPORT, protocol: "tcp", backends: backends.map((b) => labBackend(lab.inv, b)) }]);
}

async function apply(lab: Lab, mode: Mode, backends: readonly LabBackend[]): Promise<void> {
  if (mode === "peer") return peerPush(lab, backends);
  lab.lb ??= new ProviderDriver("DeferredNatLoadBalancer");
  await (lab.lb.id ? lab.lb.update(lbInputs(lab, backends)) : lab.lb.create(lbInputs(lab, backends)));
}

/** The group's bucket ids on gw1, in order, with the backend MAC each sends to. */
async function bucketsOn(lab: Lab, mode: Mode): Promise<Array<{ id: number; mac: string }>> {
  const id = mode === "peer" ? PEER_GROUP : (lab.lb!.outputs.groupIds[KEY] as number);
  const out = await runChecked(lab.ssh.gw1, ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-groups", "br-seg", String(id)]);
  const g = parseGroups(out)[0];
  const nameOf = new Map(lab.pool.map((b) => [b.mac, b.name]));
  return (g?.buckets ?? []).map((b) => {
    const mac = /set_field:([0-9a-f:]{17})->eth_dst/.exec(out.split("bucket=").find((t) => t.startsWith(`bucket_id:${b.bucketId},`)) ?? "")?.[1] ?? "?";
    return { id: b.bucketId ?? -1, mac: nameOf.get(mac) ?? mac };
  });
}

async function removeMode(lab: Lab, mode: Mode): Promise<void> {
  if (mode === "ovslb") {
    if (lab.lb?.id) await lab.lb.delete();
    if (lab.lb) lab.lb.id = "";
    return;
  }
  for (const g of GATEWAYS) {
    const cookie = `0x${PEER_COOKIE.toString(16)}`;
    await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=${cookie}/-1`]);
    await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "del-groups", "br-seg", `group_id=${PEER_GROUP}`]);
  }
  lab.peerPushed = false;
}

/** The VM-side sockets of this run's client ports: a broken connection's stays ESTABLISHED (see bench/second-chance.ts). */
function serverSockets(lab: Lab, kill: boolean): number {
  const ports = [...lab.usedPorts].filter((p) => Number.isInteger(p));
  let found = 0;
  for (const vm of lab.pool) {
    for (let i = 0; i < ports.length; i += 40) {
      const filter = `( sport = :${lab.inv.backendPort} and dst ${lab.inv.client.address} and ( ${ports
        .slice(i, i + 40)
        .map((p) => `dport = :${p}`)
        .join(" or ")} ) )`;
      found += inNamespace(vm.namespace, ["ss", "-tnH", ...(kill ? ["-K"] : []), "state", "established", filter])
        .split("\n")
        .filter((l) => l.trim()).length;
    }
  }
  return found;
}

function teardown(lab: Lab): Promise<string[]> {
  lab.tornDown ??= (async () => {
    const { failed, attempt } = teardownSteps();
    await attempt("live connections", () => lab.live?.close());
    await attempt("ovslb's load balancer", () => removeMode(lab, "ovslb"));
    if (lab.peerPushed) await attempt("the peer's group and flow", () => removeMode(lab, "peer"));
    for (const [h, d] of Object.entries(lab.hv)) await attempt(`hypervisor flows on ${h}`, async () => d.id && (await d.delete()));
    if (lab.routed) await attempt("client route", () => inNamespace(lab.inv.client.namespace, ["ip", "route", "del", `${VIP}/32`]));
    await attempt("server sockets", () => serverSockets(lab, true));
    return failed;
  })();
  return lab.tornDown;
}

// ---------------------------------------------------------------- one mode

interface StepResult {
  step: "add" | "remove";
  cycle: number;
  wallMs: number;
  sshSent: number;
  sshReceived: number;
  sshConnections: number;

  alive: number;
  broken: number;
  /** Working connections on the removed backend. */
  onRemoved: number;
  brokenOnRemoved: number;
  /**
   * Of those, the ones the trace now sends to another backend of the removed
   * one's hypervisor: that hypervisor still serves the removed backend (its
   * DsrHypervisorFlows is not changed here), and its conntrack entries keep
   * translating them to it, so they live. Every other one must break.
   */
  keptOnItsHypervisor: number;
  /** Why they broke, as the client saw it (a reset, a timeout, another backend answering). */
  reasons: Record<string, number>;
  buckets: Array<{ id: number; mac: string }>;
}

async function runMode(
  lab: Lab,
  mode: Mode,
  sizes: Sizes,
  ctx: BenchContext,
  invariants: Invariant[],
): Promise<{
  mode: Mode;
  steps: StepResult[];
  initialBuckets: Array<{ id: number; mac: string }>;
  counted: Record<"add" | "remove", { messages: number; bytes: number; commands: number }>;
}> {
  const four = lab.pool.filter((b) => b.hypervisor !== "hv3");
  const fifth = lab.pool.find((b) => b.hypervisor === "hv3")!;
  const removed = four[1];
  const steps: StepResult[] = [];
  let initialBuckets: Array<{ id: number; mac: string }> = [];
  for (let cycle = 0; cycle < sizes.cycles; cycle++) {
    // Each cycle starts from the four (the first creates them; later ones put the removed one back and take the fifth out, unmeasured).
    await apply(lab, mode, four);
    if (cycle === 0) initialBuckets = await bucketsOn(lab, mode);
    const live = (lab.live = await openLiveConnections(lab.inv.client.namespace, VIP, VPORT, sizes.connections));
    for (const c of live.initial) lab.usedPorts.add(c.port);
    invariants.push({
      name: `${mode}, cycle ${cycle + 1}: all ${sizes.connections} connections opened`,
      ok: live.initial.every((c) => !c.broken),
      detail:
        live.initial
          .filter((c) => c.broken)
          .map((c) => c.broken)
          .slice(0, 3)
          .join(", ") || undefined,
    });
    let state: LiveConnection[] = live.initial;
    const plans = { add: [...four, fifth], remove: [...four, fifth].filter((b) => b !== removed) };
    for (const step of ["add", "remove"] as const) {
      const alive = state.filter((c) => !c.broken);
      const t = performance.now();
      const counted = await countingSshBytes(() => apply(lab, mode, plans[step]));
      const wallMs = performance.now() - t;
      for (let r = 0; r < 2; r++) state = await live.round();
      const brokeNow = state.filter((c) => c.broken && alive.some((a) => a.port === c.port));
      const onRemoved = step === "remove" ? alive.filter((c) => c.backend === removed.name) : [];
      const buckets = await bucketsOn(lab, mode);
      const nowOn = await traceBuckets(
        lab.ssh.gw1,
        "br-seg",
        onRemoved.map((c) => ({
          protocol: "tcp" as const,
          in_port: lab.segOfport.gw1,
          nw_src: lab.inv.client.address,
          nw_dst: VIP,
          tp_src: c.port,
          tp_dst: VPORT,
        })),
      );
      const hypervisorOf = (bucket: number | undefined) => lab.pool.find((b) => b.name === buckets.find((x) => x.id === bucket)?.mac)?.hypervisor;
      steps.push({
        step,
        cycle,
        wallMs,
        sshSent: counted.sent,
        sshReceived: counted.received,
        sshConnections: counted.connections,
        alive: alive.length,
        broken: brokeNow.length,
        onRemoved: onRemoved.length,
        brokenOnRemoved: brokeNow.filter((c) => c.backend === removed.name).length,
        keptOnItsHypervisor: nowOn.filter((b) => hypervisorOf(b) === removed.hypervisor).length,
        reasons: brokeNow.reduce<Record<string, number>>((m, c) => {
          const why = /^error:|^closed|^timeout/.test(c.broken) ? c.broken : "another backend answered";
          m[why] = (m[why] ?? 0) + 1;
          return m;
        }, {}),
        buckets,
      });
      ctx.log(`[${mode}] cycle ${cycle + 1} ${step}: ${fmtMs(wallMs)}, ${counted.sent} B sent, ${brokeNow.length} of ${alive.length} broken`);
    }
    live.close();
    lab.live = undefined;
  }
  // The counted pass: the same two changes once more, ovs-ofctl under strace (not timed, no connections).
  await apply(lab, mode, four);
  const counted: Record<"add" | "remove", { messages: number; bytes: number; commands: number }> = {} as never;
  for (const step of ["add", "remove"] as const) {
    const next = step === "add" ? [...four, fifth] : [...four, fifth].filter((b) => b !== removed);
    const { value: _v, ...c } = await countingOpenFlow(() => apply(lab, mode, next));
    counted[step] = c;
    ctx.log(`[${mode}] counted ${step}: ${c.messages} OpenFlow messages (${c.bytes} B) in ${c.commands} ovs-ofctl commands`);
  }
  return { mode, steps, initialBuckets, counted };
}

// ---------------------------------------------------------------- the run

async function run(ctx: BenchContext): Promise<BenchReport> {
  const sizes = ctx.smoke ? SMOKE : FULL;
  const inv = loadInventory();
  const pool = POOL.map((n) => inv.backends.find((b) => b.name === n)!);
  const lab: Lab = { inv, pool, ssh: {}, segOfport: {}, hv: {}, usedPorts: new Set(), routed: false, peerPushed: false };
  const invariants: Invariant[] = [];
  const results: Awaited<ReturnType<typeof runMode>>[] = [];
  let machine: Record<string, string> = {};
  let left: string[] = [];

  await labRun(
    ctx,
    {
      locks: ["hv1-gre"],
      interrupted: "removing the peer's and ovslb's load balancers",
      teardown: () => teardown(lab),
      close: () => Object.values(lab.ssh).forEach((s) => s.close()),
    },
    async (interrupted) => {
      for (const h of [...GATEWAYS, ...HYPERVISORS]) lab.ssh[h] = await labSsh(inv, h);
      machine = await machineNote(lab.ssh.gw1);
      for (const g of GATEWAYS) lab.segOfport[g] = Number((await runChecked(lab.ssh[g], ["ovs-vsctl", "get", "interface", "seg0", "ofport"])).trim());
      // Leftovers of an interrupted run, and a group id nobody else holds.
      for (const g of GATEWAYS) {
        const groups = parseGroups(await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-groups", "br-seg"]));
        if (groups.some((x) => x.groupId === PEER_GROUP)) {
          const flows = await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `cookie=0x${PEER_COOKIE.toString(16)}/-1`]);
          if (!flows.includes("cookie=")) throw new Error(`${g}: group ${PEER_GROUP} is someone else's`);
          lab.peerPushed = true;
        }
      }
      if (lab.peerPushed) await removeMode(lab, "peer");
      await new ProviderDriver("DeferredNatLoadBalancer").purge(lbInputs(lab, pool));
      for (const h of HYPERVISORS) {
        const hvIn = labHypervisorFlows(inv, `${HV_NAME}-${h}`, h, [{ address: VIP, port: VPORT, backends: pool }]);
        await new ProviderDriver("DsrHypervisorFlows").purge(hvIn);
        lab.hv[h] = new ProviderDriver("DsrHypervisorFlows");
        await lab.hv[h].create(hvIn);
      }
      const via = GATEWAYS.flatMap((g) => ["nexthop", "via", inv.hosts[g].segment!.address, "dev", "eth0"]);
      inNamespace(inv.client.namespace, ["ip", "route", "replace", `${VIP}/32`, ...via]);
      lab.routed = true;
      for (const mode of MODES) {
        if (interrupted()) return;
        results.push(await runMode(lab, mode, sizes, ctx, invariants));
        await removeMode(lab, mode);
        serverSockets(lab, true);
      }
      // Nothing left: no flow with either cookie, no group of either.
      for (const g of GATEWAYS) {
        const flows = await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg"]);
        const groups = parseGroups(await runChecked(lab.ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-groups", "br-seg"])).map(
          (x) => x.groupId,
        );
        const cookies = [PEER_COOKIE, BigInt(lab.lb?.outputs.cookie ?? "0")].map((c) => `cookie=0x${c.toString(16)},`);
        if (cookies.some((c) => flows.includes(c))) left.push(`${g}: flows`);
        const ours = [PEER_GROUP, ...Object.values((lab.lb?.outputs.groupIds ?? {}) as Record<string, number>)];
        if (groups.some((id) => ours.includes(id))) left.push(`${g}: groups`);
      }
    },
  );
  left = [...left, ...(await teardown(lab))];

  // ---------------------------------------------------------------- invariants
  const by = Object.fromEntries(results.map((r) => [r.mode, r])) as Record<Mode, (typeof results)[number]>;
  for (const r of results) {
    invariants.push({
      name: `${r.mode}: the counted pass saw OpenFlow messages in every change`,
      ok: r.counted.add.messages > 0 && r.counted.remove.messages > 0,
      detail: `add ${r.counted.add.messages}, remove ${r.counted.remove.messages}`,
    });
    invariants.push({
      name: `${r.mode}: every removal broke every connection on the removed backend but those the trace sends to another backend of its hypervisor (which still serves it: conntrack there keeps them on it)`,
      ok: r.steps.filter((s) => s.step === "remove").every((s) => s.brokenOnRemoved === s.onRemoved - s.keptOnItsHypervisor),
      detail: r.steps
        .filter((s) => s.step === "remove")
        .map((s) => `${s.brokenOnRemoved} of ${s.onRemoved} broke, ${s.keptOnItsHypervisor} kept`)
        .join("; "),
    });
    invariants.push({
      name: `${r.mode}: each add broke at most the connections that moved to the new backend (fewer than half)`,
      ok: r.steps.filter((s) => s.step === "add").every((s) => s.broken < s.alive / 2),
    });
  }
  if (by.ovslb) {
    const ids = by.ovslb.initialBuckets.map((b) => `${b.mac}:${b.id}`);
    invariants.push({
      name: "ovslb: bucket ids stay with their backends across every change",
      ok: by.ovslb.steps.every((s) => s.buckets.every((b) => ids.includes(`${b.mac}:${b.id}`) || b.mac === POOL[4])),
    });
  }
  invariants.push({ name: "nothing of the run is left (flows, groups, route, hypervisor flows)", ok: left.length === 0, detail: left.join("; ") || undefined });

  // ---------------------------------------------------------------- the report
  const med = (m: Mode, k: "add" | "remove", f: (s: StepResult) => number) => median(by[m].steps.filter((s) => s.step === k).map(f));
  const sum = (m: Mode, k: "add" | "remove", f: (s: StepResult) => number) => by[m].steps.filter((s) => s.step === k).reduce((n, s) => n + f(s), 0);
  const bucketsText = (bs: Array<{ id: number; mac: string }>) => bs.map((b) => `${b.mac}=${b.id}`).join(", ");
  const lines = [
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs}, Node ${machine.node}; load average ${machine.load} as the run started.`,
    "",
    `Per change, both gateways (gw1, gw2) together; medians over ${sizes.cycles} cycle(s); connections broken summed over the cycles.`,
    "",
    "| Change | Mode | Wall, median | Bytes over SSH: sent / received, median | SSH connections | OpenFlow messages sent to ovs-vswitchd | Connections broken (of those working) |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...(["add", "remove"] as const).flatMap((k) =>
      results.map(
        (r) =>
          `| ${k === "add" ? "add hv3-vm3 (end of the list)" : "remove hv1-vm4 (second of the list)"} | ${MODE_LABEL[r.mode]} | ${fmtMs(med(r.mode, k, (s) => s.wallMs))} | ${fmtInt(med(r.mode, k, (s) => s.sshSent))} / ${fmtInt(med(r.mode, k, (s) => s.sshReceived))} | ${med(r.mode, k, (s) => s.sshConnections)} | ${r.counted[k].messages} (${fmtInt(r.counted[k].bytes)} B) in ${r.counted[k].commands} ovs-ofctl | ${sum(r.mode, k, (s) => s.broken)} of ${sum(r.mode, k, (s) => s.alive)}${k === "remove" ? ` (${sum(r.mode, k, (s) => s.brokenOnRemoved)} on the removed backend, which held ${sum(r.mode, k, (s) => s.onRemoved)}; ${sum(r.mode, k, (s) => s.keptOnItsHypervisor)} of them, sent to its hypervisor's other backend, lived)` : ""} |`,
      ),
    ),
    "",
    "Why they broke (the client's reason, summed over the cycles):",
    "",
    ...results.flatMap((r) =>
      (["add", "remove"] as const).map((k) => {
        const why: Record<string, number> = {};
        for (const st of r.steps.filter((x) => x.step === k)) for (const [w, n] of Object.entries(st.reasons)) why[w] = (why[w] ?? 0) + n;
        return `- ${r.mode}, ${k}: ${
          Object.entries(why)
            .map(([w, n]) => `${w} ${n}`)
            .join(", ") || "none"
        }`;
      }),
    ),
    "",
    "Bucket ids on gw1 (backend=bucket_id) before the first change and after each change of the first cycle:",
    "",
    ...results.map(
      (r) =>
        `- ${r.mode}: ${bucketsText(r.initialBuckets)}; after the add: ${bucketsText(r.steps[0].buckets)}; after the remove: ${bucketsText(r.steps[1].buckets)}`,
    ),
    "",
    "Bytes: what this process wrote to and read from the gateways' SSH TCP sockets during the change (handshake, authentication, channels, commands, stdin, output); both modes open one connection per gateway per change. " +
      "OpenFlow messages: every message ovs-ofctl wrote to the gateways' ovs-vswitchd (both gateways; hello, requests, bundle controls and mods), from `strace -f -e trace=sendto` around each ovs-ofctl in a counted pass of the same two changes (not timed); the vswitchd's own coverage counters (`vconn_received`) count every client's messages, and tests read these shared gateways without a lock.",
  ];
  return { name: "peer-command", markdown: lines.join("\n"), data: { machine, sizes, results }, invariants };
}

export const peerCommandBenchmark: Benchmark = {
  name: "peer-command",
  description: "one backend change: ovslb vs a remote.Command-style script re-pushing the group (bytes, OpenFlow messages, wall, connections broken; issue 13)",
  run,
};
