import { describe, expect, it } from "vitest";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { parseGroupStats, toGroupEntry, type DumpedFlow, type Flow, type GroupStats } from "../../provider/openflow";
import { assignIds, gatewayIntent, withDefaults, type DeferredNatDefaulted } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { planAllSlots } from "../../provider/resources/deferred-nat-load-balancer/second-chance";
import { gatewayTraffic } from "../../provider/resources/deferred-nat-load-balancer/traffic";
import * as dsr from "../../provider/resources/dsr-hypervisor-flows/plan";
import { hypervisorTraffic } from "../../provider/resources/dsr-hypervisor-flows/traffic";

/** Traffic in a read, as pure data: counters of planned flows and buckets summed per VIP, backend and gateway. */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const backend = (i: number, hypervisor: string, extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.0.0.${100 + i}`,
  port: 8080,
  mac: `02:00:0a:00:00:${(100 + i).toString(16)}`,
  hypervisor,
  ...extra,
});
const gateway = (name: string, n: number) => ({
  name,
  host: { connection: conn(`172.30.0.${10 + n}`) },
  bridge: "br-seg",
  segmentPort: "seg0",
  mac: `02:00:0a:00:00:0${n}`,
  tunnelAddress: `172.16.1${n}.2`,
});
const port = (n: number) => ({
  segmentOfport: 1,
  mac: `02:00:0a:00:00:0${n}`,
  tunnelOfports: new Map([
    ["hv1", 61001],
    ["hv2", 61002],
  ]),
  bfdOfports: new Map([
    ["hv1", 62001],
    ["hv2", 62002],
  ]),
});
const counted = (f: Flow, packets: number): DumpedFlow => ({ ...f, otherMatch: [], nPackets: BigInt(packets), nBytes: BigInt(packets * 100) });

/** One gateway as a read sees it: the intent's flows and groups, each flow counting `flowPackets(f)` and each bucket `bucketPackets(position)`. */
function gatewayRead(inputs: DeferredNatDefaulted, n: number, flowPackets: (f: Flow) => number, bucketPackets: (groupId: number, position: number) => number) {
  const slots = planAllSlots(inputs, undefined).tables;
  const ids = assignIds(inputs, { groupIds: {}, bucketIds: {} }, new Set());
  const intent = gatewayIntent(inputs, ids, port(n), slots);
  const groups = intent.groups.map((g) => toGroupEntry(g));
  const groupStats: GroupStats[] = groups.map((g) => {
    const buckets = g.buckets.map((_, i) => ({ packets: BigInt(bucketPackets(g.groupId, i)), bytes: BigInt(bucketPackets(g.groupId, i) * 100) }));
    return { groupId: g.groupId, packets: buckets.reduce((s, b) => s + b.packets, 0n), bytes: buckets.reduce((s, b) => s + b.bytes, 0n), buckets };
  });
  return {
    ids,
    slots,
    read: { name: `gw${n}`, port: port(n), observed: { ports: new Map(), flows: intent.flows.map((f) => counted(f, flowPackets(f))), groups }, groupStats },
  };
}

function lb(backends: DeferredNatBackend[], extra: Partial<DeferredNatLoadBalancerInputs> = {}): DeferredNatDefaulted {
  return withDefaults({
    name: "web",
    gateways: [gateway("gw1", 1), gateway("gw2", 2)],
    hypervisors: [
      { name: "hv1", tunnelAddress: "172.16.21.2" },
      { name: "hv2", tunnelAddress: "172.16.22.2" },
    ],
    vips: [{ address: "10.0.0.200", port: 80, protocol: "tcp", backends }],
    ...extra,
  });
}
const VIP = "tcp:10.0.0.200:80";

describe("dump-group-stats", () => {
  it("parses the group's counters and each bucket's, by position", () => {
    const dump = [
      "OFPST_GROUP reply (OF1.5) (xid=0x6):",
      " group_id=999,duration=0.021s,ref_count=1,packet_count=12,byte_count=1200,bucket0:packet_count=5,byte_count=500,bucket1:packet_count=7,byte_count=700",
      " group_id=3,duration=1.5s,ref_count=0,packet_count=0,byte_count=0",
    ].join("\n");
    expect(parseGroupStats(dump)).toEqual([
      {
        groupId: 999,
        packets: 12n,
        bytes: 1200n,
        buckets: [
          { packets: 5n, bytes: 500n },
          { packets: 7n, bytes: 700n },
        ],
      },
      { groupId: 3, packets: 0n, bytes: 0n, buckets: [] },
    ]);
    expect(() => parseGroupStats(" group_id=1,duration=1s")).toThrow(/not a group stats entry/);
  });
});

describe("a load balancer's traffic on its gateways", () => {
  it("per VIP and gateway from the VIP's flow, per backend from its buckets (every replica); a backend that takes nothing reads 0", () => {
    const inputs = lb([backend(1, "hv1", { weight: 2 }), backend(2, "hv1"), backend(3, "hv2")], { delivery: "gre" });
    // Bucket positions: backend 1's two replicas, then 2, then 3 (which takes nothing).
    const perBucket = [10, 20, 5, 0];
    const g1 = gatewayRead(
      inputs,
      1,
      () => 35,
      (_, i) => perBucket[i],
    );
    const g2 = gatewayRead(
      inputs,
      2,
      () => 4,
      (_, i) => [1, 1, 2, 0][i],
    );
    const traffic = gatewayTraffic(inputs, g1.ids, [g1.read, g2.read], {});
    expect(traffic.vips[VIP]).toEqual({
      packets: 39,
      bytes: 3900,
      gateways: { gw1: { packets: 35, bytes: 3500 }, gw2: { packets: 4, bytes: 400 } },
      backends: {
        "10.0.0.101:8080": { packets: 32, bytes: 3200 },
        "10.0.0.102:8080": { packets: 7, bytes: 700 },
        "10.0.0.103:8080": { packets: 0, bytes: 0 },
      },
    });
    expect(traffic.pathMtu).toBeUndefined();
  });

  it("pathMtu: per VIP address, the errors fanned out and one copy per hypervisor for each", () => {
    const inputs = lb([backend(1, "hv1"), backend(3, "hv2")], { delivery: "gre", pathMtu: true });
    const icmp = (f: Flow) => (f.match.protocol === "icmp" ? 3 : 0);
    const g1 = gatewayRead(inputs, 1, icmp, () => 0);
    const g2 = gatewayRead(inputs, 2, icmp, () => 0);
    expect(gatewayTraffic(inputs, g1.ids, [g1.read, g2.read], {}).pathMtu).toEqual({ "10.0.0.200": { errors: { packets: 6, bytes: 600 }, copies: 12 } });
  });

  it("secondChance: per backend from the slots it owns; with BFD, what its owner group sent to the live backends instead", () => {
    const inputs = lb([backend(1, "hv1"), backend(2, "hv1"), backend(3, "hv2")], {
      delivery: "gre",
      secondChance: {},
      healthCheck: { bfd: { minRx: 100, minTx: 100, multiplier: 3 } },
    });
    // Every slot flow counts one packet; the VIP's entry flow all of them; each owner group's fallback bucket (position 1) 2.
    const g1 = gatewayRead(
      inputs,
      1,
      (f) => (f.match.reg12 !== undefined ? 1 : f.match.tp_dst === 80 ? 1024 : 0),
      (_, i) => (i === 1 ? 2 : 0),
    );
    const traffic = gatewayTraffic(inputs, g1.ids, [g1.read], g1.slots);
    const table = g1.slots[VIP];
    const owned = (b: string) => table.owner.filter((o) => table.backends[o] === b).length;
    const backends = traffic.vips[VIP].backends;
    expect(Object.keys(backends).sort()).toEqual(["10.0.0.101:8080", "10.0.0.102:8080", "10.0.0.103:8080"]);
    for (const [b, c] of Object.entries(backends)) expect(c.packets).toBe(owned(b));
    expect(Object.values(backends).reduce((n, c) => n + c.packets, 0)).toBe(table.size);
    expect(traffic.vips[VIP].failedOver).toEqual({
      "10.0.0.101:8080": { packets: 2, bytes: 200 },
      "10.0.0.102:8080": { packets: 2, bytes: 200 },
      "10.0.0.103:8080": { packets: 2, bytes: 200 },
    });
  });
});

describe("a hypervisor's traffic", () => {
  const vm1 = { address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" };
  const vm2 = { address: "10.0.0.102", port: 8080, mac: "02:00:0a:00:00:66", bridgePort: "vm2" };
  const ID = "dsr-hypervisor-flows/172.30.0.21/br-seg/web";
  const placement = {
    cookie: dsr.cookieOf(ID),
    zone: 4242,
    greOfport: 60042,
    ofports: new Map([
      ["vm1", 2],
      ["vm2", 3],
    ]),
  };
  const hv = (over: Partial<DsrHypervisorFlowsInputs> = {}) =>
    dsr.withDefaults({
      name: "web",
      host: { connection: conn("172.30.0.21") },
      bridge: "br-seg",
      vips: [{ address: "10.0.0.200", port: 80, backends: [vm1, vm2] }],
      ...over,
    });

  it("per VIP and backend from its request flows (every allowed source); what the GRE port dropped", () => {
    const inputs = hv({ mode: "gre", gre: { allowedSources: ["172.16.11.2", "172.16.12.2"] } });
    const flows = dsr
      .desiredFlows(inputs, placement)
      .map((f) =>
        counted(
          f,
          f.match.tun_src === "172.16.11.2" ? (f.match.dl_dst === vm1.mac ? 7 : 0) : f.match.tun_src ? 3 : f.priority === dsr.GRE_DROP_PRIORITY ? 9 : 50,
        ),
      );
    expect(hypervisorTraffic(inputs, flows, placement)).toEqual({
      vips: {
        [VIP]: {
          packets: 13,
          bytes: 1300,
          backends: { "10.0.0.101:8080": { packets: 10, bytes: 1000 }, "10.0.0.102:8080": { packets: 3, bytes: 300 } },
        },
      },
      dropped: { packets: 9, bytes: 900 },
    });
    // Without its GRE port nothing arrives: no traffic to report.
    const { greOfport: _, ...noPort } = placement;
    expect(hypervisorTraffic(inputs, flows, noPort)).toBeUndefined();
  });

  it("secondChance: handed on, received handed on and dropped; pathMtu: ICMP errors accepted and dropped; a backend with nothing reads 0", () => {
    const inputs = hv({ mode: "gre", pathMtu: true, gre: { allowedSources: ["172.16.11.2"], secondChance: { peers: ["172.16.22.2"] } } });
    const packets = (f: Flow) =>
      f.table === dsr.SECOND_CHANCE_TABLE && f.priority === dsr.HAND_ON_PRIORITY
        ? 4
        : f.priority === dsr.HANDED_ON_PRIORITY
          ? 6
          : f.priority === dsr.HANDED_DROP_PRIORITY
            ? 1
            : f.table === dsr.PATH_MTU_TABLE
              ? f.priority === dsr.PATH_MTU_DROP_PRIORITY
                ? 2
                : 5
              : f.match.dl_dst === vm1.mac && f.match.protocol === "tcp" && f.priority === dsr.REQUEST_PRIORITY
                ? 11
                : 0;
    const flows = dsr.desiredFlows(inputs, placement).map((f) => counted(f, packets(f)));
    const traffic = hypervisorTraffic(inputs, flows, placement)!;
    expect(traffic.vips[VIP].backends).toEqual({ "10.0.0.101:8080": { packets: 11, bytes: 1100 }, "10.0.0.102:8080": { packets: 0, bytes: 0 } });
    expect(traffic.secondChance).toEqual({ handedOn: { packets: 4, bytes: 400 }, received: { packets: 6, bytes: 600 }, dropped: { packets: 1, bytes: 100 } });
    // Two backends, each with its own related delivery: 5 each.
    expect(traffic.pathMtu).toEqual({ accepted: { packets: 10, bytes: 1000 }, dropped: { packets: 2, bytes: 200 } });
  });
});
