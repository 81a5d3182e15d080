import { parseZoneLimits, zoneLimitArgs } from "../../provider/openflow/conntrack";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { CLIENT, type LabBackend, type LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "./deferred-nat";
import { inNamespace, labSsh, spawnInNamespace } from "./lab";
import { connectAndClose, times } from "./tcp-clients";

/**
 * The "Real networks" scenarios' tools, shared by the integration tests and
 * bench/real-networks.ts: raw-packet programs run inside a lab or sandbox
 * namespace (a SYN flood, an injector of frames, a capture), and the
 * conntrack-limits scenario (connectionLimit), shared by
 * test/integration/conntrack-limits.test.ts and bench/real-networks.ts: two
 * services on hv1, each in its own conntrack zone (one DsrHypervisorFlows
 * each), behind one DeferredNatLoadBalancer on gw1 and gw2; a bounded SYN
 * flood from spoofed sources at service A's VIP, and what it leaves in A's
 * zone, in B's connections and on the gateways. The caller takes the lab's
 * hv1-gre lock.
 */

export const VIP_A = "10.0.0.161";
export const VIP_B = "10.0.0.162";
export const NAME = "flood";
/** The datapath's whole table, made small for the scenario (restored after). */
export const MAXCONNS = 1000;
export const LIMIT = 200;
/** The flood: this many SYNs, about 2,000 a second, so it is still going while B is tried. */
export const SYNS = 6000;
export const GATEWAYS = ["gw1", "gw2"] as const;

/** SYNs from `count` spoofed sources (10.9.x.y), each its own 5-tuple, from the client's namespace through its route to the VIP: a raw socket, a fixed count, then it stops. */
export const SYN_FLOOD = String.raw`
import socket, struct, sys, time
dst, dport, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def csum(data):
    if len(data) % 2: data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for i in range(count):
    src = "10.9.%d.%d" % ((i >> 8) & 255, (i & 255) or 1)
    tcp = struct.pack("!HHIIBBHHH", 1024 + i, dport, i * 7919, 0, 5 << 4, 0x02, 64240, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xffff, 0, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst))
    sock.sendto(ip + tcp, (dst, 0))
    # Paced (about 2,000 a second): the lab's veths and datapaths lose none of it, and it lasts a few seconds.
    if i % 20 == 19: time.sleep(0.01)
print(count)
`;

/** Starts the flood; resolves with the SYNs sent once it has stopped by itself. */
export function flood(address: string, syns = SYNS): { done: Promise<number> } {
  const child = spawnInNamespace(CLIENT.namespace, ["python3", "-c", SYN_FLOOD, address, "80", String(syns)]);
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  return {
    done: new Promise((resolve, reject) =>
      child.once("close", (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`SYN flood exited ${code}`)))),
    ),
  };
}

const vip = (address: string, backend: LabBackend) => ({ address, port: 80, protocol: "tcp" as const, backends: [backend] });

/** The scenario's resources and the lab's sessions to the hosts it reads. */
export class ConntrackFlood {
  readonly a: LabBackend;
  readonly b: LabBackend;
  readonly ssh: Record<string, SshSession> = {};
  readonly lb = new ProviderDriver("DeferredNatLoadBalancer");
  readonly hvA = new ProviderDriver("DsrHypervisorFlows");
  readonly hvB = new ProviderDriver("DsrHypervisorFlows");
  /** hv1's table size before the scenario, put back by tearDown. */
  maxconns: string | undefined;

  constructor(readonly inv: LabInventory) {
    [this.a, this.b] = inv.backends.filter((x) => x.hypervisor === "hv1");
  }

  lbInputs() {
    return labLoadBalancer(
      this.inv,
      NAME,
      [vip(VIP_A, this.a), vip(VIP_B, this.b)].map((v) => ({ ...v, backends: v.backends.map((x) => labBackend(this.inv, x)) })),
    );
  }

  hvInputs(service: "a" | "b", limit?: number) {
    return {
      ...labHypervisorFlows(this.inv, `${NAME}-${service}`, "hv1", [service === "a" ? vip(VIP_A, this.a) : vip(VIP_B, this.b)]),
      ...(limit === undefined ? {} : { connectionLimit: limit }),
    };
  }

  /** Sessions, the client's routes to both VIPs through both gateways, hv1's table size noted; the load balancer and both services created (leftovers of an interrupted run purged first). */
  async setUp(): Promise<void> {
    for (const h of ["hv1", ...GATEWAYS]) this.ssh[h] = await labSsh(this.inv, h);
    for (const address of [VIP_A, VIP_B]) {
      inNamespace(CLIENT.namespace, [
        "ip",
        "route",
        "replace",
        `${address}/32`,
        ...GATEWAYS.flatMap((g) => ["nexthop", "via", this.inv.hosts[g].segment!.address]),
      ]);
    }
    this.maxconns = (await this.appctl("hv1", "dpctl/ct-get-maxconns")).trim();
    await this.lb.purge(this.lbInputs());
    await this.hvA.purge(this.hvInputs("a"));
    await this.hvB.purge(this.hvInputs("b"));
    await this.hvA.create(this.hvInputs("a"));
    await this.hvB.create(this.hvInputs("b"));
    await this.lb.create(this.lbInputs());
  }

  /** Puts hv1's table size back, deletes the resources and the routes, closes the sessions; returns what failed. */
  async tearDown(): Promise<string[]> {
    const failed: string[] = [];
    const attempt = async (what: string, fn: () => unknown) => {
      try {
        await fn();
      } catch (e) {
        failed.push(`${what}: ${(e as Error).message.slice(0, 200)}`);
      }
    };
    if (this.maxconns) await attempt("hv1's ct-maxconns", () => this.appctl("hv1", "dpctl/ct-set-maxconns", this.maxconns!));
    for (const [what, d] of [
      ["load balancer", this.lb],
      ["service A", this.hvA],
      ["service B", this.hvB],
    ] as const)
      if (d.id) await attempt(`delete ${what}`, () => d.delete());
    for (const address of [VIP_A, VIP_B]) {
      await attempt(`the client's route to ${address}`, () => {
        if (inNamespace(CLIENT.namespace, ["ip", "route", "show", `${address}/32`]).trim())
          inNamespace(CLIENT.namespace, ["ip", "route", "del", `${address}/32`]);
      });
    }
    for (const s of Object.values(this.ssh)) s.close();
    return failed;
  }

  appctl(host: string, ...args: string[]): Promise<string> {
    return runChecked(this.ssh[host], ["env", `OVS_RUNDIR=${this.inv.hosts[host].ovsRundir}`, "ovs-appctl", ...args]);
  }

  zoneOf(d: ProviderDriver): number {
    return d.outputs.ctZone as number;
  }

  /** The zone's limit as hv1 reports it, and the count the limit keeps (the entries made since it was set). */
  async zoneLimit(d: ProviderDriver) {
    return parseZoneLimits(await this.appctl("hv1", ...zoneLimitArgs.get(this.zoneOf(d)))).find((l) => l.zone === this.zoneOf(d))!;
  }

  /** The entries in a zone (dpctl/ct-get-limits counts only zones with a limit of their own). */
  async entries(d: ProviderDriver): Promise<number> {
    return (await this.appctl("hv1", "dpctl/dump-conntrack", `zone=${this.zoneOf(d)}`)).split("\n").filter((l) => l.trim()).length;
  }

  /** The entries once the flood has gone through: the count stops growing. */
  async settled(d: ProviderDriver): Promise<number> {
    let last = -1;
    for (;;) {
      await new Promise((r) => setTimeout(r, 300));
      const n = await this.entries(d);
      if (n === last) return n;
      last = n;
    }
  }

  /** Fresh connections to the VIP: how many of `n` greeted. */
  opened(address: string, n: number): number {
    return connectAndClose(CLIENT.namespace, times(address, 80, n), { concurrency: 4, greetingTimeoutMs: 1500 }).filter((r) => !r.error && r.backend).length;
  }

  /** Each gateway's conntrack entries, all zones (they keep none: stateless selection). */
  async gatewayEntries(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const g of GATEWAYS) out[g] = (await this.appctl(g, "dpctl/dump-conntrack")).split("\n").filter((l) => l.trim()).length;
    return out;
  }
}

/**
 * Sends frames (hex, argv 5...) in turn on an interface from a raw packet
 * socket, `count` of them, `burst` at a time `pace` ms apart; prints the count.
 */
export const INJECTOR = String.raw`
import socket, sys, time
iface, count, burst, pace = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) / 1000
frames = [bytes.fromhex(h) for h in sys.argv[5:]]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
for i in range(count):
    s.send(frames[i % len(frames)])
    if i % burst == burst - 1: time.sleep(pace)
print(count)
`;

/** Prints every frame the interfaces receive (not those sent from them) as "IFACE HEX", one a line, until its input closes. */
export const CAPTURE = String.raw`
import select, socket, sys
socks = []
for iface in sys.argv[1:]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(socket.SOL_SOCKET, 33, 1 << 23)  # SO_RCVBUFFORCE: no copy of a burst is lost here
    s.bind((iface, 0))
    socks.append(s)
print("ready", flush=True)
while True:
    r, _, _ = select.select(socks + [sys.stdin], [], [])
    for s in r:
        if s is sys.stdin:
            if not sys.stdin.readline():
                sys.exit(0)
            continue
        data, addr = s.recvfrom(65535)
        if addr[2] != socket.PACKET_OUTGOING:
            print(addr[0], data.hex(), flush=True)
`;
