import { OvnChassis, type OvnVm } from "../test/lab/ovn-chassis";
import { labSsh, loadInventory, lockLab } from "../test/support/lab";
import { routerLbBackends } from "../test/support/ovn-incident";
import { connectAndClose, openLiveConnections, times, type LiveConnection } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import { machineNote, type Benchmark, type BenchContext, type BenchReport, type Invariant } from "./common";
import { FULL as HTTP_FULL, SMOKE as HTTP_SMOKE, Server } from "./dsr-gre";
import { ovnSelectGroup, type OvnSelectGroup } from "../test/support/ovn-groups";
import { DETECT_LB, detection, stats, withinOneInterval, type DetectionSetting } from "./ovn-peer-detection";
import {
  OVSLB_VIP,
  OvslbHttp,
  backendChanges,
  httpInvariant,
  leftovers,
  measureHttp,
  type ChangeStep,
  type HttpFigures,
  type HttpTarget,
} from "./ovn-peer-ovslb";

/**
 * issue 23, OVN's own load balancer as the measured peer: what adding and
 * removing a backend does to established connections through OVN's
 * stateful load balancer (real ovn-controllers: ovn-controller's select
 * group with positional bucket ids, conntrack on the gateway chassis),
 * beside ovslb's stateless gateways through the same changes, HTTP through
 * OVN's load balancer beside ovslb's DSR path (dsr-gre's), and OVN's health
 * check finding a killed server (bench/ovn-peer-ovslb.ts and
 * bench/ovn-peer-detection.ts), all in one run.
 * Live connections from the OVN client through the gateway router on gw1 to
 * a VIP of three OVN VMs; each change is one write of the Load_Balancer's
 * vips; every connection exchanges a line after each change.
 */

const VIP = "10.0.0.232";
const LB = "bench-ovn-peer";
const HTTP_VIP = "10.0.0.234";
const HTTP_LB = "bench-ovn-http";
const HTTP_PORT = 9080;

const ms = (x: number) => `${Math.round(x)} ms`;
const medWorst = (xs: readonly number[], f = ms) => `${f(stats(xs).median)} / ${f(stats(xs).worst)}`;

function detectionRow(s: DetectionSetting): string {
  return `| ${s.label} | ${s.configured} | **${medWorst(s.offline)}** | **${medWorst(s.stopped)}** | ${medWorst(s.dropped)} | ${medWorst(s.failedConnections, String)} | ${s.offline.length} |`;
}

function changeTable(steps: readonly ChangeStep[]): string {
  return [
    "| Change (one update of the resources) | Backends after | Live connections before | Broken by the change | of which to the removed backend | New connections served by |",
    "| --- | --- | --- | --- | --- | --- |",
    ...steps.map((s) => `| ${s.change} | ${s.backends.length} | ${s.live} | **${s.broken}** | ${s.brokenOnRemoved} | ${s.newServedBy.join(", ")} |`),
  ].join("\n");
}

interface Step {
  change: string;
  backends: string[];
  live: number;
  broken: number;
  brokenOnRemoved: number;
  newServedBy: string[];
}

export const ovnPeerBenchmark: Benchmark = {
  name: "ovn-peer",
  description:
    "issue 23: OVN's own (stateful) load balancer with real ovn-controllers beside ovslb, in one run: established connections broken by adding and removing a backend, HTTP req/s and p99, OVN health-check detection of a killed server (defaults, tuned)",
  async run(ctx: BenchContext): Promise<BenchReport> {
    const inv = loadInventory();
    // hv1-gre (ovslb's side: the second-chance and dsr-gre benchmarks' VIPs) before ovn-central, the order the tests take them in.
    const unlockOvslb = await lockLab("hv1-gre");
    const unlock = await lockLab("ovn-central").catch((e: unknown) => {
      unlockOvslb();
      throw e;
    });
    const invariants: Invariant[] = [];
    const chassis = new OvnChassis(inv);
    try {
      const ovn = chassis.up();
      const gw1 = await labSsh(inv, "gw1");
      const machine = await machineNote(gw1);
      gw1.close();
      const count = ctx.smoke ? 12 : 60;
      const [a, b, c, d] = [ovn.vms[0], ovn.vms[2], ovn.vms[1], ovn.vms[3]]; // hv1-ovn1, hv2-ovn1, hv1-ovn2, hv2-ovn2
      const ep = (vm: OvnVm) => `${vm.address}:${ovn.backendPort}`;
      const setVip = (vms: OvnVm[]) => {
        chassis.nbctl("set", "load_balancer", LB, `vips:"${VIP}:80"="${vms.map(ep).join(",")}"`);
        return waitUntil(() => JSON.stringify(routerLbBackends(chassis, ovn.router, VIP, 80)) === JSON.stringify(vms.map(ep).sort()), {
          what: `northd's flow with ${vms.map((v) => v.name).join(", ")}`,
        });
      };
      const steps: Step[] = [];
      // ovn-controller's group on gw1 after each write: the backends it was given, and the group it installed.
      const groups: { backends: string[]; group?: OvnSelectGroup }[] = [];
      const readGroup = (vms: OvnVm[]) => groups.push({ backends: vms.map(ep), group: ovnSelectGroup(chassis, ovn.gatewayChassis, vms.map(ep)) });
      chassis.nbctl("--if-exists", "lb-del", LB);
      chassis.nbctl("lb-add", LB, `${VIP}:80`, [a, b, c].map(ep).join(","), "tcp", "--", "lr-lb-add", ovn.router, LB);
      await setVip([a, b, c]);
      chassis.nbctl("--wait=hv", "--timeout=30", "sync");
      readGroup([a, b, c]);
      const conns = await openLiveConnections(ovn.client.namespace, VIP, 80, count);
      try {
        const initial = conns.initial;
        invariants.push({
          name: `all ${count} connections opened, spread over the three backends`,
          ok: initial.every((x) => !x.broken) && new Set(initial.map((x) => x.backend)).size === 3,
          detail: [a, b, c].map((vm) => `${vm.name} ${initial.filter((x) => x.backend === vm.name).length}`).join(", "),
        });
        let before: LiveConnection[] = initial;
        const change = async (label: string, vms: OvnVm[], removed?: OvnVm) => {
          await setVip(vms);
          // OVN's flows are on the gateway chassis once every chassis has caught up.
          chassis.nbctl("--wait=hv", "--timeout=30", "sync");
          readGroup(vms);
          const after = await conns.round();
          const newlyBroken = after.filter((x, i) => x.broken && !before[i].broken);
          const fresh = connectAndClose(ovn.client.namespace, times(VIP, 80, 12));
          steps.push({
            change: label,
            backends: vms.map((v) => v.name),
            live: before.filter((x) => !x.broken).length,
            broken: newlyBroken.length,
            brokenOnRemoved: newlyBroken.filter((x) => removed && x.backend === removed.name).length,
            newServedBy: [...new Set(fresh.map((x) => x.backend || `failed: ${x.error}`))].sort(),
          });
          ctx.log(`${label}: ${newlyBroken.length} of ${steps.at(-1)!.live} broken; new connections served by ${steps.at(-1)!.newServedBy.join(", ")}`);
          before = after;
        };
        await change("add a 4th backend (hv2-ovn2)", [a, b, c, d]);
        await change("remove it again", [a, b, c], d);
        await change("remove an original backend (hv1-ovn2), still running", [a, b], c);
      } finally {
        conns.close();
        chassis.nbctl("--if-exists", "lb-del", LB);
      }
      // ovslb in the same run: the same three changes through its stateless gateways.
      const ovslbChanges = await backendChanges(inv, count, ctx.log);
      invariants.push(...ovslbChanges.invariants);
      // HTTP: through OVN's load balancer and the same router without one, through ovslb's gre DSR path (dsr-gre's resources) and its direct baseline; rounds interleaved.
      let http: HttpFigures[] = [];
      const httpSizes = ctx.smoke ? HTTP_SMOKE : HTTP_FULL;
      const servers: Server[] = [];
      const ovslb = new OvslbHttp(inv);
      try {
        for (const vm of [a, b]) servers.push(await Server.start(inv, vm, { ports: [HTTP_PORT], client: ovn.client.address }));
        chassis.nbctl("--if-exists", "lb-del", HTTP_LB);
        chassis.nbctl(
          "lb-add",
          HTTP_LB,
          `${HTTP_VIP}:${HTTP_PORT}`,
          [a, b].map((vm) => `${vm.address}:${HTTP_PORT}`).join(","),
          "tcp",
          "--",
          "lr-lb-add",
          ovn.router,
          HTTP_LB,
        );
        chassis.nbctl("--wait=hv", "--timeout=30", "sync");
        await ovslb.setUp();
        const ns = ovn.client.namespace;
        const targets: HttpTarget[] = [
          {
            path: `OVN client: direct to ${a.name} through the OVN router (no load balancer)`,
            namespace: ns,
            url: `http://${a.address}:${HTTP_PORT}/`,
            servers,
            mustServe: [[a.name]],
          },
          {
            path: `OVN client: the VIP through OVN's load balancer (${a.name}, ${b.name})`,
            namespace: ns,
            url: `http://${HTTP_VIP}:${HTTP_PORT}/`,
            servers,
            mustServe: [[a.name], [b.name]],
          },
          ...ovslb.targets().map((t) => ({ ...t, path: `lab client: ${t.path}` })),
        ];
        http = await measureHttp(inv, targets, httpSizes, ctx.log);
        http.forEach((h, i) => invariants.push(httpInvariant(h, targets[i].mustServe)));
      } finally {
        for (const srv of servers) await srv.stop();
        chassis.nbctl("--if-exists", "lb-del", HTTP_LB);
        const failed = await ovslb.tearDown();
        if (failed.length > 0) ctx.log(`ovslb teardown: ${failed.join("; ")}`);
      }
      const ovslbLeft = leftovers(inv, (h, argv) => chassis.onLabHost(h, argv), [...ovslbChanges.cookies, ...ovslb.cookies]);
      invariants.push({
        name: "nothing of ovslb's side is left: no flow with its resources' cookies on gw1, gw2, hv1 or hv2, no port of theirs, no server of this run listening",
        ok: ovslbChanges.cookies.length === 3 && ovslb.cookies.length === 3 && ovslbLeft.length === 0,
        detail: ovslbLeft.join("; ") || `${ovslbChanges.cookies.length + ovslb.cookies.length} cookies checked`,
      });
      // OVN's health check finding a killed server, defaults and tuned.
      const detect = await detection(inv, chassis, ovn, ctx.smoke ? 1 : 10, ctx.log);
      invariants.push(...detect.invariants);
      invariants.push({
        name: "OVN's group on gw1 after each write (checked with dump-groups on its br-int): select, dp_hash, positional bucket ids: bucket i translates to the VIP's i-th backend as written",
        ok:
          groups.length === 4 &&
          groups.every(
            (g) =>
              g.group?.selectionMethod === "dp_hash" &&
              g.group.buckets.length === g.backends.length &&
              g.group.buckets.every((bk, i) => bk.id === i && bk.dst === g.backends[i]),
          ),
        detail: groups
          .map((g) => (g.group ? `group ${g.group.groupId}: ${g.group.buckets.map((bk) => `${bk.id}=${bk.dst}`).join(" ")}` : "no group"))
          .join("; "),
      });
      invariants.push({
        name: "after each change every new connection is served, by a backend the VIP lists",
        ok: steps.length === 3 && steps.every((s) => s.newServedBy.every((n) => s.backends.includes(n))),
        detail: steps.map((s) => s.newServedBy.join("+")).join("; "),
      });
      invariants.push({
        name: "nothing of the run is left (its load balancers deleted)",
        ok: [LB, HTTP_LB, DETECT_LB].every((name) => chassis.nbctl("--bare", "--columns=name", "find", "load_balancer", `name=${name}`) === ""),
      });
      const markdown = [
        "### OVN's stateful load balancer: established connections across backend changes",
        "",
        "| Change (one write of the VIP's backends) | Backends after | Live connections before | Broken by the change | of which to the removed backend | New connections served by |",
        "| --- | --- | --- | --- | --- | --- |",
        ...steps.map((s) => `| ${s.change} | ${s.backends.length} | ${s.live} | **${s.broken}** | ${s.brokenOnRemoved} | ${s.newServedBy.join(", ")} |`),
        "",
        `Real ovn-controllers (OVN ${inv.software?.ovn ?? "23.03"}); OVN's Load_Balancer on the gateway router on gw1 (no selection_fields: OVN's default dp_hash group, positional bucket ids), VIP ${VIP}:80, backends OVN VMs on hv1 and hv2; ${count} connections opened one after another from the OVN client, each exchanging a line after every change (a missed or wrong answer within 2 s is broken). A connection lives in the gateway chassis's conntrack (ct_lb_mark): its packets follow the entry, not the group, so no change re-selects it; a removed backend that still runs keeps serving its established connections (nothing flushes their entries: 23.03's options:ct_flush is read by ovn-controller from the southbound Load_Balancer, which a router-only load balancer does not get).`,
        "",
        "ovslb's stateless gateways in the same run, the same three changes (lab VMs, two on hv1 and two on hv2, from the lab's client):",
        "",
        changeTable(ovslbChanges.steps),
        "",
        `ovslb: a DeferredNatLoadBalancer without secondChance (mac delivery, gw1 and gw2: one select group of stable bucket ids per gateway, one insert/remove_bucket per change; nothing kept per connection on the gateways) and DsrHypervisorFlows on hv1 and hv2, VIP ${OVSLB_VIP}:80, updated through the provider's handlers (hypervisors first when a backend comes, gateways first when one goes). A connection whose hash slot moves to a backend on another hypervisor breaks (it reaches a host with no conntrack entry for it); one moved between two backends of one hypervisor keeps going (that hypervisor's conntrack entry still translates it): the second-chance benchmark checks each broken connection against the gateways' trace; this run checks that a removal broke only connections of the removed backend. OVN keeps every connection, at the price of a conntrack entry per connection on the gateway chassis, through which every reply passes.`,
        "",
        "### HTTP through OVN's stateful load balancer, and ovslb's DSR path",
        "",
        "| Path | Requests/s | p50 | p99 | Requests ok | Failed |",
        "| --- | --- | --- | --- | --- | --- |",
        ...http.map(
          (h) =>
            `| ${h.path} | **${Math.round(h.requestsPerSecond)}**${h.perRound.length > 1 ? ` (rounds: ${h.perRound.map((x) => Math.round(x)).join(", ")})` : ""} | ${h.p50.toFixed(2)} ms | ${h.p99.toFixed(2)} ms | ${h.ok} | ${h.failed} |`,
        ),
        "",
        "ovslb's rows: the dsr-gre benchmark's gre-delivery resources and servers (its lbInputs, hvInputs and HTTP server on 4 lab VMs, its autocannon driver and sizes), created in this run; all four paths exist at once. Every row's requests/s are answered requests over the measured seconds, as dsr-gre counts them; every row's invariant checks that no request failed beyond 0.1%, none was answered other than 200, and each server saw the client's own address on its own (no SNAT). Each path crosses its own network (OVN's: br-ext, the gateway router and Geneve; ovslb's: br-seg and GRE), all on the userspace datapath of one machine.",
        "",
        `HTTP: dsr-gre's server (bench/programs/http-server.ts) in the OVN VMs on port ${HTTP_PORT}, autocannon from the OVN client (dsr-gre's driver, bench/programs/load-driver.ts, and sizes: ${httpSizes.connections} connections, ${httpSizes.seconds} s after a ${httpSizes.warmupSeconds} s warm-up, per path and round; ${httpSizes.rounds} round(s), ${httpSizes.rounds > 1 ? "the second in reverse order so a change of the machine's load weighs on every path alike, the figures pooled over the rounds" : "one"}); both OVN paths cross gw1's gateway router and Geneve to the VM's hypervisor, the second also OVN's load balancer (conntrack DNAT on gw1, replies back through it).`,
        "",
        "### OVN's health check finding a killed backend server",
        "",
        "| OVN health check | Configured | Kill → Service_Monitor offline: median / worst | Kill → last new connection sent to it: median / worst | Kill → dropped from northd's flow: median / worst | Connections failed per trial: median / worst | Trials |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        ...detect.settings.map(detectionRow),
        "",
        `Each trial kills the backend's server (SIGKILL: its port then answers SYNs with RST) as soon as its monitor reads online again, i.e. just after a probe was answered, so each figure is close to OVN's slowest phase: the next probe, one interval later. A probe answered with RST sets the monitor offline at once (controller/pinctrl.c, pinctrl_handle_tcp_svc_check), the timeout playing no part: ${detect.settings.map((s) => `${s.label}: ${withinOneInterval(s)} of ${s.offline.length} trials within one interval`).join("; ")}; a probe whose answer does not come back waits out the timeout and the status is written on a later pass (interval + timeout + interval, as for a backend that goes silent: the ovn-incident benchmark). Until the gateway chassis has the new flow OVN sends new connections to the dead backend, and they fail: new connections from the OVN client go to the VIP in batches of 8, back to back, the southbound and northd's flow read between batches, so the times are within one batch period of the event (its mean is in the .json).`,
        "",
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
      ].join("\n");
      return {
        name: "ovn-peer",
        markdown,
        data: { machine, count, steps, groups, http, ovslbChanges: ovslbChanges.steps, detection: detect.settings },
        invariants,
      };
    } finally {
      unlock();
      unlockOvslb();
    }
  },
};
