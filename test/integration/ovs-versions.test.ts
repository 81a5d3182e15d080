import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handle } from "../../provider/handlers";
import { deferredNatLoadBalancerHandler } from "../../provider/resources/deferred-nat-load-balancer/handler";
import { withDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import type { DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import type { LabInventory } from "../lab/topology";
import { labSsh, loadInventory, sshTo } from "../support/lab";

/**
 * OVS versions against the lab's real Open vSwitch (3.1.0): read reports
 * each host's version and its known issues, and a feature broken on that
 * version (dp_hash groups changed bucket by bucket) is refused on the real
 * host, naming it, the version and the fixed releases, before anything on it
 * changes.
 */

let inv: LabInventory;
const BRIDGE = "br-ovsver";

beforeAll(() => {
  inv = loadInventory();
});

afterAll(async () => {
  const s = await labSsh(inv, "hv3");
  try {
    await s.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
  } finally {
    s.close();
  }
});

async function labVersion(host: string): Promise<string> {
  const s = await labSsh(inv, host);
  try {
    const out = await s.run(["ovs-appctl", "version"]);
    return /\(Open vSwitch\)\s+(\S+)/.exec(out.stdout)![1];
  } finally {
    s.close();
  }
}

describe("OVS versions on the lab", () => {
  it("read reports the host's version (as ovs-vswitchd says it) and the known issues it has", async () => {
    const version = await labVersion("hv3");
    const inputs = { host: { connection: sshTo(inv, "hv3"), ovsRundir: inv.hosts.hv3.ovsRundir! }, name: BRIDGE };
    const checked = (await handle("OvsBridge", "check", [{}, inputs])) as { inputs: Record<string, unknown>; failures: unknown[] };
    expect(checked.failures).toEqual([]);
    const created = (await handle("OvsBridge", "create", [checked.inputs])) as { id: string; outs: Record<string, unknown> };
    const read = (await handle("OvsBridge", "read", [created.id, created.outs])) as { props: Record<string, any> };
    expect(read.props.ovsVersions).toEqual({
      [inv.hosts.hv3.address]: { version, knownIssues: version.startsWith("3.1.") ? ["dp-hash-buckets", "group-modify-race"] : expect.any(Array) },
    });
    await handle("OvsBridge", "delete", [created.id, read.props]);
  });

  it("a dp_hash load balancer is refused on the gateway's 3.1 with the version and the reason, and the gateway is untouched", async () => {
    const version = await labVersion("gw1");
    expect(version).toMatch(/^3\.1\./);
    const gw = inv.hosts.gw1;
    const inputs: DeferredNatLoadBalancerInputs = {
      name: "ovsver",
      gateways: [
        {
          name: "gw1",
          host: { connection: sshTo(inv, "gw1"), ovsRundir: gw.ovsRundir! },
          bridge: gw.segment!.bridge,
          segmentPort: gw.segment!.port,
          mac: gw.segment!.mac,
        },
      ],
      hypervisors: [{ name: "hv1" }],
      selectionMethod: "dp_hash",
      vips: [
        { address: "10.0.0.206", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", hypervisor: "hv1" }] },
      ],
    };
    // check refuses dp_hash for every version; the handler refuses it on the host whatever check said.
    const checked = (await handle("DeferredNatLoadBalancer", "check", [{}, inputs])) as { failures: { property: string }[] };
    expect(checked.failures.map((f) => f.property)).toContain("selectionMethod");
    const s = await labSsh(inv, "gw1");
    try {
      const before = await s.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", gw.segment!.bridge]);
      const flowsBefore = await s.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", gw.segment!.bridge]);
      await expect(deferredNatLoadBalancerHandler.create(withDefaults(inputs))).rejects.toThrow(
        new RegExp(
          `^deferred-nat/ovsver: selectionMethod dp_hash refused: root@${gw.address.replace(/\./g, "\\.")}:22 \\(gw1\\): Open vSwitch ${version.replace(/\./g, "\\.")}: inserting or removing buckets of a dp_hash select group corrupts the group's hash table \\(fixed in 3\\.2\\.6, 3\\.3\\.5, 3\\.4\\.3, 3\\.5\\.1, 3\\.6\\.0\\)`,
        ),
      );
      expect((await s.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", gw.segment!.bridge])).stdout).toBe(before.stdout);
      expect((await s.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", gw.segment!.bridge])).stdout).toBe(flowsBefore.stdout);
    } finally {
      s.close();
    }
  });
});
