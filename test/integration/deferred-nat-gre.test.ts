import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { greKeyOf, tunnelPorts } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { parseConntrack } from "../../provider/openflow";
import { runChecked } from "../../provider/transport/exec";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import type { SshSession } from "../../provider/transport/ssh";
import type { LabBackend, LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../support/deferred-nat";
import { inNamespace, labSsh, loadInventory, lockLab } from "../support/lab";
import { connectAndClose, connectFromPort, openLiveConnections, times } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * gre delivery end to end on the lab: the gateways tunnel each request to its
 * backend's hypervisor over the routed underlay (ip.dst still the VIP), the
 * hypervisor (DsrHypervisorFlows in gre mode) decapsulates, DNATs and
 * delivers, and the server's reply goes straight to the client. Nothing is
 * configured inside the servers.
 */

const VIP = "10.0.0.202";
const NAME = "gre-web";
const TUPLES = 2000;
type Props = Record<string, any>;

let inv: LabInventory;
let pool: LabBackend[];
const ssh: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hv: Record<string, ProviderDriver> = {};

const underlay = (host: string) => inv.hosts[host].underlay!.address;
const vips = (backends: LabBackend[]) => [{ address: VIP, port: 80, protocol: "tcp" as const, backends }];

function lbInputs(backends: LabBackend[]) {
  const base = labLoadBalancer(
    inv,
    NAME,
    vips(backends).map((v) => ({ ...v, backends: v.backends.map((b) => labBackend(inv, b)) })),
    { delivery: "gre" },
  );
  return {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(g.name) })),
    hypervisors: ["hv1", "hv2", "hv3"].map((name) => ({ name, tunnelAddress: underlay(name) })),
  };
}

function hvInputs(name: string, backends: LabBackend[]) {
  return {
    ...labHypervisorFlows(inv, NAME, name, vips(backends)),
    mode: "gre",
    gre: { allowedSources: [underlay("gw1"), underlay("gw2")], key: greKeyOf({ name: NAME }) },
  };
}

/** Creates or updates the hypervisors' flows (before the gateways send them anything), then the load balancer. */
async function apply(backends: LabBackend[]) {
  for (const name of ["hv1", "hv2", "hv3"]) {
    const here = backends.filter((b) => b.hypervisor === name);
    const driver = (hv[name] ??= new ProviderDriver("DsrHypervisorFlows"));
    if (here.length > 0) await (driver.id ? driver.update(hvInputs(name, backends)) : driver.create(hvInputs(name, backends)));
  }
  await (lb.id ? lb.update(lbInputs(backends)) : lb.create(lbInputs(backends)));
}

/** Fresh connections from the client: who answered, and what each side saw. */
function greet(count: number) {
  return connectAndClose(inv.client.namespace, times(VIP, 80, count), { concurrency: 1 }).map((r) => {
    if (r.error) throw new Error(`connection to ${VIP} failed: ${r.error}`);
    const [name, peer, local] = r.greeting.split(" ");
    const backend = pool.find((b) => b.name === name)!;
    // No SNAT: the server saw the client; DNAT happened on its hypervisor; the client's socket is connected to the VIP.
    expect(peer).toBe(`${inv.client.address}:${r.localPort}`);
    expect(local).toBe(`${backend.address}:${inv.backendPort}`);
    expect(r.remote).toBe(`${VIP}:80`);
    return name;
  });
}

/** Packets counted by flows on a host's bridge (after a revalidator pass, so datapath hits are in). */
async function packets(host: string, filter: string): Promise<number> {
  await runChecked(ssh[host], ["ovs-appctl", "revalidator/wait"]);
  const out = await runChecked(ssh[host], ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-seg", filter]);
  return [...out.matchAll(/n_packets=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

async function trace(gw: string): Promise<number[]> {
  const seg = Number((await ssh[gw].run(["ovs-vsctl", "get", "interface", "seg0", "ofport"])).stdout.trim());
  const tuples = Array.from({ length: TUPLES }, (_, i) => ({
    protocol: "tcp" as const,
    in_port: seg,
    nw_src: `10.9.${(i >> 8) & 255}.${i & 255 || 1}`,
    nw_dst: VIP,
    tp_src: 1024 + ((i * 7919) % 60000),
    tp_dst: 80,
  }));
  return (await traceBuckets(ssh[gw], "br-seg", tuples)).map((b) => {
    if (b === undefined) throw new Error(`${gw}: a packet met no live bucket`);
    return b;
  });
}

const SPY = "0x5eed"; // a counting flow of the test's own on each gateway
const RST_DROP = "0x7e58"; // the gateways' drop of one client port's resets, for a while

beforeAll(async () => {
  inv = loadInventory();
  pool = inv.backends.filter((b) => b.hypervisor !== "hv3").concat(inv.backends.filter((b) => b.hypervisor === "hv3").slice(0, 1));
  unlock = await lockLab("hv1-gre");
  for (const h of ["gw1", "gw2", "hv1", "hv2", "hv3"]) ssh[h] = await labSsh(inv, h);
  for (const g of ["gw1", "gw2"]) {
    // Counts whatever reaches the gateway from the VIP: replies that passed through it would.
    await runChecked(ssh[g], ["ovs-ofctl", "add-flow", "br-seg", `cookie=${SPY},priority=2000,tcp,nw_src=${VIP},tp_src=80,actions=NORMAL`]);
  }
  await lb.purge(lbInputs(pool.slice(0, 4)));
});

afterAll(async () => {
  await lb.delete().catch(() => undefined);
  for (const d of Object.values(hv)) if (d.id) await d.delete().catch(() => undefined);
  for (const h of ["gw1", "gw2", "hv1", "hv2"]) await ssh[h]?.run(["ovs-ofctl", "del-flows", "br-seg", `cookie=${SPY}/-1`]);
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
});

describe("deferred NAT with gre delivery", () => {
  // Two backends on each of hv1 and hv2.
  const four = () => ["hv1", "hv2"].flatMap((h) => pool.filter((b) => b.hypervisor === h).slice(0, 2));

  it("a TCP client reaches the VIP through GRE to the backends' hypervisors, which the gateways reach only over the underlay; replies leave from the VIP straight to the client, not through the gateways; the servers hold no VIP, tunnel or sysctl", async () => {
    await apply(four());
    // Cut the segment between the gateways and the hypervisors: nothing a gateway sends on it reaches them.
    for (const h of ["hv1", "hv2"]) {
      for (const g of ["gw1", "gw2"]) {
        await runChecked(ssh[h], [
          "ovs-ofctl",
          "add-flow",
          "br-seg",
          `cookie=${SPY},priority=3000,in_port=seg0,dl_src=${inv.hosts[g].segment!.mac},actions=drop`,
        ]);
      }
    }
    const names = greet(40);
    expect(new Set(names).size).toBeGreaterThan(1);
    expect(names.every((n) => four().some((b) => b.name === n))).toBe(true);
    console.log(`gre delivery: 40 connections answered by ${[...new Set(names)].sort().join(", ")}`);

    // The requests came out of the GRE port on the hypervisors, and nothing from the VIP came back to a gateway.
    const viaGre =
      (await packets("hv1", `cookie=${hv.hv1.outputs.cookie}/-1,tcp,nw_dst=${VIP}`)) +
      (await packets("hv2", `cookie=${hv.hv2.outputs.cookie}/-1,tcp,nw_dst=${VIP}`));
    expect(viaGre).toBeGreaterThanOrEqual(40 * 3);
    expect((await packets("gw1", `cookie=${SPY}/-1`)) + (await packets("gw2", `cookie=${SPY}/-1`))).toBe(0);
    expect((await packets("gw1", `cookie=${lb.outputs.cookie}/-1`)) + (await packets("gw2", `cookie=${lb.outputs.cookie}/-1`))).toBeGreaterThanOrEqual(40 * 3);

    for (const h of ["hv1", "hv2"]) await runChecked(ssh[h], ["ovs-ofctl", "del-flows", "br-seg", `cookie=${SPY}/-1`]);

    for (const b of four()) {
      expect(inNamespace(b.namespace, ["ip", "-o", "addr", "show"])).not.toContain(VIP);
      expect(inNamespace(b.namespace, ["ip", "-d", "-o", "link", "show"])).not.toMatch(/\b(gre|gretap|ipip|ip6tnl)\b/);
      for (const k of ["arp_ignore", "arp_announce"]) expect(inNamespace(b.namespace, ["sysctl", "-n", `net.ipv4.conf.all.${k}`]).trim()).toBe("0");
    }
  });

  it("the gateways' tunnel ports carry only what the buckets send: a broadcast on the segment is not flooded into them", async () => {
    const lbInputsChecked = (await lb.checked(lbInputs(four()))) as never;
    const txPackets = async () => {
      let n = 0;
      for (const g of ["gw1", "gw2"]) {
        for (const t of tunnelPorts(
          lbInputsChecked,
          (lbInputsChecked as Props).gateways.find((x: Props) => x.name === g),
        )) {
          // OpenFlow port stats are live (OVSDB's statistics column lags by seconds).
          const ofport = (await runChecked(ssh[g], ["ovs-vsctl", "get", "interface", t.name, "ofport"])).trim();
          const stats = await runChecked(ssh[g], ["ovs-ofctl", "-O", "OpenFlow15", "dump-ports", "br-seg", ofport]);
          n += Number(/tx pkts=(\d+)/.exec(stats)![1]);
        }
      }
      return n;
    };
    const before = await txPackets();
    // ARP for an address nobody has: a broadcast every gateway's NORMAL floods.
    try {
      inNamespace(inv.client.namespace, ["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.0.99"]);
    } catch {
      /* nobody answers: that is the point */
    }
    expect(await txPackets()).toBe(before);
  });

  it("stable selection through the tunnels: a 5th backend takes flows only to itself, a removal moves only its own, on both gateways alike", async () => {
    const before = await trace("gw1");
    expect(await trace("gw2")).toEqual(before);
    const key = `tcp:${VIP}:80`;
    const bucketOf = (b: LabBackend) => lb.outputs.bucketIds[key][`${b.address}:${inv.backendPort}#0`] as number;
    const fifth = pool.find((b) => b.hypervisor === "hv3")!;

    await apply([...four(), fifth]);
    const added = await trace("gw1");
    expect(await trace("gw2")).toEqual(added);
    const moved = added.map((b, i) => [before[i], b]).filter(([x, y]) => x !== y);
    expect(moved.every(([, to]) => to === bucketOf(fifth))).toBe(true);
    expect(moved.length).toBe(added.filter((b) => b === bucketOf(fifth)).length);
    expect(greet(20).length).toBe(20);

    const gone = four()[1];
    const goneBucket = bucketOf(gone);
    await apply([...four().filter((b) => b !== gone), fifth]);
    const removed = await trace("gw1");
    expect(await trace("gw2")).toEqual(removed);
    const changed = removed.map((b, i) => [added[i], b]).filter(([x, y]) => x !== y);
    expect(changed.length).toBe(added.filter((b) => b === goneBucket).length);
    expect(changed.every(([from]) => from === goneBucket)).toBe(true);
    console.log(`gre delivery: add moved ${moved.length} of ${TUPLES}, all to the new backend; remove moved ${changed.length}, all from the removed one`);
    await apply(four());
  });

  it("live connections through the tunnels: removing a backend breaks none of the other backends' connections", async () => {
    const live = await openLiveConnections(inv.client.namespace, VIP, 80, 60);
    try {
      expect(live.initial.filter((c) => c.broken)).toEqual([]);
      expect((await live.round()).filter((c) => c.broken)).toEqual([]);
      const gone = four()[2];
      await lb.update(lbInputs(four().filter((b) => b !== gone)));
      const after = await live.round();
      const others = after.filter((c) => c.backend !== gone.name);
      expect(others.length).toBeGreaterThan(30);
      expect(others.filter((c) => c.broken)).toEqual([]);
      console.log(
        `gre delivery: removed ${gone.name}; ${others.length} live connections on the other backends, 0 broken; ${after.length - others.length} were on it`,
      );
    } finally {
      live.close();
    }
    await apply(four());
  });

  it("drift: a GRE port deleted by hand on a hypervisor or a gateway is reported by read, and update puts back exactly it", async () => {
    // The hypervisor's flow-based GRE port.
    const port = hv.hv1.outputs.gre.port as string;
    await ssh.hv1.run(["ovs-vsctl", "del-port", "br-seg", port]);
    const hvRead = await hv.hv1.read();
    expect(hvRead.inputs.vips).toEqual([]);
    expect((await hv.hv1.diff(hvInputs("hv1", four()), hvRead.props)).changes).toBe(true);
    hv.hv1.outputs = hvRead.props;
    await hv.hv1.update(hvInputs("hv1", four()));
    expect(hv.hv1.outputs.lastApply).toEqual({ messages: 0, bytes: 0, operations: {} }); // the flows were still right: the port came back with its ofport
    expect((await hv.hv1.read()).inputs.vips.map((v: Props) => v.address)).toEqual([VIP]);

    // A gateway's tunnel port to hv2.
    const tunnel = tunnelPorts((await lb.checked(lbInputs(four()))) as never, (await lb.checked(lbInputs(four()))).gateways[0]).find(
      (t) => t.hypervisor === "hv2",
    )!;
    await ssh.gw1.run(["ovs-vsctl", "del-port", "br-seg", tunnel.name]);
    const lbRead = await lb.read();
    expect(lbRead.props.drift).toContain(`gw1: VIP tcp:${VIP}:80: tunnel port to hypervisor hv2 missing or changed`);
    expect((await lb.diff(lbInputs(four()), lbRead.props)).changes).toBe(true);
    lb.outputs = lbRead.props;
    await lb.update(lbInputs(four()));
    expect(lb.outputs.lastApply.gw1.messages).toBe(0);
    expect(lb.outputs.lastApply.gw2.messages).toBe(0);
    expect((await lb.read()).props.drift).toEqual([]);
    expect(greet(20).length).toBe(20);
  });

  it("a client port reused while its hypervisor still holds the conntrack entry of a broken connection: the new connection opens, and once the old backend leaves the hypervisor its entries go with it", async () => {
    await apply(four());
    const [b1, b2] = four().filter((b) => b.hypervisor === "hv1");
    const bucketOf = (b: LabBackend) => lb.outputs.bucketIds[`tcp:${VIP}:80`][`${b.address}:${inv.backendPort}#0`] as number;
    const seg = Number((await ssh.gw1.run(["ovs-vsctl", "get", "interface", "seg0", "ofport"])).stdout.trim());
    // Above the ephemeral range (32768-60999): a port the client's kernel gave another socket cannot be bound (EADDRINUSE).
    const first = 61_000 + Math.floor(Math.random() * 3_800);
    const candidates = Array.from({ length: 600 }, (_, i) => first + i);
    const choose = async () =>
      traceBuckets(
        ssh.gw1,
        "br-seg",
        candidates.map((p) => ({ protocol: "tcp" as const, in_port: seg, nw_src: inv.client.address, nw_dst: VIP, tp_src: p, tp_dst: 80 })),
      );
    // Client ports the gateways send to b1 with all four backends, and to b2 (the same hypervisor) without b1.
    const withB1 = await choose();
    const [onB1, onB2] = [bucketOf(b1), bucketOf(b2)]; // stable ids: b2's stays when b1 goes
    await lb.update(lbInputs(four().filter((b) => b !== b1)));
    const withoutB1 = await choose();
    const [x, y] = candidates.filter((_, i) => withB1[i] === onB1 && withoutB1[i] === onB2);
    expect(y).toBeDefined();
    await lb.update(lbInputs(four()));

    const zone = hv.hv1.outputs.ctZone as number;
    const entries = async () => parseConntrack(await runChecked(ssh.hv1, ["ovs-appctl", "dpctl/dump-conntrack", `zone=${zone}`]));
    const staleSocket = (port: number) =>
      inNamespace(b1.namespace, ["ss", "-tnH", "state", "established", `( sport = :${inv.backendPort} and dport = :${port} )`]).trim();
    // A connection to b1 whose reset the gateways drop: hv1 keeps its ESTABLISHED entry, b1 its socket.
    const breakOnB1 = async (port: number) => {
      for (const gw of ["gw1", "gw2"]) {
        await runChecked(ssh[gw], [
          "ovs-ofctl",
          "-O",
          "OpenFlow15",
          "add-flow",
          "br-seg",
          `table=0,priority=65000,cookie=${RST_DROP},tcp,nw_dst=${VIP},tp_dst=80,tp_src=${port},tcp_flags=+rst,actions=drop`,
        ]);
      }
      try {
        const got = connectFromPort(inv.client.namespace, VIP, 80, port, "reset");
        if (got !== b1.name) throw new Error(`client port ${port}: ${got}, not ${b1.name}; ${await whereItIs(port)}`);
        await waitUntil(() => staleSocket(port) !== "", { what: `${b1.name}'s socket of client port ${port}` });
      } finally {
        for (const gw of ["gw1", "gw2"]) await runChecked(ssh[gw], ["ovs-ofctl", "del-flows", "br-seg", `cookie=${RST_DROP}/-1`]);
      }
    };
    // For a failure: what conntrack (every hypervisor, every zone) and the VMs hold of the port.
    const whereItIs = async (port: number) => {
      const ct = (
        await Promise.all(
          ["hv1", "hv2", "hv3"].map(async (h) =>
            (await runChecked(ssh[h], ["ovs-appctl", "dpctl/dump-conntrack"]))
              .split("\n")
              .filter((l) => l.includes(`sport=${port},`))
              .map((l) => `${h}: ${l.trim()}`),
          ),
        )
      ).flat();
      const sockets = pool
        .map((b) => `${b.name}: ${inNamespace(b.namespace, ["ss", "-tanH", `( dport = :${port} )`]).trim()}`)
        .filter((l) => !l.endsWith(": "));
      return `conntrack [${ct.join(" | ")}]; sockets [${sockets.join(" | ")}]`;
    };
    const heldBy = async (b: LabBackend) => (await entries()).filter((e) => e.reply.src === b.address && e.state === "ESTABLISHED").length;

    // 1. The gateways now send client port x to b2; hv1 still serves b1, and conntrack translates x to b1.
    await breakOnB1(x);
    expect(await heldBy(b1)).toBeGreaterThan(0);
    await lb.update(lbInputs(four().filter((b) => b !== b1)));
    // Delivered to b1 (where conntrack sent it), the SYN meets the stale socket, whose challenge ACK draws the client's
    // reset; that closes the entry and the socket, and the client's next SYN is a new connection, to the gateways' choice.
    // Delivered to b2's port with b1's address, as it was, every SYN was lost.
    expect(connectFromPort(inv.client.namespace, VIP, 80, x, "close")).toBe(b2.name);
    expect(staleSocket(x)).toBe("");

    // 2. b1 leaves hv1 while it still holds a broken connection of client port y: its entries are flushed.
    await lb.update(lbInputs(four()));
    await breakOnB1(y);
    const before = await heldBy(b1);
    expect(before).toBeGreaterThan(0);
    const othersBefore = (await entries()).filter((e) => e.reply.src !== b1.address).length;
    expect(othersBefore).toBeGreaterThan(0); // x's connection to b2, at least
    await apply(four().filter((b) => b !== b1));
    expect((await entries()).filter((e) => e.reply.src === b1.address)).toEqual([]);
    // Only b1's: the partial tuple matched nothing else (an entry may only have expired meanwhile).
    expect((await entries()).filter((e) => e.reply.src !== b1.address).length).toBeGreaterThan(0);
    // Left, the entry would translate y's SYN to b1, which nothing on hv1 delivers to any more.
    expect(connectFromPort(inv.client.namespace, VIP, 80, y, "close")).toBe(b2.name);
    console.log(
      `gre delivery: client port ${x} reused over a stale entry opened on ${b2.name}; removing ${b1.name} flushed its ${before} entries, and port ${y} opened on ${b2.name}`,
    );
    inNamespace(b1.namespace, ["ss", "-tnH", "-K", "state", "established", `( sport = :${inv.backendPort} and dport = :${y} )`]);
    await apply(four());
  });
});
