import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseZoneLimits, zoneLimitArgs } from "../../provider/openflow/conntrack";
import { runChecked } from "../../provider/transport/exec";
import type { SshSession } from "../../provider/transport/ssh";
import { CLIENT, type LabBackend, type LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer } from "../support/deferred-nat";
import { inNamespace, labSsh, loadInventory, lockLab, spawnInNamespace } from "../support/lab";
import { waitUntil } from "../support/wait";
import { connectAndClose, openLiveConnections, times, type LiveConnections } from "../support/tcp-clients";

/**
 * Floods stay in their zone (connectionLimit), real TCP: two services on
 * one hypervisor, each in its own conntrack zone. A bounded SYN flood from
 * spoofed sources at service A's VIP fills conntrack. With the datapath's
 * table made small (dpctl/ct-set-maxconns) and no zone limit, the flood
 * takes the whole table and service B's new connections fail; with A's
 * zone limited, A holds at most its limit and B's established and new
 * connections keep working. The gateways keep no conntrack state at all.
 * (OVS 3.1's userspace flush of a zone can leave entries behind while a
 * flood's tail still arrives, so the phases do not flush in between: the
 * limited one comes first, and the limit's own count is what it reads.)
 */

const VIP_A = "10.0.0.161";
const VIP_B = "10.0.0.162";
const NAME = "flood";
/** The datapath's whole table, made small for the test (restored after). */
const MAXCONNS = 1000;
const LIMIT = 200;
/** The flood: this many SYNs, about 2,000 a second, so it is still going while B is tried. */
const SYNS = 6000;

let inv: LabInventory;
let a: LabBackend;
let b: LabBackend;
const ssh: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
let maxconns: string | undefined;
let live: LiveConnections | undefined;
const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hvA = new ProviderDriver("DsrHypervisorFlows");
const hvB = new ProviderDriver("DsrHypervisorFlows");

const vip = (address: string, backend: LabBackend) => ({ address, port: 80, protocol: "tcp" as const, backends: [backend] });
const lbInputs = () =>
  labLoadBalancer(
    inv,
    NAME,
    [vip(VIP_A, a), vip(VIP_B, b)].map((v) => ({ ...v, backends: v.backends.map((x) => labBackend(inv, x)) })),
  );
const hvInputs = (service: "a" | "b", limit?: number) => ({
  ...labHypervisorFlows(inv, `${NAME}-${service}`, "hv1", [service === "a" ? vip(VIP_A, a) : vip(VIP_B, b)]),
  ...(limit === undefined ? {} : { connectionLimit: limit }),
});

/** SYNs from `count` spoofed sources (10.9.x.y), each its own 5-tuple, from the client's namespace through its route to the VIP: a raw socket, a fixed count, then it stops. */
const SYN_FLOOD = String.raw`
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
function flood(address: string): { done: Promise<number> } {
  const child = spawnInNamespace(CLIENT.namespace, ["python3", "-c", SYN_FLOOD, address, "80", String(SYNS)]);
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  return {
    done: new Promise((resolve, reject) =>
      child.once("exit", (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`SYN flood exited ${code}`)))),
    ),
  };
}

const appctl = (host: string, ...args: string[]) => runChecked(ssh[host], ["env", `OVS_RUNDIR=${inv.hosts[host].ovsRundir}`, "ovs-appctl", ...args]);
const zoneOf = (d: ProviderDriver) => d.outputs.ctZone as number;
const zoneLimit = async (d: ProviderDriver) => parseZoneLimits(await appctl("hv1", ...zoneLimitArgs.get(zoneOf(d)))).find((l) => l.zone === zoneOf(d))!;
/** The entries in a zone (dpctl/ct-get-limits counts only zones with a limit of their own). */
const entries = async (d: ProviderDriver) => (await appctl("hv1", "dpctl/dump-conntrack", `zone=${zoneOf(d)}`)).split("\n").filter((l) => l.trim()).length;
/** The entries once the flood has gone through: the count stops growing. */
async function settled(d: ProviderDriver): Promise<number> {
  let last = -1;
  for (;;) {
    await new Promise((r) => setTimeout(r, 300));
    const n = await entries(d);
    if (n === last) return n;
    last = n;
  }
}
/** Fresh connections to the VIP: how many of `n` greeted. */
const opened = (address: string, n: number) =>
  connectAndClose(CLIENT.namespace, times(address, 80, n), { concurrency: 4, greetingTimeoutMs: 1500 }).filter((r) => !r.error && r.backend).length;

beforeAll(async () => {
  inv = loadInventory();
  [a, b] = inv.backends.filter((x) => x.hypervisor === "hv1");
  unlock = await lockLab("hv1-gre");
  for (const h of ["gw1", "gw2", "hv1"]) ssh[h] = await labSsh(inv, h);
  for (const address of [VIP_A, VIP_B]) {
    inNamespace(CLIENT.namespace, [
      "ip",
      "route",
      "replace",
      `${address}/32`,
      ...["gw1", "gw2"].flatMap((g) => ["nexthop", "via", inv.hosts[g].segment!.address]),
    ]);
  }
  maxconns = (await appctl("hv1", "dpctl/ct-get-maxconns")).trim();
  await lb.purge(lbInputs());
  await hvA.create(hvInputs("a"));
  await hvB.create(hvInputs("b"));
  await lb.create(lbInputs());
});

afterAll(async () => {
  live?.close();
  if (maxconns) await appctl("hv1", "dpctl/ct-set-maxconns", maxconns).catch(() => undefined);
  for (const d of [lb, hvA, hvB]) if (d.id) await d.delete().catch(() => undefined);
  for (const address of [VIP_A, VIP_B]) {
    try {
      inNamespace(CLIENT.namespace, ["ip", "route", "del", `${address}/32`]);
    } catch {
      /* not added */
    }
  }
  for (const s of Object.values(ssh)) s.close();
  unlock?.();
});

describe("a SYN flood at one service's VIP stays in its conntrack zone (connectionLimit)", () => {
  it(`with connectionLimit ${LIMIT} on A, a flood at A leaves it at most ${LIMIT} entries; B's 20 established and new connections keep working; the gateways hold no conntrack entry`, async () => {
    await appctl("hv1", "dpctl/ct-set-maxconns", String(MAXCONNS));
    await hvA.update(hvInputs("a", LIMIT));
    live = await openLiveConnections(CLIENT.namespace, VIP_B, 80, 20);
    expect(live.initial.filter((c) => c.broken)).toEqual([]);
    const f = flood(VIP_A);
    // The limit's own count: the entries made since it was set.
    await waitUntil(async () => (await zoneLimit(hvA)).count >= LIMIT, { what: `A's zone at its limit`, timeoutMs: 10_000, intervalMs: 100 });
    // While the flood goes on: B's connections, old and new; A takes no new one.
    const b = opened(VIP_B, 20);
    const aNew = opened(VIP_A, 5);
    const broken = (await live.round()).filter((c) => c.broken);
    const sent = await f.done;
    const count = await settled(hvA);
    expect([b, aNew, broken]).toEqual([20, 0, []]);
    expect(count).toBeLessThanOrEqual(LIMIT);
    expect(await zoneLimit(hvA)).toMatchObject({ limit: LIMIT, own: true, count });
    for (const g of ["gw1", "gw2"]) expect((await appctl(g, "dpctl/dump-conntrack")).trim()).toBe("");
    console.log(
      `connectionLimit ${LIMIT}: ${sent} SYNs at A left ${count} entries in A's zone (the table holds ${MAXCONNS}); B kept 20 of 20 established connections and took ${b} of 20 new ones; the gateways held no conntrack entry`,
    );
  });

  it(`without the limit, the same flood takes the datapath's whole table and B's new connections fail while it lasts`, async () => {
    await hvA.update(hvInputs("a"));
    expect(await zoneLimit(hvA)).toMatchObject({ own: false });
    const f = flood(VIP_A);
    await waitUntil(async () => (await entries(hvA)) >= MAXCONNS * 0.9, { what: `A's zone at ${MAXCONNS * 0.9} entries`, timeoutMs: 10_000, intervalMs: 100 });
    const b = opened(VIP_B, 10);
    const filled = await entries(hvA);
    expect(await f.done).toBe(SYNS);
    expect(b).toBe(0);
    console.log(`no zone limit: the flood at A filled its zone to ${filled} of the table's ${MAXCONNS} entries; B took ${b} of 10 new connections meanwhile`);
  });

  it("reads the limit back: one taken away by hand (as an ovs-vswitchd restart does) reads as drift, and the next update puts it back", async () => {
    await appctl("hv1", "dpctl/ct-set-maxconns", maxconns!);
    await hvA.update(hvInputs("a", LIMIT));
    expect((await hvA.read()).inputs.connectionLimit).toBe(LIMIT);
    await appctl("hv1", ...zoneLimitArgs.del(zoneOf(hvA)));
    expect((await hvA.read()).inputs.connectionLimit).toBeUndefined();
    await hvA.update(hvInputs("a", LIMIT));
    expect((await zoneLimit(hvA)).limit).toBe(LIMIT);
    // Deleting the resource removes its limit too.
    const zone = zoneOf(hvA);
    await hvA.delete();
    hvA.id = "";
    expect(parseZoneLimits(await appctl("hv1", ...zoneLimitArgs.get(zone)))[0]).toMatchObject({ own: false });
  });
});
