import { describe, it, expect } from "vitest";
import { asLists, check, diff } from "../../provider/handlers";
import { planBridge } from "../../provider/engine/plan";
import type { DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { flushConntrackArgs, flushSelects, parseConntrack } from "../../provider/openflow";
import * as plan from "../../provider/resources/dsr-hypervisor-flows/plan";
import { conntrackFlushes, cookieOf, derivedZone, dsrId, withDefaults, zonesOf } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { renderBundle } from "../../provider/openflow";
import { editedDump, observedFrom, recordedDump } from "../support/recorded-dumps";

// The plans take defaulted inputs (check defaults them once); these tests build raw ones.
type Raw = DsrHypervisorFlowsInputs;
const planIntent = (id: string, i: Raw, ...rest: Parameters<typeof plan.planIntent> extends [unknown, unknown, ...infer R] ? R : never) =>
  plan.planIntent(id, withDefaults(i), ...rest);
const desiredFlows = (i: Raw, ...rest: Parameters<typeof plan.desiredFlows> extends [unknown, ...infer R] ? R : never) =>
  plan.desiredFlows(withDefaults(i), ...rest);
const actualInputs = (i: Raw, ...rest: Parameters<typeof plan.actualInputs> extends [unknown, ...infer R] ? R : never) =>
  plan.actualInputs(withDefaults(i), ...rest);

/** The flushes as the argv ovs-appctl gets. */
const flushArgs = (...args: Parameters<typeof conntrackFlushes>) => conntrackFlushes(...args).map(flushConntrackArgs);

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const vm1 = { address: "10.0.0.101", port: 8080, mac: "02:00:0A:00:00:65", bridgePort: "vm1" };
const vm2 = { address: "10.0.0.102", port: 8080, mac: "02:00:0a:00:00:66", bridgePort: "vm2" };

function inputs(): DsrHypervisorFlowsInputs {
  return {
    name: "web",
    host: { connection: { host: "172.30.0.21", user: "root", hostKey: KEY, privateKeyPath: "/k" } },
    bridge: "br-seg",
    vips: [
      { address: "10.0.0.220", port: 80, backends: [vm1, vm2] },
      { address: "10.0.0.221", port: 81, protocol: "tcp", backends: [vm1] },
    ],
  };
}

const ID = "dsr-hypervisor-flows/172.30.0.21/br-seg/web";
const placement = {
  cookie: cookieOf(ID),
  zone: 4242,
  ofports: new Map([
    ["vm1", 2],
    ["vm2", 3],
  ]),
};

const lines = (i: DsrHypervisorFlowsInputs) => desiredFlows(withDefaults(i), placement).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0]);

describe("DsrHypervisorFlows check", () => {
  const failuresOf = async (i: unknown) => (await check("DsrHypervisorFlows", {}, i as Record<string, unknown>)).failures;

  it("fills defaults (mode mac, protocol tcp) and lower-cases MACs as OVS prints them", async () => {
    const { inputs: keyed, failures } = await check("DsrHypervisorFlows", {}, inputs() as unknown as Record<string, unknown>);
    expect(failures).toEqual([]);
    const checked = asLists("DsrHypervisorFlows", keyed);
    expect(checked).toMatchObject({ mode: "mac", vips: [{ protocol: "tcp", backends: [{ mac: "02:00:0a:00:00:65" }, {}] }, { protocol: "tcp" }] });
  });

  it("refuses bad addresses, ports, MACs, port names, modes and zones, naming each property", async () => {
    const bad = inputs() as any;
    bad.vips[0].address = "10.0.0.300";
    bad.vips[0].port = 0;
    bad.vips[0].protocol = "icmp";
    bad.vips[1].backends = [{ address: "10.0.0.1,actions=drop", port: 70000, mac: "03:00:00:00:00:01", bridgePort: "vm1;reboot" }];
    bad.mode = "vxlan";
    bad.zone = 0;
    const failures = await failuresOf(bad);
    const by = Object.fromEntries(failures.map((f) => [f.property, f.reason]));
    expect(Object.keys(by).sort()).toEqual([
      "mode",
      "vips[0].address",
      "vips[0].port",
      "vips[0].protocol",
      "vips[1].backends[0].address",
      "vips[1].backends[0].bridgePort",
      "vips[1].backends[0].mac",
      "vips[1].backends[0].port",
      "zone",
    ]);
    expect(by["vips[1].backends[0].mac"]).toMatch(/unicast Ethernet MAC/);
    expect(by["vips[1].backends[0].bridgePort"]).toMatch(/OVS port name/);
    expect(by.mode).toBe('must be one of "mac", "gre", "ipip"');
    expect(JSON.stringify(failures)).not.toContain("reboot");
  });

  it("refuses duplicate VIPs, duplicate backends in a VIP, a VIP equal to a backend, and one address with two MACs", async () => {
    const i = inputs();
    i.vips.push({ address: "10.0.0.220", port: 80, protocol: "tcp", backends: [vm2] });
    i.vips[0].backends.push({ ...vm1 });
    i.vips[1].backends.push({ ...vm2, address: "10.0.0.221", mac: "02:00:0a:00:00:99" });
    i.vips.push({ address: "10.0.0.222", port: 80, backends: [{ ...vm2, mac: "02:00:0a:00:00:77" }] });
    const failures = await failuresOf(i);
    expect(failures).toEqual([
      { property: "vips[0].backends[2]", reason: "duplicates vips[0].backends[0]: the same address and port" },
      { property: "vips[1].backends[1].address", reason: "equals the VIP's address: a backend must not be its own VIP" },
      { property: "vips[2]", reason: "duplicates vips[0]: the same address, port and protocol" },
      { property: "vips[3].backends[0].mac", reason: "differs from the MAC given for the same address at vips[0].backends[1]" },
    ]);
  });

  it("refuses two backends of one VIP on one MAC (mac mode cannot tell them apart), and a backend that is another VIP", async () => {
    const i = inputs();
    i.vips[0].backends = [vm1, { ...vm1, port: 8081 }];
    i.vips[1].backends = [{ ...vm2, address: "10.0.0.220" }];
    const failures = await failuresOf(i);
    expect(failures.map((f) => f.property)).toEqual(["vips[0].backends[1].mac", "vips[1].backends[0].address"]);
    expect(failures[0].reason).toMatch(/told apart by MAC/);
    expect(failures[1].reason).toMatch(/address of another VIP/);
  });

  it("diff replaces only for identity: name, host address, bridge", async () => {
    const checked = asLists("DsrHypervisorFlows", (await check("DsrHypervisorFlows", {}, inputs() as unknown as Record<string, unknown>)).inputs);
    const outs = { ...checked, cookie: "0x1", ctZone: 4242, ofports: { vm1: 2 } };
    expect(await diff("DsrHypervisorFlows", ID, outs, checked)).toEqual({ changes: false });
    const fewer = structuredClone(checked) as any;
    fewer.vips.pop();
    fewer.zone = 9;
    expect(await diff("DsrHypervisorFlows", ID, outs, fewer)).toMatchObject({ changes: true, replaces: [] });
    const moved = structuredClone(checked) as any;
    moved.bridge = "br-int";
    moved.name = "web2";
    moved.host.connection.host = "172.30.0.22";
    expect((await diff("DsrHypervisorFlows", ID, outs, moved)).replaces?.sort()).toEqual(["bridge", "host.connection.host", "name"]);
  });
});

describe("DsrHypervisorFlows flows", () => {
  it("DNATs each (VIP, backend) by MAC with conntrack in the zone, delivers to the backend conntrack chose, un-DNATs each backend once, forwards the zone", () => {
    const cookie = `0x${cookieOf(ID).toString(16)}`;
    expect(lines(inputs())).toEqual([
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:66,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.102:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.221,tp_dst=81,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      // vm1 serves two VIPs and has one delivery and one reply flow: both follow each connection's own conntrack entry.
      `flow add table=62,priority=1000,cookie=${cookie},tcp,ct_zone=4242,nw_dst=10.0.0.101,tp_dst=8080,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=2,ct_state=-trk,nw_src=10.0.0.101,tp_src=8080,actions=ct(table=60,zone=4242,nat)`,
      `flow add table=62,priority=1000,cookie=${cookie},tcp,ct_zone=4242,nw_dst=10.0.0.102,tp_dst=8080,actions=set_field:02:00:0a:00:00:66->eth_dst,output:3`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=3,ct_state=-trk,nw_src=10.0.0.102,tp_src=8080,actions=ct(table=60,zone=4242,nat)`,
      `flow add table=60,priority=1000,cookie=${cookie},ct_zone=4242,actions=resubmit(,0)`,
    ]);
  });

  it("derives cookie and zone from the resource id, reproducibly, past zones others use", () => {
    expect(dsrId(inputs())).toBe(ID);
    expect(cookieOf(ID) >> 48n).toBe(0x0b5en);
    const zone = derivedZone(ID, new Set());
    expect(zone).toBeGreaterThanOrEqual(1);
    expect(zone).toBeLessThanOrEqual(0xffff);
    expect(derivedZone(ID, new Set())).toBe(zone);
    expect(derivedZone(ID, new Set([zone]))).not.toBe(zone);
  });
});

/** A recorded hv1 dump, with what the tests read of it: the resource's inputs, cookie, zone and owned flows. */
function recorded(name: string) {
  const dump = recordedDump(name);
  const observed = observedFrom(dump);
  const id = dump.outputs.id as string;
  const cookie = cookieOf(id);
  return {
    dump,
    observed,
    id,
    inputs: dump.inputs as DsrHypervisorFlowsInputs,
    cookie,
    zone: dump.outputs.ctZone as number,
    owned: observed.flows.filter((f) => f.cookie === cookie),
    portNames: new Map([...observed.ports].map(([port, ofport]) => [ofport, port])),
  };
}

describe("DsrHypervisorFlows against hv1 as recorded from OVS", () => {
  // hv1's br-seg after creating unit-dsr (a tcp VIP on vm1 and vm2, a udp VIP on vm1), beside the
  // bridge's NORMAL flow and someone else's flow in conntrack zone 4321.
  const { dump, observed, id, inputs, cookie, zone, owned, portNames } = recorded("dsr-hv1");
  const read = (flows = owned) => actualInputs(inputs, flows, { cookie, zone, ofports: observed.ports, portNames });
  const plan = (next: DsrHypervisorFlowsInputs, on = observed) => planBridge("hv1", planIntent(id, next, zone, on).intent, on);

  it("reads the zones flows use, so a derived zone avoids others' (4321 here)", () => {
    expect(zonesOf(observed.flows.filter((f) => f.cookie !== cookie))).toEqual(new Set([4321]));
    expect([...zonesOf(owned)]).toEqual([zone]);
    expect(() => planIntent(id, { ...inputs, zone: 4321 }, zone, observed)).toThrow(
      /^zone: conntrack zone 4321 is already used by flows ovslb does not own on bridge br-seg$/,
    );
    expect(planIntent(id, inputs, undefined, observed).zone).toBe(zone);
  });

  it("plans nothing for the inputs that produced it; reads them back exactly", () => {
    expect(plan(inputs)).toEqual([]);
    expect(read()).toEqual(withDefaults(inputs));
  });

  it("a request flow deleted by hand reads as that (VIP, backend) missing, and the plan restores exactly that flow", () => {
    const drifted = observedFrom(
      editedDump(dump, ({ flows, groups }) => ({
        flows: flows
          .split("\n")
          .filter((l) => !l.includes("nw_dst=10.0.0.196"))
          .join("\n"),
        groups,
      })),
    );
    expect(read(drifted.flows.filter((f) => f.cookie === cookie)).vips.map((v) => v.address)).toEqual(["10.0.0.195"]);
    expect(renderBundle(plan(inputs, drifted))).toEqual([
      expect.stringMatching(/^flow add table=0,priority=1000,cookie=0x[0-9a-f]+,udp,dl_dst=02:00:0a:00:00:65,nw_dst=10\.0\.0\.196,tp_dst=53,actions=/),
    ]);
  });

  it("a reply flow deleted by hand reads as its backend missing from every VIP; a missing forward flow, as all missing", () => {
    const noReply = owned.filter((f) => f.match.nw_src !== "10.0.0.101");
    expect(read(noReply).vips).toEqual([{ ...inputs.vips[0], backends: [inputs.vips[0].backends[1]] }]);
    expect(read(owned.filter((f) => f.table !== 60)).vips).toEqual([]);
  });

  it("flows in another zone or to a port that is gone do not count", () => {
    expect(actualInputs(inputs, owned, { cookie, zone: zone + 1, ofports: observed.ports, portNames }).vips).toEqual([]);
    const vm2Gone = new Map([...portNames].filter(([, name]) => name !== "vm2"));
    expect(actualInputs(inputs, owned, { cookie, zone, ofports: observed.ports, portNames: vm2Gone }).vips[0].backends).toEqual([inputs.vips[0].backends[0]]);
  });

  it("adding a backend adds its request, delivery and reply flows only; a port the bridge lacks is refused naming the property", () => {
    const vm3 = { address: "10.0.0.103", port: 8080, mac: "02:00:0a:00:00:67", bridgePort: "vm3" };
    const more = { ...inputs, vips: [{ ...inputs.vips[0], backends: [...inputs.vips[0].backends, vm3] }, inputs.vips[1]] };
    expect(plan(more).map((m) => m.op)).toEqual(["add-flow", "add-flow", "add-flow"]);
    const nowhere = { ...inputs, vips: [{ ...inputs.vips[0], backends: [{ ...vm3, bridgePort: "vm9" }] }] };
    expect(() => plan(nowhere)).toThrow(/^vips\[0\]\.backends\[0\]\.bridgePort: bridge br-seg has no port vm9 with an ofport$/);
  });
});

describe("DsrHypervisorFlows upgrade from the flows of ovslb before the delivery table", () => {
  // hv1 as an older ovslb left it: each request flow output to its own backend's port, whatever conntrack translated it to.
  const { observed, id, inputs, cookie, zone, owned, portNames } = recorded("dsr-hv1-before-delivery-table");

  it("reads as every backend missing (refresh shows it), and update rewrites the request flows and adds the deliveries, keeping the reply and forward flows", () => {
    expect(actualInputs(inputs, owned, { cookie, zone, ofports: observed.ports, portNames }).vips).toEqual([]);
    const ops = planBridge("hv1", planIntent(id, inputs, zone, observed).intent, observed);
    expect(ops.map((o) => o.op).sort()).toEqual([...Array(3).fill("add-flow"), ...Array(3).fill("modify-flow")].sort());
    // Same zone, same backends: no conntrack entry is flushed.
    expect(flushArgs(owned, planIntent(id, inputs, zone, observed).intent.flows)).toEqual([]);
  });
});

describe("DsrHypervisorFlows conntrack flushes", () => {
  const flows = (i: DsrHypervisorFlowsInputs, zone = 4242) => desiredFlows(withDefaults(i), { ...placement, zone });
  const fewer = (): DsrHypervisorFlowsInputs => ({ ...inputs(), vips: [{ ...inputs().vips[0], backends: [vm1] }, inputs().vips[1]] });

  it("flush the entries of each (VIP, backend) the flows no longer commit, by partial tuples, and nothing else", () => {
    expect(flushArgs(flows(inputs()), flows(inputs()))).toEqual([]);
    expect(flushArgs(flows(fewer()), flows(inputs()))).toEqual([]);
    expect(flushArgs(flows(inputs()), flows(fewer()))).toEqual([
      ["dpctl/flush-conntrack", "zone=4242", "ct_nw_dst=10.0.0.220,ct_nw_proto=6,ct_tp_dst=80", "ct_nw_src=10.0.0.102,ct_nw_proto=6,ct_tp_src=8080"],
    ]);
    // vm1 leaves one VIP and keeps the other: only that VIP's entries of it go.
    const vm1OnOne = { ...inputs(), vips: [inputs().vips[0]] };
    expect(flushArgs(flows(inputs()), flows(vm1OnOne))).toEqual([
      ["dpctl/flush-conntrack", "zone=4242", "ct_nw_dst=10.0.0.221,ct_nw_proto=6,ct_tp_dst=81", "ct_nw_src=10.0.0.101,ct_nw_proto=6,ct_tp_src=8080"],
    ]);
  });

  it("a flush selects, in a dumped zone, exactly the entries of the (VIP, backend) that left", () => {
    const dump = [
      "tcp,orig=(src=10.0.0.2,dst=10.0.0.220,sport=40001,dport=80),reply=(src=10.0.0.102,dst=10.0.0.2,sport=8080,dport=40001),zone=4242,protoinfo=(state=TIME_WAIT)",
      "tcp,orig=(src=10.0.0.2,dst=10.0.0.220,sport=40002,dport=80),reply=(src=10.0.0.101,dst=10.0.0.2,sport=8080,dport=40002),zone=4242,protoinfo=(state=ESTABLISHED)",
      "tcp,orig=(src=10.0.0.2,dst=10.0.0.221,sport=40003,dport=81),reply=(src=10.0.0.102,dst=10.0.0.2,sport=8080,dport=40003),zone=4242,protoinfo=(state=ESTABLISHED)",
      "udp,orig=(src=10.0.0.2,dst=10.0.0.220,sport=40004,dport=80),reply=(src=10.0.0.102,dst=10.0.0.2,sport=8080,dport=40004),zone=4242",
      "tcp,orig=(src=10.0.0.2,dst=10.0.0.220,sport=40005,dport=80),reply=(src=10.0.0.102,dst=10.0.0.2,sport=8080,dport=40005),zone=7,protoinfo=(state=ESTABLISHED)",
    ].join("\n");
    const entries = parseConntrack(dump);
    expect(entries[0]).toEqual({
      protocol: "tcp",
      orig: { src: "10.0.0.2", dst: "10.0.0.220", sport: 40001, dport: 80 },
      reply: { src: "10.0.0.102", dst: "10.0.0.2", sport: 8080, dport: 40001 },
      zone: 4242,
      state: "TIME_WAIT",
    });
    const [flush] = conntrackFlushes(flows(inputs()), flows(fewer()));
    expect(entries.map((e) => flushSelects(flush, e))).toEqual([true, false, false, false, false]);
    expect(entries.map((e) => flushSelects({ zone: 4242 }, e))).toEqual([true, true, true, true, false]);
  });

  it("a udp VIP's entries are flushed as udp; a new zone flushes the old zone's entries; flows of others are never read as ours", () => {
    const udp = { ...inputs(), vips: [{ address: "10.0.0.222", port: 53, protocol: "udp" as const, backends: [{ ...vm1, port: 5353 }] }] };
    expect(flushArgs(flows(udp), flows(inputs()))).toEqual([
      ["dpctl/flush-conntrack", "zone=4242", "ct_nw_dst=10.0.0.222,ct_nw_proto=17,ct_tp_dst=53", "ct_nw_src=10.0.0.101,ct_nw_proto=17,ct_tp_src=5353"],
    ]);
    expect(flushArgs(flows(fewer(), 7), flows(fewer(), 8)).map((f) => f[1])).toEqual(["zone=7", "zone=7"]);
    // The second-chance pipeline commits in its SYN and no-chance flows: the same backends, once each.
    const sc = { ...inputs(), mode: "gre" as const, gre: { allowedSources: ["172.16.11.2"], secondChance: { peers: ["172.16.11.3"] } } };
    const scFlows = (i: DsrHypervisorFlowsInputs) => desiredFlows(withDefaults(i), { ...placement, greOfport: 60042 });
    expect(flushArgs(scFlows(sc), scFlows({ ...sc, vips: [sc.vips[1]] })).map((f) => f[2])).toEqual([
      "ct_nw_dst=10.0.0.220,ct_nw_proto=6,ct_tp_dst=80",
      "ct_nw_dst=10.0.0.220,ct_nw_proto=6,ct_tp_dst=80",
    ]);
  });
});

describe("DsrHypervisorFlows gre mode", () => {
  const gre = (over: Partial<DsrHypervisorFlowsInputs> = {}): DsrHypervisorFlowsInputs => ({
    ...inputs(),
    mode: "gre",
    gre: { allowedSources: ["172.16.11.2", "172.16.40.0/24"] },
    ...over,
  });
  const at = { ...placement, greOfport: 60042 };
  const cookie = `0x${cookieOf(ID).toString(16)}`;

  it("decapsulated requests from each allowed source are DNATed to the backend; a VIP with one backend here takes any inner MAC; the rest of the GRE port is dropped", () => {
    const flows = desiredFlows(withDefaults(gre()), at).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0]);
    expect(flows).toEqual([
      // 10.0.0.220 has two backends here: the inner frame names one by its MAC.
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,dl_dst=02:00:0a:00:00:65,tun_src=172.16.11.2,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,dl_dst=02:00:0a:00:00:65,tun_src=172.16.40.0/24,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,dl_dst=02:00:0a:00:00:66,tun_src=172.16.11.2,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.102:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,dl_dst=02:00:0a:00:00:66,tun_src=172.16.40.0/24,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.102:8080))`,
      // 10.0.0.221 has one: whatever MAC the load balancer put inside (the delivery sets the backend's).
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,tun_src=172.16.11.2,nw_dst=10.0.0.221,tp_dst=81,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=60042,tun_src=172.16.40.0/24,nw_dst=10.0.0.221,tp_dst=81,actions=ct(commit,table=62,zone=4242,nat(dst=10.0.0.101:8080))`,
      `flow add table=62,priority=1000,cookie=${cookie},tcp,ct_zone=4242,nw_dst=10.0.0.101,tp_dst=8080,actions=set_field:02:00:0a:00:00:65->eth_dst,output:2`,
      // Replies leave as in mac mode: un-NATed to source = VIP, straight to the client.
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=2,ct_state=-trk,nw_src=10.0.0.101,tp_src=8080,actions=ct(table=60,zone=4242,nat)`,
      `flow add table=62,priority=1000,cookie=${cookie},tcp,ct_zone=4242,nw_dst=10.0.0.102,tp_dst=8080,actions=set_field:02:00:0a:00:00:66->eth_dst,output:3`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=3,ct_state=-trk,nw_src=10.0.0.102,tp_src=8080,actions=ct(table=60,zone=4242,nat)`,
      `flow add table=60,priority=1000,cookie=${cookie},ct_zone=4242,actions=resubmit(,0)`,
      `flow add table=0,priority=900,cookie=${cookie},in_port=60042,actions=drop`,
    ]);
  });

  it("matches the GRE key when one is given, and reads its own flows back as the inputs", () => {
    const keyed = withDefaults(gre({ gre: { allowedSources: ["172.16.11.2"], key: 47 } }));
    const flows = desiredFlows(keyed, at);
    expect(flows.filter((f) => f.match.tun_src).every((f) => f.match.tun_id === 47)).toBe(true);
    expect(renderBundle([{ op: "add-flow", flow: flows[0] }])[0]).toContain(",tun_id=0x2f,");
    const portNames = new Map([
      [2, "vm1"],
      [3, "vm2"],
    ]);
    const owned = flows.map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    expect(actualInputs(keyed, owned, { ...at, portNames })).toEqual(keyed);
    // Without its GRE port, nothing can arrive: every backend reads as missing.
    const { greOfport: _gone, ...noPort } = at;
    expect(actualInputs(keyed, owned, { ...noPort, portNames }).vips).toEqual([]);
    // One allowed source's flow deleted by hand: that (VIP, backend) reads as missing.
    const missing = owned.filter((f) => !(f.match.nw_dst === "10.0.0.221"));
    expect(actualInputs(keyed, missing, { ...at, portNames }).vips.map((v) => v.address)).toEqual(["10.0.0.220"]);
  });

  it("check refuses gre settings outside gre mode, gre mode without them, prefixes with host bits, /33, repeats, and ipip with the reason", async () => {
    const failures = async (news: object) => (await check("DsrHypervisorFlows", {}, news as Record<string, unknown>)).failures;
    expect(await failures(gre())).toEqual([]);
    expect(await failures(gre({ gre: undefined }))).toEqual([{ property: "gre", reason: expect.stringMatching(/^is required in gre mode/) }]);
    expect(await failures({ ...inputs(), gre: { allowedSources: ["172.16.11.2"] } })).toEqual([{ property: "gre", reason: "is only used in gre mode" }]);
    expect(await failures(gre({ gre: { allowedSources: ["10.0.0.0/33"] } }))).toEqual([
      { property: "gre.allowedSources[0]", reason: expect.stringMatching(/^must be an IPv4 or IPv6 address or prefix/) },
    ]);
    // An IPv6 underlay: ip6gre, its sources' rules the same; one family per underlay, second-chance peers too; pathMtu and second chance are taken.
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::2", "FD00:16:12::/64"] } }))).toEqual([]);
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::1/64", "FD00:16:11:0::2", "fd00:16:11::2"] } }))).toEqual([
      { property: "gre.allowedSources[0]", reason: '"fd00:16:11::1/64": host bits set (the prefix\'s address must end in zero bits)' },
      { property: "gre.allowedSources[2]", reason: "is also gre.allowedSources[1]" },
    ]);
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::2", "172.16.12.2"] } }))).toEqual([
      {
        property: "gre.allowedSources[1]",
        reason: "is IPv4 while gre.allowedSources[0] is IPv6: the underlay is of one family (gre ports over IPv4, ip6gre over IPv6)",
      },
    ]);
    expect(await failures(gre({ pathMtu: true, gre: { allowedSources: ["fd00:16:11::2"] } }))).toEqual([]);
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::2"], secondChance: { peers: ["172.16.22.2"] } } }))).toEqual([
      {
        property: "gre.secondChance.peers[0]",
        reason: "is IPv4 while gre.allowedSources[0] is IPv6: the underlay is of one family (gre ports over IPv4, ip6gre over IPv6)",
      },
    ]);
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::2"], secondChance: { peers: ["fd00:16:22::2"] } } }))).toEqual([]);
    // Two peers whose hand-on keys collide (found by search) could not be told apart.
    expect(await failures(gre({ gre: { allowedSources: ["fd00:16:11::2"], secondChance: { peers: ["fd00:16::7611", "fd00:16::c717"] } } }))).toEqual([
      { property: "gre.secondChance.peers[1]", reason: expect.stringMatching(/^has the same second-chance hand-on key as gre.secondChance.peers\[0\]/) },
    ]);
    expect(await failures(gre({ gre: { allowedSources: ["10.0.0.1/24", "172.16.11.2/32", "172.16.11.2"] } }))).toEqual([
      { property: "gre.allowedSources[0]", reason: "has host bits set: write the prefix as its network address (/24)" },
      { property: "gre.allowedSources[2]", reason: "is also gre.allowedSources[1]" },
    ]);
    expect(await failures({ ...inputs(), mode: "ipip" })).toEqual([
      { property: "mode", reason: expect.stringMatching(/^ipip cannot be received by OVS \(it has no IPIP port type/) },
    ]);
    const checked = asLists(
      "DsrHypervisorFlows",
      (await check("DsrHypervisorFlows", {}, gre() as unknown as Record<string, unknown>)).inputs,
    ) as unknown as DsrHypervisorFlowsInputs;
    expect(checked.gre).toEqual({ port: "ovslb-gre", allowedSources: ["172.16.11.2", "172.16.40.0/24"] });
  });
});
