import type { LabBackend, LabInventory } from "../test/lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../test/support/deferred-nat";
import { connectAndClose, openLiveConnections, times, type LiveConnection } from "../test/support/tcp-clients";
import { inNamespace } from "../test/support/lab";
import type { Invariant } from "./common";
import { MAX_ERROR_SHARE, PORTS, Server, VIPS, hvInputs, lbInputs, loadOf, percentile, poolOf, soleOf, type Sizes } from "./dsr-gre";

/**
 * ovslb's side of the ovn-peer benchmark, measured in the same run as OVN's
 * (the caller holds the lab's hv1-gre lock, as the second-chance and dsr-gre
 * benchmarks do, taken before ovn-central):
 *
 * - backendChanges(): established connections across the same three
 *   backend changes the OVN side makes, through a stateless
 *   DeferredNatLoadBalancer (mac delivery, gw1 and gw2, stable bucket ids:
 *   one insert/remove_bucket per change) with DsrHypervisorFlows on hv1 and
 *   hv2, of the lab's br-seg VMs (the same layout: two backends on hv1, two
 *   on hv2), from the lab's client;
 * - OvslbHttp: the dsr-gre benchmark's gre-delivery resources and servers
 *   (its lbInputs, hvInputs and Server), for HTTP beside OVN's load balancer,
 *   and its direct baseline; measureHttp() measures any targets in rounds.
 *
 * Everything goes through the provider's handlers and is deleted again by
 * each function (also on failure).
 */

/** The second-chance benchmark's VIP (10.0.0.196, under the same hv1-gre lock): the gateways' range has no free address. */
export const OVSLB_VIP = "10.0.0.196";
const NAME = "bench-ovn-peer-ovslb";

export interface ChangeStep {
  change: string;
  backends: string[];
  /** Working connections before the change. */
  live: number;
  /** Connections that broke with the change (a missed or wrong answer within 2 s). */
  broken: number;
  /** Of those, connections that were on the backend the change removed. */
  brokenOnRemoved: number;
  /** Who served a dozen new connections after the change. */
  newServedBy: string[];
}

function inputs(inv: LabInventory, backends: LabBackend[]) {
  const vips = [{ address: OVSLB_VIP, port: 80, protocol: "tcp" as const, backends }];
  return {
    lb: labLoadBalancer(inv, NAME, [{ address: OVSLB_VIP, port: 80, protocol: "tcp", backends: backends.map((b) => labBackend(inv, b)) }]),
    hv: Object.fromEntries(["hv1", "hv2"].map((h) => [h, labHypervisorFlows(inv, NAME, h, vips)])),
  };
}

/**
 * ovslb's stateless gateways through the OVN side's changes: three backends
 * (hv1-vm1, hv2-vm1, hv1-vm2), add a 4th (hv2-vm2), remove it, remove an
 * original that keeps running (hv1-vm2). `count` live connections from the
 * lab's client; each change is one update of each resource.
 */
export async function backendChanges(
  inv: LabInventory,
  count: number,
  log: (line: string) => void,
): Promise<{ steps: ChangeStep[]; initial: LiveConnection[]; invariants: Invariant[]; cookies: string[] }> {
  const vm = (name: string) => inv.backends.find((b) => b.name === name)!;
  const [a, b, c, d] = ["hv1-vm1", "hv2-vm1", "hv1-vm2", "hv2-vm2"].map(vm);
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  const hv: Record<string, ProviderDriver> = { hv1: new ProviderDriver("DsrHypervisorFlows"), hv2: new ProviderDriver("DsrHypervisorFlows") };
  const first = inputs(inv, [a, b, c]);
  const steps: ChangeStep[] = [];
  const invariants: Invariant[] = [];
  const cookies: string[] = [];
  await lb.purge(first.lb).catch(() => undefined);
  for (const h of Object.keys(hv)) await hv[h].purge(first.hv[h]).catch(() => undefined);
  let conns: Awaited<ReturnType<typeof openLiveConnections>> | undefined;
  try {
    for (const h of Object.keys(hv)) await hv[h].create(first.hv[h]);
    await lb.create(first.lb);
    cookies.push(...cookiesOf(lb, ...Object.values(hv)));
    conns = await openLiveConnections(inv.client.namespace, OVSLB_VIP, 80, count);
    const initial = conns.initial;
    invariants.push({
      name: `ovslb: all ${count} connections opened, spread over the three backends`,
      ok: initial.every((x) => !x.broken) && new Set(initial.map((x) => x.backend)).size === 3,
      detail: [a, b, c].map((x) => `${x.name} ${initial.filter((y) => y.backend === x.name).length}`).join(", "),
    });
    let before = initial;
    const change = async (label: string, backends: LabBackend[], removed?: LabBackend) => {
      const next = inputs(inv, backends);
      // The hypervisors first when a backend comes, the gateways first when one goes: neither sends to a hypervisor without its flows.
      if (!removed) for (const h of Object.keys(hv)) await hv[h].update(next.hv[h]);
      await lb.update(next.lb);
      if (removed) for (const h of Object.keys(hv)) await hv[h].update(next.hv[h]);
      const after = await conns!.round();
      const newlyBroken = after.filter((x, i) => x.broken && !before[i].broken);
      const fresh = connectAndClose(inv.client.namespace, times(OVSLB_VIP, 80, 12));
      steps.push({
        change: label,
        backends: backends.map((x) => x.name),
        live: before.filter((x) => !x.broken).length,
        broken: newlyBroken.length,
        brokenOnRemoved: newlyBroken.filter((x) => removed && x.backend === removed.name).length,
        newServedBy: [...new Set(fresh.map((x) => x.backend || `failed: ${x.error}`))].sort(),
      });
      log(`ovslb, ${label}: ${newlyBroken.length} of ${steps.at(-1)!.live} broken; new connections served by ${steps.at(-1)!.newServedBy.join(", ")}`);
      before = after;
    };
    await change(`add a 4th backend (${d.name})`, [a, b, c, d]);
    await change("remove it again", [a, b, c], d);
    await change(`remove an original backend (${c.name}), still running`, [a, b], c);
    invariants.push({
      name: "ovslb: after each change every new connection is served, by a backend the VIP lists",
      ok: steps.length === 3 && steps.every((s) => s.newServedBy.every((n) => s.backends.includes(n))),
      detail: steps.map((s) => s.newServedBy.join("+")).join("; "),
    });
    invariants.push({
      name: "ovslb: a removal broke only connections of the removed backend (those of the backends that stayed kept going)",
      ok: steps.filter((s) => s.change.startsWith("remove")).every((s) => s.broken === s.brokenOnRemoved),
      detail: steps.map((s) => `${s.change}: ${s.broken} broken, ${s.brokenOnRemoved} of them on the removed backend`).join("; "),
    });
    return { steps, initial, invariants, cookies };
  } finally {
    conns?.close();
    if (lb.id) await lb.delete();
    for (const d2 of Object.values(hv)) if (d2.id) await d2.delete();
  }
}

/** The resources' flow cookies (0x...), for leftovers() once they are deleted. */
function cookiesOf(...drivers: ProviderDriver[]): string[] {
  return drivers.map((d) => {
    const c = d.outputs.cookie as string | bigint | number;
    return typeof c === "string" ? c : `0x${c.toString(16)}`;
  });
}

/**
 * What ovslb's side left on the lab once its resources were deleted: flows
 * with their cookies on br-seg of gw1, gw2, hv1 and hv2, ports whose
 * external_ids name them, and servers still listening on dsr-gre's ports.
 * `run` runs a command on a lab host (OvnChassis.onLabHost).
 */
export function leftovers(inv: LabInventory, run: (host: string, argv: string[]) => string, cookies: readonly string[]): string[] {
  const left: string[] = [];
  for (const h of ["gw1", "gw2", "hv1", "hv2"]) {
    for (const c of cookies) {
      const n = run(h, ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `cookie=${c}/-1`])
        .split("\n")
        .filter((l) => l.includes("cookie=")).length;
      if (n > 0) left.push(`${h}: ${n} flows with cookie ${c}`);
    }
    const ports = run(h, ["ovs-vsctl", "--columns=name,external_ids", "list", "Port"]);
    if (ports.includes(NAME) || ports.includes("bench-dsr-gre")) left.push(`${h}: a port of this run's resources`);
  }
  for (const b of poolOf(inv))
    for (const port of Object.values(PORTS))
      if (inNamespace(b.namespace, ["ss", "-Htln", `sport = :${port}`]).trim() !== "") left.push(`${b.name}: something listens on ${port}`);
  return left;
}

export interface HttpFigures {
  path: string;
  url: string;
  requestsPerSecond: number;
  /** Each round's answered requests per second. */
  perRound: number[];
  p50: number;
  p99: number;
  ok: number;
  /** Errors, timeouts and non-2xx answers. */
  failed: number;
  /** Requests each server counted. */
  served: Record<string, number>;
  /** Requests a server saw from a peer other than the client, or on a local address other than its own. */
  misaddressed: number;
}

/** A path to measure HTTP on: where the load comes from, where it goes, whose servers count it, and which must serve. */
export interface HttpTarget {
  path: string;
  namespace: string;
  url: string;
  servers: readonly Server[];
  /** A server of each group must have served. */
  mustServe: string[][];
}

/** One measurement of a target: autocannon (dsr-gre's loadOf, its sizes) with what the servers counted meanwhile. */
interface HttpRun {
  ok: number;
  failed: number;
  seconds: number;
  latencies: number[];
  served: Record<string, number>;
  misaddressed: number;
}

async function runHttp(inv: LabInventory, t: HttpTarget, sizes: Sizes): Promise<HttpRun> {
  for (const s of t.servers) await s.report();
  const load = loadOf(inv, t.url, sizes, t.namespace);
  const reports = await Promise.all(t.servers.map((s) => s.report()));
  const r = load.run;
  return {
    ok: r.ok,
    failed: r.errors + r.timeouts + r.non2xx + load.warmup.non2xx,
    seconds: r.duration || sizes.seconds,
    latencies: load.latencies,
    served: Object.fromEntries(t.servers.map((s, i) => [s.backend.name, reports[i].requests])),
    misaddressed: reports.reduce((n, x) => n + x.badPeer + x.badLocal, 0),
  };
}

/**
 * Every target measured in `sizes.rounds` rounds, the second in reverse
 * order (as dsr-gre does, so a change of the machine's load weighs on every
 * path alike); per target the rounds pooled: answered requests over the
 * measured seconds, p50/p99 of every answer's latency.
 */
export async function measureHttp(inv: LabInventory, targets: readonly HttpTarget[], sizes: Sizes, log: (line: string) => void): Promise<HttpFigures[]> {
  const runs: HttpRun[][] = targets.map(() => []);
  for (let round = 0; round < sizes.rounds; round++) {
    const order = targets.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) {
      const r = await runHttp(inv, targets[i], sizes);
      runs[i].push(r);
      log(`http, round ${round + 1}, ${targets[i].path}: ${Math.round(r.ok / r.seconds)} req/s`);
    }
  }
  return targets.map((t, i) => {
    const rs = runs[i];
    const sorted = rs.flatMap((r) => r.latencies).sort((x, y) => x - y);
    const ok = rs.reduce((n, r) => n + r.ok, 0);
    const served: Record<string, number> = {};
    for (const r of rs) for (const [n, c] of Object.entries(r.served)) served[n] = (served[n] ?? 0) + c;
    return {
      path: t.path,
      url: t.url,
      requestsPerSecond: ok / rs.reduce((n, r) => n + r.seconds, 0),
      perRound: rs.map((r) => r.ok / r.seconds),
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      ok,
      failed: rs.reduce((n, r) => n + r.failed, 0),
      served,
      misaddressed: rs.reduce((n, r) => n + r.misaddressed, 0),
    };
  });
}

/** What every HTTP path must show: answers, few failures, servers that saw the client's own address on their own, and a server of each group serving. */
export function httpInvariant(h: HttpFigures, mustServe: ReadonlyArray<readonly string[]>): Invariant {
  const served = Object.entries(h.served)
    .filter(([, n]) => n > 0)
    .map(([n]) => n);
  return {
    name: `HTTP, ${h.path}: answered, errors and timeouts at most ${MAX_ERROR_SHARE * 100}% and no other status than 200, every request seen by a server as from the client's own address on its own (no SNAT), served by ${mustServe.map((g) => g.join(" or ")).join(" and by ")}`,
    ok: h.ok > 0 && h.failed <= Math.floor(MAX_ERROR_SHARE * h.ok) && h.misaddressed === 0 && mustServe.every((g) => g.some((n) => served.includes(n))),
    detail: `${h.ok} ok, ${h.failed} failed, ${h.misaddressed} misaddressed; served ${served.map((n) => `${n} ${h.served[n]}`).join(", ")}`,
  };
}

/** ovslb's gre-delivery DSR path of the dsr-gre benchmark (its VIP, resources and servers), and its direct baseline, for HTTP. */
export class OvslbHttp {
  private readonly lb = new ProviderDriver("DeferredNatLoadBalancer");
  private readonly hv = { hv1: new ProviderDriver("DsrHypervisorFlows"), hv2: new ProviderDriver("DsrHypervisorFlows") };
  private servers: Server[] = [];
  /** Its resources' flow cookies, once created. */
  cookies: string[] = [];

  constructor(private readonly inv: LabInventory) {}

  static readonly PATHS = {
    direct: "direct: the lab's client to one server's own address (dsr-gre's baseline)",
    gre: "ovslb, gre delivery: gw1/gw2 tunnel to hv1, hv2, DsrHypervisorFlows gre mode (replies straight from the hypervisor)",
  } as const;

  async setUp(): Promise<void> {
    const l = lbInputs(this.inv, "gre");
    await this.lb.purge(l).catch(() => undefined);
    for (const h of ["hv1", "hv2"] as const) await this.hv[h].purge(hvInputs(this.inv, h, "gre")).catch(() => undefined);
    for (const b of poolOf(this.inv)) this.servers.push(await Server.start(this.inv, b));
    for (const h of ["hv1", "hv2"] as const) await this.hv[h].create(hvInputs(this.inv, h, "gre"));
    await this.lb.create(l);
    this.cookies = cookiesOf(this.lb, this.hv.hv1, this.hv.hv2);
  }

  /** The two paths as targets (after setUp). */
  targets(): HttpTarget[] {
    const onHv = (h: string) =>
      poolOf(this.inv)
        .filter((b) => b.hypervisor === h)
        .map((b) => b.name);
    return [
      {
        path: OvslbHttp.PATHS.direct,
        namespace: this.inv.client.namespace,
        url: `http://${soleOf(this.inv).address}:${PORTS.direct}/`,
        servers: this.servers,
        mustServe: [[soleOf(this.inv).name]],
      },
      {
        path: OvslbHttp.PATHS.gre,
        namespace: this.inv.client.namespace,
        url: `http://${VIPS.gre}:80/`,
        servers: this.servers,
        mustServe: [onHv("hv1"), onHv("hv2")],
      },
    ];
  }

  /** Deletes the resources and stops the servers; returns what it could not undo. */
  async tearDown(): Promise<string[]> {
    const failed: string[] = [];
    const attempt = async (what: string, fn: () => Promise<unknown>) => fn().catch((e: Error) => failed.push(`${what}: ${e.message.slice(0, 200)}`));
    if (this.lb.id) await attempt("delete the gre load balancer", () => this.lb.delete());
    for (const [h, d] of Object.entries(this.hv)) if (d.id) await attempt(`delete ${h}'s flows`, () => d.delete());
    for (const s of this.servers.splice(0)) await attempt(`server ${s.backend.name}`, () => s.stop());
    return failed;
  }
}
