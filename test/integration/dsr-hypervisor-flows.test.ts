import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asLists, check, create, read, remove, update } from "../../provider/handlers";
import { observeBundles } from "../../provider/resources/dsr-hypervisor-flows/handler";
import { cookieOf, dsrId } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { parseFlows, type DumpedFlow } from "../../provider/openflow";
import { type BundleSent } from "../../provider/transport/openflow-bridge";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabBackend, LabInventory } from "../lab/topology";
import { labSsh, inNamespace, loadInventory, sshTo } from "../support/lab";
import { TcpClients } from "../support/tcp-clients";

/**
 * DsrHypervisorFlows against lab host hv1, with real TCP from the client
 * namespace. No gateway is involved: the client's neighbour entry for the VIP
 * is pinned to a backend's MAC, so its frames reach hv1 exactly as a gateway
 * in mac mode would send them (eth.dst = backend's MAC, ip.dst = VIP).
 */

type Props = Record<string, any>;
const KIND = "DsrHypervisorFlows";
/** A read, its inputs as lists (the engine records them keyed by identity). */
const readLists = async (id: string, outputs: Record<string, unknown>) => {
  const r = await read(KIND, id, outputs);
  return { ...r, inputs: asLists(KIND, r.inputs) };
};
const VIP_A = "10.0.0.220";
const VIP_B = "10.0.0.221";
const FOREIGN = 0x5eed0000000000f1n;

let inv: LabInventory;
let hv1: SshSession;
let vm1: LabBackend;
let vm2: LabBackend;
let program: Props;
let id: string;
let outputs: Props;
const sent: BundleSent[] = [];
let stopObserving: () => void;

async function on(argv: string[]): Promise<string> {
  const r = await hv1.run(argv);
  if (r.exitCode !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
}
const ofctl = (...args: string[]) => on(["ovs-ofctl", "-O", "OpenFlow15", "--no-names", ...args]);
const dump = async (): Promise<DumpedFlow[]> => parseFlows(await ofctl("dump-flows", "br-seg"));
const cookieHex = () => `0x${cookieOf(id).toString(16)}`;
const owned = async () => (await dump()).filter((f) => f.cookie === cookieOf(id));
const conntrack = async (zone: number) => (await on(["ovs-appctl", "dpctl/dump-conntrack", `zone=${zone}`])).trim().split("\n").filter(Boolean);

function pin(vip: string, mac: string) {
  inNamespace(inv.client.namespace, ["ip", "neigh", "replace", vip, "lladdr", mac, "dev", "eth0", "nud", "permanent"]);
}
function unpin(vip: string) {
  try {
    inNamespace(inv.client.namespace, ["ip", "neigh", "del", vip, "dev", "eth0"]);
  } catch {
    // not pinned
  }
}

interface Opened {
  greetings: Array<{ greeting: string; peer: string }>;
  exchange(): Promise<string[]>;
}

/**
 * Opens every target at once from a namespace and keeps the connections
 * open until exchange(), which sends "ping i" on connection i, returns the
 * answers and closes them all.
 */
async function openFrom(ns: string, targets: string[]): Promise<Opened> {
  const clients = await TcpClients.open(ns, targets, { concurrency: targets.length, greetingTimeoutMs: 15_000 });
  const failed = clients.connections.find((c) => c.error);
  if (failed) {
    clients.close();
    throw new Error(`client in ${ns}: ${failed.error}`);
  }
  return {
    greetings: clients.connections.map((c) => ({ greeting: c.greeting, peer: c.remote })),
    async exchange() {
      try {
        return (await clients.exchange((i) => `ping ${i}`, 15_000)) as string[];
      } finally {
        clients.close();
      }
    },
  };
}

beforeAll(async () => {
  inv = loadInventory();
  hv1 = await labSsh(inv, "hv1");
  vm1 = inv.backends.find((b) => b.name === "hv1-vm1")!;
  vm2 = inv.backends.find((b) => b.name === "hv1-vm2")!;
  const h = inv.hosts.hv1;
  const backend = (b: LabBackend) => ({ address: b.address, port: inv.backendPort, mac: b.mac, bridgePort: b.port });
  program = {
    name: "dsr-it",
    host: { connection: sshTo(inv, "hv1"), ovsRundir: h.ovsRundir },
    bridge: "br-seg",
    vips: [
      { address: VIP_A, port: 80, backends: [backend(vm1), backend(vm2)] },
      // vm1 serves both VIPs, on another VIP port.
      { address: VIP_B, port: 81, backends: [backend(vm1)] },
    ],
  };
  id = dsrId(program as any);
  stopObserving = observeBundles((_host, s) => sent.push(s));
});

afterAll(async () => {
  stopObserving?.();
  unpin(VIP_A);
  unpin(VIP_B);
  if (hv1) {
    // Whatever a failed test left: only flows with this test's cookies, and its zone's conntrack entries.
    await hv1.run(["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=${cookieHex()}/-1`]);
    await hv1.run(["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=0x${FOREIGN.toString(16)}/-1`]);
    if (outputs?.ctZone) await hv1.run(["ovs-appctl", "dpctl/flush-conntrack", `zone=${outputs.ctZone}`]);
    hv1.close();
  }
});

describe("DsrHypervisorFlows on hv1 (mac mode)", () => {
  it("check fills defaults; create installs the flows in one bundle, above the bridge's NORMAL flow", async () => {
    const { inputs, failures } = await check(KIND, {}, program);
    expect(failures).toEqual([]);
    program = asLists(KIND, inputs);
    sent.length = 0;
    const created = await create(KIND, program);
    outputs = created.outs;
    expect(created.id).toBe(`dsr-hypervisor-flows/${inv.hosts.hv1.address}/br-seg/dsr-it`);
    expect(outputs.cookie).toBe(cookieHex());
    expect(outputs.ctZone).toBeGreaterThan(0);
    expect(outputs.ofports).toEqual({ vm1: expect.any(Number), vm2: expect.any(Number) });
    expect(sent.length).toBe(1);
    expect(sent[0].lines.length).toBe(8); // 3 (VIP, backend) requests + 2 backend deliveries + 2 backend replies + 1 zone forward
    const mine = await owned();
    expect(mine.length).toBe(8);
    expect(mine.every((f) => f.priority > 0)).toBe(true);
    const normal = (await dump()).filter((f) => f.cookie === 0n && f.priority === 0);
    expect(normal.map((f) => f.actions)).toEqual([[{ type: "other", text: "NORMAL" }]]);
  });

  it("a request for the VIP, addressed to a backend's MAC, is answered by that backend with source = VIP; conntrack is on the hypervisor", async () => {
    pin(VIP_A, vm2.mac);
    const c = await openFrom(inv.client.namespace, [`${VIP_A}:80`]);
    // The client sees the VIP as its peer; the backend sees the client and its own address.
    expect(c.greetings[0].peer).toBe(`${VIP_A}:80`);
    const [name, peer, local] = c.greetings[0].greeting.split(" ");
    expect(name).toBe("hv1-vm2");
    expect(peer).toMatch(new RegExp(`^(::ffff:)?${inv.client.address.replace(/\./g, "\\.")}:\\d+$`));
    expect(local).toMatch(/10\.0\.0\.102:8080$/);
    const clientPort = peer.split(":").at(-1);
    const entries = await conntrack(outputs.ctZone);
    const entry = entries.find((e) => e.includes(`sport=${clientPort},dport=80`));
    expect(entry).toMatch(
      new RegExp(
        `orig=\\(src=10\\.0\\.0\\.2,dst=${VIP_A},sport=${clientPort},dport=80\\),reply=\\(src=10\\.0\\.0\\.102,dst=10\\.0\\.0\\.2,sport=8080,dport=${clientPort}\\),zone=${outputs.ctZone}`,
      ),
    );
    expect(await c.exchange()).toEqual(["hv1-vm2 ping 0"]);
  });

  it("a backend in two VIPs answers both, concurrently, each reply un-DNATed to its own VIP", async () => {
    pin(VIP_A, vm1.mac);
    pin(VIP_B, vm1.mac);
    const c = await openFrom(inv.client.namespace, [`${VIP_A}:80`, `${VIP_B}:81`, `${VIP_A}:80`, `${VIP_B}:81`]);
    expect(c.greetings.map((g) => g.peer)).toEqual([`${VIP_A}:80`, `${VIP_B}:81`, `${VIP_A}:80`, `${VIP_B}:81`]);
    expect(c.greetings.every((g) => g.greeting.startsWith("hv1-vm1 ") && g.greeting.endsWith("10.0.0.101:8080"))).toBe(true);
    const entries = await conntrack(outputs.ctZone);
    for (const g of c.greetings) {
      const port = g.greeting.split(" ")[1].split(":").at(-1);
      const [vip, vport] = g.peer.split(":");
      expect(entries.some((e) => e.includes(`dst=${vip},sport=${port},dport=${vport}),reply=(src=10.0.0.101,`))).toBe(true);
    }
    expect(await c.exchange()).toEqual(["hv1-vm1 ping 0", "hv1-vm1 ping 1", "hv1-vm1 ping 2", "hv1-vm1 ping 3"]);
  });

  it("other traffic keeps working: a direct connection to a backend, and a connection the backend opens itself", async () => {
    const direct = await openFrom(inv.client.namespace, [`${vm1.address}:8080`]);
    expect(direct.greetings[0].peer).toBe(`${vm1.address}:8080`);
    expect(direct.greetings[0].greeting).toMatch(/^hv1-vm1 /);
    expect(await direct.exchange()).toEqual(["hv1-vm1 ping 0"]);
    // vm1 opens a connection to a backend on hv2, through hv1's br-seg.
    const hv2vm1 = inv.backends.find((b) => b.name === "hv2-vm1")!;
    const outbound = await openFrom(vm1.namespace, [`${hv2vm1.address}:8080`, `${vm2.address}:8080`]);
    expect(outbound.greetings.map((g) => g.greeting.split(" ")[0])).toEqual(["hv2-vm1", "hv1-vm2"]);
    expect(outbound.greetings.every((g) => g.greeting.split(" ")[1].includes(vm1.address))).toBe(true);
    expect(await outbound.exchange()).toEqual(["hv2-vm1 ping 0", "hv1-vm2 ping 1"]);
  });

  it("read reports the host as declared, then a flow deleted by hand as that VIP missing", async () => {
    const same = await readLists(id, outputs);
    expect(same.inputs).toEqual(program);
    await ofctl("del-flows", "--strict", "br-seg", `priority=1000,cookie=${cookieHex()}/-1,tcp,dl_dst=${vm1.mac},nw_dst=${VIP_B},tp_dst=81`);
    const drifted = await readLists(id, outputs);
    const actual = drifted.inputs as Props;
    expect(actual.vips.map((v: Props) => v.address)).toEqual([VIP_A]);
    expect(actual.vips[0]).toEqual(program.vips[0]);
    outputs = drifted.props;
  });

  it("update restores exactly that flow, in one bundle of one line, leaving every other flow untouched", async () => {
    const before = await owned();
    sent.length = 0;
    const updated = await update(KIND, id, outputs, program);
    outputs = updated.outs;
    expect(outputs.lastApply).toEqual({ messages: 1, bytes: expect.any(Number), operations: { "add-flow": 1 } });
    expect(sent.length).toBe(1);
    expect(sent[0].lines).toEqual([
      `flow add table=0,priority=1000,cookie=${cookieHex()},tcp,dl_dst=${vm1.mac},nw_dst=${VIP_B},tp_dst=81,actions=ct(commit,table=62,zone=${outputs.ctZone},nat(dst=${vm1.address}:8080))`,
    ]);
    // The flows already there kept their counters (they were not re-added).
    const after = await owned();
    for (const f of before) {
      const now = after.find((a) => a.table === f.table && JSON.stringify(a.match) === JSON.stringify(f.match))!;
      expect(now.nPackets).toBeGreaterThanOrEqual(f.nPackets);
    }
    expect(after.some((f) => f.nPackets > 0n)).toBe(true);
    expect((await readLists(id, outputs)).inputs).toEqual(program);
    // Converged: a second update sends nothing.
    sent.length = 0;
    await update(KIND, id, outputs, program);
    expect(sent).toEqual([]);
  });

  it("a membership change sends only its difference; the ct zone stays (sticky)", async () => {
    const zone = outputs.ctZone;
    const fewer = structuredClone(program);
    fewer.vips[0].backends = fewer.vips[0].backends.filter((b: Props) => b.bridgePort !== "vm2");
    sent.length = 0;
    const updated = await update(KIND, id, outputs, fewer);
    expect(updated.outs.ctZone).toBe(zone);
    expect(sent[0].lines).toEqual([
      expect.stringMatching(new RegExp(`^flow delete_strict .*tcp,dl_dst=${vm2.mac},nw_dst=${VIP_A},tp_dst=80$`)),
      expect.stringMatching(new RegExp(`^flow delete_strict .*tcp,in_port=${outputs.ofports.vm2},ct_state=-trk,nw_src=${vm2.address},tp_src=8080$`)),
      expect.stringMatching(new RegExp(`^flow delete_strict table=62,.*tcp,ct_zone=${zone},nw_dst=${vm2.address},tp_dst=8080$`)),
    ]);
    outputs = (await update(KIND, id, updated.outs, program)).outs;
    expect(outputs.ctZone).toBe(zone);
    expect((await owned()).length).toBe(8);
  });

  it("refuses a zone others use and a flow another owner holds, and changes nothing", async () => {
    const other = { ...structuredClone(program), name: "dsr-it-other", vips: [program.vips[1]] };
    const otherId = dsrId(other as any);
    const mineBefore = await owned();
    // Someone else's flow using conntrack zone 4321.
    await ofctl("add-flow", "br-seg", `table=60,priority=1000,cookie=0x${FOREIGN.toString(16)},ct_zone=4321,actions=drop`);
    await expect(create(KIND, { ...other, zone: 4321 })).rejects.toThrow(/zone: conntrack zone 4321 is already used by flows ovslb does not own/);
    // VIP_B -> vm1 is already this test's resource's flow: a second owner may not take it over.
    await expect(create(KIND, other)).rejects.toThrow(/already matches .*nw_dst=10\.0\.0\.221.*; refusing to replace it/);
    expect((await dump()).filter((f) => f.cookie === cookieOf(otherId))).toEqual([]);
    expect((await owned()).map((f) => f.actions)).toEqual(mineBefore.map((f) => f.actions));
  });

  it("delete removes only its own flows, leaving NORMAL and others' flows; it is idempotent and read then reports it gone", async () => {
    const foreignBefore = (await dump()).filter((f) => f.cookie === FOREIGN);
    expect(foreignBefore.length).toBe(1);
    // A connection NATed in the zone just before the delete: its entry is still in the table.
    pin(VIP_A, vm1.mac);
    expect(await (await openFrom(inv.client.namespace, [`${VIP_A}:80`])).exchange()).toEqual(["hv1-vm1 ping 0"]);
    expect((await conntrack(outputs.ctZone)).length).toBeGreaterThan(0);
    sent.length = 0;
    await remove(KIND, id, outputs);
    // Its NAT state went with the flows.
    expect(await conntrack(outputs.ctZone)).toEqual([]);
    expect(sent.map((s) => s.lines)).toEqual([[`flow delete cookie=${cookieHex()}/-1`]]);
    const left = await dump();
    expect(left.filter((f) => f.cookie === cookieOf(id))).toEqual([]);
    expect(left.filter((f) => f.cookie === FOREIGN).length).toBe(1);
    expect(left.filter((f) => f.cookie === 0n && f.priority === 0).map((f) => f.actions)).toEqual([[{ type: "other", text: "NORMAL" }]]);
    sent.length = 0;
    await remove(KIND, id, outputs);
    expect(sent).toEqual([]);
    expect((await read(KIND, id, outputs)).id).toBe("");
    await ofctl("del-flows", "br-seg", `cookie=0x${FOREIGN.toString(16)}/-1`);
  });
});
