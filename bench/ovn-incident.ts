import { OvnChassis, type OvnInventory, type OvnVm } from "../test/lab/ovn-chassis";
import type { LabInventory } from "../test/lab/topology";
import { bfdKeyOf, greKeyOf, tunnelPorts, withDefaults as lbDefaults } from "../provider/resources/deferred-nat-load-balancer/plan";
import { ProviderDriver, labLoadBalancer } from "../test/support/deferred-nat";
import { labSsh, loadInventory, lockLab, sshTo } from "../test/support/lab";
import { killChassis, monitorStatus, reviveChassis, routerLbBackends, routerLbWithHealthCheck, setVmNic } from "../test/support/ovn-incident";
import { connectAndClose, times } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import { machineNote, median, type Benchmark, type BenchContext, type BenchReport, type Invariant } from "./common";

/**
 * issue 23, with real ovn-controllers (test/lab/ovn-chassis.ts, brought up
 * here if it is not): how long OVN's own health check takes to find a dead
 * backend while its chassis lives (OVN's defaults and tuned), and the
 * stale-monitor incident (the chassis itself dies abruptly: its
 * ovn-controller and ovs-vswitchd SIGKILLed, its links cut): OVN alone over
 * an observation window, and ovslb (BFD on the gateways, the southbound read
 * polled, enforce) from the death to no failing connection. Backends
 * hv1-ovn1 and hv2-ovn1 behind the gateway router on gw1; connections from
 * the OVN client.
 */

const DETECT_VIP = "10.0.0.230";
const DETECT_LB = "bench-ovn-detect";
const INCIDENT_VIP = "10.0.0.231";
const INCIDENT_NAME = "bench-incident";
const SRC_IP = "10.10.0.254";
const DEAD = "hv1";
const GATEWAYS = ["gw1", "gw2"];
const HYPERVISORS = ["hv1", "hv2"];
const TIMERS = { minRx: 100, minTx: 100, multiplier: 3 };
const CONNECTIONS = 16;
type Props = Record<string, any>;

interface Ctx {
  inv: LabInventory;
  chassis: OvnChassis;
  ovn: OvnInventory;
}

const backends = (c: Ctx): OvnVm[] => HYPERVISORS.map((hv) => c.ovn.vms.find((v) => v.hypervisor === hv)!);
const endpoint = (c: Ctx, vm: OvnVm) => `${vm.address}:${c.ovn.backendPort}`;
const monitors = (c: Ctx) =>
  monitorStatus(
    c.chassis,
    backends(c).map((b) => b.name),
  );
const stats = (xs: number[]) => (xs.length ? { median: median(xs), worst: Math.max(...xs) } : undefined);
const ms = (x: number | undefined) => (x === undefined ? "" : `${Math.round(x)} ms`);
const medWorst = (xs: number[]) => {
  const s = stats(xs);
  return s ? `${ms(s.median)} / ${ms(s.worst)}` : "";
};

interface DetectionSetting {
  label: string;
  configured: string;
  options: Record<string, string>;
  offline: number[];
  dropped: number[];
  online: number[];
}

/** OVN's health check while the chassis lives: the backend's NIC down until its monitor is offline and northd drops it, then up until online again. */
async function detection(c: Ctx, ctx: BenchContext, trials: number, invariants: Invariant[]): Promise<DetectionSetting[]> {
  const [b1, b2] = backends(c);
  const hc = routerLbWithHealthCheck(c.chassis, {
    router: c.ovn.router,
    name: DETECT_LB,
    vip: DETECT_VIP,
    port: c.ovn.backendPort,
    backends: [b1, b2],
    sourceIp: SRC_IP,
  });
  const both = [endpoint(c, b1), endpoint(c, b2)].sort();
  const settings: DetectionSetting[] = [
    { label: "OVN's defaults", configured: "interval 5 s, timeout 3 s, success_count 1, failure_count 1", options: {}, offline: [], dropped: [], online: [] },
    {
      label: "tuned",
      configured: "interval 1 s, timeout 1 s, success_count 1, failure_count 1",
      options: { interval: "1", timeout: "1" },
      offline: [],
      dropped: [],
      online: [],
    },
  ];
  // The smoke run checks that the code still works, not OVN's timing: the tuned setting only (the defaults' rounds take
  // about 13 s each), and no warm-up round.
  const measured = ctx.smoke ? settings.filter((s) => s.label === "tuned") : settings;
  try {
    for (const s of measured) {
      c.chassis.nbctl(
        "set",
        "load_balancer_health_check",
        hc,
        `options={${Object.entries(s.options)
          .map(([k, v]) => `${k}=${v}`)
          .join(",")}}`,
      );
      // One untimed round first: a probe already scheduled keeps the interval it was scheduled with.
      for (let t = ctx.smoke ? 0 : -1; t < trials; t++) {
        await waitUntil(
          () => monitors(c)[b1.name] === "online" && JSON.stringify(routerLbBackends(c.chassis, c.ovn.router, DETECT_VIP, 80)) === JSON.stringify(both),
          {
            what: `${b1.name} online and in the flow`,
            timeoutMs: 30_000,
          },
        );
        const cut = Date.now();
        setVmNic(c.ovn, b1, false);
        await waitUntil(() => monitors(c)[b1.name] === "offline", { what: `${b1.name} offline`, timeoutMs: 30_000, intervalMs: 20 });
        const offline = Date.now() - cut;
        await waitUntil(() => JSON.stringify(routerLbBackends(c.chassis, c.ovn.router, DETECT_VIP, 80)) === JSON.stringify([endpoint(c, b2)]), {
          what: "northd's flow without it",
          intervalMs: 20,
        });
        const dropped = Date.now() - cut;
        const repaired = Date.now();
        setVmNic(c.ovn, b1, true);
        await waitUntil(() => monitors(c)[b1.name] === "online", { what: `${b1.name} online again`, timeoutMs: 30_000, intervalMs: 20 });
        const online = Date.now() - repaired;
        ctx.log(
          `detection, ${s.label}, ${t < 0 ? "warm-up round" : `trial ${t + 1}`}: offline ${offline} ms, dropped ${dropped} ms; online again ${online} ms`,
        );
        if (t < 0) continue;
        s.offline.push(offline);
        s.dropped.push(dropped);
        s.online.push(online);
      }
    }
    invariants.push({
      name: "OVN's health check, chassis alive: every trial found the backend offline, northd dropped it, and it came back online",
      ok: measured.every((s) => s.offline.length === trials && s.dropped.length === trials && s.online.length === trials),
      detail: `${measured.reduce((n, s) => n + s.online.length, 0)} of ${measured.length * trials} trials`,
    });
    return measured;
  } finally {
    setVmNic(c.ovn, b1, true);
  }
}

interface OvnAlone {
  windowMs: number;
  statusAtEnd: string;
  inFlowAtEnd: boolean;
  failed: number;
}

/** OVN alone: the chassis dies; over the window, does anything write its backend offline? (the detection LB, tuned). Then hv1 back. */
async function ovnAlone(c: Ctx, ctx: BenchContext, windowMs: number, invariants: Invariant[]): Promise<OvnAlone> {
  const [b1, b2] = backends(c);
  const hc = c.chassis.nbctl("get", "load_balancer", DETECT_LB, "health_check").replace(/[[\]]/g, "").trim();
  c.chassis.nbctl("set", "load_balancer_health_check", hc, "options={interval=1,timeout=1}");
  await waitUntil(() => Object.values(monitors(c)).join() === "online,online", { what: "both monitors online", timeoutMs: 30_000 });
  const died = Date.now();
  try {
    await killChassis(c.inv, c.chassis, DEAD);
    await waitUntil(() => Date.now() - died >= windowMs, { what: "the observation window", timeoutMs: windowMs + 5_000, intervalMs: 200 });
    const statusAtEnd = monitors(c)[b1.name];
    const inFlowAtEnd = routerLbBackends(c.chassis, c.ovn.router, DETECT_VIP, 80)?.includes(endpoint(c, b1)) ?? false;
    const served = connectAndClose(c.ovn.client.namespace, times(DETECT_VIP, 80, CONNECTIONS), { greetingTimeoutMs: 2000 }).map((x) => x.backend);
    const failed = served.filter((s) => s !== b2.name).length;
    ctx.log(`OVN alone: after ${windowMs} ms ${b1.name} is ${statusAtEnd}, in the flow: ${inFlowAtEnd}; ${failed} of ${CONNECTIONS} connections failed`);
    invariants.push({
      name: `OVN alone: the dead chassis's backend is still online and in northd's flow ${windowMs / 1000} s after the death, and connections OVN sends it fail`,
      ok: statusAtEnd === "online" && inFlowAtEnd && failed > 0 && served.every((s) => s === b2.name || s === ""),
      detail: `${statusAtEnd}, ${failed} of ${CONNECTIONS} failed`,
    });
    return { windowMs, statusAtEnd, inFlowAtEnd, failed };
  } finally {
    await reviveChassis(c.inv, c.chassis, DEAD);
    c.chassis.nbctl("--if-exists", "lb-del", DETECT_LB);
  }
}

interface OvslbTrials {
  stale: number[];
  enforced: number[];
  dropped: number[];
  served: number[];
  failedAfter: number;
}

/** ovslb: BFD on both gateways, the read polled every 100 ms, then one update with enforce. Each trial ends with hv1 back and all ready. */
async function withOvslb(c: Ctx, ctx: BenchContext, trials: number, invariants: Invariant[]): Promise<OvslbTrials> {
  const { inv, ovn } = c;
  const underlay = (h: string) => inv.hosts[h].underlay!.address;
  const central = { connection: sshTo(inv, "central") };
  const [b1, b2] = backends(c);
  const base = labLoadBalancer(
    inv,
    INCIDENT_NAME,
    [
      {
        address: INCIDENT_VIP,
        port: 80,
        protocol: "tcp",
        backends: backends(c).map((vm) => ({ address: vm.address, port: ovn.backendPort, mac: vm.mac, hypervisor: vm.hypervisor, logicalPort: vm.name })),
      },
    ],
    {
      delivery: "gre",
      ovn: { northbound: { ...central, socket: inv.hosts.central.ovn!.nbSock }, router: ovn.router, attach: true, healthCheckSourceIp: SRC_IP },
    },
  );
  const lbInputs = {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(g.name) })),
    hypervisors: HYPERVISORS.map((name) => ({ name, tunnelAddress: underlay(name) })),
    healthCheck: { bfd: TIMERS, probe: { interval: 1, timeout: 1 }, southbound: { ...central, socket: inv.hosts.central.ovn!.sbSock }, enforce: true },
  };
  const hvInputs = (name: string) => ({
    name: INCIDENT_NAME,
    host: { connection: sshTo(inv, name), ovsRundir: inv.hosts[name].ovsRundir },
    bridge: "br-seg",
    mode: "gre" as const,
    vips: [],
    gre: {
      allowedSources: GATEWAYS.map(underlay),
      key: greKeyOf({ name: INCIDENT_NAME }),
      bfd: { peers: GATEWAYS.map((g) => ({ address: underlay(g), key: bfdKeyOf({ name: INCIDENT_NAME }) })), timers: TIMERS },
    },
  });
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  const hv: Record<string, ProviderDriver> = Object.fromEntries(HYPERVISORS.map((h) => [h, new ProviderDriver("DsrHypervisorFlows")]));
  const observe = async () => {
    const { props } = await lb.read();
    const up = (props.health as Props[]).every((h) => GATEWAYS.every((g) => h.bfd?.[g] === "up"));
    return { up, stale: (props.stale as Props[]).map((s) => String(s.logicalPort)).sort() };
  };
  const both = [endpoint(c, b1), endpoint(c, b2)].sort();
  // Up is not enough: a session just up still runs at 1 s until the rates are negotiated (3 s to detect; the liveness benchmark waits the same way).
  const bfdPortsOf = (i: number) =>
    tunnelPorts(lbDefaults(lbInputs), lbInputs.gateways[i])
      .filter((p) => p.bfd)
      .map((p) => p.name);
  const negotiated = () =>
    GATEWAYS.every((g, i) => {
      const blocks = c.chassis.onLabHost(g, ["ovs-appctl", "bfd/show"]).split(/^---- /m);
      return bfdPortsOf(i).every((name) =>
        blocks.some((b) => b.startsWith(`${name} ----`) && /State: up/.test(b) && /TX Interval: Approx 100ms/.test(b) && /RX Interval: Approx 100ms/.test(b)),
      );
    });
  const out: OvslbTrials = { stale: [], enforced: [], dropped: [], served: [], failedAfter: 0 };
  let dead = false;
  try {
    await lb.purge(lbInputs).catch(() => undefined);
    for (const h of HYPERVISORS) {
      await hv[h].purge(hvInputs(h)).catch(() => undefined);
      await hv[h].create(hvInputs(h));
    }
    await lb.create(lbInputs);
    for (let t = 0; t < trials; t++) {
      // Ready: BFD up both ways, both monitors online, the flow with both backends, nothing stale.
      await waitUntil(
        async () =>
          Object.values(monitors(c)).join() === "online,online" &&
          JSON.stringify(routerLbBackends(c.chassis, ovn.router, INCIDENT_VIP, 80)) === JSON.stringify(both) &&
          negotiated() &&
          (await observe()).up &&
          (await observe()).stale.length === 0,
        { what: "ready: BFD up at 100 ms both ways, both online, both in the flow, nothing stale", timeoutMs: 60_000, intervalMs: 200 },
      );
      const died = Date.now();
      dead = true;
      await killChassis(inv, c.chassis, DEAD);
      await waitUntil(async () => (await observe()).stale.join() === b1.name, { what: `${b1.name} stale`, timeoutMs: 30_000, intervalMs: 100 });
      out.stale.push(Date.now() - died);
      await lb.update(lbInputs);
      out.enforced.push(Date.now() - died);
      await waitUntil(() => JSON.stringify(routerLbBackends(c.chassis, ovn.router, INCIDENT_VIP, 80)) === JSON.stringify([endpoint(c, b2)]), {
        what: "northd's flow without it",
        intervalMs: 20,
      });
      out.dropped.push(Date.now() - died);
      const served = connectAndClose(ovn.client.namespace, times(INCIDENT_VIP, 80, CONNECTIONS), { greetingTimeoutMs: 2000 }).map((x) => x.backend);
      out.served.push(Date.now() - died);
      out.failedAfter += served.filter((s) => s !== b2.name).length;
      ctx.log(
        `ovslb, trial ${t + 1}: stale ${out.stale.at(-1)} ms, enforced ${out.enforced.at(-1)} ms, dropped ${out.dropped.at(-1)} ms, ${CONNECTIONS - served.filter((s) => s !== b2.name).length} of ${CONNECTIONS} served ${out.served.at(-1)} ms`,
      );
      await reviveChassis(inv, c.chassis, DEAD);
      dead = false;
      // hv1's ovs-vswitchd restarted without its flows: put its side back.
      await hv[DEAD].update(hvInputs(DEAD));
    }
    invariants.push({
      name: "ovslb: in every trial the dead chassis's backend was reported stale, enforced offline, dropped by northd, and every new connection after that was served",
      ok: out.served.length === trials && out.failedAfter === 0,
      detail: `${out.served.length} of ${trials} trials; ${out.failedAfter} of ${trials * CONNECTIONS} connections failed after the drop`,
    });
    return out;
  } finally {
    if (dead) await reviveChassis(inv, c.chassis, DEAD);
    if (lb.id) await lb.delete();
    for (const d of Object.values(hv)) if (d.id) await d.delete();
  }
}

export const ovnIncidentBenchmark: Benchmark = {
  name: "ovn-incident",
  description:
    "issue 23: with real ovn-controllers: OVN's own health check finding a dead backend (defaults, tuned), and a chassis dying abruptly: OVN alone vs ovslb's stale report and enforce",
  async run(ctx: BenchContext): Promise<BenchReport> {
    const inv = loadInventory();
    const unlock = await lockLab("ovn-central");
    const invariants: Invariant[] = [];
    try {
      const chassis = new OvnChassis(inv);
      const ovn = chassis.up();
      const c: Ctx = { inv, chassis, ovn };
      const gw1 = await labSsh(inv, "gw1");
      const machine = await machineNote(gw1);
      gw1.close();
      const trials = ctx.smoke ? 1 : 10;
      const windowMs = ctx.smoke ? 6_000 : 30_000;
      const detect = await detection(c, ctx, trials, invariants);
      const alone = await ovnAlone(c, ctx, windowMs, invariants);
      const ovslb = await withOvslb(c, ctx, trials, invariants);
      invariants.push({
        name: "nothing of the run is left: its load balancers deleted, hv1's daemons running and the OVN layer healthy",
        ok: chassis.nbctl("--bare", "--columns=name", "find", "load_balancer", `name=${DETECT_LB}`) === "" && chassis.status().up,
      });
      const markdown = [
        "### OVN's own health check, the backend's chassis alive",
        "",
        "| Fault | OVN health check | Configured | Fault → Service_Monitor offline: median / worst | Fault → dropped from northd's flow: median / worst | Repair → online again: median / worst | Trials |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        ...detect.map(
          (s) =>
            `| the backend stops answering (its NIC down) | ${s.label} | ${s.configured} | **${medWorst(s.offline)}** | ${medWorst(s.dropped)} | ${medWorst(s.online)} | ${s.offline.length} |`,
        ),
        "",
        "### The chassis dies abruptly (ovn-controller and ovs-vswitchd SIGKILLed, links cut)",
        "",
        "| Who acts | Death → reported stale | → monitor offline | → dropped from northd's flow | → every new connection served | Trials |",
        "| --- | --- | --- | --- | --- | --- |",
        `| OVN alone (health check 1 s / 1 s) | never | never: still ${alone.statusAtEnd} after ${alone.windowMs / 1000} s | never: still in the flow | never: ${alone.failed} of ${CONNECTIONS} connections failed after ${alone.windowMs / 1000} s | 1 |`,
        `| ovslb (BFD 100/100/3 on both gateways, negotiated before each death; its read polled every 100 ms, then one update with enforce) | ${medWorst(ovslb.stale)} | ${medWorst(ovslb.enforced)} | ${medWorst(ovslb.dropped)} | **${medWorst(ovslb.served)}** (${CONNECTIONS} of ${CONNECTIONS} in each trial) | ${ovslb.served.length} |`,
        "",
        "A detection trial cuts the backend's NIC as soon as its monitor reads online again (just after a probe was answered), so each figure is OVN's slowest phase: the next probe one interval later, its timeout, and the status written only when pinctrl next runs the monitor, at the following send time, one interval after that (controller/pinctrl.c, svc_monitors_run: a timed-out probe sets the state offline and schedules the next send; the status follows on that pass): interval + timeout + interval. Back online (the repair comes just after that pass, which also sent a probe into the cut): that probe's timeout, then the next probe one interval later, answered: timeout + interval. One untimed round after each change of options: a probe already scheduled keeps its old interval.",
        "",
        `Real ovn-controllers (OVN ${inv.software?.ovn ?? "23.03"}) on every gateway and hypervisor (\`npm run lab -- ovn-up\`); backends hv1-ovn1 and hv2-ovn1 behind the gateway router on gw1, connections from the OVN client through it. Times from the fault or the death, taken just before the command that makes it; the southbound and northd's flows polled every 20 ms, ovslb's read every 100 ms (each read is SSH round trips to both gateways and the southbound). ovslb's times include the read's own latency: BFD itself finds the chassis dead in about 300 ms (the liveness benchmark).`,
        "",
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
      ].join("\n");
      return { name: "ovn-incident", markdown, data: { machine, trials, detection: detect, ovnAlone: alone, ovslb }, invariants };
    } finally {
      unlock();
    }
  },
};
