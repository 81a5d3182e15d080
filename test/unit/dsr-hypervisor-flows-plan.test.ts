import { describe, it, expect } from "vitest";
import { check, diff } from "../../provider/handlers";
import { diffFlows } from "../../provider/model/flow-diff";
import type { DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { actualInputs, cookieOf, derivedZone, desiredFlows, dsrId, withDefaults, zonesOf } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { renderBundle, toFlowEntry, type FlowEntry } from "../../provider/openflow";

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
const ofports = new Map([["vm1", 2], ["vm2", 3]]);
const portNames = new Map([[2, "vm1"], [3, "vm2"]]);
const placement = { cookie: cookieOf(ID), zone: 4242, ofports };

const lines = (i: DsrHypervisorFlowsInputs) => desiredFlows(withDefaults(i), placement).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0]);

describe("DsrHypervisorFlows check", () => {
  const failuresOf = async (i: unknown) => (await check("DsrHypervisorFlows", {}, i as Record<string, unknown>)).failures;

  it("fills defaults (mode mac, protocol tcp) and lower-cases MACs as OVS prints them", async () => {
    const { inputs: checked, failures } = await check("DsrHypervisorFlows", {}, inputs() as unknown as Record<string, unknown>);
    expect(failures).toEqual([]);
    expect(checked).toMatchObject({ mode: "mac", vips: [{ protocol: "tcp", backends: [{ mac: "02:00:0a:00:00:65" }, {}] }, { protocol: "tcp" }] });
  });

  it("refuses bad addresses, ports, MACs, port names, modes and zones, naming each property", async () => {
    const bad = inputs() as any;
    bad.vips[0].address = "10.0.0.300";
    bad.vips[0].port = 0;
    bad.vips[0].protocol = "icmp";
    bad.vips[1].backends = [{ address: "10.0.0.1,actions=drop", port: 70000, mac: "03:00:00:00:00:01", bridgePort: "vm1;reboot" }];
    bad.mode = "gre";
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
    expect(by.mode).toBe('must be one of "mac"');
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
    const checked = (await check("DsrHypervisorFlows", {}, inputs() as unknown as Record<string, unknown>)).inputs as Record<string, unknown>;
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
  it("DNATs each (VIP, backend) by MAC with conntrack in the zone, un-DNATs each backend once, forwards the zone", () => {
    const cookie = `0x${cookieOf(ID).toString(16)}`;
    expect(lines(inputs())).toEqual([
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,zone=4242,nat(dst=10.0.0.101:8080)),output:2`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:66,nw_dst=10.0.0.220,tp_dst=80,actions=ct(commit,zone=4242,nat(dst=10.0.0.102:8080)),output:3`,
      `flow add table=0,priority=1000,cookie=${cookie},tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.221,tp_dst=81,actions=ct(commit,zone=4242,nat(dst=10.0.0.101:8080)),output:2`,
      // vm1 serves two VIPs and has one reply flow: the un-NAT comes from each connection's own conntrack entry.
      `flow add table=0,priority=1000,cookie=${cookie},tcp,in_port=2,ct_state=-trk,nw_src=10.0.0.101,tp_src=8080,actions=ct(table=60,zone=4242,nat)`,
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
    const foreign: FlowEntry[] = [
      { cookie: 1n, table: 0, priority: 5, match: {}, actions: ["ct(commit,zone=17,nat(dst=10.0.0.9:80))", "output:1"] },
      { cookie: 1n, table: 3, priority: 5, match: { ct_zone: "18" }, actions: ["drop"] },
    ];
    expect([...zonesOf(foreign)].sort()).toEqual([17, 18]);
  });
});

describe("DsrHypervisorFlows read-back", () => {
  const onHost = (i: DsrHypervisorFlowsInputs) => desiredFlows(withDefaults(i), placement).map((f) => toFlowEntry(f));
  const read = (flows: FlowEntry[]) => actualInputs(withDefaults(inputs()), flows, { ...placement, portNames });

  it("reads the flows it wrote back as exactly the inputs", () => {
    expect(read(onHost(inputs()))).toEqual(withDefaults(inputs()));
  });

  it("a deleted request flow reads as that (VIP, backend) missing; its VIP goes when no backend is left", () => {
    const flows = onHost(inputs()).filter((f) => f.match.nw_dst !== "10.0.0.221");
    const actual = read(flows);
    expect(actual.vips.map((v) => v.address)).toEqual(["10.0.0.220"]);
    // And the plan restores exactly that one flow.
    const mods = diffFlows(desiredFlows(withDefaults(inputs()), placement), flows);
    expect(renderBundle(mods)).toEqual([expect.stringMatching(/^flow add .*nw_dst=10\.0\.0\.221,tp_dst=81,actions=/)]);
  });

  it("a deleted reply flow reads as its backend missing from every VIP; a missing forward flow, as all missing", () => {
    const noReply = onHost(inputs()).filter((f) => f.match.nw_src !== "10.0.0.101");
    expect(read(noReply).vips).toEqual([{ address: "10.0.0.220", port: 80, protocol: "tcp", backends: [vm2] }]);
    expect(read(onHost(inputs()).filter((f) => f.table !== 60)).vips).toEqual([]);
  });

  it("flows in another zone, to a port that is gone, or with changed actions do not count; extra owned ones are reported", () => {
    const flows = onHost(inputs());
    const otherZone = actualInputs(withDefaults(inputs()), flows, { ...placement, zone: 1, portNames });
    expect(otherZone.vips).toEqual([]);
    expect(actualInputs(withDefaults(inputs()), flows, { ...placement, portNames: new Map([[2, "vm1"]]) }).vips[0].backends).toEqual([
      { ...vm1, mac: "02:00:0a:00:00:65" },
    ]);
    const extra = { ...inputs(), vips: [...inputs().vips, { address: "10.0.0.222", port: 82, protocol: "udp" as const, backends: [vm2] }] };
    const actual = read(onHost(extra));
    expect(actual.vips.at(-1)).toEqual({ address: "10.0.0.222", port: 82, protocol: "udp", backends: [vm2] });
  });
});
