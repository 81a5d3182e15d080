import { createInterface } from "node:readline";
import type { ChildProcess } from "node:child_process";
import type { DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../provider/model/inputs.generated";
import {
  cookieOf as lbCookieOf,
  desiredDataplane,
  greKeyOf,
  replicaKey,
  tunnelPorts,
  withDefaults,
  type GatewayPort,
} from "../provider/resources/deferred-nat-load-balancer/plan";
import { DEVIATION_DIVISOR, deviationBound, quotas, readSlots, type SlotTable } from "../provider/resources/deferred-nat-load-balancer/slots";
import { HAND_ON_PRIORITY, SECOND_CHANCE_TABLE, DEFAULT_GRE_PORT, cookieOf as dsrCookieOf, dsrId } from "../provider/resources/dsr-hypervisor-flows/plan";
import { ipMatch, ipv4Number, parseFlows, type Match } from "../provider/openflow";
import { runChecked } from "../provider/transport/exec";
import { OpenFlowBridge } from "../provider/transport/openflow-bridge";
import { traceBuckets, traceSlots } from "../provider/transport/openflow-trace";
import { bridgeSocket } from "../provider/transport/ovs-host";
import type { SshSession } from "../provider/transport/ssh";
import { ipv6Twin, type LabBackend, type LabInventory } from "../test/lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../test/support/deferred-nat";
import { connectAndClose, openLiveConnections, times, type LiveConnection, type LiveConnections } from "../test/support/tcp-clients";
import { inNamespace, labSsh, loadInventory, spawnInNamespace, sshTo } from "../test/support/lab";
import { waitUntil } from "../test/support/wait";
import { byAddress } from "./deferred-nat";
import {
  benchProgram,
  fmtInt,
  machineNote,
  type BenchContext,
  type BenchReport,
  type Benchmark,
  type Invariant,
  labRun,
  teardownSteps,
  type LabRunOptions,
} from "./common";

/**
 * Issue 10's benchmark: what a backend change does to established
 * connections, side by side in one run, with real TCP through the lab, for
 *
 * (a) second chance: DeferredNatLoadBalancer `secondChance: {}` (gre
 *     delivery, gw1 and gw2), DsrHypervisorFlows with gre.secondChance peers;
 * (b) stateless ovslb: the same load balancer without secondChance (select
 *     group with stable bucket ids, one insert/remove_bucket per change);
 * (c) OVN-style rebuild: the stateless gateways' group rewritten whole with
 *     positional bucket ids 0..n-1 in the order of the backend list sorted by
 *     address (one modify-group per gateway), the model bench/deferred-nat.ts
 *     measures in flows moved.
 *
 * Per mode, 60 long-lived connections (test/support/tcp-clients.ts) over 4
 * backends (2 on hv1, 2 on hv2) go through: add a 5th (on hv3); drain one
 * (second chance only; for the others drain = remove); remove the drained
 * one once its connections have closed; remove one without draining. Each
 * step counts the connections broken, and for (b) and (c) checks that the
 * broken ones are exactly those the trace sends off their backend's
 * hypervisor (or whose backend left): a bucket moved between two backends
 * of one hypervisor keeps its connections, whose conntrack entries there
 * still translate them to their backend.
 *
 * In (a), right after the add, request/echo round trips are timed on
 * connections whose slot moved (gateway -> hv3 -> the previous owner's
 * hypervisor) against those whose slot did not, interleaved, on the same
 * connections before the add as a control. And per change and mode, what
 * each gateway was sent (lastApply, or the modify-group), the slots moved
 * and the shares against the weights.
 *
 * Everything goes through the provider's handlers (check, create, update,
 * delete), runs under the lab's hv1-gre lock, and is removed at the end (also
 * on failure or Ctrl-C); the run checks that nothing is left.
 */

export interface Sizes {
  /** Long-lived connections per mode. */
  connections: number;
  /** Connections of the latency client (second chance, opened before the add). */
  latencyConnections: number;
  /** Timed exchanges per class (moved / not moved), before and after the add. */
  exchanges: number;
}
export const FULL: Sizes = { connections: 60, latencyConnections: 60, exchanges: 1000 };
export const SMOKE: Sizes = { connections: 60, latencyConnections: 30, exchanges: 100 };

/**
 * A VIP in the gateways' range (10.0.0.192/28), which the client routes to
 * them: every address of it is taken by something (the integration tests,
 * the other benchmarks, .200 by `npm run demo`), so this is the second-chance
 * test's own, 10.0.0.196 (also deferred-nat-apply's): the integration tests
 * run one at a time and never beside a benchmark, and the second-chance test
 * holds the same hv1-gre lock. The three modes use it one after the other,
 * each with its own resources (names, cookies, conntrack zones).
 */
export const VIP = "10.0.0.196";
/** The IPv6 rows' VIP, in the client's IPv6 VIP range, of the same backends' IPv6 addresses: the slot table's multipath hashes ipv6_src/ipv6_dst. */
export const VIP6 = "fd00:20::196";
const VPORT = 80;
type Family = 4 | 6;
const vipOf = (lab: { family: Family }) => (lab.family === 6 ? VIP6 : VIP);
const keyOf = (lab: { family: Family }) => `tcp:${vipOf(lab)}:${VPORT}`;
const GATEWAYS = ["gw1", "gw2"] as const;
const HYPERVISORS = ["hv1", "hv2", "hv3"] as const;

type Mode = "second-chance" | "stateless" | "ovn-rebuild";
const MODES: readonly Mode[] = ["second-chance", "stateless", "ovn-rebuild"];
const NAME: Record<Mode, string> = { "second-chance": "bench-sc", stateless: "bench-sc-stateless", "ovn-rebuild": "bench-sc-ovn" };
const MODE_LABEL: Record<Mode, string> = {
  "second-chance": "(a) second chance (`secondChance: {}`)",
  stateless: "(b) stateless ovslb (stable bucket ids)",
  "ovn-rebuild": "(c) OVN-style rebuild (positional ids, modify-group)",
};
type StepKey = "add" | "drain" | "remove-drained" | "remove";
const STEPS: readonly StepKey[] = ["add", "drain", "remove-drained", "remove"];
const STEP_LABEL: Record<StepKey, string> = {
  add: "add a 5th backend (hv3-vm1)",
  drain: "drain one (hv1-vm1)",
  "remove-drained": "remove the drained one, its connections closed",
  remove: "remove one without draining (hv2-vm1)",
};

/** The lab backends a run uses: four to start with, the 5th, and the sequence's 6th and 7th. */
const POOL = ["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2", "hv3-vm1", "hv3-vm2", "hv1-vm3"];

type Declared = { backend: LabBackend; state?: "active" | "draining"; weight?: number };

// ---------------------------------------------------------------- a timing client

/** Request/echo round trips timed inside the client namespace (bench/programs/timing-client.ts). */

class TimingClient {
  private readonly waiters: Array<(line: string) => void> = [];
  connections: Array<{ localPort: number; backend: string; error: string }> = [];
  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (l) => this.waiters.shift()?.(l));
  }
  static async open(ns: string, count: number): Promise<TimingClient> {
    const c = new TimingClient(spawnInNamespace(ns, [process.execPath, benchProgram("timing-client.ts")]));
    const r = await c.call({ op: "open", host: VIP, port: VPORT, count }, 3000 * count + 10_000);
    c.connections = (r.connections as Array<{ localPort: number; greeting: string; error: string }>).map((x) => ({
      localPort: x.localPort,
      backend: x.greeting.split(" ")[0],
      error: x.error,
    }));
    return c;
  }
  async measure(ids: readonly number[]): Promise<number[]> {
    return (await this.call({ op: "measure", ids }, 2000 * ids.length + 10_000)).us as number[];
  }
  private call(cmd: object, timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timing client: no answer in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push((l) => {
        clearTimeout(t);
        const r = JSON.parse(l) as Record<string, unknown>;
        if (r.failed) reject(new Error(`timing client: ${typeof r.failed === "string" ? r.failed : JSON.stringify(r.failed)}`));
        else resolve(r);
      });
      this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    });
  }
  close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const gone = new Promise<void>((r) => this.child.once("close", () => r()));
    this.child.stdin!.end();
    const t = setTimeout(() => this.child.kill("SIGKILL"), 3000);
    return gone.finally(() => clearTimeout(t));
  }
}

// ---------------------------------------------------------------- the lab and the resources

interface Lab {
  inv: LabInventory;
  /** The family of the VIP and backends now measured: the pool's addresses are of it. */
  family: Family;
  pool: LabBackend[];
  ssh: Record<string, SshSession>;
  segOfport: Record<string, number>;
  /** Ports on each host's br-seg before the run: whatever else is there afterwards is ours. */
  portsBefore: Record<string, Set<string>>;
  /** Every resource the run made, per mode (teardown deletes them all). */
  made: Array<{ mode: Mode; lb: ProviderDriver; hv: Record<string, ProviderDriver>; cookies: string[]; groupIds: number[] }>;
  /** Every client port this run connected from: their server-side sockets are cleaned up after each mode. */
  usedPorts: Set<number>;
  live?: LiveConnections;
  timer?: TimingClient;
  tornDown?: Promise<string[]>;
  /** secondChance.holdSeconds while set (the sequence's expiry step); the default otherwise. */
  holdSeconds?: number;
}

const underlay = (lab: Lab, host: string) => lab.inv.hosts[host].underlay!.address;
const clientOf = (lab: Lab) => (lab.family === 6 ? ipv6Twin(lab.inv.client.address) : lab.inv.client.address);
/** A mode's resources now measured (the IPv6 rows make a mode's second set). */
const madeOf = (lab: Lab, mode: Mode) => [...lab.made].reverse().find((m) => m.mode === mode)!;
const backendKeyOf = (lab: Lab, b: LabBackend) => `${b.address}:${lab.inv.backendPort}`;

function lbInputs(lab: Lab, mode: Mode, declared: Declared[]): DeferredNatLoadBalancerInputs {
  const backends = declared.map((d) => ({
    ...labBackend(lab.inv, d.backend),
    ...(d.state ? { state: d.state } : {}),
    ...(d.weight ? { weight: d.weight } : {}),
  }));
  const base = labLoadBalancer(lab.inv, NAME[mode], [{ address: vipOf(lab), port: VPORT, protocol: "tcp", backends }], {
    delivery: "gre",
    ...(mode === "second-chance" ? { secondChance: lab.holdSeconds === undefined ? {} : { holdSeconds: lab.holdSeconds } } : {}),
  });
  return {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(lab, g.name) })),
    hypervisors: HYPERVISORS.map((name) => ({ name, tunnelAddress: underlay(lab, name) })),
  };
}

function hvInputs(lab: Lab, mode: Mode, name: string, backends: LabBackend[]): DsrHypervisorFlowsInputs {
  const gre =
    mode === "second-chance"
      ? { allowedSources: GATEWAYS.map((g) => underlay(lab, g)), secondChance: { peers: HYPERVISORS.filter((h) => h !== name).map((h) => underlay(lab, h)) } }
      : { allowedSources: GATEWAYS.map((g) => underlay(lab, g)), key: greKeyOf({ name: NAME[mode] }) };
  return { ...labHypervisorFlows(lab.inv, NAME[mode], name, [{ address: vipOf(lab), port: VPORT, backends }]), mode: "gre", gre };
}

/** The gateway's tunnel ofports (by hypervisor) for the stateless load balancer: what its buckets output to. */
const gatewayPorts = new Map<string, GatewayPort>();
async function gatewayPort(lab: Lab, mode: Mode, gw: string): Promise<GatewayPort> {
  const known = gatewayPorts.get(`${mode}/${gw}`);
  if (known) return known;
  const inputs = lbInputs(lab, mode, []);
  const tunnelOfports = new Map<string, number>();
  for (const p of tunnelPorts(
    withDefaults(inputs),
    inputs.gateways.find((g) => g.name === gw)!,
  )) {
    tunnelOfports.set(p.hypervisor, Number((await runChecked(lab.ssh[gw], ["ovs-vsctl", "get", "interface", p.name, "ofport"])).trim()));
  }
  const port = { segmentOfport: lab.segOfport[gw], mac: lab.inv.hosts[gw].segment!.mac, tunnelOfports };
  gatewayPorts.set(`${mode}/${gw}`, port);
  return port;
}

/**
 * Baseline (c): the VIP's group as OVN numbers it, bucket ids 0..n-1 in the
 * order of the backend list sorted by address (bench/deferred-nat.ts's
 * model), with ovslb's own bucket actions (eth_src, eth_dst, output to the
 * tunnel), re-sent whole as one modify-group to every gateway.
 */
async function rebuildGroup(
  lab: Lab,
  backends: LabBackend[],
): Promise<Record<string, { messages: number; bytes: number; operations: Record<string, number> }>> {
  const mode: Mode = "ovn-rebuild";
  const made = madeOf(lab, mode);
  const ordered = byAddress(backends.map((b) => labBackend(lab.inv, b)));
  const ids = {
    groupIds: { [keyOf(lab)]: made.lb.outputs.groupIds[keyOf(lab)] as number },
    bucketIds: { [keyOf(lab)]: Object.fromEntries(ordered.map((b, i) => [replicaKey(b, 0), i])) },
  };
  const inputs = lbInputs(
    lab,
    mode,
    ordered.map((b) => ({ backend: lab.pool.find((p) => p.address === b.address)! })),
  );
  const out: Record<string, { messages: number; bytes: number; operations: Record<string, number> }> = {};
  await Promise.all(
    GATEWAYS.map(async (g) => {
      const group = desiredDataplane(withDefaults(inputs), ids, await gatewayPort(lab, mode, g))[0].group;
      const host = { connection: sshTo(lab.inv, g), ovsRundir: lab.inv.hosts[g].ovsRundir };
      const sent = await new OpenFlowBridge(lab.ssh[g], bridgeSocket(host, "br-seg")).applyBundle([{ op: "modify-group", group }]);
      out[g] = { messages: sent.messages, bytes: sent.bytes, operations: { "modify-group": 1 } };
    }),
  );
  return out;
}

/** The hypervisors first (a draining backend stays on its hypervisor: it still serves), then the gateways. */
async function apply(lab: Lab, mode: Mode, declared: Declared[]) {
  const made = madeOf(lab, mode);
  const backends = declared.map((d) => d.backend);
  // Each hypervisor is its own host: all of them at once.
  await Promise.all(
    HYPERVISORS.map(async (name) => {
      const here = backends.filter((b) => b.hypervisor === name);
      const driver = (made.hv[name] ??= new ProviderDriver("DsrHypervisorFlows"));
      if (here.length > 0) {
        await (driver.id ? driver.update(hvInputs(lab, mode, name, backends)) : driver.create(hvInputs(lab, mode, name, backends)));
        if (!made.cookies.includes(driver.outputs.cookie)) made.cookies.push(driver.outputs.cookie);
      } else if (driver.id) {
        await driver.delete();
        driver.id = "";
      }
    }),
  );
  if (mode === "ovn-rebuild" && made.lb.id) return rebuildGroup(lab, backends);
  await (made.lb.id ? made.lb.update(lbInputs(lab, mode, declared)) : made.lb.create(lbInputs(lab, mode, declared)));
  if (!made.cookies.includes(made.lb.outputs.cookie)) made.cookies.push(made.lb.outputs.cookie);
  const ownerGroups = Object.values((made.lb.outputs.ownerGroupIds ?? {}) as Record<string, Record<string, number>>).flatMap((g) => Object.values(g));
  for (const id of [...Object.values((made.lb.outputs.groupIds ?? {}) as Record<string, number>), ...ownerGroups])
    if (!made.groupIds.includes(id)) made.groupIds.push(id);
  if (mode === "ovn-rebuild") return rebuildGroup(lab, backends);
  return made.lb.outputs.lastApply as Record<string, { messages: number; bytes: number; operations: Record<string, number> }>;
}

/** The load balancer (the gateways) and the hypervisors' resources, all at once: no traffic is left to care about the order. */
async function deleteMode(made: Lab["made"][number]): Promise<void> {
  await Promise.all(
    [made.lb, ...Object.values(made.hv)].map(async (d) => {
      if (d.id) await d.delete();
      d.id = "";
    }),
  );
}

/** A mode's resources deleted, and the server sockets its broken connections left in the VMs closed. */
async function endMode(lab: Lab, mode: Mode, ctx: BenchContext, label: string): Promise<void> {
  const d0 = Date.now();
  await deleteMode(madeOf(lab, mode));
  await new Promise((r) => setTimeout(r, 500)); // the clients' last FINs
  const killed = lab.pool.reduce((n, vm) => n + serverSockets(lab, vm, true).length, 0);
  ctx.log(`${label} closed ${killed} server sockets its broken connections left in the VMs`);
  ctx.log(`${label} deleted in ${Date.now() - d0} ms`);
}

function teardown(lab: Lab): Promise<string[]> {
  lab.tornDown ??= (async () => {
    const { failed, attempt } = teardownSteps();
    await attempt("live connections", () => lab.live?.close());
    await attempt("timing client", () => lab.timer?.close());
    for (const m of lab.made) await attempt(`delete ${NAME[m.mode]}`, () => deleteMode(m));
    return failed;
  })();
  return lab.tornDown;
}

/** What is on a host's br-seg: the cookies of its flows, its ports, and (gateways) its group ids; one exec each. */
async function snapshot(lab: Lab, h: string): Promise<{ cookies: Set<bigint>; ports: string[]; groups: Set<number> }> {
  const [flows, ports, groups] = await Promise.all([
    runChecked(lab.ssh[h], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg"]),
    runChecked(lab.ssh[h], ["ovs-vsctl", "list-ports", "br-seg"]),
    h.startsWith("gw") ? runChecked(lab.ssh[h], ["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"]) : Promise.resolve(""),
  ]);
  return {
    cookies: new Set([...flows.matchAll(/cookie=(0x[0-9a-f]+)/g)].map((m) => BigInt(m[1]))),
    ports: ports
      .split("\n")
      .map((p) => p.trim())
      .filter(Boolean),
    groups: new Set([...groups.matchAll(/group_id=(\d+)/g)].map((m) => Number(m[1]))),
  };
}

/** Whether an interrupted run of a mode left anything: flows with its cookies, or its tunnel or GRE ports. */
function leftoversOf(lab: Lab, mode: Mode, snaps: Record<string, Awaited<ReturnType<typeof snapshot>>>): boolean {
  const lb = lbInputs(lab, mode, []);
  return (
    GATEWAYS.some((g) => {
      const names = tunnelPorts(
        withDefaults(lb),
        lb.gateways.find((x) => x.name === g)!,
      ).map((p) => p.name);
      return snaps[g].cookies.has(lbCookieOf(lb)) || snaps[g].ports.some((p) => names.includes(p));
    }) || HYPERVISORS.some((h) => snaps[h].cookies.has(dsrCookieOf(dsrId(hvInputs(lab, mode, h, lab.pool)))) || snaps[h].ports.includes(DEFAULT_GRE_PORT))
  );
}

/** Purges what an interrupted run of a mode left (by cookie, ports it owned). */
async function purge(lab: Lab, mode: Mode, snaps: Record<string, Awaited<ReturnType<typeof snapshot>>>) {
  if (!leftoversOf(lab, mode, snaps)) return;
  const all = lab.pool.map((backend) => ({ backend }));
  await Promise.all([
    new ProviderDriver("DeferredNatLoadBalancer").purge(lbInputs(lab, mode, all)),
    ...HYPERVISORS.map((h) => new ProviderDriver("DsrHypervisorFlows").purge(hvInputs(lab, mode, h, lab.pool))),
  ]);
}

/**
 * A connection the change broke is gone on the client, but its backend never
 * heard: its socket stays ESTABLISHED in the VM (the lab's servers set no
 * keepalive). A later connection from the same client port that lands on
 * that VM first meets a challenge ACK instead of a SYN-ACK, and opens only
 * once the client's reset has cleared the old socket (the hypervisors pass
 * it: test/integration/deferred-nat-second-chance.test.ts). So after each
 * mode the server-side sockets of this run's client ports are closed
 * (`ss -K` in the VM), and the run checks that none is left.
 */
function serverSockets(lab: Lab, vm: LabBackend, kill: boolean): number[] {
  // A connection that failed before it was bound has no local port.
  const ports = [...lab.usedPorts].filter((p) => Number.isInteger(p));
  const found: number[] = [];
  for (let i = 0; i < ports.length; i += 40) {
    // The client's address of either family: a VM holds sockets of both runs.
    const filter = `( sport = :${lab.inv.backendPort} and ( dst ${lab.inv.client.address} or dst [${ipv6Twin(lab.inv.client.address)}] ) and ( ${ports
      .slice(i, i + 40)
      .map((p) => `dport = :${p}`)
      .join(" or ")} ) )`;
    const out = inNamespace(vm.namespace, ["ss", "-tnH", ...(kill ? ["-K"] : []), "state", "established", filter]);
    // Local and peer address: the peer (the client) is the last column.
    found.push(
      ...out
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => Number(l.trim().split(/\s+/).at(-1)!.split(":").at(-1))),
    );
  }
  return found;
}

/** For a connection that did not open: its slot on gw1, its conntrack entries on every hypervisor and its sockets in every VM. */
async function whereItWent(lab: Lab, ports: readonly number[]): Promise<string> {
  const known = ports.filter((p) => Number.isInteger(p));
  if (known.length === 0) return "no local port known";
  const slots = await traceSlots(
    lab.ssh.gw1,
    "br-seg",
    known.map((p) => tupleOf(lab, p)),
  );
  // One conntrack dump per hypervisor, for all the ports.
  const entries = (
    await Promise.all(
      HYPERVISORS.map(async (h) => (await runChecked(lab.ssh[h], ["ovs-appctl", "dpctl/dump-conntrack"])).split("\n").map((l) => `${h}: ${l.trim()}`)),
    )
  ).flat();
  return known
    .map((port, i) => {
      const ct = entries.filter((l) => l.includes(`sport=${port},`));
      const sockets = lab.pool.map((vm) => inNamespace(vm.namespace, ["ss", "-tanH", `( dport = :${port} )`]).trim()).filter(Boolean);
      return `:${port} slot ${slots[i].slot} key ${slots[i].key}; ct [${ct.join(" | ")}]; sockets [${sockets.join(" | ")}]`;
    })
    .join("; ");
}

async function leftBehind(lab: Lab): Promise<string[]> {
  const left: string[] = [];
  const cookies = lab.made.flatMap((m) => m.cookies).map((c) => BigInt(c));
  const hosts = [...GATEWAYS, ...HYPERVISORS];
  const snaps = await Promise.all(hosts.map((h) => snapshot(lab, h)));
  hosts.forEach((h, i) => {
    const snap = snaps[i];
    const flows = cookies.filter((c) => snap.cookies.has(c));
    if (flows.length > 0) left.push(`${h}: flows with cookie ${flows.map((c) => `0x${c.toString(16)}`).join(", ")}`);
    const extra = snap.ports.filter((p) => !lab.portsBefore[h].has(p));
    if (extra.length > 0) left.push(`${h}: ports ${extra.join(", ")}`);
    const groups = lab.made.flatMap((m) => m.groupIds).filter((id) => snap.groups.has(id));
    if (groups.length > 0) left.push(`${h}: groups ${groups.join(", ")}`);
  });
  for (const vm of lab.pool) {
    const stale = serverSockets(lab, vm, false);
    if (stale.length > 0) left.push(`${vm.name}: ${stale.length} server sockets of this run's connections`);
  }
  return left;
}

// ---------------------------------------------------------------- where each connection goes

const tupleOf = (lab: Lab, localPort: number): Match => ({
  ...ipMatch("tcp", "src", clientOf(lab)),
  ...ipMatch("tcp", "dst", vipOf(lab)),
  in_port: lab.segOfport.gw1,
  tp_src: localPort,
  tp_dst: VPORT,
});

/**
 * The backend (name) each client port is sent to by gw1 now, from a trace:
 * (a) the slot's owner, (b) the bucket's backend by ovslb's recorded ids,
 * (c) the bucket's position in the address-sorted list in force.
 */
async function mapping(lab: Lab, mode: Mode, ports: readonly number[], current: readonly LabBackend[]): Promise<string[]> {
  const nameOf = new Map(lab.pool.map((b) => [backendKeyOf(lab, b), b.name]));
  const made = madeOf(lab, mode);
  const matches = ports.map((p) => tupleOf(lab, p));
  if (mode === "second-chance") {
    const table = readSlots(made.lb.outputs.slotTables[keyOf(lab)]);
    return (await traceSlots(lab.ssh.gw1, "br-seg", matches)).map((c) => nameOf.get(table.backends[table.owner[c.slot!]]) ?? `slot ${c.slot}?`);
  }
  const buckets = await traceBuckets(lab.ssh.gw1, "br-seg", matches);
  if (mode === "stateless") {
    const ids = made.lb.outputs.bucketIds[keyOf(lab)] as Record<string, number>;
    const byId = new Map(Object.entries(ids).map(([replica, id]) => [id, nameOf.get(replica.split("#")[0])!]));
    return buckets.map((id) => (id === undefined ? "none" : (byId.get(id) ?? `bucket ${id}?`)));
  }
  const order = byAddress(current.map((b) => labBackend(lab.inv, b)));
  return buckets.map((id) => (id === undefined ? "none" : (nameOf.get(`${order[id]?.address}:${lab.inv.backendPort}`) ?? `bucket ${id}?`)));
}

// ---------------------------------------------------------------- one mode

interface StepResult {
  step: StepKey;
  /** Connections working before the step. */
  alive: number;
  /** Working connections on the backend removed or drained by this step. */
  onChanged: number;
  /** Working connections whose traced backend changed (slot or bucket moved). */
  moved: number;
  broken: number;
  brokenOnRemoved: number;
  /** (b), (c): broken exactly where the trace sends a connection off its backend's hypervisor (or its backend left); (a): broken only on the removed backend. */
  brokenAsTraced: boolean;
  /** Why they broke (client's reason: error:ECONNRESET, timeout...). */
  reasons: Record<string, number>;
  sent?: Record<string, { messages: number; bytes: number; operations: Record<string, number> }>;
  slotMoves?: { moved: number; minimum: number };
  /** From the slot tables before and after: slot flows whose owner changed, and those whose GRE key alone changed (their previous owner left). */
  slotFlows?: { ownerMoved: number; keyOnly: number; groupsAdded: number; groupsRemoved: number };
  slotShares?: Record<string, number>;
  /** Max |share - weighted quota| / quota over active backends. */
  imbalance?: number;
  note?: string;
}

interface Latency {
  connections: { moved: number; unmoved: number };
  /** Round trips in µs, per class, after the add and (same connections) before it. */
  after: { moved: number[]; unmoved: number[] };
  before: { moved: number[]; unmoved: number[] };
  failed: number;
  handOnPackets: string;
  classifiedOk: boolean;
  classifyDetail: string;
}

interface ModeResult {
  mode: Mode;
  initial: Record<string, number>;
  steps: StepResult[];
  latency?: Latency;
  freshToDrained?: number;
}

const counts = (xs: readonly string[]) => xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

function imbalanceOf(shares: Record<string, number>): number {
  const active = Object.keys(shares);
  const quota = 1 / active.length;
  return Math.max(...active.map((k) => Math.abs(shares[k] - quota) / quota));
}

async function handOnPackets(lab: Lab, host: string): Promise<bigint> {
  const made = madeOf(lab, "second-chance");
  await runChecked(lab.ssh[host], ["ovs-appctl", "revalidator/wait"]);
  const out = await runChecked(lab.ssh[host], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `cookie=${made.hv[host].outputs.cookie}/-1`]);
  return parseFlows(out)
    .filter((f) => f.table === SECOND_CHANCE_TABLE && f.priority === HAND_ON_PRIORITY)
    .reduce((n, f) => n + f.nPackets, 0n);
}

async function runMode(lab: Lab, mode: Mode, sizes: Sizes, ctx: BenchContext, invariants: Invariant[]): Promise<ModeResult> {
  const made = {
    mode,
    lb: new ProviderDriver("DeferredNatLoadBalancer"),
    hv: {} as Record<string, ProviderDriver>,
    cookies: [] as string[],
    groupIds: [] as number[],
  };
  lab.made.push(made);
  const sc = mode === "second-chance";
  const four = lab.pool.slice(0, 4);
  const fifth = lab.pool[4];
  const drained = four[0];
  const removed = four.find((b) => b.hypervisor === "hv2")!;
  const ports: number[] = [];
  const t0 = Date.now();
  const label = lab.family === 6 ? `[${mode} IPv6]` : `[${mode}]`;
  const log = (line: string) => ctx.log(`${label} ${((Date.now() - t0) / 1000).toFixed(1)} s: ${line}`);

  log(`creating ${NAME[mode]} (VIP ${vipOf(lab)}, 4 backends) and opening ${sizes.connections} connections`);
  await apply(
    lab,
    mode,
    four.map((backend) => ({ backend })),
  );
  log("created");
  let live = (lab.live = await openLiveConnections(lab.inv.client.namespace, vipOf(lab), VPORT, sizes.connections));
  ports.push(...live.initial.map((c) => c.port));
  for (const p of ports) lab.usedPorts.add(p);
  log("connections open");
  const initial = counts(live.initial.map((c) => c.backend || c.broken));
  const failedInitial = live.initial.filter((c) => c.broken);
  invariants.push({
    name: `${mode}: all ${sizes.connections} connections opened, over the 4 backends`,
    ok: failedInitial.length === 0 && four.every((b) => (initial[b.name] ?? 0) > 0) && Object.keys(initial).length === 4,
    detail: `${Object.entries(initial)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}${
      failedInitial.length
        ? `; ${await whereItWent(
            lab,
            failedInitial.map((c) => c.port),
          )}`
        : ""
    }`,
  });

  let state: LiveConnection[] = live.initial;
  let lastDeclared: LabBackend[] = [...four];
  const swap = (next: LiveConnections) => {
    live = next;
    ports.splice(0, ports.length, ...next.initial.map((c) => c.port));
    state = next.initial;
  };
  let current: LabBackend[] = [...four];
  const steps: StepResult[] = [];
  let latency: Latency | undefined;
  let freshToDrained: number | undefined;

  const step = async (key: StepKey, declared: Declared[] | undefined, changed: LabBackend | undefined, note?: string) => {
    const aliveBefore = state.filter((c) => !c.broken);
    const tableBefore = sc ? readSlots(made.lb.outputs.slotTables[keyOf(lab)]) : undefined;
    const declaredBefore = lastDeclared;
    const before = await mapping(lab, mode, ports, current);
    let sent: StepResult["sent"];
    if (declared) {
      const a0 = Date.now();
      sent = await apply(lab, mode, declared);
      log(`${key}: applied in ${Date.now() - a0} ms`);
      current = declared.filter((d) => d.state !== "draining").map((d) => d.backend);
    }
    const after = await mapping(lab, mode, ports, current);
    await live.round();
    state = await live.round();
    const wasAlive = new Set(aliveBefore.map((c) => c.port));
    const brokeNow = state.filter((c) => c.broken && c.broken !== "closed" && wasAlive.has(c.port));
    const movedIdx = ports.flatMap((p, i) => (wasAlive.has(p) && before[i] !== after[i] ? [i] : []));
    const brokenIdx = brokeNow.map((c) => ports.indexOf(c.port));
    const removedName = key === "remove" || (key === "drain" && !sc) ? changed?.name : undefined;
    const brokenOnRemoved = brokeNow.filter((c) => c.backend === removedName).length;
    // (b), (c): a connection goes on where its packets now reach its own backend's hypervisor, whose conntrack entry
    // still translates them to it, while that backend is still served; elsewhere it meets no entry and breaks.
    const hypervisorOf = (name: string) => lab.pool.find((b) => b.name === name)?.hypervisor;
    const goesOn = (c: LiveConnection) => {
      const now = after[ports.indexOf(c.port)];
      return hypervisorOf(now) === hypervisorOf(c.backend) && current.some((b) => b.name === c.backend);
    };
    const expected = new Set(aliveBefore.filter((c) => (sc ? c.backend === removedName : !goesOn(c))).map((c) => ports.indexOf(c.port)));
    const brokenAsTraced = brokenIdx.length === expected.size && brokenIdx.every((i) => expected.has(i));
    const r: StepResult = {
      step: key,
      alive: aliveBefore.length,
      onChanged: changed ? aliveBefore.filter((c) => c.backend === changed.name).length : 0,
      moved: movedIdx.length,
      broken: brokeNow.length,
      brokenOnRemoved,
      brokenAsTraced,
      reasons: counts(brokeNow.map((c) => c.broken)),
      ...(sent ? { sent } : {}),
      ...(note ? { note } : {}),
    };
    if (declared) lastDeclared = declared.map((d) => d.backend);
    if (sc && declared) {
      const tableAfter = readSlots(made.lb.outputs.slotTables[keyOf(lab)]);
      const flow = (t: SlotTable, inForce: LabBackend[], s: number) => {
        const byKey = new Map(inForce.map((b) => [backendKeyOf(lab, b), b]));
        const owner = byKey.get(t.backends[t.owner[s]]);
        const prev = t.previous[s] >= 0 ? byKey.get(t.backends[t.previous[s]]) : undefined;
        return `${owner?.name}/${prev && prev.hypervisor !== owner?.hypervisor ? prev.hypervisor : 0}`;
      };
      let ownerMoved = 0;
      let keyOnly = 0;
      for (let slot = 0; slot < tableAfter.size; slot++) {
        const a = flow(tableBefore!, declaredBefore, slot);
        const b = flow(tableAfter, lastDeclared, slot);
        if (a.split("/")[0] !== b.split("/")[0]) ownerMoved++;
        else if (a !== b) keyOnly++;
      }
      // Each backend that owns slots has its group (the slot flows point at it): one comes with a new owner, one goes with an owner that left.
      const owners = (t: SlotTable) => new Set(t.owner.filter((o) => o >= 0).map((o) => t.backends[o]));
      const [was, now] = [owners(tableBefore!), owners(tableAfter)];
      r.slotFlows = { ownerMoved, keyOnly, groupsAdded: [...now].filter((b) => !was.has(b)).length, groupsRemoved: [...was].filter((b) => !now.has(b)).length };
      r.slotMoves = made.lb.outputs.slotMoves[keyOf(lab)];
      r.slotShares = made.lb.outputs.slotShares[keyOf(lab)];
      r.imbalance = imbalanceOf(r.slotShares!);
    }
    steps.push(r);
    log(
      `${key}: ${r.broken} of ${r.alive} broken (${r.moved} moved; ${r.onChanged} on ${changed?.name ?? "-"})${r.slotMoves ? `, slots moved ${r.slotMoves.moved}/${r.slotMoves.minimum}` : ""}`,
    );
    return r;
  };

  // 1. Add the 5th; second chance: the timing client, before and after.
  let timer: TimingClient | undefined;
  let baseline: { order: number[]; us: number[] } | undefined;
  let timerConnections: TimingClient["connections"] = [];
  const timerMoved = new Set<number>();
  const freshPorts = new Map<number, string>();
  let handOn0 = 0n;
  // The handed-on path's latency is measured on the IPv4 rows only.
  if (sc && lab.family === 4) {
    timer = lab.timer = await TimingClient.open(lab.inv.client.namespace, sizes.latencyConnections);
    for (const c of timer.connections) lab.usedPorts.add(c.localPort);
    handOn0 = await handOnPackets(lab, "hv3").catch(() => 0n);
  }
  if (sc && timer) {
    // Which of them the add will move is known only after it; measure every connection now, classify afterwards.
    const ids = timer.connections.map((_, i) => i);
    const per = Math.ceil((5 * sizes.exchanges) / ids.length);
    const order = Array.from({ length: per * ids.length }, (_, k) => ids[k % ids.length]);
    baseline = { order, us: (await timer.measure(order)).map((x) => Math.round(x * 10) / 10) };
  }
  await step(
    "add",
    [...four, fifth].map((backend) => ({ backend })),
    fifth,
  );
  current = [...four, fifth];

  if (sc && timer && baseline) {
    const table: SlotTable = readSlots(made.lb.outputs.slotTables[keyOf(lab)]);
    const slots = await traceSlots(
      lab.ssh.gw1,
      "br-seg",
      timer.connections.map((c) => tupleOf(lab, c.localPort)),
    );
    const byName = new Map(lab.pool.map((b) => [b.name, b]));
    const moved: number[] = [];
    const unmoved: number[] = [];
    const bad: string[] = [];
    slots.forEach((s, i) => {
      const conn = timer.connections[i];
      const mine = byName.get(conn.backend);
      if (!mine || conn.error) return void bad.push(`conn ${i}: ${conn.error || "no greeting"}`);
      const owner = table.backends[table.owner[s.slot!]];
      const previous = table.previous[s.slot!] >= 0 ? table.backends[table.previous[s.slot!]] : undefined;
      if (owner === backendKeyOf(lab, mine)) {
        if (s.key !== 0) bad.push(`conn ${i}: its own slot ${s.slot} carries key ${s.key}`);
        unmoved.push(i);
      } else if (owner === backendKeyOf(lab, fifth) && previous === backendKeyOf(lab, mine) && s.key === ipv4Number(underlay(lab, mine.hypervisor))) {
        moved.push(i);
      } else bad.push(`conn ${i} (${conn.backend}): slot ${s.slot} owner ${owner}, previous ${previous}, key ${s.key}`);
    });
    const pick = (ids: number[], n: number) => Array.from({ length: n }, (_, k) => ids[k % ids.length]);
    const n = sizes.exchanges;
    // Interleaved: moved, not moved, moved, ... so a change of the machine's load weighs on both alike.
    const order = moved.length > 0 && unmoved.length > 0 ? pick(moved, n).flatMap((m, k) => [m, pick(unmoved, n)[k]]) : [];
    const us = order.length > 0 ? (await timer.measure(order)).map((x) => Math.round(x * 10) / 10) : [];
    const handOn = (await handOnPackets(lab, "hv3")) - handOn0;
    const split = (order_: number[], values: number[], set: Set<number>) => values.filter((v, k) => v >= 0 && set.has(order_[k]));
    const movedSet = new Set(moved);
    const unmovedSet = new Set(unmoved);
    const failedAfter = us.filter((v) => v < 0).length;
    // Before the add: the same connections, the same classes (from the first pass, which went over all of them).
    const bUs = baseline.us;
    const beforeLat = { moved: split(baseline.order, bUs, movedSet), unmoved: split(baseline.order, bUs, unmovedSet) };
    latency = {
      connections: { moved: moved.length, unmoved: unmoved.length },
      after: { moved: split(order, us, movedSet), unmoved: split(order, us, unmovedSet) },
      before: beforeLat,
      failed: failedAfter + bUs.filter((v) => v < 0).length,
      handOnPackets: handOn.toString(),
      classifiedOk: bad.length === 0,
      classifyDetail: bad.slice(0, 5).join("; "),
    };
    invariants.push({
      name: "second chance, latency: every timed connection is either on its own slot (key 0) or on a slot moved to hv3-vm1 that names it as previous owner and its hypervisor in the GRE key",
      ok: bad.length === 0 && moved.length > 0 && unmoved.length > 0,
      detail: `${moved.length} moved, ${unmoved.length} not${bad.length ? `; ${bad.slice(0, 3).join("; ")}` : ""}`,
    });
    invariants.push({
      name: `second chance, latency: all ${order.length + bUs.length} timed exchanges answered`,
      ok: latency.failed === 0,
      detail: `${latency.failed} failed`,
    });
    invariants.push({
      name: "second chance, latency: hv3 handed on at least one packet per timed exchange on a moved connection",
      ok: handOn >= BigInt(latency.after.moved.length),
      detail: `${handOn} packets handed on, ${latency.after.moved.length} moved exchanges`,
    });
    timerConnections = timer.connections;
    for (const i of moved) timerMoved.add(timer.connections[i].localPort);
    await timer.close();
    lab.timer = undefined;
  }

  // 2. Drain (second chance) or remove.
  if (sc) {
    await step(
      "drain",
      [...four, fifth].map((backend) => ({ backend, ...(backend === drained ? { state: "draining" as const } : {}) })),
      drained,
    );
    const fresh = connectAndClose(lab.inv.client.namespace, times(vipOf(lab), VPORT, 40), { concurrency: 4 });
    for (const c of fresh) {
      freshPorts.set(c.localPort, c.backend || c.error || "");
      lab.usedPorts.add(c.localPort);
    }
    freshToDrained = fresh.filter((c) => c.backend === drained.name).length;
    const failedFresh = fresh.filter((c) => c.error).length;
    const table = readSlots(made.lb.outputs.slotTables[keyOf(lab)]);
    invariants.push({
      name: "second chance, drain: no new connection reaches the drained backend (40 fresh connections, and no slot owned by it)",
      ok: freshToDrained === 0 && failedFresh === 0 && table.owner.every((o) => o < 0 || table.backends[o] !== backendKeyOf(lab, drained)),
      detail: `${freshToDrained} of 40 reached it, ${failedFresh} failed`,
    });
    const onIt = state.filter((c) => !c.broken && c.backend === drained.name).length;
    const reported = (await made.hv[drained.hypervisor].read()).props.connections?.[backendKeyOf(lab, drained)];
    invariants.push({
      name: "second chance, drain: the hypervisor reports the drained backend's live connections",
      ok: reported === onIt,
      detail: `reported ${reported}, held ${onIt}`,
    });
  } else {
    await step(
      "drain",
      [...four, fifth].filter((b) => b !== drained).map((backend) => ({ backend })),
      drained,
      "drain = remove (a select group cannot drain)",
    );
  }

  // 3. Remove the drained one once its connections closed.
  if (sc) {
    const closed = await live.closeTo([drained.name]);
    const key = backendKeyOf(lab, drained);
    try {
      await waitUntil(async () => (await made.hv[drained.hypervisor].read()).props.connections?.[key] === 0, {
        what: `${key}'s connections to end`,
        timeoutMs: 15_000,
        intervalMs: 200,
      });
    } catch (e) {
      // Say which connections are still there, and whose they are, before teardown flushes the zone.
      const zone = made.hv[drained.hypervisor].outputs.ctZone;
      const dump = await runChecked(lab.ssh[drained.hypervisor], ["ovs-appctl", "dpctl/dump-conntrack", `zone=${zone}`]);
      const livePorts = new Set(ports);
      const timerPorts = new Set(timerConnections.map((c) => c.localPort));
      const rest = dump
        .split("\n")
        .filter((l) => l.includes(`src=${drained.address},`))
        .map((l) => {
          const sport = Number(/orig=\(src=[0-9a-f.:]+,dst=[0-9a-f.:]+,sport=(\d+)/.exec(l)?.[1]);
          const state = /state=(\w+)/.exec(l)?.[1];
          const whose = livePorts.has(sport)
            ? "live"
            : timerPorts.has(sport)
              ? `timer(${timerMoved.has(sport) ? "moved" : "own"})`
              : freshPorts.has(sport)
                ? `fresh(${freshPorts.get(sport)})`
                : `? ${l.trim()}`;
          return `${sport}:${state}:${whose}`;
        });
      // A stuck one: where else its tuple is tracked, and what the client's kernel holds of it.
      const stuck = rest.filter((r) => !r.includes(":TIME_WAIT:")).map((r) => Number(r.split(":")[0]));
      const elsewhere: string[] = [];
      for (const sport of stuck) {
        for (const hv of HYPERVISORS) {
          const all = await runChecked(lab.ssh[hv], ["ovs-appctl", "dpctl/dump-conntrack"]);
          for (const l of all.split("\n").filter((x) => x.includes(`sport=${sport},`))) elsewhere.push(`${hv}: ${l.trim()}`);
        }
        elsewhere.push(`client: ${inNamespace(lab.inv.client.namespace, ["ss", "-tanoi", "sport", "=", `:${sport}`]).trim()}`);
        elsewhere.push(`${drained.name}: ${inNamespace(drained.namespace, ["ss", "-tanoi", "dport", "=", `:${sport}`]).trim()}`);
      }
      throw new Error(`${(e as Error).message}; in zone ${zone}: ${rest.join(" ")}${elsewhere.length ? `; stuck ones: ${elsewhere.join(" | ")}` : ""}`);
    }
    state = await live.round();
    await step(
      "remove-drained",
      [...four, fifth].filter((b) => b !== drained).map((backend) => ({ backend })),
      drained,
      `after closing its ${closed} connections (the hypervisor read 0)`,
    );
  } else {
    steps.push({
      step: "remove-drained",
      alive: state.filter((c) => !c.broken).length,
      onChanged: 0,
      moved: 0,
      broken: 0,
      brokenOnRemoved: 0,
      brokenAsTraced: true,
      reasons: {},
      note: "n/a: already removed at the drain step",
    });
  }

  // 4. Remove one without draining, on a fresh set of connections (in (c) the drain left none working).
  live.close();
  // The connections earlier steps broke left server sockets behind: closed, so
  // that a fresh connection from the same client port need not clear one first.
  await new Promise((r) => setTimeout(r, 500));
  for (const vm of lab.pool) serverSockets(lab, vm, true);
  const fresh = (lab.live = await openLiveConnections(lab.inv.client.namespace, vipOf(lab), VPORT, sizes.connections));
  const failedFresh = fresh.initial.filter((c) => c.broken);
  invariants.push({
    name: `${mode}: ${sizes.connections} fresh connections opened over the 4 backends in force before the last removal`,
    ok: failedFresh.length === 0,
    detail: `${failedFresh.length} failed${
      failedFresh.length
        ? `: ${await whereItWent(
            lab,
            failedFresh.map((c) => c.port),
          )}`
        : ""
    }`,
  });
  swap(fresh);
  for (const p of ports) lab.usedPorts.add(p);
  const left = [...four, fifth].filter((b) => b !== drained && b !== removed);
  await step(
    "remove",
    left.map((backend) => ({ backend })),
    removed,
    "on fresh connections",
  );

  fresh.close();
  lab.live = undefined;

  // Invariants of the mode.
  const s = Object.fromEntries(steps.map((x) => [x.step, x])) as Record<StepKey, StepResult>;
  if (sc) {
    invariants.push({
      name: "second chance: adding a 5th backend breaks 0 connections (some of them moved and were handed on)",
      ok: s.add.broken === 0 && s.add.moved > 0,
      detail: `${s.add.broken} broken of ${s.add.alive}, ${s.add.moved} moved`,
    });
    invariants.push({ name: "second chance: draining one breaks 0", ok: s.drain.broken === 0, detail: `${s.drain.broken} of ${s.drain.alive}` });
    invariants.push({
      name: "second chance: removing the drained one after its connections closed breaks 0",
      ok: s["remove-drained"].broken === 0,
      detail: `${s["remove-drained"].broken} of ${s["remove-drained"].alive}`,
    });
    invariants.push({
      name: "second chance: removing one without draining breaks only its own connections (all of them)",
      ok: s.remove.brokenAsTraced && s.remove.broken === s.remove.onChanged && s.remove.broken > 0,
      detail: `${s.remove.broken} broken, ${s.remove.onChanged} on ${removed.name}`,
    });
    invariants.push({
      name: "second chance: each change sent one modify-flow per slot flow whose owner or GRE key changed (from the slot tables), one add-group per new owner and one delete-group per owner gone, nothing else",
      ok: steps.every(
        (x) =>
          !x.slotFlows ||
          GATEWAYS.every((g) => {
            const ops = x.sent![g].operations;
            return (
              Object.keys(ops).every((k) => ["modify-flow", "add-group", "delete-group"].includes(k)) &&
              (ops["modify-flow"] ?? 0) === x.slotFlows!.ownerMoved + x.slotFlows!.keyOnly &&
              (ops["add-group"] ?? 0) === x.slotFlows!.groupsAdded &&
              (ops["delete-group"] ?? 0) === x.slotFlows!.groupsRemoved &&
              x.slotFlows!.ownerMoved === x.slotMoves!.moved
            );
          }),
      ),
      detail: steps
        .filter((x) => x.slotFlows)
        .map((x) => `${x.step} ${JSON.stringify(x.sent!.gw1.operations)} = ${x.slotFlows!.ownerMoved} moved + ${x.slotFlows!.keyOnly} key`)
        .join("; "),
    });
    invariants.push({
      name: "second chance: every change moved exactly the minimum of slots, and shares stay within 1% of the weights",
      ok: steps.every((x) => !x.slotMoves || (x.slotMoves.moved === x.slotMoves.minimum && (x.imbalance ?? 1) < 0.01)),
      detail: steps
        .filter((x) => x.slotMoves)
        .map((x) => `${x.step} ${x.slotMoves!.moved}/${x.slotMoves!.minimum}, ${(100 * x.imbalance!).toFixed(2)}%`)
        .join("; "),
    });
  } else {
    invariants.push({
      name: `${mode}: each change broke exactly the connections the trace sends off their backend's hypervisor, or whose backend left (a bucket moved between two backends of one hypervisor keeps its connections: conntrack there still translates them)`,
      ok: steps.every((x) => x.brokenAsTraced),
      detail: steps.map((x) => `${x.step} ${x.broken}/${x.moved}`).join("; "),
    });
    invariants.push({
      name: `${mode}: the add broke some connections (those now hashing to the 5th)`,
      ok: s.add.broken > 0,
      detail: `${s.add.broken} of ${s.add.alive}`,
    });
    invariants.push({
      name: `${mode}: each removal broke at least the removed backend's connections`,
      ok: s.drain.brokenOnRemoved === s.drain.onChanged && s.remove.brokenOnRemoved === s.remove.onChanged,
    });
  }
  return { mode, initial, steps, ...(latency ? { latency } : {}), ...(freshToDrained !== undefined ? { freshToDrained } : {}) };
}

// ---------------------------------------------------------------- the sequence (issue 24)

/** Changes one right after the other, inside one connection lifetime: what autoscaling and a rollout do. */
type SeqKey = "add-5" | "add-6" | "add-7" | "weight" | "drain" | "remove-drained" | "expire";
const SEQ_LABEL: Record<SeqKey, string> = {
  "add-5": "add hv3-vm1",
  "add-6": "add hv3-vm2",
  "add-7": "add hv1-vm3",
  weight: "weight 3 on hv2-vm1",
  drain: "drain hv2-vm1",
  "remove-drained": "remove the drained hv2-vm1, its connections still open",
  expire: "the history expires (an update with holdSeconds 1, 2 s later)",
};
const SEQ_MODES: readonly Mode[] = ["second-chance", "stateless", "ovn-rebuild"];

interface SeqStep {
  step: SeqKey;
  alive: number;
  /** Broken connections whose backend is still declared after the step (what second chance promises to keep). */
  brokenStaying: number;
  /** Broken connections of the backend the step removed. */
  brokenRemoved: number;
  sent?: StepResult["sent"];
  slotMoves?: { moved: number; minimum: number };
  /** Worst |slots - quota| / quota over active backends, and whether every backend is within the bound. */
  deviation?: { worst: number; withinBound: boolean };
  history?: { slots: number; released: number };
  note?: string;
}

async function runSequence(lab: Lab, mode: Mode, sizes: Sizes, ctx: BenchContext, invariants: Invariant[]): Promise<SeqStep[]> {
  const sc = mode === "second-chance";
  const made = madeOf(lab, mode);
  const [four, added] = [lab.pool.slice(0, 4), lab.pool.slice(0, 7)];
  const heavy = lab.pool[2];
  const t0 = Date.now();
  const log = (line: string) => ctx.log(`[${mode} sequence] ${((Date.now() - t0) / 1000).toFixed(1)} s: ${line}`);
  const plain = (bs: LabBackend[]) => bs.map((backend) => ({ backend }));
  const weighed = plain(added).map((d) => (d.backend === heavy ? { ...d, weight: 3 } : d));
  // A select group cannot drain (check refuses it without secondChance): there the drain removes the backend.
  const steps: [SeqKey, Declared[] | undefined][] = [
    ["add-5", plain(added.slice(0, 5))],
    ["add-6", plain(added.slice(0, 6))],
    ["add-7", plain(added)],
    ["weight", weighed],
    ["drain", sc ? weighed.map((d) => (d.backend === heavy ? { ...d, state: "draining" as const } : d)) : plain(added.filter((b) => b !== heavy))],
    ["remove-drained", sc ? plain(added.filter((b) => b !== heavy)) : undefined],
    // Second chance only: once the history has expired, the next update releases it and the shares are exact.
    ["expire", sc ? plain(added.filter((b) => b !== heavy)) : undefined],
  ];
  await apply(lab, mode, plain(four));
  const live = (lab.live = await openLiveConnections(lab.inv.client.namespace, vipOf(lab), VPORT, sizes.connections));
  for (const c of live.initial) lab.usedPorts.add(c.port);
  invariants.push({
    name: `${mode} sequence: all ${sizes.connections} connections opened, over the 4 backends`,
    ok: live.initial.every((c) => !c.broken) && new Set(live.initial.map((c) => c.backend)).size === 4,
  });
  log("created, connections open");
  let state = live.initial;
  const out: SeqStep[] = [];
  for (const [key, declared] of steps) {
    const wasAlive = new Set(state.filter((c) => !c.broken).map((c) => c.port));
    if (!declared) {
      out.push({
        step: key,
        alive: wasAlive.size,
        brokenStaying: 0,
        brokenRemoved: 0,
        note: key === "expire" ? "n/a: no history" : "n/a: already removed at the drain step",
      });
      continue;
    }
    if (key === "expire") {
      lab.holdSeconds = 1;
      await new Promise((r) => setTimeout(r, 2000));
    }
    const a0 = Date.now();
    const sent = await apply(lab, mode, declared).finally(() => (lab.holdSeconds = undefined));
    await live.round();
    state = await live.round();
    const stays = new Set(declared.map((d) => d.backend.name));
    const broke = state.filter((c) => c.broken && c.broken !== "closed" && wasAlive.has(c.port));
    const r: SeqStep = {
      step: key,
      alive: wasAlive.size,
      brokenStaying: broke.filter((c) => stays.has(c.backend)).length,
      brokenRemoved: broke.filter((c) => !stays.has(c.backend)).length,
      sent,
    };
    if (sc) {
      const size = readSlots(made.lb.outputs.slotTables[keyOf(lab)]).size;
      const shares = made.lb.outputs.slotShares[keyOf(lab)] as Record<string, number>;
      const slotBackends = declared.map((d) => ({ key: backendKeyOf(lab, d.backend), weight: d.weight ?? 1, state: d.state ?? ("active" as const) }));
      const off = [...quotas(size, slotBackends)].map(([b, q]) => ({ q, d: Math.abs(Math.round((shares[b] ?? 0) * size) - q) }));
      r.slotMoves = made.lb.outputs.slotMoves[keyOf(lab)];
      r.deviation = { worst: Math.max(...off.map((x) => x.d / x.q)), withinBound: off.every((x) => x.d <= deviationBound(x.q)) };
      const h = made.lb.outputs.slotHistory[keyOf(lab)] as { slots: number; released: number };
      r.history = { slots: h.slots, released: h.released };
    }
    out.push(r);
    log(`${key}: applied in ${Date.now() - a0} ms; ${r.brokenStaying} broken whose backend stays, ${r.brokenRemoved} of the removed one's, of ${r.alive}`);
  }
  live.close();
  lab.live = undefined;
  if (sc) {
    invariants.push({
      name: "second chance sequence (add, add, add, weight, drain, remove the drained, one right after the other): none refused, 0 broken whose backend stays at every step",
      ok: out.every((x) => x.step === "expire" || x.brokenStaying === 0),
      detail: out.map((x) => `${x.step} ${x.brokenStaying}`).join("; "),
    });
    invariants.push({
      name: `second chance sequence: every share within 1/${DEVIATION_DIVISOR} of its weighted quota at every step, no history released`,
      ok: out.every((x) => x.deviation!.withinBound && x.history!.released === 0),
      detail: out.map((x) => `${x.step} ${(100 * x.deviation!.worst).toFixed(2)}%, ${x.history!.slots} slots with history`).join("; "),
    });
    const expired = out.find((x) => x.step === "expire")!;
    invariants.push({
      // Connections still served through their second chance lose it here, by design (holdSeconds is their lifetime): counted, not held to 0.
      name: "second chance sequence: once the history has expired, the next update leaves no history and every share exact",
      ok: expired.history!.slots === 0 && expired.deviation!.worst === 0,
      detail: `${expired.history!.slots} slots with history, worst share ${(100 * expired.deviation!.worst).toFixed(2)}% off, ${expired.brokenStaying} broken`,
    });
  }
  return out;
}

// ---------------------------------------------------------------- the report

const pct = (xs: readonly number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(p * s.length) - 1)];
};
const us = (x: number) => (Math.abs(x) >= 1000 ? `${(x / 1000).toFixed(2)} ms` : `${Math.round(x)} µs`);

const signed = (x: number) => `${x >= 0 ? "+" : "−"}${us(Math.abs(x))}`;

function brokenCell(r: StepResult, sc: boolean): string {
  if (r.note?.startsWith("n/a")) return "n/a (already removed at the drain step)";
  const moved = sc && r.step !== "remove" ? `, ${r.moved} moved and kept` : "";
  const own = r.step === "remove" || (!sc && r.step === "drain") ? `; ${r.onChanged} were on it` : "";
  return `**${r.broken}** of ${r.alive}${moved}${own}`;
}

function sentCell(r: StepResult): string {
  if (!r.sent) return "";
  const g = GATEWAYS.map((gw) => r.sent![gw]);
  const same = g.every((x) => x && x.messages === g[0].messages && x.bytes === g[0].bytes);
  const ops = Object.entries(g[0]?.operations ?? {})
    .map(([k, v]) => `${k} ×${fmtInt(v)}`)
    .join(", ");
  const size = same
    ? `${fmtInt(g[0].messages)} message${g[0].messages === 1 ? "" : "s"}, ${fmtInt(g[0].bytes)} B`
    : GATEWAYS.map((gw) => `${gw}: ${r.sent![gw].messages} msg, ${fmtInt(r.sent![gw].bytes)} B`).join("; ");
  return `${size} (${ops})`;
}

function touchedCell(r: StepResult, mode: Mode, n: number): string {
  if (!r.sent) return "";
  if (mode === "second-chance") {
    const f = r.slotFlows!;
    return `${fmtInt(f.ownerMoved + f.keyOnly)} slot flows: ${fmtInt(r.slotMoves!.moved)} slots moved (minimum ${fmtInt(r.slotMoves!.minimum)})${f.keyOnly ? `, ${fmtInt(f.keyOnly)} whose previous owner left (GRE key back to 0)` : ""}`;
  }
  if (mode === "stateless") return "1 bucket";
  return `the whole group: ${n} buckets, ids 0..${n - 1}`;
}

function sequenceMarkdown(seq: Partial<Record<Mode, SeqStep[]>>, sizes: Sizes): string[] {
  const modes = SEQ_MODES.filter((m) => seq[m]);
  const cell = (m: Mode, k: SeqKey) => {
    const r = seq[m]!.find((x) => x.step === k)!;
    if (r.note) return r.note;
    const gw = r.sent?.gw1;
    const moves = r.slotMoves
      ? `; ${fmtInt(r.slotMoves.moved)} slots moved (fewest ${fmtInt(r.slotMoves.minimum)}), worst share ${(100 * r.deviation!.worst).toFixed(2)}% off`
      : "";
    const removed = r.brokenRemoved ? ` (+${r.brokenRemoved} of the removed one's)` : "";
    return `**${r.brokenStaying}** of ${r.alive}${removed}${moves}; ${gw ? `${fmtInt(gw.messages)} msg, ${fmtInt(gw.bytes)} B` : ""}`;
  };
  return [
    `### Scaling out one change after another (${sizes.connections} long-lived connections, no wait between changes)`,
    "",
    `| Change | ${modes.map((m) => MODE_LABEL[m]).join(" | ")} |`,
    `| --- | ${modes.map(() => "---").join(" | ")} |`,
    ...(Object.keys(SEQ_LABEL) as SeqKey[]).map((k) => `| ${SEQ_LABEL[k]} | ${modes.map((m) => cell(m, k)).join(" | ")} |`),
    "",
    "Each cell: connections broken by the change whose backend is still declared after it, of those working before it; what gw1 was sent (gw2 the same). " +
      `Second chance: history is live for the whole sequence (holdSeconds default); a new backend's slots come from slots with no live history, and a surplus slot with history goes back to its previous owner (never to a third), so shares stay within 1/${DEVIATION_DIVISOR} of each quota. ` +
      "Stateless and OVN-style rebuild: a select group cannot drain, so the drain removes the backend. " +
      "The last row lets the history expire: the load balancer is updated with secondChance.holdSeconds 1, two seconds after the last change; that update drops every previous owner and the shares are exact. The connections it breaks are those still served through their second chance (here they are all still open: in use, holdSeconds outlives them).",
    "",
  ];
}

function markdownOf(
  results: readonly ModeResult[],
  sizes: Sizes,
  machine: Record<string, string>,
  seq: Partial<Record<Mode, SeqStep[]>> = {},
  results6: readonly ModeResult[] = [],
): string {
  const by = Object.fromEntries(results.map((r) => [r.mode, r])) as Record<Mode, ModeResult>;
  const by6 = Object.fromEntries(results6.map((r) => [r.mode, r])) as Partial<Record<Mode, ModeResult>>;
  const stepOf = (m: Mode, k: StepKey, f: Family = 4) => (f === 6 ? by6[m] : by[m])!.steps.find((s) => s.step === k)!;
  const families: Family[] = results6.length > 0 ? [4, 6] : [4];
  const ran = (m: Mode, f: Family) => f === 4 || by6[m] !== undefined;
  const nAfter: Record<StepKey, number> = { add: 5, drain: 4, "remove-drained": 4, remove: 3 };
  const lines: string[] = [
    `### Connections broken per backend change (${sizes.connections} long-lived connections, 4 backends: hv1-vm1, hv1-vm2, hv2-vm1, hv2-vm2; the 5th hv3-vm1)`,
    "",
    `| Change | VIP and backends | ${MODES.map((m) => MODE_LABEL[m]).join(" | ")} |`,
    `| --- | --- | ${MODES.map(() => "---").join(" | ")} |`,
    ...STEPS.flatMap((k) =>
      families.map(
        (f) =>
          `| ${STEP_LABEL[k]} | IPv${f} (${f === 6 ? VIP6 : VIP}) | ${MODES.map((m) => (ran(m, f) ? brokenCell(stepOf(m, k, f), m === "second-chance") : "not run (smoke)")).join(" | ")} |`,
      ),
    ),
    "",
    ...(families.includes(6)
      ? [
          `IPv6 rows: the same steps and backends at their IPv6 addresses (VIP ${VIP6}, the client's IPv6 address), one mode after the other after the IPv4 rows, on fresh connections; the gateways hash ipv6_src/ipv6_dst (second chance: the slot table's \`multipath\`; (b), (c): the select group's fields), the underlay is IPv4.`,
          "",
        ]
      : []),
    "Each cell: connections broken by the change (a round's echo missed within 2 s, or reset) of those working before it. " +
      '"Moved" (second chance): working connections whose slot now has another owner (traced on gw1): their packets are handed on by the new owner\'s hypervisor. ' +
      'For (b) and (c) a select group cannot drain, so "drain" removes the backend and the next step has nothing to do. ' +
      `Break reasons: ${MODES.map(
        (m) =>
          `${m}: ${
            Object.entries(
              by[m].steps.reduce<Record<string, number>>((acc, s) => {
                for (const [k, v] of Object.entries(s.reasons)) acc[k] = (acc[k] ?? 0) + v;
                return acc;
              }, {}),
            )
              .map(([k, v]) => `${k} ×${v}`)
              .join(", ") || "none"
          }`,
      ).join("; ")}.`,
    "",
  ];
  const lat = by["second-chance"].latency;
  if (lat) {
    const row = (what: string, xs: number[], ys: number[], n: number) =>
      `| ${what} | ${n} | ${fmtInt(xs.length)} | ${us(pct(xs, 0.5))} | ${us(pct(xs, 0.99))} | ${fmtInt(ys.length)} | ${us(pct(ys, 0.5))} | ${us(pct(ys, 0.99))} |`;
    lines.push(
      "### Extra latency of the handed-on path, by chain depth (second chance, right after adding the 5th)",
      "",
      "Depth 0: the slot's owner holds the connection (gateway -> owner's hypervisor). Depth 1: the slot moved, its new owner's hypervisor hands the packet to the previous owner's (gateway -> new owner's hypervisor -> previous owner's). A packet is handed on at most once, so there is no depth 2: a slot whose history is live moves only back to its previous owner.",
      "",
      "| Connections | Count | Exchanges after the add | p50 | p99 | Exchanges before the add (same connections) | p50 | p99 |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |",
      row("depth 1, slot moved: gateway → hv3 → previous owner's hypervisor", lat.after.moved, lat.before.moved, lat.connections.moved),
      row("depth 0, slot not moved: gateway → owner's hypervisor", lat.after.unmoved, lat.before.unmoved, lat.connections.unmoved),
      "",
      `Handed-on minus direct, after the add (the same instants): p50 ${signed(pct(lat.after.moved, 0.5) - pct(lat.after.unmoved, 0.5))}, p99 ${signed(pct(lat.after.moved, 0.99) - pct(lat.after.unmoved, 0.99))}; before the add the same two sets differed by p50 ${signed(pct(lat.before.moved, 0.5) - pct(lat.before.unmoved, 0.5))}, p99 ${signed(pct(lat.before.moved, 0.99) - pct(lat.before.unmoved, 0.99))} (the noise floor of this machine). ` +
        `Round trip of one line and its echo, timed with hrtime inside the client namespace, one exchange in flight at a time; after the add, moved and not-moved connections alternate (${fmtInt(sizes.exchanges)} each); before it, every connection in turn (${fmtInt(5 * sizes.exchanges)} in all, split by the class each connection fell in after the add). ` +
        `${sizes.latencyConnections} connections of their own (besides the ${sizes.connections} counted above), opened before the add and classified after it by tracing each one's 5-tuple on gw1: slot, the slot's owner and previous owner (slotTables), and the GRE key naming the previous owner's hypervisor. hv3 handed on ${lat.handOnPackets} packets meanwhile (its hand-on flow's counter).`,
      "",
    );
  }
  lines.push(...sequenceMarkdown(seq, sizes));
  lines.push(
    "### What one backend change sends, per gateway",
    "",
    "| Change | Mode | VIP and backends | Sent to each gateway (gw1 = gw2) | Flows touched |",
    "| --- | --- | --- | --- | --- |",
    ...STEPS.flatMap((k) =>
      MODES.flatMap((m) =>
        families
          .filter((f) => ran(m, f) && stepOf(m, k, f).sent)
          .map((f) => `| ${STEP_LABEL[k]} | ${MODE_LABEL[m]} | IPv${f} | ${sentCell(stepOf(m, k, f))} | ${touchedCell(stepOf(m, k, f), m, nAfter[k])} |`),
      ),
    ),
    "",
    "Bytes: the bundle text fed to `ovs-ofctl bundle` over SSH (ovslb's `lastApply`, and the same `applyBundle` for the rebuild). " +
      "Second chance moves flows of the slot table (table 70; one flow per slot, 1,024 slots here) instead of buckets: each moved slot is one modify-flow, which sets the GRE key and points at its owner's group (one group per backend: a new backend's is one add-group, a leaving one's one delete-group); the minimum is what the weighted quotas force.",
    "",
    "### Slot shares (second chance)",
    "",
    "| After | Slots moved / minimum | Shares (slots of 1,024) | Worst deviation from the weighted quota |",
    "| --- | --- | --- | --- |",
    ...by["second-chance"].steps
      .filter((s) => s.slotShares)
      .map(
        (s) =>
          `| ${STEP_LABEL[s.step]} | ${s.slotMoves!.moved} / ${s.slotMoves!.minimum} | ${Object.entries(s.slotShares!)
            .sort(([a], [b]) => ipv4Number(a.split(":")[0]) - ipv4Number(b.split(":")[0]))
            .map(([k, v]) => `${k.split(":")[0]} ${(100 * v).toFixed(2)}%`)
            .join(", ")} | ${(100 * s.imbalance!).toFixed(2)}% |`,
      ),
    "",
    "Maglev (Eisenbud et al., NSDI 2016) reports its lookup table's imbalance under 1% once the table has more than 100 entries per backend; ovslb's table here has 1,024 slots (over 200 per backend) and assigns them by exact weighted quotas, so the deviation is the rounding of 1,024 over the active backends.",
    "",
    `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
  );
  return lines.join("\n");
}

export const secondChanceBenchmark: Benchmark = {
  name: "second-chance",
  description:
    "issues 10 and 24: connections broken per add/drain/remove (second chance vs stateless ovslb vs OVN-style rebuild) and over a sequence of changes one right after the other (second chance vs stateless), the handed-on path's latency, what a change sends",
  async run(ctx) {
    const sizes = ctx.smoke ? SMOKE : FULL;
    gatewayPorts.clear();
    const inv = loadInventory();
    const pool4 = POOL.map((n) => inv.backends.find((b) => b.name === n)!);
    const lab: Lab = {
      inv,
      // The four, the 5th, then the sequence's 6th and 7th.
      family: 4,
      pool: pool4,
      ssh: {},
      segOfport: {},
      portsBefore: {},
      made: [],
      usedPorts: new Set(),
    };
    const invariants: Invariant[] = [];
    const run: LabRunOptions = {
      locks: ["hv1-gre"],
      interrupted: "removing this run's resources",
      teardown: () => teardown(lab),
      close: () => {
        for (const s of Object.values(lab.ssh)) s.close();
      },
    };
    return labRun(ctx, run, async (interrupted) => {
      await Promise.all([...GATEWAYS, ...HYPERVISORS].map(async (h) => (lab.ssh[h] = await labSsh(inv, h))));
      for (const g of GATEWAYS) lab.segOfport[g] = Number((await runChecked(lab.ssh[g], ["ovs-vsctl", "get", "interface", "seg0", "ofport"])).trim());
      const machine = await machineNote(lab.ssh.gw1);
      const p0 = Date.now();
      const hosts = [...GATEWAYS, ...HYPERVISORS];
      const snap = async () => Object.fromEntries(await Promise.all(hosts.map(async (h) => [h, await snapshot(lab, h)] as const)));
      let snaps = await snap();
      if (MODES.some((m) => leftoversOf(lab, m, snaps))) {
        for (const m of MODES) await purge(lab, m, snaps);
        snaps = await snap();
      }
      ctx.log(`checked for leftovers of earlier runs in ${Date.now() - p0} ms`);
      for (const h of hosts) lab.portsBefore[h] = new Set(snaps[h].ports);
      if (HYPERVISORS.some((h) => lab.portsBefore[h].has(DEFAULT_GRE_PORT)))
        throw new Error(`a hypervisor already has a ${DEFAULT_GRE_PORT} port (another GRE test running?)`);

      const results: ModeResult[] = [];
      for (const m of MODES) {
        if (interrupted()) throw new Error("interrupted");
        results.push(await runMode(lab, m, sizes, ctx, invariants));
        await endMode(lab, m, ctx, `[${m}]`);
      }

      const sequence: Partial<Record<Mode, SeqStep[]>> = {};
      for (const m of SEQ_MODES) {
        if (interrupted()) throw new Error("interrupted");
        sequence[m] = await runSequence(lab, m, sizes, ctx, invariants);
        await endMode(lab, m, ctx, `[${m} sequence]`);
      }

      // The IPv6 rows: each mode again with an IPv6 VIP of the same backends' IPv6 addresses, the same steps and invariants.
      if (!inv.gatewayVipRange6) throw new Error("the lab's segment is IPv4 only (built before it was dual-stack): `npm run lab -- down && npm run lab -- up`");
      lab.family = 6;
      lab.pool = pool4.map((b) => ({ ...b, address: ipv6Twin(b.address) }));
      gatewayPorts.clear();
      const results6: ModeResult[] = [];
      // Smoke: second chance alone (the IPv6 rows' own code paths: multipath over IPv6 fields, IPv6 traces and conntrack).
      for (const m of ctx.smoke ? (["second-chance"] as const) : MODES) {
        if (interrupted()) throw new Error("interrupted");
        const own: Invariant[] = [];
        results6.push(await runMode(lab, m, sizes, ctx, own));
        invariants.push(...own.map((i) => ({ ...i, name: `IPv6: ${i.name}` })));
        await endMode(lab, m, ctx, `[${m} IPv6]`);
      }

      const failed = await teardown(lab);
      invariants.push({ name: "every resource of the run was deleted through the provider", ok: failed.length === 0, detail: failed.join("; ") || undefined });
      const left = await leftBehind(lab);
      invariants.push({
        name: "nothing of the run is left (flows with its cookies, its groups, its tunnel and GRE ports, server sockets of its connections in the VMs)",
        ok: left.length === 0,
        detail: left.join("; ") || undefined,
      });

      const latency = results.find((r) => r.latency)?.latency;
      const summary = latency && {
        movedP50us: pct(latency.after.moved, 0.5),
        movedP99us: pct(latency.after.moved, 0.99),
        unmovedP50us: pct(latency.after.unmoved, 0.5),
        unmovedP99us: pct(latency.after.unmoved, 0.99),
        beforeMovedP50us: pct(latency.before.moved, 0.5),
        beforeUnmovedP50us: pct(latency.before.unmoved, 0.5),
      };
      const data = {
        machine,
        sizes,
        vip: VIP,
        vip6: VIP6,
        names: NAME,
        backends: pool4.map((b) => ({ name: b.name, address: b.address, hypervisor: b.hypervisor })),
        latencySummary: summary,
        results,
        sequence,
        results6,
      };
      return { name: "second-chance", markdown: markdownOf(results, sizes, machine, sequence, results6), data, invariants } satisfies BenchReport;
    });
  },
};
