import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dstAddressOf, parseFlows, type DumpedFlow } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { encapsulateVip, l3dsrCounters, type L3dsrTunnel } from "../lab/l3dsr";
import { ipv6Twin, type LabBackend, type LabInventory } from "../lab/topology";
import { ProviderDriver } from "../support/deferred-nat";
import { inNamespace, labSsh, loadInventory, lockLab, sshTo } from "../support/lab";
import { connectAndClose } from "../support/tcp-clients";

/**
 * Transparent L3 DSR behind an external load balancer: the lab's l3dsr
 * namespace (plain Linux, no OVS, no ovslb) tunnels VIPs in GRE to hv1's
 * underlay address; DsrHypervisorFlows in gre mode on hv1 decapsulates,
 * DNATs to the server and lets the reply go straight to the client. The
 * server is configured with nothing.
 */

const VIP = "10.0.0.179";
const VIP_TWO = "10.0.0.182"; // two servers on hv1: the inner frame names one by its MAC
const VIP_DENIED = "10.0.0.180"; // declared, but tunnelled from a source that is not allowed
const VIP_UNDECLARED = "10.0.0.181"; // tunnelled from the allowed source, but no VIP of the resource
const VIP6 = "fd00:22::179"; // an IPv6 VIP, tunnelled over the same IPv4 underlay
const KEY = 47;

let inv: LabInventory;
let hv1: SshSession;
let vm1: LabBackend;
let vm2: LabBackend;
let unlock: (() => void) | undefined;
const tunnels: L3dsrTunnel[] = [];
const dsr = new ProviderDriver("DsrHypervisorFlows");

function inputs(allowed: string[]) {
  const h = inv.hosts.hv1;
  const server = (b: LabBackend) => ({ address: b.address, port: inv.backendPort, mac: b.mac, bridgePort: b.port });
  return {
    name: "l3dsr-web",
    host: { connection: sshTo(inv, h), ovsRundir: h.ovsRundir },
    bridge: "br-seg",
    mode: "gre",
    gre: { allowedSources: allowed, key: KEY },
    vips: [
      { address: VIP, port: 80, protocol: "tcp", backends: [server(vm1)] },
      { address: VIP_DENIED, port: 80, protocol: "tcp", backends: [server(vm1)] },
      { address: VIP_TWO, port: 80, protocol: "tcp", backends: [server(vm1), server(vm2)] },
      { address: VIP6, port: 80, protocol: "tcp", backends: [{ ...server(vm1), address: ipv6Twin(vm1.address) }] },
    ],
  };
}

/** Packets counted by the resource's flows that `which` picks, on hv1 (after a revalidator pass, so datapath hits are in). */
async function packets(which: (f: DumpedFlow) => boolean): Promise<number> {
  await runChecked(hv1, ["ovs-appctl", "revalidator/wait"]);
  const flows = parseFlows(await runChecked(hv1, ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-flows", "br-seg", `cookie=${dsr.outputs.cookie}/-1`]));
  return flows.filter(which).reduce((n, f) => n + Number(f.nPackets), 0);
}
const toVip = (vip: string) => (f: DumpedFlow) => dstAddressOf(f.match) === vip;

const connect = (vip: string, timeoutMs = 3000) => connectAndClose(inv.client.namespace, [{ host: vip, port: 80 }], { greetingTimeoutMs: timeoutMs })[0];

beforeAll(async () => {
  inv = loadInventory();
  [vm1, vm2] = inv.backends.filter((b) => b.hypervisor === "hv1");
  unlock = await lockLab("hv1-gre");
  hv1 = await labSsh(inv, "hv1");
  await dsr.purge(inputs([inv.l3dsr!.underlay.address]));
  await dsr.create(inputs([inv.l3dsr!.underlay.address]));
});

afterAll(async () => {
  for (const t of tunnels) t.close();
  if (dsr.id) await dsr.delete().catch(() => undefined);
  hv1?.close();
  unlock?.();
});

describe("DsrHypervisorFlows gre mode behind an external L3DSR load balancer", () => {
  it("a TCP client reaches the VIP through the external GRE tunnel; the server sees the client on its own address; the reply leaves from the VIP and bypasses the load balancer", async () => {
    tunnels.push(encapsulateVip(inv, { vip: VIP, hypervisor: "hv1", key: KEY, innerMac: "02:00:00:00:00:99" }));
    const before = l3dsrCounters(inv);
    const c = connect(VIP);
    const after = l3dsrCounters(inv);
    expect(c.error).toBeUndefined();
    expect(c.greeting.startsWith(`${vm1.name} ${inv.client.address}:${c.localPort} ${vm1.address}:${inv.backendPort}`)).toBe(true);
    expect(c.remote).toBe(`${VIP}:80`);
    expect(after.forwarded - before.forwarded).toBeGreaterThan(0);
    expect(after.segment.tx.packets - before.segment.tx.packets).toBe(0); // nothing went back out toward the client
    expect(await packets(toVip(VIP))).toBeGreaterThan(0);
    expect(inNamespace(vm1.namespace, ["ip", "-o", "addr", "show"])).not.toContain(VIP);
    expect(inNamespace(vm1.namespace, ["ip", "-d", "-o", "link", "show"])).not.toMatch(/\b(gre|gretap|ipip)\b/);
  });

  it("an IPv6 VIP through the same IPv4 GRE tunnel: the server sees the client's IPv6 address on its own; the reply leaves from the VIP and bypasses the load balancer", async () => {
    tunnels.push(encapsulateVip(inv, { vip: VIP6, hypervisor: "hv1", key: KEY, innerMac: "02:00:00:00:00:99" }));
    const before = l3dsrCounters(inv);
    const c = connect(VIP6);
    const after = l3dsrCounters(inv);
    expect(c.error).toBeUndefined();
    expect(c.greeting.startsWith(`${vm1.name} ${ipv6Twin(inv.client.address)}:${c.localPort} ${ipv6Twin(vm1.address)}:${inv.backendPort}`)).toBe(true);
    expect(c.remote).toBe(`${VIP6}:80`);
    expect(after.forwarded6 - before.forwarded6).toBeGreaterThan(0);
    expect(after.segment.tx.packets - before.segment.tx.packets).toBe(0); // nothing went back out toward the client
    expect(await packets(toVip(VIP6))).toBeGreaterThan(0);
  });

  it("with two servers of one VIP on the hypervisor, the inner destination MAC picks the server", async () => {
    for (const b of [vm1, vm2]) {
      const t = encapsulateVip(inv, { vip: VIP_TWO, hypervisor: "hv1", key: KEY, innerMac: b.mac });
      const c = connect(VIP_TWO);
      t.close();
      expect(c.greeting.split(" ")[0]).toBe(b.name);
      expect(c.remote).toBe(`${VIP_TWO}:80`);
    }
  });

  it("GRE from a source that is not allowed, or for an inner VIP that is not declared, is dropped and reaches no server", async () => {
    const dropped = () => packets((f) => f.priority === 900);
    const start = await dropped();
    tunnels.push(encapsulateVip(inv, { vip: VIP_DENIED, hypervisor: "hv1", key: KEY, source: "disallowed" }));
    const denied = connect(VIP_DENIED, 1500);
    expect(denied.error).toBe("timeout");
    expect(await packets(toVip(VIP_DENIED))).toBe(0);
    const afterDenied = await dropped();
    expect(afterDenied).toBeGreaterThan(start);

    tunnels.push(encapsulateVip(inv, { vip: VIP_UNDECLARED, hypervisor: "hv1", key: KEY }));
    const undeclared = connect(VIP_UNDECLARED, 1500);
    expect(undeclared.error).toBe("timeout");
    expect(await dropped()).toBeGreaterThan(afterDenied);
    const conntrack = (await hv1.run(["ovs-appctl", "dpctl/dump-conntrack", `zone=${dsr.outputs.ctZone}`])).stdout;
    expect(conntrack).not.toContain(VIP_DENIED);
    expect(conntrack).not.toContain(VIP_UNDECLARED);
  });

  it("drift: a request flow deleted by hand is reported and restored alone", async () => {
    await hv1.run([
      "ovs-ofctl",
      "-O",
      "OpenFlow15",
      "del-flows",
      "--strict",
      "br-seg",
      `cookie=${dsr.outputs.cookie}/-1,table=0,priority=1000,tcp,in_port=${(await hv1.run(["ovs-vsctl", "get", "interface", dsr.outputs.gre.port, "ofport"])).stdout.trim()},tun_src=${inv.l3dsr!.underlay.address},tun_id=0x2f,nw_dst=${VIP},tp_dst=80`,
    ]);
    const read = await dsr.read();
    expect(read.inputs.vips.map((v: { address: string }) => v.address).sort()).toEqual([VIP_DENIED, VIP_TWO, VIP6].sort());
    dsr.outputs = read.props;
    await dsr.update(inputs([inv.l3dsr!.underlay.address]));
    expect(dsr.outputs.lastApply).toMatchObject({ messages: 1, operations: { "add-flow": 1 } });
    expect(connect(VIP).greeting.split(" ")[0]).toBe(vm1.name);
  });
});
