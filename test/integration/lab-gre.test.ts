import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SshSession } from "../../provider/transport/ssh";
import { encapsulateVip, l3dsrCounters, l3dsrDevice, removeVip, type L3dsrTunnel } from "../lab/l3dsr";
import { L3DSR, type LabBackend, type LabInventory, type LabL3dsr } from "../lab/topology";
import { inNamespace, labSsh, loadInventory, lockLab } from "../support/lab";

/**
 * The lab's GRE plumbing for transparent L3 DSR, end to end, with no ovslb
 * code: the external L3DSR load balancer (namespace ovslb-l3dsr, no OVS)
 * tunnels a VIP to hv1's underlay address; on hv1's br-seg the test's own
 * ovs-vsctl/ovs-ofctl commands add a flow-based GRE port (remote_ip=flow,
 * key=flow) and the flows DsrHypervisorFlows plans (request: ct(commit,
 * zone, nat(dst=SERVER:8080)), eth_dst = the server's MAC, output to it;
 * reply: -trk from the server's port -> ct(zone, nat, table=T) -> back to
 * table 0). A real TCP connection from the lab's client to VIP:80 is
 * answered by hv1-vm1, which has no VIP, no tunnel and no special sysctl;
 * the reply comes straight back over the segment, never through l3dsr.
 *
 * What others' tests may do on hv1 at the same time is left alone: every
 * flow here has this test's cookie, the reply flow matches only this test's
 * client ports (30208-30223, below the kernel's ephemeral range), and a
 * flow-based GRE port someone else already has on br-seg is used, not
 * replaced (OVS allows one such port per datapath). Tests that add one take
 * lockLab("hv1-gre") as this one does.
 */

const VIP = "10.0.0.177"; // tunnelled from the l3dsr's allowed address
const VIP_DENIED = "10.0.0.178"; // tunnelled from its disallowed address
const VPORT = 80;
const ZONE = 3177;
const TABLE = 62;
const KEY = 47;
const COOKIE = "0x6c3d9e0e00000001";
const GRE_PORT = "l3dsr-gre";
const CLIENT_PORT_BASE = 30208; // 0x7600: the reply flow matches tp_dst=0x7600/0xfff0
const PRIORITY = { keyed: 1200, allow: 1100, denied: 1060, drop: 1050 } as const;

let inv: LabInventory;
let l3: LabL3dsr;
let hv1: SshSession;
let vm1: LabBackend;
let greOfport: number;
let vm1Ofport: number;
let ownPort = false;
let unlock: (() => void) | undefined;
const tunnels: L3dsrTunnel[] = [];

async function on(argv: string[], stdin?: string): Promise<string> {
  const r = await hv1.run(argv, { stdin });
  if (r.exitCode !== 0) throw new Error(`hv1: ${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const ofctl = (...args: string[]) => on(["ovs-ofctl", "-O", "OpenFlow15", ...args]);
const vsctl = (...args: string[]) => on(["ovs-vsctl", ...args]);

/**
 * n_packets of this test's flows: the request flows of `vip` by their
 * priority's name, and the reply and forward flows. Datapath flows report
 * their packets to OpenFlow counters in revalidator passes: wait for one.
 */
async function counts(vip: string): Promise<Record<string, number>> {
  await on(["ovs-appctl", "revalidator/wait"]);
  const dump = await ofctl("--no-names", "dump-flows", "br-seg", `cookie=${COOKIE}/-1`);
  const out: Record<string, number> = { reply: 0, forward: 0 };
  for (const line of dump.split("\n").filter((l) => l.includes("actions="))) {
    const field = (name: string) => new RegExp(`[ ,]${name}=([^, ]+)`).exec(line)?.[1];
    const n = Number(field("n_packets"));
    if (field("nw_dst") === vip) {
      const name = Object.entries(PRIORITY).find(([, p]) => p === Number(field("priority")))?.[0];
      if (name) out[name] = (out[name] ?? 0) + n;
    } else if (Number(field("table") ?? 0) === TABLE) out.forward += n;
    else if (Number(field("in_port")) === vm1Ofport) out.reply += n;
  }
  return out;
}

async function conntrack(): Promise<string[]> {
  return (await on(["ovs-appctl", "dpctl/dump-conntrack", `zone=${ZONE}`])).trim().split("\n").filter(Boolean);
}

/**
 * One TCP connection from the lab client, from a fixed local port: reads
 * the greeting, sends a `lineLength`-byte line (full-size segments through
 * the tunnel) and reads its echo, then resets (no TIME_WAIT on the port).
 */
const CLIENT = String.raw`
const net = require("node:net");
const [host, port, localPort, len, timeout] = process.argv.slice(1);
const out = { greeting: "", remote: "", echo: "", error: "" };
const s = net.connect({ host, port: Number(port), localPort: Number(localPort) });
let finished = false;
const done = (e) => {
  if (finished) return;
  finished = true;
  if (e) out.error = e;
  console.log(JSON.stringify(out));
  s.resetAndDestroy();
  setTimeout(() => process.exit(0), 50);
};
setTimeout(() => done("timeout"), Number(timeout));
let buf = "", phase = 0;
s.on("connect", () => (out.remote = s.remoteAddress + ":" + s.remotePort));
s.on("data", (d) => {
  buf += d;
  const nl = buf.indexOf("\n");
  if (nl < 0) return;
  if (phase === 0) {
    out.greeting = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    phase = 1;
    s.write("x".repeat(Number(len)) + "\n");
    if (buf.indexOf("\n") < 0) return;
  }
  out.echo = buf.slice(0, buf.indexOf("\n"));
  done();
});
s.on("error", (e) => done("error:" + e.code));
s.on("close", () => done("closed"));
`;

let nextClientPort = CLIENT_PORT_BASE + Math.floor(Math.random() * 16);
function connect(vip: string, lineLength = 5000, timeoutMs = 5000) {
  const localPort = nextClientPort;
  nextClientPort = CLIENT_PORT_BASE + ((nextClientPort - CLIENT_PORT_BASE + 1) % 16);
  const out = execFileSync(
    "ip",
    ["netns", "exec", inv.client.namespace, process.execPath, "-e", CLIENT, vip, String(VPORT), String(localPort), String(lineLength), String(timeoutMs)],
    { encoding: "utf8", timeout: timeoutMs + 5000 },
  );
  return { localPort, line: "x".repeat(lineLength), ...(JSON.parse(out.trim()) as { greeting: string; remote: string; echo: string; error: string }) };
}

function requestFlow(priority: number, vip: string, tunSrc: string, extra = ""): string {
  return (
    `cookie=${COOKIE},table=0,priority=${priority},tcp,in_port=${greOfport},tun_src=${tunSrc}${extra},nw_dst=${vip},tp_dst=${VPORT},` +
    `actions=ct(commit,zone=${ZONE},nat(dst=${vm1.address}:${inv.backendPort})),set_field:${vm1.mac}->eth_dst,output:${vm1Ofport}`
  );
}

beforeAll(async () => {
  inv = loadInventory();
  if (!inv.l3dsr) throw new Error('the lab predates its l3dsr namespace: run "npm run lab -- down && npm run lab -- up"');
  l3 = inv.l3dsr;
  vm1 = inv.backends.find((b) => b.name === "hv1-vm1")!;
  unlock = await lockLab("hv1-gre");
  hv1 = await labSsh(inv, "hv1");
  for (const vip of [VIP, VIP_DENIED]) removeVip(inv, vip); // whatever a failed run left

  // One flow-based GRE port per datapath: use one that is there, else add this test's.
  const existing = (await vsctl("--bare", "--columns=name", "find", "Interface", "type=gre", "options:remote_ip=flow")).trim().split(/\s+/).filter(Boolean);
  let port = existing[0];
  if (port && (await vsctl("port-to-br", port)).trim() !== "br-seg") throw new Error(`hv1 has a flow-based GRE port ${port} on another bridge`);
  if (!port) {
    await vsctl("add-port", "br-seg", GRE_PORT, "--", "set", "Interface", GRE_PORT, "type=gre", "options:remote_ip=flow", "options:key=flow");
    port = GRE_PORT;
    ownPort = true;
  }
  greOfport = Number((await vsctl("get", "Interface", port, "ofport")).trim());
  vm1Ofport = Number((await vsctl("get", "Interface", vm1.port, "ofport")).trim());
  expect(greOfport).toBeGreaterThan(0);

  const flows = [
    requestFlow(PRIORITY.allow, VIP, l3.underlay.address),
    requestFlow(PRIORITY.keyed, VIP, l3.underlay.address, `,tun_id=${KEY}`),
    requestFlow(PRIORITY.allow, VIP_DENIED, l3.underlay.address),
    `cookie=${COOKIE},table=0,priority=${PRIORITY.denied},ip,in_port=${greOfport},tun_src=${l3.underlay.disallowedAddress},nw_dst=${VIP_DENIED},actions=drop`,
    ...[VIP, VIP_DENIED].map((v) => `cookie=${COOKIE},table=0,priority=${PRIORITY.drop},ip,in_port=${greOfport},nw_dst=${v},actions=drop`),
    // The reply, as DsrHypervisorFlows plans it, narrowed to this test's client ports.
    `cookie=${COOKIE},table=0,priority=${PRIORITY.allow},ct_state=-trk,tcp,in_port=${vm1Ofport},nw_src=${vm1.address},tp_src=${inv.backendPort},` +
      `nw_dst=${inv.client.address},tp_dst=0x${CLIENT_PORT_BASE.toString(16)}/0xfff0,actions=ct(zone=${ZONE},nat,table=${TABLE})`,
    `cookie=${COOKIE},table=${TABLE},priority=${PRIORITY.allow},ct_zone=${ZONE},actions=resubmit(,0)`,
  ];
  await on(["ovs-ofctl", "-O", "OpenFlow15", "add-flows", "br-seg", "-"], `${flows.join("\n")}\n`);
});

afterAll(async () => {
  for (const vip of [VIP, VIP_DENIED]) {
    try {
      if (inv?.l3dsr) removeVip(inv, vip);
    } catch {
      /* reported by the tests */
    }
  }
  if (hv1) {
    await hv1.run(["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=${COOKIE}/-1`]);
    if (ownPort) await hv1.run(["ovs-vsctl", "--if-exists", "del-port", "br-seg", GRE_PORT]);
    await hv1.run(["ovs-appctl", "dpctl/flush-conntrack", `zone=${ZONE}`]);
    hv1.close();
  }
  unlock?.();
});

describe("lab: the external L3DSR load balancer", () => {
  it("is a plain namespace on the segment and its own underlay, and the client routes its VIP range to it", () => {
    expect(l3).toMatchObject({
      namespace: L3DSR.namespace,
      segment: { port: "eth0", address: "10.0.0.4", mac: "02:00:0a:00:00:04" },
      underlay: { port: "ul0", address: "172.16.41.2", router: "172.16.41.1", disallowedAddress: "172.16.41.3" },
      vipRange: "10.0.0.176/28",
    });
    // Its two legs and nothing else: no OVS (no ovs-netdev, no bridges), no tunnel device until a test adds one.
    const links = [...inNamespace(l3.namespace, ["ip", "-o", "link", "show"]).matchAll(/^\d+: ([^:@]+)/gm)].map((m) => m[1]);
    expect(links.filter((l) => !l.startsWith("l3g")).sort()).toEqual(["eth0", "lo", "ul0"]);
    expect(inNamespace(inv.client.namespace, ["ip", "route", "show", l3.vipRange])).toContain(`via ${l3.segment.address} dev eth0`);
    expect(inNamespace(inv.client.namespace, ["ip", "route", "get", VIP])).toContain(`via ${l3.segment.address}`);
    // It reaches every hypervisor's underlay address from both of its own.
    for (const hv of ["hv1", "hv2", "hv3"]) {
      for (const src of [l3.underlay.address, l3.underlay.disallowedAddress]) {
        inNamespace(l3.namespace, ["ping", "-c1", "-W2", "-I", src, inv.hosts[hv].underlay!.address]);
      }
    }
  });

  it("the server has no VIP, no tunnel interface and no special sysctl", () => {
    const addresses = inNamespace(vm1.namespace, ["ip", "-4", "-o", "addr", "show"]);
    expect(addresses).not.toContain(VIP);
    expect([...addresses.matchAll(/inet (\S+)/g)].map((m) => m[1]).sort()).toEqual(["10.0.0.101/24", "127.0.0.1/8"].sort());
    const links = [...inNamespace(vm1.namespace, ["ip", "-o", "link", "show"]).matchAll(/^\d+: ([^:@]+)/gm)].map((m) => m[1]);
    expect(links.sort()).toEqual(["eth0", "lo"]);
    for (const key of ["all.arp_ignore", "all.arp_announce", "eth0.arp_ignore", "eth0.arp_announce", "lo.arp_ignore"]) {
      expect(inNamespace(vm1.namespace, ["sysctl", "-n", `net.ipv4.conf.${key}`]).trim(), key).toBe("0");
    }
  });
});

describe("lab: GRE from the L3DSR namespace to hv1, decapsulated by a flow-based GRE port", () => {
  it("a TCP connection to the VIP is answered by hv1-vm1 with source = VIP, and the reply bypasses l3dsr", async () => {
    const tunnel = encapsulateVip(inv, { vip: VIP, hypervisor: "hv1" });
    tunnels.push(tunnel);
    expect(tunnel).toMatchObject({
      device: l3dsrDevice(VIP),
      local: l3.underlay.address,
      remote: inv.hosts.hv1.underlay!.address,
      innerMac: inv.hosts.hv1.segment!.mac,
    });
    expect(inNamespace(l3.namespace, ["ip", "route", "get", VIP])).toContain(`dev ${tunnel.device}`);

    const flowsBefore = await counts(VIP);
    const l3Before = l3dsrCounters(inv);
    const sentBefore = tunnel.sent();
    const c = connect(VIP);
    const l3After = l3dsrCounters(inv);
    const sentAfter = tunnel.sent();
    const flowsAfter = await counts(VIP);

    expect(c.error).toBe("");
    // The server saw the client itself, on its own address: no VIP there.
    expect(c.greeting).toBe(`${vm1.name} ${inv.client.address}:${c.localPort} ${vm1.address}:${inv.backendPort}`);
    // The client's socket accepted every reply from the VIP.
    expect(c.remote).toBe(`${VIP}:${VPORT}`);
    expect(c.echo).toBe(`${vm1.name} ${c.line}`);
    // Requests went through the keyless allow flow, replies through the un-NAT.
    expect(flowsAfter.allow - flowsBefore.allow).toBeGreaterThan(0);
    expect(flowsAfter.keyed - flowsBefore.keyed).toBe(0);
    expect(flowsAfter.reply - flowsBefore.reply).toBeGreaterThan(0);
    expect(flowsAfter.forward - flowsBefore.forward).toBe(flowsAfter.reply - flowsBefore.reply);
    // l3dsr forwarded the requests, all into the tunnel, and sent nothing back onto the segment.
    const forwarded = l3After.forwarded - l3Before.forwarded;
    expect(forwarded).toBeGreaterThan(0);
    expect(sentAfter.packets - sentBefore.packets).toBe(forwarded);
    expect(l3After.segment.tx.packets - l3Before.segment.tx.packets).toBe(0);
    // Requests only: with a 5000-byte line the client sent 4 segments of data plus handshake; the 4 reply segments did not come here.
    expect(forwarded).toBeLessThan(flowsAfter.allow - flowsBefore.allow + 3);
  });

  it("with a GRE key, the key arrives as tun_id, and the inner frame's dl_dst does not matter", async () => {
    const tunnel = encapsulateVip(inv, { vip: VIP, hypervisor: "hv1", key: KEY, innerMac: "02:00:00:00:00:99" });
    tunnels.push(tunnel);
    const before = await counts(VIP);
    const c = connect(VIP);
    const after = await counts(VIP);
    expect(c.error).toBe("");
    expect(c.greeting.split(" ")[0]).toBe(vm1.name);
    expect(c.remote).toBe(`${VIP}:${VPORT}`);
    expect(after.keyed - before.keyed).toBeGreaterThan(0);
    expect(after.allow - before.allow).toBe(0);
    const entries = await conntrack();
    expect(entries.some((e) => e.includes(`dst=${VIP}`) && e.includes(`sport=${c.localPort}`) && e.includes(`src=${vm1.address}`))).toBe(true);
  });

  it("GRE from the disallowed source arrives with that tun_src, hits the drop and reaches no server", async () => {
    const tunnel = encapsulateVip(inv, { vip: VIP_DENIED, hypervisor: "hv1", source: "disallowed", innerMac: vm1.mac });
    tunnels.push(tunnel);
    expect(tunnel.local).toBe(l3.underlay.disallowedAddress);
    const before = await counts(VIP_DENIED);
    const sentBefore = tunnel.sent();
    const c = connect(VIP_DENIED, 10, 2000);
    const after = await counts(VIP_DENIED);
    expect(c.error).toBe("timeout");
    expect(c.greeting).toBe("");
    expect(tunnel.sent().packets - sentBefore.packets).toBeGreaterThan(0);
    expect(after.denied - before.denied).toBeGreaterThan(0);
    expect(after.allow - before.allow).toBe(0);
    expect((await conntrack()).some((e) => e.includes(`dst=${VIP_DENIED}`))).toBe(false);
  });

  it("closing a tunnel removes its encapsulator, device and route", () => {
    for (const t of tunnels.splice(0)) t.close();
    for (const vip of [VIP, VIP_DENIED]) {
      const device = l3dsrDevice(vip);
      expect(inNamespace(l3.namespace, ["ip", "-o", "link", "show"])).not.toContain(device);
      expect(inNamespace(l3.namespace, ["ip", "route", "show", `${vip}/32`]).trim()).toBe("");
    }
    // Back to the plain route: no tunnel, so nothing reaches hv1 any more.
    expect(inNamespace(l3.namespace, ["ip", "route", "get", VIP])).not.toContain("l3g");
  });
});
