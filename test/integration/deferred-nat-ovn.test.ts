import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory, sshTo } from "../support/lab";

/** OVN mode against the lab's OVN central: the NB row, northd's logical flows, drift. */

const VIP = "10.0.0.198";
const ROUTER = "lr-ovslb-test";
let inv: LabInventory;
let central: SshSession;

async function nbctl(...args: string[]): Promise<string> {
  const r = await central.run(["ovn-nbctl", ...args]);
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

async function sbctl(...args: string[]): Promise<string> {
  const sb = inv.hosts.central.ovn!.sbSock;
  const r = await central.run(["ovn-sbctl", `--db=unix:${sb}`, ...args]);
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return r.stdout;
}

beforeAll(async () => {
  inv = loadInventory();
  central = await labSsh(inv, "central");
  await nbctl("--if-exists", "lr-del", ROUTER);
  // A gateway router: northd writes load-balancer flows for it.
  await nbctl("lr-add", ROUTER, "--", "set", "logical_router", ROUTER, "options:chassis=gw1");
});

afterAll(async () => {
  await nbctl("--if-exists", "lr-del", ROUTER).catch(() => undefined);
  central?.close();
});

describe("deferred-NAT load balancer, OVN mode", () => {
  const lb = new ProviderDriver("DeferredNatLoadBalancer");
  let desired: ReturnType<typeof labLoadBalancer>;

  afterAll(async () => {
    if (lb.id) await lb.delete();
  });

  it("writes the NB row, attaches it to the router, and northd hashes on the selection fields", async () => {
    const [b1, b2] = inv.backends;
    desired = labLoadBalancer(
      inv,
      "ovnmode",
      [
        {
          address: VIP,
          port: 80,
          protocol: "tcp",
          backends: [
            { ...labBackend(inv, b1), logicalPort: "lsp-vm1" },
            { ...labBackend(inv, b2), logicalPort: "lsp-vm2" },
          ],
        },
      ],
      {
        selectionFields: ["ip_src", "tp_src"],
        ovn: {
          northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock },
          router: ROUTER,
          // Attached, as an OVN with the deferred-NAT series would want it (what a stock OVN does with it: deferred-nat-ovn-stock.test.ts).
          attach: true,
          healthCheckSourceIp: "10.0.0.254",
        },
      },
    );
    await lb.create(desired);
    const row = "ovslb-ovnmode-tcp";
    const get = (col: string) => nbctl("get", "load_balancer", row, col);
    expect(await get("vips")).toBe(`{"${VIP}:80"="${b1.address}:8080,${b2.address}:8080"}`);
    expect(await get("protocol")).toBe("tcp");
    expect(await get("selection_fields")).toBe("[ip_src, tp_src]");
    expect(await get("options")).toBe('{deferred-nat="true"}');
    expect(await get("ip_port_mappings")).toBe(`{"${b1.address}"="lsp-vm1:10.0.0.254", "${b2.address}"="lsp-vm2:10.0.0.254"}`);
    expect(await get("external_ids")).toBe('{"ovslb:owner"="deferred-nat/ovnmode"}');
    const uuid = await nbctl("--bare", "--columns=_uuid", "find", "load_balancer", `name=${row}`);
    expect(await nbctl("get", "logical_router", ROUTER, "load_balancer")).toBe(`[${uuid}]`);

    // Returns once northd has caught up with the northbound as it is now (nb_cfg reached the SB): the flows are there.
    await nbctl("--wait=sb", "--timeout=30", "sync");
    const lflows = await sbctl("lflow-list", ROUTER);
    expect(lflows).toContain(`ip4.dst == ${VIP} && tcp && tcp.dst == 80`);
    expect(lflows).toContain('hash_fields="ip_src,tcp_src"');
  });

  it("reports a hand edit of the NB row as drift and update puts it back", async () => {
    await nbctl("set", "load_balancer", "ovslb-ovnmode-tcp", "selection_fields=ip_dst");
    const read = await lb.read();
    expect(read.props.drift).toEqual(["OVN Load_Balancer ovslb-ovnmode-tcp: selectionFields differs"]);
    expect(read.inputs.ovn).toBeUndefined();
    expect((await lb.diff(desired, read.props)).changes).toBe(true);
    lb.outputs = read.props;
    await lb.update(desired);
    expect(await nbctl("get", "load_balancer", "ovslb-ovnmode-tcp", "selection_fields")).toBe("[ip_src, tp_src]");
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("refuses a row of the same name that it does not own before changing anything", async () => {
    await nbctl("lb-add", "ovslb-clash-tcp", "10.0.0.199:80", "10.0.0.101:8080", "tcp");
    try {
      const gw1 = await labSsh(inv, "gw1");
      const dump = async () =>
        (await gw1.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "br-seg"])).stdout +
        (await gw1.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-seg"])).stdout;
      const before = await dump();
      const clash = new ProviderDriver("DeferredNatLoadBalancer");
      const inputs = { ...desired, name: "clash", vips: [{ ...desired.vips[0], address: "10.0.0.199" }] };
      await expect(clash.create(inputs)).rejects.toThrow(/OVN Load_Balancer ovslb-clash-tcp exists and is not owned by ovslb/);
      expect(await nbctl("get", "load_balancer", "ovslb-clash-tcp", "external_ids")).toBe("{}");
      expect(await dump()).toBe(before);
      gw1.close();
    } finally {
      await nbctl("lb-del", "ovslb-clash-tcp");
    }
  });

  it("an IPv6 VIP beside the IPv4 one: written [addr]:port, read back with no drift, and northd makes its ip6 flows", async () => {
    const [b1, b2] = inv.backends;
    const v6 = (a: string) => `fd00:10::${a.split(".")[3]}`;
    const dual = {
      ...desired,
      vips: [
        ...desired.vips,
        {
          address: "FD00:20::C6",
          port: 80,
          protocol: "tcp" as const,
          backends: [b1, b2].map((b) => ({ ...labBackend(inv, b), address: v6(b.address) })),
        },
      ],
    };
    await lb.update(dual);
    const vips = await nbctl("get", "load_balancer", "ovslb-ovnmode-tcp", "vips");
    expect(vips).toContain(`"[fd00:20::c6]:80"="[${v6(b1.address)}]:8080,[${v6(b2.address)}]:8080"`);
    expect(vips).toContain(`"${VIP}:80"=`);
    expect((await lb.read()).props.drift).toEqual([]);
    await nbctl("--wait=sb", "--timeout=30", "sync");
    expect(await sbctl("lflow-list", ROUTER)).toContain("ip6.dst == fd00:20::c6 && tcp && tcp.dst == 80");
    await lb.update(desired);
  });

  it("delete detaches and removes its rows", async () => {
    await lb.delete();
    lb.id = "";
    expect(await nbctl("--bare", "--columns=name", "find", "load_balancer", "name=ovslb-ovnmode-tcp")).toBe("");
    expect(await nbctl("get", "logical_router", ROUTER, "load_balancer")).toBe("[]");
  });
});
