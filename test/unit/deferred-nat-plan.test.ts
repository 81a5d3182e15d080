import { describe, it, expect } from "vitest";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import type { DeferredNatDefaulted as Inputs } from "../../provider/resources/deferred-nat-load-balancer/plan";
import {
  BUCKET_WEIGHT,
  actualInputs,
  assignIds,
  checkRules,
  desiredDataplane,
  foreignGroupsOn,
  bfdKeyOf,
  greKeyOf,
  mergeIds,
  planGateway,
  replicaKey,
  tunnelPorts,
  vipKey,
  withDefaults,
  type RecordedIds,
} from "../../provider/resources/deferred-nat-load-balancer/plan";
import { toGroupEntry } from "../../provider/openflow";
import { renderFinding } from "../../provider/model/drift";
import { grePortState } from "../../provider/engine/gre-port";
import { editedDump, observedFrom, recordedDump } from "../support/recorded-dumps";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const backend = (i: number, extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.1.${i >> 8}.${i & 255}`,
  port: 8080,
  mac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
  hypervisor: "hv1",
  ...extra,
});
function lb(backends: DeferredNatBackend[], extra: Partial<DeferredNatLoadBalancerInputs> = {}): Inputs {
  return withDefaults({
    name: "web",
    gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
    hypervisors: [{ name: "hv1" }, { name: "hv2" }],
    vips: [{ address: "10.0.0.193", port: 80, protocol: "tcp", backends }],
    ...extra,
  });
}
const NONE: RecordedIds = { groupIds: {}, bucketIds: {} };

describe("ids", () => {
  it("gives the group an id from the load balancer and VIP, and buckets ids from the backend", () => {
    const a = assignIds(lb([backend(1), backend(2)]), NONE, new Set());
    const b = assignIds(lb([backend(2), backend(1), backend(3)]), NONE, new Set());
    expect(b.groupIds).toEqual(a.groupIds);
    expect(b.bucketIds["tcp:10.0.0.193:80"][replicaKey(backend(1), 0)]).toBe(a.bucketIds["tcp:10.0.0.193:80"][replicaKey(backend(1), 0)]);
  });

  it("keeps recorded ids even when the collision partner that shaped them is gone", () => {
    const key = "tcp:10.0.0.193:80";
    const recorded: RecordedIds = { groupIds: { [key]: 77 }, bucketIds: { [key]: { [replicaKey(backend(2), 0)]: 5 } } };
    const ids = assignIds(lb([backend(2), backend(3)]), recorded, new Set());
    expect(ids.groupIds[key]).toBe(77);
    expect(ids.bucketIds[key][replicaKey(backend(2), 0)]).toBe(5);
    expect(ids.bucketIds[key][replicaKey(backend(3), 0)]).not.toBe(5);
  });

  it("probes past group ids held by someone else, and refuses a recorded id someone else now holds", () => {
    const first = assignIds(lb([backend(1)]), NONE, new Set()).groupIds["tcp:10.0.0.193:80"];
    const probed = assignIds(lb([backend(1)]), NONE, new Set([first])).groupIds["tcp:10.0.0.193:80"];
    expect(probed).not.toBe(first);
    expect(() => assignIds(lb([backend(1)]), { groupIds: { "tcp:10.0.0.193:80": 9 }, bucketIds: {} }, new Set([9]))).toThrow(
      /group 9 of VIP tcp:10.0.0.193:80 is now held by a group this load balancer does not own/,
    );
  });

  it("gives a weighted backend one bucket per unit of weight", () => {
    const ids = assignIds(lb([backend(1, { weight: 3 }), backend(2)]), NONE, new Set());
    expect(Object.keys(ids.bucketIds["tcp:10.0.0.193:80"])).toHaveLength(4);
    expect(new Set(Object.values(ids.bucketIds["tcp:10.0.0.193:80"])).size).toBe(4);
  });
});

describe("planning one gateway, against a gateway recorded from OVS", () => {
  // gw1 after creating unit-web (a tcp VIP of 4 backends, a udp VIP of 2, one weighing 2), beside someone
  // else's flow (cookie 0x1234, VIP-like match on 10.0.0.197) and group 7.
  const dump = recordedDump("deferred-nat-gw1");
  const observed = observedFrom(dump);
  const recorded: RecordedIds = { groupIds: dump.outputs.groupIds, bucketIds: dump.outputs.bucketIds };
  const inputs = withDefaults(dump.inputs as DeferredNatLoadBalancerInputs);
  const port = { segmentOfport: dump.ports.seg0, mac: inputs.gateways[0].mac };
  const TCP = "tcp:10.0.0.193:80";
  const tcp = inputs.vips[0];
  const withTcp = (backends: DeferredNatBackend[], extra: Partial<DeferredNatLoadBalancerInputs> = {}): Inputs =>
    withDefaults({ ...inputs, vips: [{ ...tcp, backends }, inputs.vips[1]], ...extra });
  const plan = (next: Inputs, ids: RecordedIds = recorded) => planGateway("gw1", next, mergeIds(recorded, ids), port, observed);
  const bucketOf = (b: DeferredNatBackend, r = 0) => recorded.bucketIds[TCP][replicaKey(b, r)];

  it("plans nothing for the inputs that produced it, nor for them reordered", () => {
    expect(plan(inputs)).toEqual([]);
    const reordered = { ...inputs, vips: [inputs.vips[1], { ...tcp, backends: [...tcp.backends].reverse() }] };
    expect(plan(reordered)).toEqual([]);
  });

  it("adds a 5th backend as one bucket insert at the end, and nothing else; the group keeps its id", () => {
    const next = withTcp([...tcp.backends, { address: "10.0.0.120", port: 8080, mac: "02:00:0a:00:00:78", hypervisor: "hv2", weight: 1 }]);
    const ids = assignIds(next, recorded, foreignGroupsOn(next, observed, recorded));
    expect(ids.groupIds).toEqual(recorded.groupIds);
    const mods = plan(next, ids);
    expect(mods).toEqual([
      {
        op: "insert-buckets",
        groupId: recorded.groupIds[TCP],
        commandBucketId: "last",
        buckets: [expect.objectContaining({ bucketId: ids.bucketIds[TCP]["10.0.0.120:8080#0"], weight: BUCKET_WEIGHT })],
      },
    ]);
  });

  it("removes a backend by its bucket id only", () => {
    expect(plan(withTcp(tcp.backends.filter((_, i) => i !== 1)))).toEqual([
      { op: "remove-buckets", groupId: recorded.groupIds[TCP], commandBucketId: bucketOf(tcp.backends[1]) },
    ]);
  });

  it("a changed MAC is a remove and an insert of the same bucket id at the same position, after its predecessor", () => {
    const mods = plan(withTcp(tcp.backends.map((b, i) => (i === 2 ? { ...b, mac: "02:00:00:00:ff:ff" } : b))));
    const order = observed.groups.find((g) => g.groupId === recorded.groupIds[TCP])!.buckets.map((b) => b.bucketId);
    const id = bucketOf(tcp.backends[2]);
    expect(mods.map((m) => [m.op, "commandBucketId" in m ? m.commandBucketId : undefined])).toEqual([
      ["remove-buckets", id],
      ["insert-buckets", order[order.indexOf(id) - 1]],
    ]);
  });

  it("a lighter backend loses only its replica's bucket", () => {
    const udp = inputs.vips[1];
    const key = "udp:10.0.0.194:53";
    const lighter = { ...inputs, vips: [tcp, { ...udp, backends: udp.backends.map((b) => ({ ...b, weight: 1 })) }] };
    expect(plan(lighter)).toEqual([
      { op: "remove-buckets", groupId: recorded.groupIds[key], commandBucketId: recorded.bucketIds[key][replicaKey(udp.backends[1], 1)] },
    ]);
  });

  it("rebuilds a group only when the selection fields change", () => {
    expect(plan({ ...inputs, selectionFields: ["ip_src"] }).map((m) => m.op)).toEqual(["modify-group", "modify-group"]);
  });

  it("refuses to overwrite someone else's flow or group, and never counts them as its own", () => {
    expect(foreignGroupsOn(inputs, observed, recorded)).toEqual(new Set([7]));
    const clash = { ...inputs, vips: [...inputs.vips, { address: "10.0.0.197", port: 80, protocol: "tcp" as const, backends: tcp.backends }] };
    const ids = assignIds(clash, recorded, foreignGroupsOn(clash, observed, recorded));
    expect(() => plan(clash, ids)).toThrow(/gw1: a flow of cookie 0x1234 already matches VIP tcp:10.0.0.197:80 at priority 100; refusing to replace it/);
    const held: RecordedIds = { ...recorded, groupIds: { ...recorded.groupIds, "tcp:10.0.0.197:80": 7 } };
    expect(() => assignIds(clash, held, foreignGroupsOn(clash, observed, held))).toThrow(
      /group 7 of VIP tcp:10.0.0.197:80 is now held by a group this load balancer does not own/,
    );
  });

  it("removes a VIP's flow before its group; with no VIPs, everything it owns and nothing else", () => {
    const mods = plan({ ...inputs, vips: [tcp] });
    expect(mods).toEqual([
      expect.objectContaining({ op: "delete-flow", match: expect.objectContaining({ nw_dst: "10.0.0.194" }) }),
      { op: "delete-group", groupId: recorded.groupIds["udp:10.0.0.194:53"] },
    ]);
    const none = plan({ ...inputs, vips: [] });
    expect(none.map((m) => m.op).sort()).toEqual(["delete-flow", "delete-flow", "delete-group", "delete-group"]);
    expect(none.some((m) => m.op === "delete-group" && m.groupId === 7)).toBe(false);
    expect(none.some((m) => m.op === "delete-flow" && m.cookie === 0x1234n)).toBe(false);
  });
});

describe("reading back recorded gateways", () => {
  const dump = recordedDump("deferred-nat-gw1");
  const inputs = withDefaults(dump.inputs as DeferredNatLoadBalancerInputs);
  const ids: RecordedIds = { groupIds: dump.outputs.groupIds, bucketIds: dump.outputs.bucketIds };
  const port = { segmentOfport: dump.ports.seg0, mac: inputs.gateways[0].mac };
  const read = (d = dump) => actualInputs(inputs, ids, [{ name: "gw1", port, observed: observedFrom(d) }]);

  it("reads what the provider applied as exactly the inputs, with nothing to report", () => {
    const { inputs: actual, observations } = read();
    expect(actual).toEqual(withDefaults(inputs));
    expect(observations).toEqual([{ gateway: "gw1", findings: [] }]);
  });

  it("a bucket removed by hand reads as its backend missing; a bucket nobody declared, as a backend at 0.0.0.0 with its MAC", () => {
    const { inputs: actual, observations } = read(recordedDump("deferred-nat-gw1-drifted"));
    const key = vipKey(inputs.vips[0]);
    const second = inputs.vips[0].backends[1];
    expect(actual.vips[0].backends.map((b) => [b.address, b.mac])).toEqual([
      ...inputs.vips[0].backends.filter((b) => b !== second).map((b) => [b.address, b.mac]),
      ["0.0.0.0", "02:00:0a:00:00:99"],
    ]);
    expect(observations[0].findings.map(renderFinding)).toEqual([
      `gw1: VIP ${key}: bucket ${ids.bucketIds[key][replicaKey(second, 0)]} (${replicaKey(second, 0)}) missing`,
      `gw1: VIP ${key}: bucket 4242 is not declared`,
    ]);
  });

  it("a VIP whose flow was deleted by hand reads as absent", () => {
    const gone = editedDump(dump, ({ flows, groups }) => ({
      flows: flows
        .split("\n")
        .filter((l) => !l.includes("nw_dst=10.0.0.194"))
        .join("\n"),
      groups,
    }));
    const { inputs: actual, observations } = read(gone);
    expect(actual.vips.map(vipKey)).toEqual(["tcp:10.0.0.193:80"]);
    expect(observations[0].findings.map(renderFinding)).toEqual(["gw1: VIP udp:10.0.0.194:53: flow missing or changed"]);
  });
});

describe("check rules", () => {
  const failures = (i: Inputs) => checkRules(i).map((f) => `${f.property}: ${f.reason}`);

  it("refuses dp_hash and empty selection fields, explaining why", () => {
    expect(failures(lb([backend(1)], { selectionMethod: "dp_hash" }))).toEqual([expect.stringMatching(/^selectionMethod: dp_hash remaps most connections/)]);
    expect(failures(lb([backend(1)], { selectionFields: [] }))).toEqual([expect.stringMatching(/^selectionFields: give at least one field/)]);
  });

  it("refuses duplicate backends, a backend at the VIP's address, unknown hypervisors and duplicate VIPs", () => {
    const vip = { address: "10.0.0.193", port: 80, protocol: "tcp" as const };
    const bad = lb([], {
      vips: [
        { ...vip, backends: [backend(1), backend(1), backend(2, { address: "10.0.0.193" }), backend(3, { hypervisor: "hv9" })] },
        { ...vip, backends: [] },
      ],
    });
    expect(failures(bad)).toEqual([
      "vips[1]: is the same address, port and protocol as another VIP",
      "vips[0].backends[1]: is listed twice in this VIP",
      "vips[0].backends[2].address: equals the VIP's address: a backend cannot be its own VIP",
      "vips[0].backends[3].hypervisor: names a hypervisor the load balancer does not know (known: hv1, hv2)",
    ]);
  });

  it("refuses a VIP needing more buckets than one OpenFlow group message holds", () => {
    const heavy = Array.from({ length: 400 }, (_, i) => backend(i + 1, { weight: 3 }));
    expect(failures(lb(heavy))).toEqual([
      "vips[0].backends: needs 1200 buckets (one per backend and unit of weight); a group holds at most 1000, the most OVS can send or report in one OpenFlow message",
    ]);
    expect(failures(lb(Array.from({ length: 1000 }, (_, i) => backend(i + 1))))).toEqual([]);
  });

  it("refuses a gateway without a host key or a key to log in with", () => {
    const i = lb([backend(1)]);
    i.gateways[0].host.connection = { host: "172.30.0.11", user: "root" };
    expect(failures(i).map((f) => f.split(":")[0])).toEqual(["gateways[0].host.connection.hostKey", "gateways[0].host.connection.privateKey"]);
  });
});

describe("gre delivery", () => {
  const gre = (over: Partial<Inputs> = {}): Inputs =>
    withDefaults({
      name: "web",
      gateways: [
        {
          name: "gw1",
          host: { connection: conn("172.30.0.11") },
          bridge: "br-seg",
          segmentPort: "seg0",
          mac: "02:00:0a:00:00:0b",
          tunnelAddress: "172.16.11.2",
        },
      ],
      hypervisors: [
        { name: "hv1", tunnelAddress: "172.16.21.2" },
        { name: "hv2", delivery: "mac" },
      ],
      delivery: "gre",
      vips: [{ address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(1), backend(2, { hypervisor: "hv2" })] }],
      ...over,
    });
  const port = { segmentOfport: 1, mac: "02:00:0a:00:00:0b", tunnelOfports: new Map([["hv1", 60123]]) };

  it("a gre hypervisor's buckets go into its tunnel, with ip.dst still the VIP; a mac hypervisor's stay on the segment", () => {
    const inputs = gre();
    const ids = assignIds(inputs, NONE, new Set());
    const [plane] = desiredDataplane(inputs, ids, port);
    expect(plane.group.buckets.map((b) => b.actions.at(-1))).toEqual([{ type: "output", port: 60123 }, { type: "in_port" }]);
    expect(plane.group.buckets[0].actions).toContainEqual({ type: "set_field", field: "eth_dst", value: backend(1).mac });
    expect(plane.group.buckets.flatMap((b) => b.actions).some((a) => a.type === "set_field" && a.field === "ip_dst")).toBe(false);
    expect(() => desiredDataplane(inputs, ids, { ...port, tunnelOfports: new Map() })).toThrow(/no working tunnel port to hypervisor hv1/);
  });

  it("one tunnel port per gateway and gre hypervisor: fixed remote_ip and local_ip, the load balancer's own key, a name within 15 characters", () => {
    const [t] = tunnelPorts(gre(), gre().gateways[0]);
    expect(t).toEqual({
      hypervisor: "hv1",
      name: expect.stringMatching(/^gre-[0-9a-f]{8}$/),
      options: { remote_ip: "172.16.21.2", local_ip: "172.16.11.2", key: String(greKeyOf({ name: "web" })) },
      ofportRequest: expect.any(Number),
      tag: 4095,
      externalIds: { "ovslb:hypervisor": "hv1", "ovslb:role": "tunnel" },
    });
    expect(greKeyOf({ name: "web" })).not.toBe(greKeyOf({ name: "api" }));
    // healthCheck.bfd: a BFD port beside each tunnel, same ends, its own key, BFD on with decay off.
    const withBfd = gre({ healthCheck: { bfd: { minRx: 100, minTx: 50, multiplier: 4 } } });
    const ports = tunnelPorts(withBfd, withBfd.gateways[0]).filter((p) => p.hypervisor === "hv1");
    expect(ports.map((p) => p.externalIds["ovslb:role"])).toEqual(["tunnel", "bfd"]);
    expect(ports[1]).toMatchObject({
      name: expect.stringMatching(/^bfd-[0-9a-f]{8}$/),
      options: { remote_ip: "172.16.21.2", local_ip: "172.16.11.2", key: String(bfdKeyOf({ name: "web" })) },
      bfd: { enable: "true", min_rx: "100", min_tx: "50", mult: "4", decay_min_rx: "0" },
    });
    expect(bfdKeyOf({ name: "web" })).not.toBe(greKeyOf({ name: "web" }));
    expect(tunnelPorts(gre({ delivery: "mac", hypervisors: [{ name: "hv1" }, { name: "hv2" }] }), gre().gateways[0])).toEqual([]);
    const rows = {
      port: { external_ids: new Map([["ovslb:owner", "deferred-nat/web"]]) },
      iface: { type: "gre", options: new Map(Object.entries(t.options)) },
    };
    expect(grePortState("deferred-nat/web", t.options, rows)).toBe("right");
    expect(grePortState("deferred-nat/web", t.options, { ...rows, iface: { type: "gre", options: new Map([["remote_ip", "flow"]]) } })).toBe("changed");
    expect(grePortState("deferred-nat/web", t.options, { port: { external_ids: new Map() }, iface: rows.iface })).toBe("foreign");
    expect(grePortState("deferred-nat/web", t.options, {})).toBe("absent");
  });

  it("a tunnel port missing on a gateway reads as its hypervisor's backends missing, and says so", () => {
    const inputs = gre();
    const ids = assignIds(inputs, NONE, new Set());
    const planes = desiredDataplane(inputs, ids, port);
    const observed = {
      ports: new Map(),
      flows: planes.flatMap((p) => p.flows).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n })),
      groups: planes.map((p) => toGroupEntry(p.group)),
    };
    expect(actualInputs(inputs, ids, [{ name: "gw1", port, observed }]).inputs).toEqual(inputs);
    const cut = actualInputs(inputs, ids, [{ name: "gw1", port: { ...port, tunnelOfports: new Map() }, observed }]);
    expect(cut.inputs.vips[0].backends.map((b) => b.hypervisor)).toEqual(["hv2"]);
    expect(cut.observations[0].findings.map(renderFinding)).toContain("gw1: VIP tcp:10.0.0.193:80: tunnel port to hypervisor hv1 missing or changed");
  });

  it("check asks for the tunnel addresses gre delivery needs", () => {
    const bare = gre({ hypervisors: [{ name: "hv1" }, { name: "hv2", delivery: "mac" }] });
    expect(checkRules(bare)).toContainEqual({ property: "hypervisors[0].tunnelAddress", reason: expect.stringMatching(/^is required for gre delivery/) });
    const noSource = gre({ gateways: [{ ...gre().gateways[0], tunnelAddress: undefined }] });
    expect(checkRules(noSource)).toContainEqual({ property: "gateways[0].tunnelAddress", reason: expect.stringMatching(/^is required for gre delivery/) });
    expect(checkRules(gre())).toEqual([]);
  });
});
