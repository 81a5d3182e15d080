import { describe, expect, it } from "vitest";
import type { DeferredNatBackend } from "../../provider/model/inputs.generated";
import type { DeferredNatDefaulted as Inputs } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { parseFlows, parseGroups } from "../../provider/openflow";
import { driftOutputs, renderFinding, type DriftFinding } from "../../provider/model/drift";
import {
  actualInputs,
  assignIds,
  cookieOf,
  mergeIds,
  replicaKey,
  vipKey,
  withDefaults,
  type RecordedIds,
} from "../../provider/resources/deferred-nat-load-balancer/plan";
import {
  COMPARED_BACKEND_FIELDS,
  MAX_SCOPED_VIPS,
  idsOf,
  planGatewayScoped,
  recordPorts,
  scopedRead,
  updateScope,
  type UpdateScope,
} from "../../provider/resources/deferred-nat-load-balancer/scope";
import { observedFrom, recordedDump } from "../support/recorded-dumps";

/**
 * The proportional update, structurally: what one change touches is only
 * that VIP's group and flow, in what is read and in what is planned; drift
 * a refresh recorded is touched (and repaired); a change of the whole load
 * balancer reads everything.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const GW_MAC = "02:00:0a:00:00:0b";
const hex2 = (n: number) => (n & 255).toString(16).padStart(2, "0");
const backend = (v: number, i: number): DeferredNatBackend => ({
  address: `10.${64 + (v >> 8)}.${v & 255}.${i + 1}`,
  port: 8080,
  mac: `02:01:${hex2(v >> 8)}:${hex2(v)}:00:${hex2(i + 1)}`,
  hypervisor: "hv1",
  weight: 1,
});
/** The largest VIP set the schema accepts (1,024 VIPs), each of `n` backends. */
function big(n: number): Inputs {
  return withDefaults({
    name: "big",
    gateways: [
      {
        name: "gw1",
        host: { connection: { host: "172.30.0.11", user: "root", hostKey: KEY, privateKeyPath: "/k" } },
        bridge: "br-seg",
        segmentPort: "seg0",
        mac: GW_MAC,
      },
    ],
    hypervisors: [{ name: "hv1" }],
    vips: Array.from({ length: 1024 }, (_, v) => ({
      address: `10.0.${v >> 8}.${v & 255}`,
      port: 80,
      protocol: "tcp" as const,
      backends: Array.from({ length: n }, (_, i) => backend(v, i)),
    })),
  });
}

const port = { segmentOfport: 1, mac: GW_MAC };
const vipsScope = (s: UpdateScope) => {
  if (s.kind !== "vips") throw new Error(`expected a scoped update, got all: ${s.reason}`);
  return s;
};

describe("a scoped update at the largest VIP set: one added backend among 1,024 VIPs x 100", () => {
  const old = big(100);
  const recorded = assignIds(old, { groupIds: {}, bucketIds: {} }, new Set());
  const state = { ...recorded, drift: [], gatewayPorts: { gw1: recordPorts(port) } };
  const V = 500;
  const key = vipKey(old.vips[V]);
  const added = backend(V, 100);
  const news: Inputs = withDefaults({ ...old, vips: old.vips.map((v, i) => (i === V ? { ...v, backends: [...v.backends, added] } : v)) });

  it("touches that VIP only", () => {
    expect(updateScope(old, news, state)).toMatchObject({ kind: "vips", touched: [key], removed: [] });
    // Backends are unordered: the same set reversed touches nothing, and an update that touches nothing reads everything (a repair).
    const reversed = { ...old, vips: old.vips.map((v) => ({ ...v, backends: [...v.backends].reverse() })) };
    expect(updateScope(old, reversed, state)).toEqual({ kind: "all", reason: "no VIP differs from the recorded inputs: everything is read and repaired" });
    const reorderedNews = { ...news, vips: news.vips.map((v) => ({ ...v, backends: [...v.backends].reverse() })) };
    expect(updateScope(old, reorderedNews, state)).toMatchObject({ kind: "vips", touched: [key], removed: [] });
  });

  it("reads only that VIP's group (by id) and its flow (by match), nothing of the other 1,023", () => {
    const scope = vipsScope(updateScope(old, news, state));
    const ids = assignIds({ ...news, vips: [news.vips[V]] }, idsOf(recorded, [key]), new Set());
    expect(scopedRead(scope, mergeIds(idsOf(recorded, [key]), ids), port)).toEqual({
      groupIds: [recorded.groupIds[key]],
      flows: [{ cookie: 0n, mask: 0n, table: 0, match: { protocol: "tcp", in_port: 1, nw_dst: "10.0.1.244", tp_dst: 80 } }],
    });
  });

  it("plans one bucket insert into that group, against that group and flow as OVS prints them", () => {
    const scope = vipsScope(updateScope(old, news, state));
    const ids = mergeIds(idsOf(recorded, [key]), assignIds({ ...news, vips: [news.vips[V]] }, idsOf(recorded, [key]), new Set()));
    const group = recorded.groupIds[key];
    // What dump-groups BR ID and dump-flows BR MATCH print for it (OVS 3.1, -O OpenFlow15 --no-names).
    const buckets = old.vips[V].backends.map(
      (b) =>
        `bucket=bucket_id:${recorded.bucketIds[key][replicaKey(b, 0)]},weight:100,actions=set_field:${GW_MAC}->eth_src,set_field:${b.mac}->eth_dst,IN_PORT`,
    );
    const observed = {
      ports: new Map([["seg0", 1]]),
      groups: parseGroups(
        `OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):\n group_id=${group},type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),${buckets.join(",")}\n`,
      ),
      flows: parseFlows(
        `OFPST_FLOW reply (OF1.5) (xid=0x2):\n cookie=0x${cookieOf(old).toString(16)}, duration=9.1s, table=0, n_packets=0, n_bytes=0, idle_age=9, priority=100,tcp,in_port=1,nw_dst=10.0.1.244,tp_dst=80 actions=group:${group}\n`,
      ),
    };
    const mods = planGatewayScoped("gw1", news, scope, ids, port, observed);
    expect(mods).toEqual([
      {
        op: "insert-buckets",
        groupId: group,
        commandBucketId: "last",
        buckets: [
          {
            bucketId: ids.bucketIds[key][replicaKey(added, 0)],
            weight: 100,
            actions: [{ type: "set_field", field: "eth_src", value: GW_MAC }, { type: "set_field", field: "eth_dst", value: added.mac }, { type: "in_port" }],
          },
        ],
      },
    ]);
  });

  it("a removed VIP reads and deletes its flow, then its group; nothing else", () => {
    const gone = { ...old, vips: old.vips.filter((_, i) => i !== V) };
    const scope = vipsScope(updateScope(old, gone, state));
    expect(scope).toMatchObject({ kind: "vips", touched: [], removed: [key] });
    const group = recorded.groupIds[key];
    expect(scopedRead(scope, recorded, port).groupIds).toEqual([group]);
    const observed = {
      ports: new Map([["seg0", 1]]),
      groups: parseGroups(
        ` group_id=${group},type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),bucket=bucket_id:${recorded.bucketIds[key][replicaKey(old.vips[V].backends[0], 0)]},weight:100,actions=IN_PORT\n`,
      ),
      flows: parseFlows(
        ` cookie=0x${cookieOf(old).toString(16)}, duration=9.1s, table=0, n_packets=0, n_bytes=0, idle_age=9, priority=100,tcp,in_port=1,nw_dst=10.0.1.244,tp_dst=80 actions=group:${group}\n`,
      ),
    };
    expect(planGatewayScoped("gw1", gone, scope, idsOf(recorded, [key]), port, observed)).toEqual([
      { op: "delete-flow", table: 0, priority: 100, match: { protocol: "tcp", in_port: 1, nw_dst: "10.0.1.244", tp_dst: 80 }, cookie: cookieOf(old) },
      { op: "delete-group", groupId: group },
    ]);
  });

  it("reads everything when the whole load balancer changes, the port numbers are not recorded, or many VIPs change", () => {
    expect(updateScope(old, { ...news, selectionFields: ["ip_src"] }, state).kind).toBe("all");
    expect(updateScope(old, { ...news, hypervisors: [{ name: "hv1" }, { name: "hv2" }] }, state).kind).toBe("all");
    expect(updateScope(old, news, { ...recorded })).toEqual({ kind: "all", reason: "no recorded port numbers (state from an earlier ovslb)" });
    const many = { ...old, vips: old.vips.map((v, i) => (i <= MAX_SCOPED_VIPS ? { ...v, port: 81 } : v)) };
    expect(updateScope(old, many, state).kind).toBe("all");
    expect(updateScope(old, { ...news, secondChance: { slots: 64 } } as unknown as Inputs, state).kind).toBe("all");
  });
});

describe("drift a refresh recorded is touched and repaired (against a gateway recorded from OVS)", () => {
  // gw1 with unit-web, then a bucket removed by hand and one nobody declared added (test/fixtures/dumps).
  const dump = recordedDump("deferred-nat-gw1-drifted");
  const inputs = withDefaults(dump.inputs as Inputs);
  const ids: RecordedIds = { groupIds: dump.outputs.groupIds, bucketIds: dump.outputs.bucketIds };
  const gwPort = { segmentOfport: dump.ports.seg0, mac: inputs.gateways[0].mac };
  const observed = observedFrom(dump);
  // What `pulumi refresh` records: the inputs the gateway amounts to, and the findings.
  const refreshed = actualInputs(inputs, ids, [{ name: "gw1", port: gwPort, observed }]);
  const findings = refreshed.observations.flatMap((o) => o.findings);
  const state = { ...ids, ...driftOutputs(findings), gatewayPorts: { gw1: recordPorts(gwPort) } };
  const TCP = vipKey(inputs.vips[0]);
  const second = inputs.vips[0].backends[1];

  it("the drifted VIP is touched, the other is not", () => {
    expect(findings.map((f) => [f.kind, f.vip])).toEqual([
      ["bucket-missing", TCP],
      ["bucket-stray", TCP],
    ]);
    expect(updateScope(refreshed.inputs, inputs, state)).toMatchObject({ kind: "vips", touched: [TCP], removed: [] });
  });

  it("the plan puts the removed bucket back and takes the undeclared one out, in that VIP's group only", () => {
    const scope = vipsScope(updateScope(refreshed.inputs, inputs, state));
    const read = scopedRead(scope, ids, gwPort);
    expect(read.groupIds).toEqual([ids.groupIds[TCP]]);
    // Only what the scoped read asked for: that group, and the flows at that VIP's match.
    const m = read.flows[0].match!;
    const partial = {
      ports: observed.ports,
      groups: observed.groups.filter((g) => read.groupIds.includes(g.groupId)),
      flows: observed.flows.filter((f) => f.table === 0 && f.match.nw_dst === m.nw_dst && f.match.tp_dst === m.tp_dst && f.match.protocol === m.protocol),
    };
    const mods = planGatewayScoped("gw1", inputs, scope, mergeIds(ids, assignIds({ ...inputs, vips: [inputs.vips[0]] }, ids, new Set())), gwPort, partial);
    expect(mods.map((x) => x.op)).toEqual(["remove-buckets", "insert-buckets"]);
    expect(mods.every((x) => "groupId" in x && x.groupId === ids.groupIds[TCP])).toBe(true);
    expect(mods[0]).toMatchObject({ commandBucketId: 4242 });
    expect(mods[1]).toMatchObject({ buckets: [{ bucketId: ids.bucketIds[TCP][replicaKey(second, 0)] }] });
  });

  const recordedWith = (...f: DriftFinding[]) => ({ ...state, ...driftOutputs(f) });

  it("a finding that is not one VIP's reads everything", () => {
    const row: DriftFinding = { host: "northbound", kind: "northbound-column", object: "OVN Load_Balancer lb-tcp", detail: "vips differs" };
    expect(updateScope(refreshed.inputs, inputs, recordedWith(row)).kind).toBe("all");
    // A gateway's BFD or tunnel port serves every VIP (its drop flows are no VIP's), though reported under one: a restarted ovs-vswitchd lost them.
    const bfd: DriftFinding = { host: "gw2", kind: "bfd-port", object: "BFD port to hypervisor hv1", vip: TCP };
    const tunnel: DriftFinding = { host: "gw1", kind: "tunnel-port", object: "tunnel port to hypervisor hv2", vip: TCP };
    expect(updateScope(refreshed.inputs, inputs, recordedWith(bfd)).kind).toBe("all");
    expect(updateScope(refreshed.inputs, inputs, recordedWith(findings[0], tunnel))).toMatchObject({
      kind: "all",
      reason: expect.stringContaining(renderFinding(tunnel)),
    });
    // A host a partial change did not reach.
    const missed: DriftFinding = { host: "root@172.30.0.12:22 (gw2)", kind: "not-applied", object: "this change", detail: "OVS refused" };
    expect(updateScope(refreshed.inputs, inputs, recordedWith(missed)).kind).toBe("all");
  });

  it("drift recorded before findings were (sentences only) reads everything, whatever the sentences say; none recorded scopes as usual", () => {
    const old = { ...ids, gatewayPorts: state.gatewayPorts };
    for (const sentence of [`gw1: VIP ${TCP}: bucket 7 (10.0.0.101:8080#0) missing`, "root@172.30.0.12:22 (gw2): not changed: OVS refused"]) {
      expect(updateScope(refreshed.inputs, inputs, { ...old, drift: [sentence] })).toMatchObject({
        kind: "all",
        reason: expect.stringMatching(/without findings/),
      });
    }
    expect(updateScope(refreshed.inputs, inputs, { ...old, drift: [] })).toMatchObject({ kind: "vips", touched: [TCP], removed: [] });
  });
});

describe("what a scoped update compares", () => {
  it("every backend property the schema has", async () => {
    const schema = (await import("../../schema/deferred-nat-load-balancer.json")).default;
    expect(Object.keys(schema.properties.vips.items.properties.backends.items.properties).sort()).toEqual([...COMPARED_BACKEND_FIELDS].sort());
  });

  it("a changed MAC, weight or state touches the VIP", () => {
    const old = big(3);
    const state = { ...assignIds(old, { groupIds: {}, bucketIds: {} }, new Set()), gatewayPorts: { gw1: recordPorts(port) } };
    for (const change of [{ mac: "02:ff:00:00:00:01" }, { weight: 2 }, { state: "draining" as const }]) {
      const news = { ...old, vips: old.vips.map((v, i) => (i === 3 ? { ...v, backends: [{ ...v.backends[0], ...change }, ...v.backends.slice(1)] } : v)) };
      expect(updateScope(old, news, state)).toMatchObject({ kind: "vips", touched: [vipKey(old.vips[3])], removed: [] });
    }
  });
});
