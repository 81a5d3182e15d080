import { describe, it, expect } from "vitest";
import type { DeferredNatLoadBalancerInputs as Inputs, DeferredNatBackend } from "../../provider/model/inputs.generated";
import {actualInputs, assignIds, checkRules, desiredDataplane, ownedGroupIds, planGateway, replicaKey, vipKey, withDefaults, type GatewayActual, type RecordedIds,} from "../../provider/resources/deferred-nat-load-balancer/plan";
import { toFlowEntry, toGroupEntry, type DumpedFlow, type Modification } from "../../provider/openflow";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const backend = (i: number, extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.1.${i >> 8}.${i & 255}`,
  port: 8080,
  mac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
  hypervisor: "hv1",
  ...extra,
});
function lb(backends: DeferredNatBackend[], extra: Partial<Inputs> = {}): Inputs {
  return withDefaults({
    name: "web",
    gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
    hypervisors: [{ name: "hv1" }, { name: "hv2" }],
    vips: [{ address: "10.0.0.193", port: 80, protocol: "tcp", backends }],
    ...extra,
  });
}
const PORT = { segmentOfport: 1, mac: "02:00:0a:00:00:0b" };
const NONE: RecordedIds = { groupIds: {}, bucketIds: {} };

/** What a gateway holds once `inputs` were applied with `ids`. */
function applied(inputs: Inputs, ids: RecordedIds): GatewayActual {
  const planes = desiredDataplane(inputs, ids, PORT);
  const flows: DumpedFlow[] = planes.map((p) => ({ ...toFlowEntry(p.flow), nPackets: 0n, nBytes: 0n }));
  return { ownedFlows: flows, table0: flows, groups: planes.map((p) => toGroupEntry(p.group)) };
}

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

describe("planning one gateway", () => {
  const many = Array.from({ length: 64 }, (_, i) => backend(i + 1));

  it("creates the group before the flow that uses it, with no conntrack and the VIP kept", () => {
    const inputs = lb(many.slice(0, 2));
    const ids = assignIds(inputs, NONE, new Set());
    const mods = planGateway("gw1", desiredDataplane(inputs, ids, PORT), { ownedFlows: [], table0: [], groups: [] }, new Set());
    expect(mods.map((m) => m.op)).toEqual(["add-group", "add-flow"]);
    const group = toGroupEntry((mods[0] as { group: Parameters<typeof toGroupEntry>[0] }).group);
    expect(group.selectionMethod).toBe("hash");
    expect(group.fields).toEqual(["ip_src", "ip_dst", "tcp_src", "tcp_dst"]);
    expect(group.buckets[0].actions).toEqual(["set_field:02:00:0a:00:00:0b->eth_src", "set_field:02:00:00:00:00:01->eth_dst", "IN_PORT"]);
    const flowActions = toFlowEntry((mods[1] as { flow: Parameters<typeof toFlowEntry>[0] }).flow).actions;
    expect(flowActions).toEqual([`group:${group.groupId}`]);
    expect([...flowActions, ...group.buckets.flatMap((b) => b.actions)].some((a) => a.startsWith("ct("))).toBe(false);
  });

  it("adds one backend to 64 as one bucket insert and nothing else", () => {
    const before = lb(many);
    const ids = assignIds(before, NONE, new Set());
    const actual = applied(before, ids);
    const after = lb([...many, backend(65)]);
    const ids2 = assignIds(after, ids, new Set());
    const mods = planGateway("gw1", desiredDataplane(after, ids2, PORT), actual, ownedGroupIds(actual, ids2));
    expect(mods).toHaveLength(1);
    expect(mods[0]).toMatchObject({ op: "insert-buckets", commandBucketId: "last" });
    expect((mods[0] as Extract<Modification, { op: "insert-buckets" }>).buckets).toHaveLength(1);
    expect(ids2.groupIds).toEqual(ids.groupIds);
  });

  it("removes a backend by its bucket id only, and a changed MAC as remove + insert of the same id", () => {
    const ids = assignIds(lb(many), NONE, new Set());
    const actual = applied(lb(many), ids);
    const removed = lb(many.filter((_, i) => i !== 10));
    const mods = planGateway("gw1", desiredDataplane(removed, ids, PORT), actual, ownedGroupIds(actual, ids));
    expect(mods).toEqual([{ op: "remove-buckets", groupId: ids.groupIds["tcp:10.0.0.193:80"], commandBucketId: ids.bucketIds["tcp:10.0.0.193:80"][replicaKey(many[10], 0)] }]);

    const moved = lb(many.map((b, i) => (i === 3 ? { ...b, mac: "02:00:00:00:ff:ff" } : b)));
    const mods2 = planGateway("gw1", desiredDataplane(moved, ids, PORT), actual, ownedGroupIds(actual, ids));
    const id3 = ids.bucketIds["tcp:10.0.0.193:80"][replicaKey(many[3], 0)];
    expect(mods2.map((m) => [m.op, "commandBucketId" in m ? m.commandBucketId : undefined])).toEqual([["remove-buckets", id3], ["insert-buckets", "last"]]);
  });

  it("rebuilds a group only when the selection fields change", () => {
    const ids = assignIds(lb(many), NONE, new Set());
    const actual = applied(lb(many), ids);
    const mods = planGateway("gw1", desiredDataplane(lb(many, { selectionFields: ["ip_src"] }), ids, PORT), actual, ownedGroupIds(actual, ids));
    expect(mods.map((m) => m.op)).toEqual(["modify-group"]);
  });

  it("refuses a group id or a VIP flow owned by someone else", () => {
    const inputs = lb(many.slice(0, 2));
    const ids = assignIds(inputs, NONE, new Set());
    const foreignGroup = { ...toGroupEntry(desiredDataplane(inputs, ids, PORT)[0].group), buckets: [{ bucketId: 1, weight: 1, actions: ["drop"] }] };
    expect(() => planGateway("gw1", desiredDataplane(inputs, ids, PORT), { ownedFlows: [], table0: [], groups: [foreignGroup] }, new Set())).toThrow(
      /gw1: group \d+ \(for VIP tcp:10.0.0.193:80\) exists and is not owned/,
    );
    const flow = { ...toFlowEntry(desiredDataplane(inputs, ids, PORT)[0].flow), cookie: 0x1234n, nPackets: 0n, nBytes: 0n };
    expect(() => planGateway("gw1", desiredDataplane(inputs, ids, PORT), { ownedFlows: [], table0: [flow], groups: [] }, new Set())).toThrow(
      /a flow of cookie 0x1234 already matches VIP tcp:10.0.0.193:80/,
    );
  });

  it("removes a VIP's flow before its group", () => {
    const two = lb(many.slice(0, 2), {
      vips: [
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: many.slice(0, 2) },
        { address: "10.0.0.194", port: 53, protocol: "udp", backends: many.slice(0, 2) },
      ],
    });
    const ids = assignIds(two, NONE, new Set());
    const actual = applied(two, ids);
    const one = lb(many.slice(0, 2));
    const mods = planGateway("gw1", desiredDataplane(one, ids, PORT), actual, ownedGroupIds(actual, ids));
    expect(mods.map((m) => m.op)).toEqual(["delete-flow", "delete-group"]);
    expect(mods[1]).toEqual({ op: "delete-group", groupId: ids.groupIds["udp:10.0.0.194:53"] });
  });
});

describe("reading back", () => {
  it("reads applied state as the inputs, a missing bucket as lower weight, and a stray bucket as an undeclared backend", () => {
    const inputs = lb([backend(1, { weight: 2 }), backend(2)]);
    const ids = assignIds(inputs, NONE, new Set());
    const actual = applied(inputs, ids);
    expect(actualInputs(inputs, ids, [{ name: "gw1", port: PORT, actual }]).inputs).toEqual(inputs);

    const key = vipKey(inputs.vips[0]);
    const dropped = ids.bucketIds[key][replicaKey(backend(1), 1)];
    const drifted: GatewayActual = {
      ...actual,
      groups: [{ ...actual.groups[0], buckets: [...actual.groups[0].buckets.filter((b) => b.bucketId !== dropped), { bucketId: 42, weight: 100, actions: ["set_field:02:00:00:00:99:99->eth_dst", "IN_PORT"] }] }],
    };
    const read = actualInputs(inputs, ids, [{ name: "gw1", port: PORT, actual: drifted }]);
    expect(read.inputs.vips[0].backends.map((b) => [b.address, b.weight])).toEqual([["10.1.0.1", 1], ["10.1.0.2", 1], ["0.0.0.0", 1]]);
    expect(read.observations[0].findings).toEqual([
      `VIP ${key}: bucket ${dropped} (10.1.0.1:8080#1) missing`,
      `VIP ${key}: bucket 42 is not declared`,
    ]);
  });

  it("reads a VIP whose flow is gone as absent", () => {
    const inputs = lb([backend(1)]);
    const ids = assignIds(inputs, NONE, new Set());
    const actual = { ...applied(inputs, ids), ownedFlows: [] };
    expect(actualInputs(inputs, ids, [{ name: "gw1", port: PORT, actual }]).inputs.vips).toEqual([]);
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
