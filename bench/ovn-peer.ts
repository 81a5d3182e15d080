import { OvnChassis, type OvnVm } from "../test/lab/ovn-chassis";
import { labSsh, loadInventory, lockLab } from "../test/support/lab";
import { routerLbBackends } from "../test/support/ovn-incident";
import { connectAndClose, openLiveConnections, times, type LiveConnection } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import { machineNote, type Benchmark, type BenchContext, type BenchReport, type Invariant } from "./common";

/**
 * issue 23, OVN's own load balancer as the measured peer: what adding and
 * removing a backend does to established connections through OVN's
 * stateful load balancer (real ovn-controllers: ovn-controller's select
 * group with positional bucket ids, conntrack on the gateway chassis),
 * beside the second-chance benchmark's stateless figures for ovslb.
 * Live connections from the OVN client through the gateway router on gw1 to
 * a VIP of three OVN VMs; each change is one write of the Load_Balancer's
 * vips; every connection exchanges a line after each change.
 */

const VIP = "10.0.0.232";
const LB = "bench-ovn-peer";

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
  description: "issue 23: OVN's own (stateful) load balancer with real ovn-controllers: established connections broken by adding and removing a backend",
  async run(ctx: BenchContext): Promise<BenchReport> {
    const inv = loadInventory();
    const unlock = await lockLab("ovn-central");
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
      chassis.nbctl("--if-exists", "lb-del", LB);
      chassis.nbctl("lb-add", LB, `${VIP}:80`, [a, b, c].map(ep).join(","), "tcp", "--", "lr-lb-add", ovn.router, LB);
      await setVip([a, b, c]);
      chassis.nbctl("--wait=hv", "--timeout=30", "sync");
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
      invariants.push({
        name: "after each change every new connection is served, by a backend the VIP lists",
        ok: steps.length === 3 && steps.every((s) => s.newServedBy.every((n) => s.backends.includes(n))),
        detail: steps.map((s) => s.newServedBy.join("+")).join("; "),
      });
      invariants.push({
        name: "nothing of the run is left (its load balancer deleted)",
        ok: chassis.nbctl("--bare", "--columns=name", "find", "load_balancer", `name=${LB}`) === "",
      });
      const markdown = [
        "### OVN's stateful load balancer: established connections across backend changes",
        "",
        "| Change (one write of the VIP's backends) | Backends after | Live connections before | Broken by the change | of which to the removed backend | New connections served by |",
        "| --- | --- | --- | --- | --- | --- |",
        ...steps.map((s) => `| ${s.change} | ${s.backends.length} | ${s.live} | **${s.broken}** | ${s.brokenOnRemoved} | ${s.newServedBy.join(", ")} |`),
        "",
        `Real ovn-controllers (OVN ${inv.software?.ovn ?? "23.03"}); OVN's Load_Balancer on the gateway router on gw1 (no selection_fields: OVN's default dp_hash group, positional bucket ids), VIP ${VIP}:80, backends OVN VMs on hv1 and hv2; ${count} connections opened one after another from the OVN client, each exchanging a line after every change (a missed or wrong answer within 2 s is broken). A connection lives in the gateway chassis's conntrack (ct_lb_mark): its packets follow the entry, not the group, so no change re-selects it; a removed backend that still runs keeps serving its established connections (nothing flushes their entries: 23.03's options:ct_flush is read by ovn-controller from the southbound Load_Balancer, which a router-only load balancer does not get). ovslb's stateless gateways, for comparison: the second-chance benchmark.`,
        "",
        `Machine: ${machine.cpu}, ${machine.memory}, ${machine.kernel}, ${machine.ovs} (userspace datapath), Node ${machine.node}; load average ${machine.load} as the run started; ${machine.date}.`,
      ].join("\n");
      return { name: "ovn-peer", markdown, data: { machine, count, steps }, invariants };
    } finally {
      unlock();
    }
  },
};
