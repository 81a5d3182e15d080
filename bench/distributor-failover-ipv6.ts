import { execFileSync } from "node:child_process";
import { rootLinkOf, type LabBackend } from "../test/lab/topology";
import { ProviderDriver } from "../test/support/deferred-nat";
import { deviceAttachment } from "../test/support/distributor";
import { trackNextHops6, type TrackedRoute } from "../test/support/edge-router";
import { amphoraVip, inNamespace, labSsh, loadInventory, sshTo } from "../test/support/lab";
import { connectAndClose, openLiveConnections, times, type LiveConnections } from "../test/support/tcp-clients";
import { waitUntil } from "../test/support/wait";
import { fmtMs, labRun, machineNote, median, type BenchReport, type Benchmark, type Invariant } from "./common";

/**
 * Issue 18's distributor row: an IPv6 VIP on two distributor devices, the
 * lab's edge router spreading it by ECMP over the devices' next hops, which
 * the attachments answer neighbour solicitations for. dist1's segment link
 * is cut; measured: the time until the router has dropped dist1's next hop
 * (its neighbour entry FAILED: Linux's IPv6 ECMP keeps a failed next hop
 * while forwarding, so the lab's router tracks them, test/support/edge-router.ts)
 * and until new connections from the client all succeed again, with 40 live
 * connections held through every trial. Then the link is restored and dist1
 * updated: the time until the router uses its next hop again.
 */

const VIP = "fd00:21::214";
const LB = "bench-dfo6";
const DEVICES = ["dist1", "dist2"] as const;
type Device = (typeof DEVICES)[number];
const NEXT_HOP: Record<Device, string> = { dist1: "fd00:10::43", dist2: "fd00:10::44" };
const LIVE_CONNECTIONS = 40;
const GOAL_MS = 1000;
const SIZES = { full: 10, smoke: 1 };

interface Trial {
  /** Fault -> the route without dist1's next hop. */
  droppedMs: number;
  /** Fault -> 10 new connections in a row all answered (polled every 20 ms, 400 ms greeting timeout). */
  recoveredMs: number;
  /** Live connections that missed an answer (2 s) in a round during the fault or just after it. */
  broken: number;
  /** Link restored -> the route with both next hops again (the router's probe answered, or the update's unsolicited advertisement). */
  backMs: number;
}

const neighbourState = (address: string) =>
  execFileSync("ip", ["-n", loadInventory().edgeRouter!.namespace, "-6", "neigh", "show", address], { encoding: "utf8" });
const setLink = (d: Device, up: boolean) => execFileSync("ip", ["link", "set", rootLinkOf("s", d), up ? "up" : "down"]);

export const distributorFailoverIpv6Benchmark: Benchmark = {
  name: "distributor-failover-ipv6",
  description: "issue 18: an IPv6 VIP on two distributor devices; dist1's link cut: time until the edge router drops its next hop and new connections succeed",
  async run(ctx) {
    const trials = ctx.smoke ? SIZES.smoke : SIZES.full;
    const inv = loadInventory();
    if (!inv.edgeRouter?.address6) throw new Error("the lab has no dual-stack edge router: run `npm run lab -- up` again");
    const amphorae: LabBackend[] = inv.backends.filter((b) => b.hypervisor === "hv3").slice(0, 3);
    const device = { dist1: new ProviderDriver("DistributorDevice"), dist2: new ProviderDriver("DistributorDevice") };
    const attachment = { dist1: new ProviderDriver("DistributorAttachment"), dist2: new ProviderDriver("DistributorAttachment") };
    const hostOf = (d: Device) => ({ connection: sshTo(inv, d), ovsRundir: inv.hosts[d].ovsRundir });
    const attachmentInputs = (d: Device) => deviceAttachment(inv, d, { id: LB, vip: VIP, nextHop: NEXT_HOP }, amphorae, ["active", "active", "standby"]);
    let route: TrackedRoute | undefined;
    let live: LiveConnections | undefined;
    const client = inv.client.namespace;
    let tornDown = false;
    const teardown = async () => {
      const failed: string[] = [];
      if (tornDown) return failed;
      tornDown = true;
      const step = async (what: string, fn: () => unknown) => {
        try {
          await fn();
        } catch (e) {
          failed.push(`${what}: ${(e as Error).message}`);
        }
      };
      live?.close();
      await step("link up", () => setLink("dist1", true));
      await step("edge route", () => route?.close());
      await step("client route", () => inNamespace(client, ["ip", "-6", "route", "del", `${VIP}/128`]));
      for (const d of DEVICES) await step(`${d} attachment`, () => attachment[d].purge(attachmentInputs(d)));
      for (const d of DEVICES) await step(`${d} device`, () => device[d].purge({ host: hostOf(d), deviceId: d, uplinkBridge: "br-seg" }));
      for (const b of amphorae) await step(`${b.name} VIP`, () => amphoraVip(b, VIP, false));
      return failed;
    };
    return labRun(
      ctx,
      {
        locks: ["distributor"],
        lockTimeoutMs: 900_000,
        interrupted: "restoring dist1's link and removing the run's resources",
        teardown,
        close: () => undefined,
      },
      async () => {
        const ssh = await labSsh(inv, "dist1");
        const machine = await machineNote(ssh);
        ssh.close();
        // Leftovers of an interrupted run.
        for (const d of DEVICES) await attachment[d].purge(attachmentInputs(d)).catch(() => undefined);
        for (const d of DEVICES) await device[d].purge({ host: hostOf(d), deviceId: d, uplinkBridge: "br-seg" }).catch(() => undefined);
        for (const b of amphorae) amphoraVip(b, VIP, true);
        for (const d of DEVICES) await device[d].create({ host: hostOf(d), deviceId: d, uplinkBridge: "br-seg" });
        for (const d of DEVICES) await attachment[d].create(attachmentInputs(d));
        inNamespace(client, ["ip", "-6", "route", "replace", `${VIP}/128`, "via", inv.edgeRouter!.address6!, "dev", "eth0"]);
        route = trackNextHops6(inv.edgeRouter!.namespace, "eth0", `${VIP}/128`, Object.values(NEXT_HOP));
        live = await openLiveConnections(client, VIP, inv.backendPort, LIVE_CONNECTIONS);
        const results: Trial[] = [];
        for (let k = 0; k < trials; k++) {
          // A trial starts with both next hops in use and dist1's entry valid: once, right after distributor-ipv6.test.ts, the
          // route seems to have held only dist2 at the cut (new connections at once, no drop), which measures nothing.
          await waitUntil(() => route!.changes.at(-1)!.live.length === 2 && /REACHABLE|STALE|DELAY|PROBE/.test(neighbourState(NEXT_HOP.dist1)), {
            what: "both next hops in use before the fault",
            timeoutMs: 10_000,
            intervalMs: 50,
          });
          await live.round();
          const started = Date.now();
          setLink("dist1", false);
          // The live connections keep talking through the fault, so the router's next packet for dist1 goes right away, as under load.
          const during = live.round();
          let recoveredMs: number;
          let linkBack = 0;
          try {
            await waitUntil(
              () => connectAndClose(client, times(VIP, inv.backendPort, 10), { concurrency: 10, greetingTimeoutMs: 400 }).every((r) => !r.error),
              {
                what: "new IPv6 connections through dist2",
                timeoutMs: 10_000,
                intervalMs: 20,
              },
            );
            recoveredMs = Date.now() - started;
          } finally {
            setLink("dist1", true);
            linkBack = Date.now();
          }
          const dropped = await route.dropped(NEXT_HOP.dist1, started);
          await during;
          const broken = (await live.round()).filter((c) => c.broken).length;
          await attachment.dist1.update(attachmentInputs("dist1"));
          const back = await waitUntil(() => route!.changes.find((c) => c.at > (dropped?.at ?? started) && c.live.length === 2), {
            what: "dist1's next hop back in the route",
            timeoutMs: 10_000,
            intervalMs: 10,
          });
          const trial = { droppedMs: dropped ? dropped.at - started : NaN, recoveredMs, broken, backMs: back.at - linkBack };
          ctx.log(
            `trial ${k + 1}/${trials}: next hop dropped ${trial.droppedMs} ms, new connections ${recoveredMs} ms, ${broken} broken, back ${trial.backMs} ms`,
          );
          results.push(trial);
        }
        const worst = (xs: number[]) => Math.max(...xs);
        const recovered = results.map((t) => t.recoveredMs);
        const dropped = results.map((t) => t.droppedMs);
        const back = results.map((t) => t.backMs);
        const underGoal = recovered.filter((ms) => ms < GOAL_MS).length;
        const invariants: Invariant[] = [
          {
            name: "the router dropped dist1's next hop in every trial",
            ok: dropped.every(Number.isFinite),
            detail: `${dropped.filter(Number.isFinite).length} of ${trials}`,
          },
          { name: "no live connection broke in any trial", ok: results.every((t) => t.broken === 0), detail: results.map((t) => t.broken).join(", ") },
        ];
        const failed = await teardown();
        invariants.push({
          name: "every resource of the run was removed and dist1's link restored",
          ok: failed.length === 0,
          detail: failed.join("; ") || undefined,
        });
        const markdown = [
          `# Distributor failover, IPv6 VIP (${trials} trial(s), dist1's link cut)`,
          "",
          "| fault | new connections succeed again (median / worst) | under 1 s | next hop dropped by the router (median / worst) | live connections broken | next hop back after the link (median / worst) |",
          "|---|---|---|---|---|---|",
          `| dist1's link cut | **${fmtMs(median(recovered))} / ${fmtMs(worst(recovered))}** | ${underGoal} of ${trials} | ${fmtMs(median(dropped))} / ${fmtMs(worst(dropped))} | ${results.reduce((n, t) => n + t.broken, 0)} of ${LIVE_CONNECTIONS * trials} | ${fmtMs(median(back))} / ${fmtMs(worst(back))} |`,
          "",
          `VIP ${VIP} on dist1 and dist2 (next hops ${NEXT_HOP.dist1}, ${NEXT_HOP.dist2}); ${LIVE_CONNECTIONS} live connections through every trial, each exchanging a line (2 s to answer) as the link is cut and again after recovery; new connections polled every 20 ms (10 at a time, 400 ms greeting timeout). ` +
            "The edge router's neighbour timers: base reachable time 200 ms, no delay before the first probe, 2 unicast probes 100 ms apart; it drops a next hop whose entry FAILED (Linux does not for IPv6 while forwarding; the lab tracks it) and probes it every 200 ms to take it back.",
          "",
          `Machine: ${Object.entries(machine)
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")}. Rerun: \`npm run bench -- distributor-failover-ipv6\`.`,
          "",
        ].join("\n");
        return {
          name: "distributor-failover-ipv6",
          markdown,
          data: { machine, vip: VIP, nextHops: NEXT_HOP, trials: results, goalMs: GOAL_MS },
          invariants,
        } satisfies BenchReport;
      },
    );
  },
};
