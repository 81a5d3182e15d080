import { describe, it, expect } from "vitest";
import { conflictingFlows, diffFlows, UnplannableFlowError } from "../../provider/engine/flows";
import { flowKey, parseFlows, renderBundle, type DumpedFlow, type Flow } from "../../provider/openflow";

const COOKIE = 0x0b5e000000000001n;
const OTHER = 0x0b5e000000000002n;

const request: Flow = {
  table: 0,
  priority: 1000,
  cookie: COOKIE,
  match: { protocol: "tcp", dl_dst: "02:00:0a:00:00:65", nw_dst: "10.0.0.220", tp_dst: 80 },
  actions: [
    { type: "ct", commit: true, zone: 7, nat: { kind: "dst", ip: "10.0.0.101", port: 8080 } },
    { type: "output", port: 2 },
  ],
};
const reply: Flow = {
  table: 0,
  priority: 1000,
  cookie: COOKIE,
  match: { ct_state: { trk: false }, protocol: "tcp", in_port: 2, nw_src: "10.0.0.101", tp_src: 8080 },
  actions: [{ type: "ct", table: 60, zone: 7, nat: { kind: "existing" } }],
};
const forward: Flow = { table: 60, priority: 1000, cookie: COOKIE, match: { ct_zone: 7 }, actions: [{ type: "resubmit", table: 0 }] };

/** What OVS 3.1 printed for these flows (dump-flows --no-names, OpenFlow15), in its own field order. */
const DUMP = `OFPST_FLOW reply (OF1.5) (xid=0x2):
 cookie=0xb5e000000000001, duration=1.2s, table=0, n_packets=3, n_bytes=200, idle_age=0, priority=1000,tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.220,tp_dst=80 actions=ct(commit,zone=7,nat(dst=10.0.0.101:8080)),output:2
 cookie=0xb5e000000000001, duration=1.2s, table=0, n_packets=3, n_bytes=200, idle_age=0, priority=1000,ct_state=-trk,tcp,in_port=2,nw_src=10.0.0.101,tp_src=8080 actions=ct(table=60,zone=7,nat)
 cookie=0x0, duration=9.1s, table=0, n_packets=330, n_bytes=24727, idle_age=1, priority=0 actions=NORMAL
 cookie=0xb5e000000000001, duration=1.2s, table=60, n_packets=3, n_bytes=200, idle_age=0, priority=1000,ct_zone=7 actions=resubmit(,0)
`;
const dumped = (): DumpedFlow[] => parseFlows(DUMP).filter((f) => f.cookie === COOKIE);

describe("flowKey", () => {
  it("names a flow by table, priority and match, whatever order the fields were printed in; a dump and its desired flow share it", () => {
    const shuffled = { ...reply, match: Object.fromEntries(Object.entries(reply.match).reverse()) };
    expect(flowKey(shuffled)).toBe(flowKey(reply));
    expect(flowKey(reply)).toBe("table=0,priority=1000,ct_state=-trk,in_port=2,nw_src=10.0.0.101,tcp,tp_src=8080");
    expect(flowKey({ ...reply, priority: 999 })).not.toBe(flowKey(reply));
    expect(dumped().map(flowKey)).toEqual([request, reply, forward].map(flowKey));
  });
});

describe("diffFlows", () => {
  it("plans nothing when the dump is what is desired: rendered flows compare equal to OVS's own dump", () => {
    expect(diffFlows([request, reply, forward], dumped())).toEqual([]);
  });

  it("adds exactly the flow that is missing", () => {
    const actual = dumped().filter((f) => f.table !== 60);
    const mods = diffFlows([request, reply, forward], actual);
    expect(mods).toEqual([{ op: "add-flow", flow: forward }]);
    expect(renderBundle(mods)).toEqual(["flow add table=60,priority=1000,cookie=0xb5e000000000001,ct_zone=7,actions=resubmit(,0)"]);
  });

  it("modifies in place a flow whose actions changed (same table, priority and match)", () => {
    const moved: Flow = { ...request, actions: [request.actions[0], { type: "output", port: 5 }] };
    const mods = diffFlows([moved, reply, forward], dumped());
    expect(mods).toEqual([{ op: "modify-flow", flow: moved }]);
    expect(renderBundle(mods)[0]).toMatch(
      /^flow modify_strict table=0,priority=1000,cookie=0xb5e000000000001\/-1,tcp,.*actions=ct\(commit,zone=7,nat\(dst=10\.0\.0\.101:8080\)\),output:5$/,
    );
  });

  it("deletes strictly, by its own cookie, an owned flow that is no longer desired; deletes come first", () => {
    const other: Flow = { ...request, match: { ...request.match, nw_dst: "10.0.0.221" } };
    const mods = diffFlows([other, reply, forward], dumped());
    expect(mods.map((m) => m.op)).toEqual(["delete-flow", "add-flow"]);
    expect(renderBundle(mods)[0]).toBe(
      "flow delete_strict table=0,priority=1000,cookie=0xb5e000000000001/-1,tcp,dl_dst=02:00:0a:00:00:65,nw_dst=10.0.0.220,tp_dst=80",
    );
  });

  it("re-adds a flow at the same key under another of the caller's cookies, in the same bundle", () => {
    const recookied = { ...forward, cookie: OTHER };
    const mods = diffFlows([request, reply, recookied], dumped());
    expect(renderBundle(mods)).toEqual([
      "flow delete_strict table=60,priority=1000,cookie=0xb5e000000000001/-1,ct_zone=7",
      "flow add table=60,priority=1000,cookie=0xb5e000000000002,ct_zone=7,actions=resubmit(,0)",
    ]);
  });

  it("deletes everything owned when nothing is desired, and refuses desired flows with one key twice", () => {
    expect(diffFlows([], dumped()).map((m) => m.op)).toEqual(["delete-flow", "delete-flow", "delete-flow"]);
    expect(() => diffFlows([request, request], [])).toThrow(/appear twice/);
  });
});

describe("owned flows ovslb cannot name", () => {
  it("refuses to plan a strict delete of an owned flow whose match has a field ovslb does not write, naming the flow", () => {
    const [hand] = parseFlows(" cookie=0xb5e000000000001, duration=1.2s, table=0, n_packets=0, n_bytes=0, idle_age=0, priority=5,reg0=0x1 actions=drop\n");
    expect(hand.otherMatch).toEqual(["reg0=0x1"]);
    expect(() => diffFlows([], [hand])).toThrow(UnplannableFlowError);
    expect(() => diffFlows([], [hand])).toThrow(/reg0=0x1 is not one ovslb writes/);
  });
});

describe("conflictingFlows", () => {
  it("finds flows of others at a desired key (an add would overwrite them), and ignores the rest", () => {
    const [foreign] = parseFlows(
      " cookie=0xb5e000000000002, duration=1.2s, table=60, n_packets=0, n_bytes=0, idle_age=0, priority=1000,ct_zone=7 actions=drop\n",
    );
    const normal = parseFlows(DUMP).find((f) => f.cookie === 0n)!;
    const found = conflictingFlows([request, reply, forward], [foreign, normal]);
    expect(found).toEqual([{ desired: forward, other: foreign }]);
  });
});
