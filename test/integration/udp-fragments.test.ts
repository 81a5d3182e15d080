import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { greKeyOf } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { CLIENT, ipv6Twin, type LabBackend, type LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labHypervisorFlows, labLoadBalancer, removeAll } from "../support/deferred-nat";
import { inNamespace, loadInventory, lockLab } from "../support/lab";

/**
 * Fragmented UDP through a VIP (`fragments`), real datagrams: the client
 * sends 4,000-byte requests (three fragments each on the lab's 1500-byte
 * segment); only the first fragment carries the ports. Without `fragments`
 * the later fragments match no VIP flow on the gateways and no request is
 * ever answered. With it the VIP hashes on addresses (every fragment of a
 * datagram takes the same bucket), its later fragments follow its group,
 * the hypervisor's conntrack reassembles them for the NAT, and the
 * backend's fragmented answer is un-NATed fragment by fragment: every
 * request is answered, whole, by one backend. In mac and in gre delivery,
 * over IPv4 and IPv6 (the dual-stack segment; an IPv6 fragment after the
 * first shows OVS no transport protocol, so IPv6 matches every fragment to
 * the VIP's address).
 */

const VIP = "10.0.0.163";
const VIP6 = "fd00:20::a3";
const NAME = "frag-dns";
const REQUESTS = 40;
const SIZE = 4000;

let inv: LabInventory;
let pool: LabBackend[];
let unlock: (() => void) | undefined;
const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hv: Record<string, ProviderDriver> = {};

type Mode = "mac" | "gre";
type Family = 4 | 6;
const vipOf = (family: Family) => (family === 6 ? VIP6 : VIP);
/** A backend's address in the family: its own, or its IPv6 twin on the dual-stack segment. */
const inFamily = (address: string, family: Family) => (family === 6 ? ipv6Twin(address) : address);
const udpVip = (fragments: boolean, family: Family) => ({
  address: vipOf(family),
  port: inv.backendPort,
  protocol: "udp" as const,
  ...(fragments ? { fragments: true } : {}),
});
const underlay = (host: string) => inv.hosts[host].underlay!.address;

function lbInputs(mode: Mode, fragments: boolean, family: Family = 4) {
  const backends = pool.map((b) => ({ ...labBackend(inv, b), address: inFamily(b.address, family) }));
  const base = labLoadBalancer(inv, NAME, [{ ...udpVip(fragments, family), backends }], { delivery: mode });
  return {
    ...base,
    gateways: base.gateways.map((g) => ({ ...g, tunnelAddress: underlay(g.name) })),
    hypervisors: ["hv1", "hv2"].map((name) => ({ name, tunnelAddress: underlay(name) })),
  };
}

function hvInputs(name: string, mode: Mode, fragments: boolean, family: Family) {
  const flows = labHypervisorFlows(inv, NAME, name, [{ ...udpVip(fragments, family), backends: pool }]);
  return {
    ...flows,
    vips: flows.vips.map((v) => ({
      ...v,
      ...(fragments ? { fragments: true } : {}),
      backends: v.backends.map((b) => ({ ...b, address: inFamily(b.address, family) })),
    })),
    ...(mode === "gre" ? { mode: "gre" as const, gre: { allowedSources: ["gw1", "gw2"].map(underlay), key: greKeyOf({ name: NAME }) } } : {}),
  };
}

async function apply(mode: Mode, fragments: boolean, family: Family) {
  for (const name of ["hv1", "hv2"]) {
    const d = (hv[name] ??= new ProviderDriver("DsrHypervisorFlows"));
    await (d.id ? d.update(hvInputs(name, mode, fragments, family)) : d.create(hvInputs(name, mode, fragments, family)));
  }
  await (lb.id ? lb.update(lbInputs(mode, fragments, family)) : lb.create(lbInputs(mode, fragments, family)));
}

/** REQUESTS datagrams of SIZE bytes from the client, one at a time, each from its own port: per request the backend that answered it whole, or "none". */
const UDP_CLIENT = String.raw`
const dgram = require("node:dgram");
const [host, port, count, size, timeoutMs] = process.argv.slice(1).map((x, i) => (i === 0 ? x : Number(x)));
(async () => {
  const out = [];
  for (let i = 0; i < count; i++) {
    const s = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
    const body = String(i).padStart(8, "0") + "x".repeat(size - 8);
    const answer = await new Promise((resolve) => {
      const t = setTimeout(() => resolve("none"), timeoutMs);
      s.on("message", (m) => {
        clearTimeout(t);
        const text = m.toString();
        resolve(text.endsWith(" " + body) ? text.split(" ")[0] : "partial");
      });
      s.send(body, port, host);
    });
    s.close();
    out.push(answer);
  }
  console.log(JSON.stringify(out));
})();
`;
const requests = (family: Family, count: number, timeoutMs: number): string[] =>
  JSON.parse(
    inNamespace(CLIENT.namespace, [process.execPath, "-e", UDP_CLIENT, vipOf(family), String(inv.backendPort), String(count), String(SIZE), String(timeoutMs)]),
  );
/** Requests the control sends: enough to show none is answered, each given time to be. */
const UNANSWERED = 8;

beforeAll(async () => {
  inv = loadInventory();
  pool = ["hv1", "hv2"].map((h) => inv.backends.find((b) => b.hypervisor === h)!);
  unlock = await lockLab("hv1-gre");
  inNamespace(CLIENT.namespace, ["ip", "route", "replace", `${VIP}/32`, ...["gw1", "gw2"].flatMap((g) => ["nexthop", "via", inv.hosts[g].segment!.address])]);
  await lb.purge(lbInputs("mac", true));
});

afterAll(async () => {
  try {
    inNamespace(CLIENT.namespace, ["ip", "route", "del", `${VIP}/32`]);
  } catch {
    /* not added */
  }
  await lb.delete().catch(() => undefined);
  for (const d of Object.values(hv)) if (d.id) await d.delete().catch(() => undefined);
  unlock?.();
});

describe.each([
  ["mac", 4],
  ["gre", 4],
  ["mac", 6],
  ["gre", 6],
] as const)("fragmented UDP requests through a VIP, %s delivery, IPv%s", (mode, family) => {
  // A VIP of the other family goes first: each family's VIP is the only udp VIP of its address.
  beforeAll(() => removeAll(lb, ...Object.values(hv)));

  it(`without fragments, none of ${UNANSWERED} requests of ${SIZE} bytes is answered`, async () => {
    await apply(mode, false, family);
    expect(requests(family, UNANSWERED, 500)).toEqual(Array(UNANSWERED).fill("none"));
  });

  it(`with fragments, every one of ${REQUESTS} requests is answered whole, by one backend (the client's, by address)`, async () => {
    await apply(mode, true, family);
    const answers = requests(family, REQUESTS, 1000);
    expect(answers.filter((a) => !pool.some((b) => b.name === a))).toEqual([]);
    expect(new Set(answers).size).toBe(1);
    console.log(`fragments, ${mode}, IPv${family}: ${answers.length} of ${REQUESTS} requests of ${SIZE} bytes answered whole, all by ${answers[0]}`);
  });
});
