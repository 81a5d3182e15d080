import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabBackend, LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, inNamespace, loadInventory } from "../support/lab";
import { connectAndClose, openLiveConnections, times } from "../support/tcp-clients";

/**
 * Deferred NAT end to end with real TCP: the client reaches VIPs through
 * both gateways (ECMP), the gateways choose statelessly, the backends'
 * hypervisors DNAT and un-DNAT with conntrack.
 */

const VIP1 = "10.0.0.193";
const VIP2 = "10.0.0.194";
/** A UDP service on VIP2, port 53, served by the backends' UDP echo on 8080. */
const UDP_PORT = 53;
let inv: LabInventory;
const ssh: Record<string, SshSession> = {};
let pool: LabBackend[];

const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hvFlows: Record<string, ProviderDriver> = {};

const lbInputs = (vip1: LabBackend[], vip2: LabBackend[], udp: LabBackend[] = []) =>
  labLoadBalancer(inv, "traffic", [
    { address: VIP1, port: 80, protocol: "tcp", backends: vip1.map((b) => labBackend(inv, b)) },
    { address: VIP2, port: 80, protocol: "tcp", backends: vip2.map((b) => labBackend(inv, b)) },
    ...(udp.length > 0 ? [{ address: VIP2, port: UDP_PORT, protocol: "udp" as const, backends: udp.map((b) => labBackend(inv, b)) }] : []),
  ]);

/** Backend names greeting `count` fresh connections to vip:80 from the client (one after another). */
function greet(vip: string, count: number): string[] {
  const results = connectAndClose(inv.client.namespace, times(vip, 80, count), { concurrency: 1 });
  for (const r of results) {
    if (r.error) throw new Error(`connection to ${vip} failed: ${r.error}`);
    // The backend saw the client itself (no SNAT) and its own address as the destination (DNAT done before it).
    const [name, peer, local] = r.greeting.split(" ");
    const backend = pool.find((b) => b.name === name)!;
    expect(peer).toBe(`${inv.client.address}:${r.localPort}`);
    expect(local).toBe(`${backend.address}:${inv.backendPort}`);
    // The client's socket is connected to the VIP: every reply it accepted came from VIP:80.
    expect(r.remote).toBe(`${vip}:80`);
  }
  return results.map((r) => r.backend);
}

async function vipFlowPackets(gw: string): Promise<number> {
  const out = (await ssh[gw].run(["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", `cookie=${lb.outputs.cookie}/-1,tcp,nw_dst=${VIP1}`])).stdout;
  return Number(/n_packets=(\d+)/.exec(out)?.[1] ?? 0);
}

async function conntrackFor(host: string, vip: string): Promise<string[]> {
  const out = (await ssh[host].run(["ovs-appctl", "dpctl/dump-conntrack"])).stdout;
  return out.split("\n").filter((l) => l.includes(`dst=${vip}`));
}

beforeAll(async () => {
  inv = loadInventory();
  pool = inv.backends.filter((b) => b.hypervisor === "hv1" || b.hypervisor === "hv2");
  for (const h of ["gw1", "gw2", "hv1", "hv2"]) ssh[h] = await labSsh(inv, h);
  // Every hypervisor can NAT for every local backend of either VIP, before the gateways use them.
  for (const hv of ["hv1", "hv2"]) {
    hvFlows[hv] = new ProviderDriver("DsrHypervisorFlows");
    await hvFlows[hv].purge(labHypervisorFlows(inv, `traffic-${hv}`, hv, [{ address: VIP1, port: 80, backends: pool }]));
    await hvFlows[hv].create(
      labHypervisorFlows(inv, `traffic-${hv}`, hv, [
        { address: VIP1, port: 80, backends: pool },
        { address: VIP2, port: 80, backends: pool },
        { address: VIP2, port: UDP_PORT, protocol: "udp", backends: pool },
      ]),
    );
  }
});

afterAll(async () => {
  if (lb.id) await lb.delete();
  for (const d of Object.values(hvFlows)) if (d.id) await d.delete();
  for (const s of Object.values(ssh)) s.close();
});

describe("deferred NAT with real TCP", () => {
  it("answers through both gateways from the backends, with NAT state only on the hypervisors", async () => {
    const [a1, a2, b1, b2] = [pool[0], pool[1], pool[4], pool[5]]; // hv1-vm1, hv1-vm2, hv2-vm1, hv2-vm2
    await lb.purge(lbInputs([a1, a2, b1, b2], [a1, b1]));
    await lb.create(lbInputs([a1, a2, b1, b2], [a1, b1]));
    const before = { gw1: await vipFlowPackets("gw1"), gw2: await vipFlowPackets("gw2") };

    const names = greet(VIP1, 24);
    expect(new Set(names).size).toBeGreaterThan(1);
    expect(names.every((n) => [a1, a2, b1, b2].some((b) => b.name === n))).toBe(true);
    // ECMP spread the connections over both gateways.
    expect(await vipFlowPackets("gw1")).toBeGreaterThan(before.gw1);
    expect(await vipFlowPackets("gw2")).toBeGreaterThan(before.gw2);

    const held = await openLiveConnections(inv.client.namespace, VIP1, 80, 8);
    try {
      expect(held.initial.every((c) => !c.broken)).toBe(true);
      const onHv1 = held.initial.some((c) => c.backend.startsWith("hv1-"));
      const onHv2 = held.initial.some((c) => c.backend.startsWith("hv2-"));
      const hv1Entries = await conntrackFor("hv1", VIP1);
      const hv2Entries = await conntrackFor("hv2", VIP1);
      if (onHv1) expect(hv1Entries.length).toBeGreaterThan(0);
      if (onHv2) expect(hv2Entries.length).toBeGreaterThan(0);
      expect(hv1Entries.length + hv2Entries.length).toBeGreaterThan(0);
      expect(await conntrackFor("gw1", VIP1)).toEqual([]);
      expect(await conntrackFor("gw2", VIP1)).toEqual([]);
    } finally {
      held.close();
    }
  });

  it("one backend serves two VIPs correctly at the same time", async () => {
    const shared = pool[0].name;
    // The gateways hash each connection's 5-tuple, and the client's ports are its kernel's pick: with 16 connections,
    // none landed on the shared backend, one of VIP1's four, in 1% of runs ((3/4)^16). With 64: (3/4)^64, about 1e-8.
    const [c1, c2] = await Promise.all([openLiveConnections(inv.client.namespace, VIP1, 80, 64), openLiveConnections(inv.client.namespace, VIP2, 80, 64)]);
    try {
      const on1 = c1.initial.filter((c) => c.backend === shared);
      const on2 = c2.initial.filter((c) => c.backend === shared);
      expect(on1.length).toBeGreaterThan(0);
      expect(on2.length).toBeGreaterThan(0);
      const [r1, r2] = await Promise.all([c1.round(), c2.round()]);
      expect([...r1, ...r2].filter((c) => c.broken)).toEqual([]);
      // hv1 holds one conntrack entry per VIP for the shared backend.
      const hv1 = (await ssh.hv1.run(["ovs-appctl", "dpctl/dump-conntrack"])).stdout;
      for (const vip of [VIP1, VIP2]) {
        expect(hv1.split("\n").some((l) => l.includes(`dst=${vip},`) && l.includes(`reply=(src=${pool[0].address},`))).toBe(true);
      }
    } finally {
      c1.close();
      c2.close();
    }
  });

  it("UDP: datagrams to the VIP are answered by backends from the VIP, each 5-tuple sticking to one backend", async () => {
    const udpBackends = [pool[0], pool[1], pool[4]];
    await lb.update(lbInputs([pool[0], pool[1], pool[4], pool[5]], [pool[0], pool[4]], udpBackends));
    // 30 source ports, each sending 3 datagrams: every answer must come from VIP2:53.
    const program = `
      const dgram = require("node:dgram");
      (async () => {
        const out = [];
        for (let i = 0; i < 30; i++) {
          const s = dgram.createSocket("udp4");
          await new Promise((r) => s.bind(20000 + i, r));
          const answers = [];
          for (let k = 0; k < 3; k++) {
            answers.push(await new Promise((resolve) => {
              const t = setTimeout(() => resolve({ error: "timeout" }), 2000);
              s.once("message", (m, from) => { clearTimeout(t); resolve({ text: String(m), from: from.address + ":" + from.port }); });
              s.send("q" + k, ${UDP_PORT}, "${VIP2}");
            }));
          }
          s.close();
          out.push(answers);
        }
        console.log(JSON.stringify(out));
      })();`;
    const results: { text?: string; from?: string; error?: string }[][] = JSON.parse(inNamespace(inv.client.namespace, [process.execPath, "-e", program]));
    const names = new Set<string>();
    results.forEach((answers, i) => {
      for (const a of answers) {
        expect(a.error).toBeUndefined();
        expect(a.from).toBe(`${VIP2}:${UDP_PORT}`);
        // The backend saw the client's own address and port (DNAT only).
        expect(a.text!.split(" ")[1]).toBe(`${inv.client.address}:${20000 + i}`);
      }
      const backends = new Set(answers.map((a) => a.text!.split(" ")[0]));
      expect(backends.size).toBe(1);
      names.add([...backends][0]);
    });
    expect([...names].every((n) => udpBackends.some((b) => b.name === n))).toBe(true);
    expect(names.size).toBeGreaterThan(1);
    const hv = (await ssh.hv1.run(["ovs-appctl", "dpctl/dump-conntrack"])).stdout + (await ssh.hv2.run(["ovs-appctl", "dpctl/dump-conntrack"])).stdout;
    expect(hv).toMatch(
      new RegExp(`^udp,orig=\\(src=${inv.client.address.replace(/\./g, "\\.")},dst=${VIP2.replace(/\./g, "\\.")},sport=200\\d\\d,dport=${UDP_PORT}\\)`, "m"),
    );
  });

  it("live connections: adding a backend breaks exactly those the trace moves to it; removing an idle one breaks none", async () => {
    const four = [pool[0], pool[1], pool[4], pool[5]];
    const fifth = pool[6]; // hv2-vm3
    await lb.update(lbInputs(four, [pool[0], pool[4]]));
    const live = await openLiveConnections(inv.client.namespace, VIP1, 80, 60);
    try {
      expect(live.initial.filter((c) => c.broken)).toEqual([]);
      expect((await live.round()).filter((c) => c.broken)).toEqual([]);

      const traceAll = async () => {
        const ofport = Number((await ssh.gw1.run(["ovs-vsctl", "get", "interface", "seg0", "ofport"])).stdout.trim());
        return traceBuckets(
          ssh.gw1,
          "br-seg",
          live.initial.map((c) => ({
            protocol: "tcp" as const,
            in_port: ofport,
            nw_src: inv.client.address,
            nw_dst: VIP1,
            tp_src: c.port,
            tp_dst: 80,
          })),
        );
      };
      const before = await traceAll();

      // Add a fifth backend while every connection keeps exchanging data.
      await lb.update(lbInputs([...four, fifth], [pool[0], pool[4]]));
      const after = await traceAll();
      const fifthBucket = lb.outputs.bucketIds[`tcp:${VIP1}:80`][`${fifth.address}:${inv.backendPort}#0`];
      expect(after.filter((b, i) => b !== before[i]).every((b) => b === fifthBucket)).toBe(true);
      // A connection moved to the new backend on another hypervisor meets no conntrack entry there and breaks; one moved
      // from a backend of the new one's own hypervisor meets its entry, which still translates it to its backend: it lives.
      const moved = live.initial.filter((_, i) => after[i] !== before[i]);
      const hypervisorOf = (name: string) => pool.find((b) => b.name === name)!.hypervisor;
      const predicted = moved
        .filter((c) => hypervisorOf(c.backend) !== fifth.hypervisor)
        .map((c) => c.port)
        .sort();
      const kept = moved.filter((c) => hypervisorOf(c.backend) === fifth.hypervisor).map((c) => c.port);
      await live.round();
      const afterAdd = await live.round();
      const broken = afterAdd
        .filter((c) => c.broken)
        .map((c) => c.port)
        .sort();
      expect(broken).toEqual(predicted);
      expect(afterAdd.filter((c) => kept.includes(c.port) && c.broken)).toEqual([]);
      console.log(
        `add: ${moved.length} of ${live.initial.length} live connections moved to the new backend; ${broken.length} broke (from the other hypervisor, as the trace predicted), ${kept.length} from its own hypervisor kept their backend`,
      );

      // Remove the fifth backend again: no surviving connection is on it.
      await lb.update(lbInputs(four, [pool[0], pool[4]]));
      await live.round();
      const afterRemove = await live.round();
      expect(
        afterRemove
          .filter((c) => c.broken)
          .map((c) => c.port)
          .sort(),
      ).toEqual(broken);
      console.log(`remove: ${afterRemove.filter((c) => !c.broken).length} surviving connections, none broken`);
    } finally {
      live.close();
    }
  });
});
