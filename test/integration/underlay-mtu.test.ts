import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { LabBackend, LabInventory } from "../lab/topology";
import { Harness } from "../harness/engine";
import { labBackend, labHypervisorFlows, labLoadBalancer } from "../support/deferred-nat";
import { inNamespace, loadInventory } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";

/**
 * An apply of gre delivery warns, as the Pulumi CLI shows warnings, of a
 * gateway whose underlay cannot carry a client's full-size frame in GRE
 * (1500 + 42 bytes): a DeferredNatService through the harness (the SDK's
 * program runner and the dynamic-provider plugin, which sends the warning to
 * the engine's Log), with gw1's underlay interface set to 1500 for one update.
 */

/** The hypervisors' flows are named by it (the fixture's service is "svc"). */
const NAME = "mtu-warn";
const VIP = "10.0.0.209";
const HVS = ["hv1", "hv2"];

let inv: LabInventory;
let project: string | undefined;
let stack: Harness | undefined;
/** gw1's underlay MTU as the lab made it (1600), put back after the test. */
let labMtu: number;
const underlay = (host: string) => inv.hosts[host].underlay!.address;
const setGw1Mtu = (mtu: number) => inNamespace(inv.hosts.gw1.namespace, ["ip", "link", "set", "br-phy", "mtu", String(mtu)]);

async function up(backends: LabBackend[]) {
  const base = labLoadBalancer(inv, NAME, [], { delivery: "gre" });
  const args = {
    delivery: "gre",
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(g.name) })),
    hypervisors: HVS.map((name) => ({ name, host: labHypervisorFlows(inv, NAME, name, []).host, bridge: "br-seg", tunnelAddress: underlay(name) })),
    vips: [{ address: VIP, port: 80, protocol: "tcp", backends: backends.map((b) => ({ ...labBackend(inv, b), bridgePort: b.port })) }],
  };
  project ??= tempProject(resolve(__dirname, "..", "fixtures", "harness", "components"));
  writeFileSync(join(project, "Pulumi.dev.yaml"), stackConfigYaml({ component: "DeferredNatService", args }));
  stack = await Harness.open({ cwd: project });
  return stack.up();
}

const mtuWarnings = (r: Awaited<ReturnType<typeof up>>) => r.diagnostics.filter((d) => d.severity === "warning" && /underlay interface/.test(d.message));

beforeAll(() => {
  inv = loadInventory();
  labMtu = Number(inNamespace(inv.hosts.gw1.namespace, ["cat", "/sys/class/net/br-phy/mtu"]).trim());
});

afterAll(async () => {
  setGw1Mtu(labMtu);
  await stack?.destroy().catch(() => undefined);
  if (project) removeTempProject(project);
});

describe("gre delivery over an underlay too small for full-size frames", () => {
  it("an apply warns of gw1 at MTU 1500 (and of no gateway at the lab's 1600), naming the interface, the 1542 needed and the fixes", async () => {
    const pool = inv.backends.filter((b) => HVS.includes(b.hypervisor)).slice(0, 3);
    const first = await up(pool.slice(0, 2));
    expect(mtuWarnings(first)).toEqual([]);
    setGw1Mtu(1500);
    try {
      const second = await up(pool);
      expect(second.steps.some((s) => s.op === "update")).toBe(true);
      const warnings = mtuWarnings(second).map((d) => d.message);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(
        `deferred-nat/svc: root@${inv.hosts.gw1.address}:22 (gw1): the underlay interface br-phy (tunnel address ${underlay("gw1")}) has MTU 1500, below 1542`,
      );
      expect(warnings[0]).toContain("Raise the underlay MTU to 1542 or more");
    } finally {
      setGw1Mtu(labMtu);
    }
  });
});
