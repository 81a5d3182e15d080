import { describe, expect, it } from "vitest";
import { asLists, check } from "../../provider/handlers";
import type { DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { parseFlows, renderBundle, toGroupEntry } from "../../provider/openflow";
import { assignIds, desiredDataplane, withDefaults as lbDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import * as dsr from "../../provider/resources/dsr-hypervisor-flows/plan";
import { tunnelPorts } from "../../provider/resources/deferred-nat-load-balancer/dataplane";
import { handOnKey } from "../../provider/model/ids";

/** IPv6 VIPs and backends as inputs: recorded canonical, refused by name where they cannot work yet, and the flows they make. */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });

const hvInputs = (over: Partial<DsrHypervisorFlowsInputs> = {}): DsrHypervisorFlowsInputs => ({
  name: "web6",
  host: { connection: conn("172.30.0.21") },
  bridge: "br-seg",
  vips: [
    {
      address: "FD00:10:0:0::C8",
      port: 80,
      backends: [
        { address: "fd00:10::0:65", port: 8080, mac: "02:00:0A:00:00:65", bridgePort: "vm1" },
        { address: "fd00:10::66", port: 8080, mac: "02:00:0a:00:00:66", bridgePort: "vm2" },
      ],
    },
  ],
  ...over,
});

const lbInputs = (over: Partial<DeferredNatLoadBalancerInputs> = {}): DeferredNatLoadBalancerInputs => ({
  name: "web6",
  gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
  hypervisors: [{ name: "hv1" }],
  vips: [
    { address: "fd00:10::c8", port: 80, protocol: "tcp", backends: [{ address: "FD00:10::65", port: 8080, mac: "02:00:0a:00:00:65", hypervisor: "hv1" }] },
    { address: "10.0.0.200", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", hypervisor: "hv1" }] },
  ],
  ...over,
});

const failures = async (kind: string, inputs: object) =>
  (await check(kind, {}, inputs as Record<string, unknown>)).failures.map((f) => `${f.property}: ${f.reason}`);

describe("IPv6 inputs", () => {
  it("are recorded in RFC 5952 form, so two spellings of one VIP are one VIP (a dual-stack service: one VIP of each family)", async () => {
    const checked = asLists("DsrHypervisorFlows", (await check("DsrHypervisorFlows", {}, hvInputs() as unknown as Record<string, unknown>)).inputs);
    const vips = checked.vips as DsrHypervisorFlowsInputs["vips"];
    expect(vips[0].address).toBe("fd00:10::c8");
    expect(vips[0].backends.map((b) => b.address).sort()).toEqual(["fd00:10::65", "fd00:10::66"]);
    const lb = asLists("DeferredNatLoadBalancer", (await check("DeferredNatLoadBalancer", {}, lbInputs() as unknown as Record<string, unknown>)).inputs);
    const lbVips = lb.vips as DeferredNatLoadBalancerInputs["vips"];
    expect(lbVips.map((v) => [v.address, v.backends[0].address]).sort()).toEqual([
      ["10.0.0.200", "10.0.0.101"],
      ["fd00:10::c8", "fd00:10::65"],
    ]);
    // The same VIP spelt twice is a duplicate, whatever the spelling.
    const twice = lbInputs();
    twice.vips = [twice.vips[0], { ...twice.vips[0], address: "FD00:0010:0::C8" }];
    expect(await failures("DeferredNatLoadBalancer", twice)).toContain("vips[1]: is the same address, port and protocol as another VIP");
  });

  it("check refuses a VIP mixing families, scoped, IPv4-mapped and prefix addresses, naming the property", async () => {
    const mixed = hvInputs();
    mixed.vips[0].backends[1] = { ...mixed.vips[0].backends[1], address: "10.0.0.102" };
    expect(await failures("DsrHypervisorFlows", mixed)).toContain(
      "vips[0].backends[1].address: is IPv4 in an IPv6 VIP: a VIP's backends are of its family (a dual-stack service is two VIPs, one of each family)",
    );
    // A zone is refused by the schema already (no %), before the rules run.
    const scoped = lbInputs();
    scoped.vips[0] = { ...scoped.vips[0], address: "fe80::c8%eth0" };
    expect((await failures("DeferredNatLoadBalancer", scoped)).some((f) => f.startsWith("vips[0].address: must be an IPv4 address"))).toBe(true);
    const mapped = lbInputs();
    mapped.vips[1].backends[0] = { ...mapped.vips[1].backends[0], address: "::ffff:10.0.0.101" };
    expect(await failures("DeferredNatLoadBalancer", mapped)).toEqual([
      'vips[1].backends[0].address: "::ffff:10.0.0.101": an IPv4-mapped IPv6 address: write the IPv4 address itself',
    ]);
    const prefix = hvInputs();
    prefix.vips[0].address = "fd00:10::/64";
    expect((await failures("DsrHypervisorFlows", prefix)).some((f) => f.startsWith("vips[0].address"))).toBe(true);
  });

  it("check takes IPv6 VIPs in every mode and feature: mac, gre over an IPv4 underlay, secondChance, healthCheck, pathMtu", async () => {
    const hvGre = hvInputs({ mode: "gre", gre: { allowedSources: ["172.16.11.2"] } });
    expect(await failures("DsrHypervisorFlows", hvGre)).toEqual([]);
    expect(
      await failures("DsrHypervisorFlows", hvInputs({ mode: "gre", gre: { allowedSources: ["172.16.11.2"], secondChance: { peers: ["172.16.22.2"] } } })),
    ).toEqual([]);
    expect(await failures("DsrHypervisorFlows", hvInputs({ pathMtu: true }))).toEqual([]);
    const gre = lbInputs({
      delivery: "gre",
      gateways: [{ ...lbInputs().gateways[0], tunnelAddress: "172.16.11.2" }],
      hypervisors: [{ name: "hv1", tunnelAddress: "172.16.21.2" }],
    });
    expect(await failures("DeferredNatLoadBalancer", gre)).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", { ...gre, secondChance: {} })).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", { ...gre, healthCheck: { bfd: { minRx: 100, minTx: 100, multiplier: 3 } } })).toEqual([]);
    // OVN probes IPv6 backends (OVN 23.03+): the IPv6 VIP needs the IPv6 probes' source, and only that one is named.
    const probed = await failures("DeferredNatLoadBalancer", { ...gre, healthCheck: { probe: {} } });
    expect(probed).toContain("healthCheck.probe: needs ovn: OVN's probes are Load_Balancer_Health_Check rows of the northbound load balancer");
    expect(probed.filter((f) => f.includes("OVN's probes does not carry"))).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", { ...gre, pathMtu: true })).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", lbInputs())).toEqual([]);
    expect(await failures("DsrHypervisorFlows", hvInputs())).toEqual([]);
  });
});

describe("an IPv6 underlay (gre delivery over ip6gre)", () => {
  const v6Underlay = (extra: object = {}) =>
    lbInputs({
      delivery: "gre",
      gateways: [{ ...lbInputs().gateways[0], tunnelAddress: "FD00:16:11:0::2" }],
      hypervisors: [{ name: "hv1", tunnelAddress: "fd00:16:21::2" }],
      ...extra,
    });

  it("is accepted with BFD, and its tunnel addresses are recorded canonical; the load balancer's tunnels are ip6gre", async () => {
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ healthCheck: { bfd: { minRx: 100, minTx: 100, multiplier: 3 } } }))).toEqual([]);
    const d = lbDefaults(v6Underlay() as never);
    expect(d.gateways[0].tunnelAddress).toBe("fd00:16:11::2");
    expect(tunnelPorts(d, d.gateways[0]).map((p) => [p.type, p.options.remote_ip, p.options.local_ip])).toEqual([["ip6gre", "fd00:16:21::2", "fd00:16:11::2"]]);
    // An IPv4 underlay's ports keep their type unsaid (gre), as before.
    const v4 = lbDefaults(
      lbInputs({
        delivery: "gre",
        gateways: [{ ...lbInputs().gateways[0], tunnelAddress: "172.16.11.2" }],
        hypervisors: [{ name: "hv1", tunnelAddress: "172.16.21.2" }],
      }) as never,
    );
    expect(tunnelPorts(v4, v4.gateways[0])[0].type).toBeUndefined();
  });

  it("refuses ends of two families, naming the property; second chance and pathMtu are taken, and two hypervisors whose hand-on keys collide are refused", async () => {
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ hypervisors: [{ name: "hv1", tunnelAddress: "172.16.21.2" }] }))).toEqual([
      "hypervisors[0].tunnelAddress: is IPv4 while gateways[0].tunnelAddress is IPv6: the underlay is of one family (gre ports over IPv4, ip6gre over IPv6)",
    ]);
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ secondChance: {} }))).toEqual([]);
    // fd00:16::7611 and fd00:16::c717 derive the same 32-bit key (found by search): second chance could not tell them apart.
    const colliding = [
      { name: "hv1", tunnelAddress: "fd00:16::7611" },
      { name: "hv2", tunnelAddress: "fd00:16::c717" },
    ];
    expect(handOnKey("fd00:16::7611")).toBe(handOnKey("FD00:16:0::C717"));
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ secondChance: {}, hypervisors: colliding }))).toEqual([
      `hypervisors[1].tunnelAddress: has the same second-chance hand-on key as hypervisors[0].tunnelAddress (${handOnKey("fd00:16::7611")}): give one of them another address`,
    ]);
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ hypervisors: colliding }))).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ pathMtu: true }))).toEqual([]);
    expect(await failures("DeferredNatLoadBalancer", v6Underlay({ hypervisors: [{ name: "hv1", tunnelAddress: "::ffff:172.16.21.2" }] }))).toEqual([
      'hypervisors[0].tunnelAddress: "::ffff:172.16.21.2": an IPv4-mapped IPv6 address: write the IPv4 address itself',
    ]);
  });
});

describe("IPv6 flows", () => {
  it("a hypervisor's flows match the VIP and backends in ipv6_* fields (tcp6), NAT to [backend]:port, and read back as the inputs", () => {
    const inputs = dsr.withDefaults(hvInputs());
    const id = "dsr-hypervisor-flows/172.30.0.21/br-seg/web6";
    const placement = {
      cookie: dsr.cookieOf(id),
      zone: 4242,
      ofports: new Map([
        ["vm1", 2],
        ["vm2", 3],
      ]),
    };
    const lines = dsr.desiredFlows(inputs, placement).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0].replace(/cookie=0x[0-9a-f]+/, "cookie=C"));
    expect(lines).toEqual([
      "flow add table=0,priority=1000,cookie=C,tcp6,dl_dst=02:00:0a:00:00:65,ipv6_dst=fd00:10::c8,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=[fd00:10::65]:8080))",
      "flow add table=0,priority=1000,cookie=C,tcp6,dl_dst=02:00:0a:00:00:66,ipv6_dst=fd00:10::c8,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=[fd00:10::66]:8080))",
      "flow add table=62,priority=1000,cookie=C,tcp6,ct_zone=4242,ipv6_dst=fd00:10::65,tp_dst=8080,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2",
      "flow add table=0,priority=1000,cookie=C,tcp6,in_port=2,ct_state=-trk,ipv6_src=fd00:10::65,tp_src=8080,actions=ct(table=60,zone=4242,nat)",
      "flow add table=62,priority=1000,cookie=C,tcp6,ct_zone=4242,ipv6_dst=fd00:10::66,tp_dst=8080,actions=set_field:02:00:0a:00:00:66->eth_dst,output:3",
      "flow add table=0,priority=1000,cookie=C,tcp6,in_port=3,ct_state=-trk,ipv6_src=fd00:10::66,tp_src=8080,actions=ct(table=60,zone=4242,nat)",
      "flow add table=60,priority=1000,cookie=C,ct_zone=4242,actions=resubmit(,0)",
    ]);
    // As OVS 3.1 prints them (fields in its order), parsed back: the same inputs.
    const dump = dsr.desiredFlows(inputs, placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    const portNames = new Map([
      [2, "vm1"],
      [3, "vm2"],
    ]);
    expect(dsr.actualInputs(inputs, dump, { ...placement, portNames })).toEqual(inputs);
    // Removing a backend flushes its conntrack entries by IPv6 tuple.
    const [flush] = dsr.conntrackFlushes(
      dump,
      dump.filter((f) => !renderBundle([{ op: "add-flow", flow: f }])[0].includes("fd00:10::66")),
    );
    expect(flush).toEqual({ zone: 4242, orig: { proto: 6, dst: "fd00:10::c8", dport: 80 }, reply: { proto: 6, src: "fd00:10::66", sport: 8080 } });
    expect(
      parseFlows(
        ` cookie=0x1, duration=1s, table=0, n_packets=0, n_bytes=0, priority=1000,tcp6,dl_dst=02:00:0a:00:00:65,ipv6_dst=fd00:10::c8,tp_dst=80 actions=ct(commit,table=62,zone=4242,nat(dst=[fd00:10::65]:8080))`,
      )[0].otherMatch,
    ).toEqual([]);
  });

  it("fragments of an IPv6 VIP: every IPv6 fragment to its address (after the first, OVS sees no transport protocol), on the gateway and the hypervisor", () => {
    const inputs = lbDefaults(lbInputs({ vips: [{ ...lbInputs().vips[0], protocol: "udp", fragments: true }] }));
    const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
    const [v6] = desiredDataplane(inputs, ids, { segmentOfport: 1, mac: "02:00:0a:00:00:0b" });
    expect(v6.flows.map((f) => f.match)).toEqual([
      { protocol: "udp6", ipv6_dst: "fd00:10::c8", in_port: 1, tp_dst: 80 },
      { protocol: "ipv6", ipv6_dst: "fd00:10::c8", in_port: 1, nw_frag: "yes" },
    ]);
    expect(toGroupEntry(v6.group).fields).toEqual(["ipv6_src", "ipv6_dst"]);
    const hv = dsr.withDefaults(hvInputs({ vips: [{ ...hvInputs().vips[0], protocol: "udp", fragments: true }] }));
    const placement = {
      cookie: 1n,
      zone: 7,
      ofports: new Map([
        ["vm1", 2],
        ["vm2", 3],
      ]),
    };
    const twins = dsr.desiredFlows(hv, placement).filter((f) => f.match.nw_frag === "yes");
    expect(twins.map((f) => f.match.protocol)).toEqual(Array(twins.length).fill("ipv6"));
    expect(twins.length).toBe(6); // per backend: its request, delivery and reply, for the fragments
  });

  it("a gateway's IPv6 VIP: its flow matches ipv6_dst, its group hashes ipv6_src and ipv6_dst; the IPv4 VIP beside it is unchanged", () => {
    const inputs = lbDefaults(lbInputs());
    const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
    const [v6, v4] = desiredDataplane(inputs, ids, { segmentOfport: 1, mac: "02:00:0a:00:00:0b" });
    expect(v6.flows[0].match).toEqual({ protocol: "tcp6", ipv6_dst: "fd00:10::c8", in_port: 1, tp_dst: 80 });
    expect(toGroupEntry(v6.group).fields).toEqual(["ipv6_src", "ipv6_dst", "tcp_src", "tcp_dst"]);
    expect(v4.flows[0].match).toEqual({ protocol: "tcp", nw_dst: "10.0.0.200", in_port: 1, tp_dst: 80 });
    expect(toGroupEntry(v4.group).fields).toEqual(["ip_src", "ip_dst", "tcp_src", "tcp_dst"]);
  });
});
