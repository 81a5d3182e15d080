import { describe, expect, it } from "vitest";
import { check } from "../../provider/handlers";
import type { ObservedBridge } from "../../provider/engine/plan";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { renderBundle, toGroupEntry, type Flow } from "../../provider/openflow";
import { renderFinding } from "../../provider/model/drift";
import { parseZoneLimits, zoneLimitArgs } from "../../provider/openflow/conntrack";
import {
  actualInputs,
  assignIds,
  gatewayIntent,
  pathMtuFlows,
  withDefaults,
  type DeferredNatDefaulted,
  type GatewayPort,
} from "../../provider/resources/deferred-nat-load-balancer/plan";
import { planGatewayScoped, updateScope } from "../../provider/resources/deferred-nat-load-balancer/scope";
import { planAllSlots } from "../../provider/resources/deferred-nat-load-balancer/second-chance";
import {
  actualInputs as dsrActual,
  cookieOf as dsrCookie,
  desiredFlows,
  PATH_MTU_TABLE,
  withDefaults as dsrDefaults,
} from "../../provider/resources/dsr-hypervisor-flows/plan";

/** Real networks as pure data: pathMtu (the gateways' fan-out of ICMP "fragmentation needed", the hypervisors' related-only delivery) and connectionLimit (zone limits). */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const backend = (i: number, hypervisor: string): DeferredNatBackend => ({
  address: `10.0.0.${100 + i}`,
  port: 8080,
  mac: `02:00:0a:00:00:${(100 + i).toString(16)}`,
  hypervisor,
});
const gw: GatewayPort = {
  segmentOfport: 1,
  mac: "02:00:0a:00:00:0b",
  tunnelOfports: new Map([
    ["hv1", 61001],
    ["hv2", 61002],
    ["hv3", 61003],
  ]),
};

function lb(extra: Partial<DeferredNatLoadBalancerInputs> = {}): DeferredNatDefaulted {
  return withDefaults({
    name: "pmtu",
    pathMtu: true,
    gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: gw.mac, tunnelAddress: "172.16.11.2" }],
    hypervisors: ["hv1", "hv2", "hv3"].map((name, i) => ({ name, tunnelAddress: `172.16.2${i + 1}.2` })),
    vips: [
      // Two VIPs of one address, on hv1+hv2 and hv2+hv3: one fan-out to all three.
      { address: "10.0.0.196", port: 80, protocol: "tcp", backends: [backend(2, "hv1"), backend(1, "hv1"), backend(3, "hv2")] },
      { address: "10.0.0.196", port: 443, protocol: "tcp", backends: [backend(4, "hv3"), backend(5, "hv2")] },
      { address: "10.0.0.197", port: 80, protocol: "tcp", backends: [backend(6, "hv1")] },
    ],
    ...extra,
  });
}
const line = (f: Flow) => renderBundle([{ op: "add-flow", flow: f }])[0];
const observedOf = (flows: readonly Flow[], groups: ReturnType<typeof gatewayIntent>["groups"] = []): ObservedBridge => ({
  ports: new Map(),
  flows: flows.map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n })),
  groups: groups.map((g) => toGroupEntry(g)),
});

describe("pathMtu on the gateways", () => {
  it("one flow per VIP address sends its ICMP fragmentation-needed errors to every hypervisor of its VIPs, one copy each, to the first backend's MAC there", () => {
    const flows = pathMtuFlows(lb({ delivery: "mac" }), gw).map(line);
    expect(flows).toHaveLength(2);
    expect(flows[0]).toMatch(/,icmp,in_port=1,nw_dst=10\.0\.0\.196,icmp_type=3,icmp_code=4,actions=set_field:02:00:0a:00:00:0b->eth_src,/);
    expect(flows[0]).toMatch(
      /actions=set_field:02:00:0a:00:00:0b->eth_src,set_field:02:00:0a:00:00:65->eth_dst,IN_PORT,set_field:02:00:0a:00:00:67->eth_dst,IN_PORT,set_field:02:00:0a:00:00:68->eth_dst,IN_PORT$/,
    );
    const gre = pathMtuFlows(lb({ delivery: "gre" }), gw).map(line);
    expect(gre[0]).toMatch(
      /,set_field:02:00:0a:00:00:65->eth_dst,output:61001,set_field:02:00:0a:00:00:67->eth_dst,output:61002,set_field:02:00:0a:00:00:68->eth_dst,output:61003$/,
    );
    // Second chance's tunnels take the key from the flow: 0, no previous owner to ask.
    const sc = lb({ delivery: "gre", secondChance: {} });
    const scFlows = gatewayIntent(sc, assignIds(sc, { groupIds: {}, bucketIds: {} }, new Set()), gw, planAllSlots(sc, undefined).tables).flows;
    expect(scFlows.filter((f) => f.match.protocol === "icmp").map(line)[0]).toMatch(
      /->eth_src,set_field:0->tun_id,set_field:02:00:0a:00:00:65->eth_dst,output:61001,/,
    );
    // Off by default.
    expect(pathMtuFlows(withDefaults({ ...lb(), pathMtu: undefined }), gw)).toEqual([]);
  });

  it("reads back: a fan-out flow missing on a gateway takes that address's VIPs out of the inputs it reads, and says so", () => {
    const inputs = lb({ delivery: "gre" });
    const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
    const intent = gatewayIntent(inputs, ids, gw);
    const g = { name: "gw1", port: gw, observed: observedOf(intent.flows, intent.groups) };
    expect(actualInputs(inputs, ids, [g]).inputs).toEqual(inputs);
    const without = intent.flows.filter((f) => !(f.match.protocol === "icmp" && f.match.nw_dst === "10.0.0.196"));
    const read = actualInputs(inputs, ids, [{ ...g, observed: observedOf(without, intent.groups) }]);
    expect(read.inputs.vips.map((v) => v.address)).toEqual(["10.0.0.197"]);
    expect(read.observations[0].findings.map(renderFinding)).toContain("gw1: VIP tcp:10.0.0.196:80: ICMP fan-out flow missing or changed");
  });

  it("a scoped update that moves a backend to another hypervisor re-plans that address's fan-out from all its VIPs, and leaves the other address's alone", () => {
    const old = lb({ delivery: "gre" });
    const ids = assignIds(old, { groupIds: {}, bucketIds: {} }, new Set());
    const news = withDefaults({ ...old, vips: [old.vips[0], { ...old.vips[1], backends: [backend(4, "hv1"), backend(5, "hv2")] }, old.vips[2]] });
    const scope = updateScope(old, news, { ...ids, driftFindings: [], drift: [], gatewayPorts: {} });
    expect(scope.kind).toBe("vips");
    const before = gatewayIntent(old, ids, gw);
    const mods = planGatewayScoped("gw1", news, scope as Extract<typeof scope, { kind: "vips" }>, ids, gw, observedOf(before.flows, before.groups));
    const fanout = mods.filter((m) => m.op === "modify-flow" && m.flow.match.protocol === "icmp");
    expect(fanout).toHaveLength(1);
    // hv3 is gone from 10.0.0.196's VIPs: two copies now.
    expect(line((fanout[0] as { flow: Flow }).flow)).toMatch(/nw_dst=10\.0\.0\.196,.*output:61001,set_field:02:00:0a:00:00:67->eth_dst,output:61002$/);
    expect(mods.some((m) => "flow" in m && m.flow.match.nw_dst === "10.0.0.197")).toBe(false);
  });

  it("an IPv6 VIP's fan-out takes ICMPv6 packet too big (type 2 code 0) to its address, beside the IPv4 VIP's fragmentation needed; reads back and counts by address", () => {
    const v6 = (b: DeferredNatBackend): DeferredNatBackend => ({ ...b, address: `fd00:10::${b.address.split(".")[3]}` });
    const inputs = lb({
      delivery: "gre",
      vips: [
        { address: "10.0.0.196", port: 80, protocol: "tcp", backends: [backend(1, "hv1"), backend(3, "hv2")] },
        { address: "FD00:20:0::196", port: 80, protocol: "tcp", backends: [v6(backend(1, "hv1")), v6(backend(3, "hv2"))] },
      ],
    });
    const flows = pathMtuFlows(inputs, gw).map(line);
    expect(flows).toHaveLength(2);
    expect(flows[0]).toMatch(/,icmp,in_port=1,nw_dst=10\.0\.0\.196,icmp_type=3,icmp_code=4,actions=/);
    expect(flows[1]).toMatch(/,icmp6,in_port=1,ipv6_dst=fd00:20::196,icmp_type=2,icmp_code=0,actions=.*output:61001,.*output:61002$/);
    const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
    const intent = gatewayIntent(inputs, ids, gw);
    const g = { name: "gw1", port: gw, observed: observedOf(intent.flows, intent.groups) };
    expect(actualInputs(inputs, ids, [g]).inputs).toEqual(inputs);
    const without = intent.flows.filter((f) => f.match.icmp_type !== 2);
    const read = actualInputs(inputs, ids, [{ ...g, observed: observedOf(without, intent.groups) }]);
    expect(read.inputs.vips.map((v) => v.address)).toEqual(["10.0.0.196"]);
  });

  it("check takes pathMtu on both resources", async () => {
    expect((await check("DeferredNatLoadBalancer", {}, lb() as unknown as Record<string, unknown>)).failures).toEqual([]);
  });
});

describe("pathMtu on the hypervisors", () => {
  const ID = "dsr-hypervisor-flows/172.30.0.21/br-seg/pmtu";
  const placement = {
    cookie: dsrCookie(ID),
    zone: 77,
    ofports: new Map([
      ["vm1", 2],
      ["vm2", 3],
    ]),
    greOfport: 60001,
  };
  const dsr = (gre: boolean) =>
    dsrDefaults({
      name: "pmtu",
      host: { connection: conn("172.30.0.21") },
      bridge: "br-seg",
      pathMtu: true,
      ...(gre ? { mode: "gre" as const, gre: { allowedSources: ["172.16.11.2", "172.16.12.2"], key: 7 } } : {}),
      vips: [80, 443].map((port) => ({
        address: "10.0.0.196",
        port,
        backends: [
          { address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" },
          { address: "10.0.0.102", port: 8080, mac: "02:00:0a:00:00:66", bridgePort: "vm2" },
        ],
      })),
    });

  it("passes the VIP address's errors through conntrack (mac: to a backend's MAC; gre: from an allowed source, with the key), delivers what is related, translated, to its backend, and drops the rest", async () => {
    const mac = desiredFlows(dsr(false), placement).map(line);
    const c = placement.cookie.toString(16);
    expect(mac.filter((l) => l.includes("icmp_type=3,icmp_code=4"))).toEqual([
      `flow add table=0,priority=1000,cookie=0x${c},icmp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.196,icmp_type=3,icmp_code=4,actions=ct(table=${PATH_MTU_TABLE},zone=77,nat)`,
      `flow add table=0,priority=1000,cookie=0x${c},icmp,dl_dst=02:00:0a:00:00:66,nw_dst=10.0.0.196,icmp_type=3,icmp_code=4,actions=ct(table=${PATH_MTU_TABLE},zone=77,nat)`,
    ]);
    expect(mac.filter((l) => l.startsWith(`flow add table=${PATH_MTU_TABLE},`))).toEqual([
      `flow add table=${PATH_MTU_TABLE},priority=1000,cookie=0x${c},icmp,ct_state=+rel+trk,ct_zone=77,nw_dst=10.0.0.101,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2`,
      `flow add table=${PATH_MTU_TABLE},priority=1000,cookie=0x${c},icmp,ct_state=+rel+trk,ct_zone=77,nw_dst=10.0.0.102,actions=set_field:02:00:0a:00:00:66->eth_dst,output:3`,
      `flow add table=${PATH_MTU_TABLE},priority=100,cookie=0x${c},ct_zone=77,actions=drop`,
    ]);
    const gre = desiredFlows(dsr(true), placement).map(line);
    expect(gre.filter((l) => l.includes("icmp_type=3"))).toEqual(
      ["172.16.11.2", "172.16.12.2"].map(
        (s) =>
          `flow add table=0,priority=1000,cookie=0x${c},icmp,in_port=60001,tun_src=${s},tun_id=0x7,nw_dst=10.0.0.196,icmp_type=3,icmp_code=4,actions=ct(table=${PATH_MTU_TABLE},zone=77,nat)`,
      ),
    );
  });

  it("an IPv6 VIP: ICMPv6 packet too big through conntrack, the related delivery by the backend's IPv6 address", () => {
    const inputs = dsrDefaults({
      ...dsr(false),
      vips: [
        {
          address: "fd00:20::196",
          port: 80,
          backends: [{ address: "fd00:10::101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" }],
        },
      ],
    });
    const flows = desiredFlows(inputs, placement).map(line);
    const c = placement.cookie.toString(16);
    expect(flows.filter((l) => l.includes("icmp"))).toEqual([
      `flow add table=0,priority=1000,cookie=0x${c},icmp6,dl_dst=02:00:0a:00:00:65,ipv6_dst=fd00:20::196,icmp_type=2,icmp_code=0,actions=ct(table=${PATH_MTU_TABLE},zone=77,nat)`,
      `flow add table=${PATH_MTU_TABLE},priority=1000,cookie=0x${c},icmp6,ct_state=+rel+trk,ct_zone=77,ipv6_dst=fd00:10::101,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2`,
    ]);
    const read = desiredFlows(inputs, placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    expect(dsrActual(inputs, read, { ...placement, portNames: new Map([[2, "vm1"]]) })).toEqual(inputs);
  });

  it("reads back as its inputs; without the related delivery of a backend, that backend is not read as serving", () => {
    const inputs = dsr(false);
    const flows = desiredFlows(inputs, placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    const portNames = new Map([
      [2, "vm1"],
      [3, "vm2"],
    ]);
    expect(dsrActual(inputs, flows, { ...placement, portNames })).toEqual(inputs);
    const missing = flows.filter((f) => !(f.table === PATH_MTU_TABLE && f.match.nw_dst === "10.0.0.102"));
    expect(dsrActual(inputs, missing, { ...placement, portNames }).vips.map((v) => v.backends.map((b) => b.address))).toEqual([["10.0.0.101"], ["10.0.0.101"]]);
  });
});

describe("connectionLimit: zone limits as ovs-vswitchd prints them", () => {
  it("reads dpctl/ct-get-limits (captured from OVS 3.1): a zone's own limit and count; one with none of its own shows the default's", () => {
    expect(parseZoneLimits("default limit=0\nzone=46035,limit=200,count=200\n")).toEqual([{ zone: 46035, limit: 200, count: 200, own: true }]);
    expect(parseZoneLimits("default limit=0\nzone=4243,limit=0,count=0\n")).toEqual([{ zone: 4243, limit: 0, count: 0, own: false }]);
    expect(parseZoneLimits("default limit=500\nzone=7,limit=500,count=3\n")[0].own).toBe(false);
    expect(zoneLimitArgs.set(7, 200)).toEqual(["dpctl/ct-set-limits", "zone=7,limit=200"]);
    expect(zoneLimitArgs.del(7)).toEqual(["dpctl/ct-del-limits", "zone=7"]);
  });

  it("check refuses a limit below 1, naming it", async () => {
    const { failures } = await check(
      "DsrHypervisorFlows",
      {},
      {
        name: "flood",
        host: { connection: conn("172.30.0.21") },
        bridge: "br-seg",
        connectionLimit: 0,
        vips: [{ address: "10.0.0.161", port: 80, backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" }] }],
      },
    );
    expect(failures.map((f) => f.property)).toEqual(["connectionLimit"]);
  });
});

describe("fragments: a UDP VIP whose datagrams fragment", () => {
  const udp = (extra: Partial<DeferredNatLoadBalancerInputs> = {}) =>
    lb({
      pathMtu: false,
      delivery: "mac",
      vips: [{ address: "10.0.0.163", port: 53, protocol: "udp", fragments: true, backends: [backend(1, "hv1"), backend(3, "hv2")] }],
      ...extra,
    });

  it("hashes on addresses only, and sends every fragment to the address (whose ports OVS reads as 0) to the same group", () => {
    const inputs = udp();
    const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
    const intent = gatewayIntent(inputs, ids, gw);
    expect(renderBundle([{ op: "add-group", group: intent.groups[0] }])[0]).toMatch(/selection_method=hash,fields\(ip_src,ip_dst\),/);
    expect(intent.flows.map(line)).toEqual([
      expect.stringMatching(/,udp,in_port=1,nw_dst=10\.0\.0\.163,tp_dst=53,actions=group:\d+$/),
      expect.stringMatching(/,udp,in_port=1,nw_dst=10\.0\.0\.163,nw_frag=yes,actions=group:\d+$/),
    ]);
    // Read back whole; the fragments flow gone reads as the VIP gone.
    const g = { name: "gw1", port: gw, observed: observedOf(intent.flows, intent.groups) };
    expect(actualInputs(inputs, ids, [g]).inputs).toEqual(inputs);
    expect(actualInputs(inputs, ids, [{ ...g, observed: observedOf(intent.flows.slice(0, 1), intent.groups) }]).inputs.vips).toEqual([]);
  });

  it("check refuses fragments on tcp, with secondChance, or beside another udp VIP of the address, naming the VIP", async () => {
    const reasons = async (i: DeferredNatDefaulted) => (await check("DeferredNatLoadBalancer", {}, i as unknown as Record<string, unknown>)).failures;
    expect(await reasons(udp())).toEqual([]);
    const tcp = udp();
    tcp.vips[0] = { ...tcp.vips[0], protocol: "tcp" };
    expect(await reasons(tcp)).toEqual([{ property: "vips[0].fragments", reason: expect.stringMatching(/^is for udp VIPs/) }]);
    expect((await reasons(udp({ delivery: "gre", secondChance: {} }))).map((f) => f.property)).toContain("vips[0].fragments");
    const two = udp();
    two.vips.push({ ...two.vips[0], port: 54, fragments: false });
    expect(await reasons(two)).toEqual([{ property: "vips[0].fragments", reason: expect.stringMatching(/only udp VIP of its address/) }]);
  });

  it("on the hypervisor, every fragment goes into conntrack beside the request flow, and the backend's delivery and reply flows have their fragment twins", () => {
    const inputs = dsrDefaults({
      name: "frag",
      host: { connection: conn("172.30.0.21") },
      bridge: "br-seg",
      vips: [
        {
          address: "10.0.0.163",
          port: 53,
          protocol: "udp",
          fragments: true,
          backends: [{ address: "10.0.0.101", port: 5353, mac: "02:00:0a:00:00:65", bridgePort: "vm1" }],
        },
      ],
    });
    const placement = { cookie: dsrCookie("frag"), zone: 9, ofports: new Map([["vm1", 2]]) };
    const lines = desiredFlows(inputs, placement)
      .map(line)
      .filter((l) => l.includes("nw_frag=yes"));
    expect(lines.map((l) => l.replace(/cookie=0x[0-9a-f]+,/, ""))).toEqual([
      "flow add table=0,priority=1000,udp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.163,nw_frag=yes,actions=ct(commit,table=62,zone=9,nat(dst=10.0.0.101:5353))",
      "flow add table=62,priority=1000,udp,ct_zone=9,nw_dst=10.0.0.101,nw_frag=yes,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2",
      "flow add table=0,priority=1000,udp,in_port=2,ct_state=-trk,nw_src=10.0.0.101,nw_frag=yes,actions=ct(table=60,zone=9,nat)",
    ]);
    const owned = desiredFlows(inputs, placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    const portNames = new Map([[2, "vm1"]]);
    expect(dsrActual(inputs, owned, { ...placement, portNames })).toEqual(inputs);
    expect(
      dsrActual(
        inputs,
        owned.filter((f) => f.match.nw_frag === undefined),
        { ...placement, portNames },
      ).vips,
    ).toEqual([]);
  });
});
