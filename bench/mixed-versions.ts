import { closeIdleSshConnections } from "../provider/transport/ssh";
import { loadInventory } from "../test/support/lab";
import { distroRoot, type Release } from "../test/lab/root";
import { measureCase, mixedFleet, SELECTION_CASES, type CaseResult, type MixedFleet } from "../test/support/mixed-versions";
import { execFileSync } from "node:child_process";
import { fmtInt, fmtPct, labRun, teardownSteps, type Benchmark, type Invariant } from "./common";

/**
 * Issue 19's mixed-version measurement: a fleet mid-upgrade, with gateways
 * on Debian 12's Open vSwitch 3.1.0, Ubuntu 24.04's 3.3 (the OVS LTS) and
 * Debian 13's 3.5.0 (hosts of their own beside the lab,
 * test/support/mixed-versions.ts), given the same DeferredNatLoadBalancer
 * through the provider's handlers. For each way ovslb selects a backend,
 * each VIP's tuples are traced on every gateway (ofproto/trace over unixctl)
 * and counted: how many chose the same backend (and the same bucket, or slot
 * and second-chance key) on all of them.
 *
 * It uses no host of the lab (only its inventory: the client key, gw1's
 * host key, the lab directory), so it takes no lab lock.
 */

const FULL = { tuples: 2000 };
const SMOKE = { tuples: 200 };

/** Subnets 172.31.248.0/30, .249 and .250: the benchmark's own (the tests use others). */
const SUBNET = 248;

export const mixedVersionsBenchmark: Benchmark = {
  name: "mixed-versions",
  description: "issue 19: a 3.1, a 3.3 and a 3.5 gateway given the same load balancer: do traced tuples choose the same backend, per selection method",
  async run(ctx) {
    const size = ctx.smoke ? SMOKE : FULL;
    const inv = loadInventory();
    const started = Date.now();
    let fleet: MixedFleet | undefined;
    const teardown = async () => {
      const t = teardownSteps();
      await t.attempt("the gateways", () => {
        for (const g of fleet ?? []) g.host.down();
      });
      return t.failed;
    };
    const results = await labRun(ctx, { locks: [], interrupted: "removing the benchmark's gateways", teardown, close: closeIdleSshConnections }, async () => {
      ctx.log("bringing up a gateway on this machine's Open vSwitch and one on each root's (tools/distro-root.sh)");
      const f = (fleet = await mixedFleet(inv, "bmv", SUBNET));
      const out: Record<string, CaseResult> = {};
      for (const c of SELECTION_CASES) {
        ctx.log(`${c.key}: ${c.vips.length} VIP(s) x ${fmtInt(size.tuples)} tuples`);
        out[c.key] = await measureCase(f, c, size.tuples);
      }
      const groups = f.map(
        ({ host }) =>
          host
            .ofctl("dump-groups", host.bridge)
            .split("\n")
            .filter((l) => l.includes("group_id")).length,
      );
      return { cases: out, leftGroups: groups, gateways: f.map(({ name, distribution, branch, release }) => ({ name, distribution, branch, release })) };
    });
    const { gateways } = results;
    const packages = gateways.map((g) => `${g.distribution}: openvswitch-switch ${ovsPackage(g.release)}`);

    const invariants: Invariant[] = [];
    const all = SELECTION_CASES.flatMap((c) => results.cases[c.key].vips.map((v) => ({ c, v })));
    const versions = SELECTION_CASES.map((c) => results.cases[c.key].versions);
    const reported = (v: CaseResult["versions"]) => gateways.map((g) => v[g.name] ?? "none").join(" / ");
    invariants.push({
      name: `the provider's read reports ${gateways.map((g) => g.branch).join(", ")} on the gateways of ${gateways.map((g) => g.distribution).join(", ")}, for every load balancer`,
      ok: versions.every((v) => gateways.every((g) => (v[g.name] ?? "").startsWith(`${g.branch}.`))),
      detail: [...new Set(versions.map(reported))].join(", "),
    });
    invariants.push({
      name: "every traced tuple reached a backend on every gateway, over more than one backend per VIP",
      ok: all.every(({ v }) => v.unchosen === 0 && v.backendsUsed > 1),
      detail: all.map(({ c, v }) => `${c.key} ${v.vip}: ${v.unchosen} unchosen, ${v.backendsUsed} used`).join("; "),
    });
    invariants.push({
      name: `every tuple chose the same backend on ${reported(versions[0])}, for every selection method (what lets ovslb accept the mix)`,
      ok: all.every(({ v }) => v.same === v.tuples),
      detail: all
        .filter(({ v }) => v.same !== v.tuples)
        .map(({ c, v }) => `${c.key} ${v.vip}: ${v.same}/${v.tuples}, first ${JSON.stringify(v.firstDifferences[0])}`)
        .join("; "),
    });
    invariants.push({
      name: "deleting each load balancer left no group on any gateway",
      ok: results.leftGroups.every((n) => n === 0),
      detail: results.leftGroups.join(" / "),
    });

    const released = gateways.map((g) => versions[0]?.[g.name] ?? g.branch);
    const named = `${released.slice(0, -1).join(", ")} and ${released[released.length - 1]}`;
    const rows = SELECTION_CASES.flatMap((c) =>
      results.cases[c.key].vips.map(
        (v) => `| ${c.method} | ${v.vip} | ${fmtInt(v.tuples)} | ${fmtInt(v.same)} (${fmtPct(v.same, v.tuples)}) | ${v.backendsUsed} |`,
      ),
    );
    const markdown = [
      `## mixed-versions: gateways on Open vSwitch ${named}, one load balancer`,
      "",
      `${new Date(started).toISOString()}. Gateways: ${packages.join("; ")} (this machine's, then each root's from tools/distro-root.sh), each a host of its own (own namespace, ovsdb-server, userspace ovs-vswitchd, sshd), given the same DeferredNatLoadBalancer through the provider's handlers. ${fmtInt(size.tuples)} tuples per VIP (sources over a /16 or its IPv6 twin, spread source ports), each traced on every gateway (ofproto/trace over unixctl, entering by the segment port); "same" counts tuples whose backend MAC and bucket (or slot and second-chance key) match on all of them. Each VIP has 8 backends (6 weighted 1, 2, 3 in the weighted row) over 4 hypervisors.`,
      "",
      `| Selection | VIP | Tuples | Same backend on ${named} | Backends chosen |`,
      "| --- | --- | --- | --- | --- |",
      ...rows,
      "",
      "Both releases pick a select group's bucket the same way (ofproto/ofproto-dpif-xlate.c, pick_hash_fields_select_group: hash_bytes over the masked fields, then the best hash_int(bucket_id) x weight among the live buckets) and a multipath slot with the same flow_hash_fields (lib/flow.c); the hash functions of a build without SSE 4.2, as Debian's and Ubuntu's are, did not change between v3.1.0 and v3.5.0 (lib/hash.h: the changes are in its SSE 4.2 branch, e85e8a754). dp_hash, which ovslb refuses, did change (cb6423478, 'Improve load balancing in dp_hash select groups').",
    ].join("\n");
    return { name: "mixed-versions", markdown, invariants, data: { size, packages, cases: results.cases } };
  },
};

/** A gateway's Open vSwitch package version, as dpkg records it (this machine's, or its root's). */
function ovsPackage(release: Release | undefined): string {
  const query = ["dpkg-query", "-W", "-f=${Version}", "openvswitch-switch"];
  try {
    return execFileSync(release ? "chroot" : query[0], release ? [distroRoot(release), ...query] : query.slice(1), { encoding: "utf8" }).trim();
  } catch {
    return "of unknown version";
  }
}
