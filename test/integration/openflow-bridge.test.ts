import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CommandRunner, runChecked } from "../../provider/transport/exec";
import {
  type Flow,
  type Group,
  type Match,
  type Modification,
  type SelectBucket,
  actionsText,
  flowKey,
  renderBundle,
  toGroupEntry,
  type DumpedFlow,
} from "../../provider/openflow";
import { OpenFlowBridge, OpenFlowError } from "../../provider/transport/openflow-bridge";
import { traceBucket, traceBuckets } from "../../provider/transport/openflow-trace";
import { type OvsSandbox, startOvsSandbox } from "../support/sandbox";

const ALL_ONES = (1n << 64n) - 1n;
const OWNER = 0x1bn;

function bucket(id: number, port: number, extra: Partial<SelectBucket> = {}): SelectBucket {
  return {
    bucketId: id,
    weight: 100,
    actions: [
      { type: "set_field", field: "eth_dst", value: `02:00:00:00:00:${port.toString(16).padStart(2, "0")}` },
      { type: "output", port },
    ],
    ...extra,
  };
}

const lb: Group = {
  groupId: 10,
  type: "select",
  selectionMethod: "hash",
  fields: ["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst"],
  buckets: [bucket(10, 1, { watchPort: 1 }), bucket(20, 2, { watchPort: 2 }), bucket(30, 3, { watchPort: 3 })],
};

const vip: Flow = {
  table: 0,
  priority: 100,
  cookie: OWNER,
  match: { protocol: "tcp", nw_dst: "10.0.0.100", tp_dst: 80 },
  actions: [{ type: "group", groupId: 10 }],
};

/** Client 5-tuples toward the VIP, as ofproto/trace packets. */
function clients(count: number): Match[] {
  return Array.from({ length: count }, (_, i) => ({
    protocol: "tcp",
    in_port: 4,
    nw_src: `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`,
    nw_dst: "10.0.0.100",
    tp_src: 1024 + i,
    tp_dst: 80,
  }));
}

let sandbox: OvsSandbox;

/** A netdev bridge with dummy ports 1-4, and what is on it once `mods` are applied. */
async function bridgeWith(name: string, mods: readonly Modification[] = []): Promise<OpenFlowBridge> {
  const bridge = new OpenFlowBridge(sandbox.runner, sandbox.addBridge(name));
  for (const port of [1, 2, 3, 4]) {
    await runChecked(sandbox.runner, [
      "ovs-vsctl",
      `--db=unix:${sandbox.dbSock}`,
      "add-port",
      name,
      `${name}-p${port}`,
      "--",
      "set",
      "interface",
      `${name}-p${port}`,
      "type=dummy",
      `ofport_request=${port}`,
    ]);
  }
  await bridge.applyBundle(mods);
  return bridge;
}

async function snapshot(bridge: OpenFlowBridge) {
  const flows = await bridge.dumpFlows();
  const groups = await bridge.dumpGroups();
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return {
    flows: flows.map((f) => JSON.stringify(f, (_, v) => (typeof v === "bigint" ? `${v}` : v))).sort(order),
    groups: groups.sort((a, b) => a.groupId - b.groupId),
  };
}

async function rejection(promise: Promise<unknown>): Promise<OpenFlowError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenFlowError);
  return err as OpenFlowError;
}

beforeAll(() => {
  sandbox = startOvsSandbox();
});

afterAll(() => sandbox?.stop());

describe("OpenFlowBridge against ovs-vswitchd 3.1", () => {
  it("applies a select group and the flow using it as one bundle, and dumps both back exactly", async () => {
    const bridge = await bridgeWith("br-apply");
    const sent = await bridge.applyBundle([
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ]);
    expect(sent.messages).toBe(2);
    expect(sent.lines).toEqual(
      renderBundle([
        { op: "add-group", group: lb },
        { op: "add-flow", flow: vip },
      ]),
    );
    expect(sent.bytes).toBe(sent.lines.join("\n").length + 1);

    expect(await bridge.dumpGroup(10)).toEqual(toGroupEntry(lb));
    expect(await bridge.dumpGroup(11)).toBeUndefined();
    // Parsed back into exactly the typed flow that was written.
    expect(await bridge.dumpFlows({ cookie: OWNER, mask: ALL_ONES })).toEqual([{ ...vip, otherMatch: [], nPackets: 0n, nBytes: 0n }]);
  });

  it("dumps every kind of action back as rendered (ARP responder, ct, tunnels)", async () => {
    const flows: Flow[] = [
      {
        table: 0,
        priority: 200,
        cookie: OWNER,
        match: { protocol: "arp", arp_op: 1, arp_tpa: "10.0.0.100" },
        actions: [
          { type: "move", src: "NXM_OF_ETH_SRC", dst: "NXM_OF_ETH_DST" },
          { type: "set_field", field: "eth_src", value: "02:00:00:00:00:AA" },
          { type: "set_field", field: "arp_op", value: 2 },
          { type: "move", src: "NXM_NX_ARP_SHA", dst: "NXM_NX_ARP_THA" },
          { type: "set_field", field: "arp_sha", value: "02:00:00:00:00:aa" },
          { type: "move", src: "NXM_OF_ARP_SPA", dst: "NXM_OF_ARP_TPA" },
          { type: "set_field", field: "arp_spa", value: "10.0.0.100" },
          { type: "in_port" },
        ],
      },
      {
        table: 0,
        priority: 300,
        cookie: OWNER,
        match: { protocol: "ip", in_port: 1, dl_dst: "02:00:00:00:00:aa", nw_src: "10.0.0.0/24", nw_dst: "10.0.0.100" },
        actions: [{ type: "ct", table: 1, zone: 7 }],
      },
      {
        table: 1,
        priority: 300,
        cookie: OWNER,
        match: { ct_state: { trk: true, new: true }, ct_zone: 7, protocol: "tcp", tp_dst: 80 },
        actions: [
          { type: "ct", commit: true, zone: 7, nat: { kind: "dst", ip: "10.1.0.5", port: 8080 }, mark: 5 },
          { type: "set_field", field: "tcp_dst", value: 8080 },
          { type: "resubmit", table: 2 },
        ],
      },
      {
        table: 1,
        priority: 301,
        cookie: OWNER,
        match: { ct_state: { trk: true, est: true, rel: false }, ct_mark: 5, protocol: "ip" },
        actions: [
          { type: "ct", zone: 7, nat: { kind: "existing" } },
          { type: "move", src: "NXM_OF_IP_SRC", dst: "NXM_OF_IP_DST" },
          { type: "output", port: 3 },
        ],
      },
      {
        table: 2,
        priority: 10,
        cookie: OWNER,
        match: { protocol: "ip", in_port: 2, tun_src: "192.168.1.2", tun_dst: "192.168.1.0/24" },
        actions: [
          { type: "set_field", field: "tun_dst", value: "192.168.1.9" },
          { type: "set_field", field: "ip_dst", value: "10.1.0.5" },
          { type: "output", port: 4 },
        ],
      },
      { table: 2, priority: 0, cookie: OWNER, match: {}, actions: [{ type: "drop" }] },
    ];
    const bridge = await bridgeWith("br-actions");
    await bridge.applyBundle(flows.map((flow) => ({ op: "add-flow", flow })));
    const byKey = (f: { table: number; priority: number }) => f.table * 65536 + f.priority;
    // Compared as OVS prints them: the upper-case MAC written comes back lower-case, and nothing else differs.
    const printed = (f: Flow | DumpedFlow) => ({ key: flowKey(f), cookie: f.cookie, actions: actionsText(f.actions) });
    const dumped = (await bridge.dumpFlows({ cookie: OWNER, mask: ALL_ONES })).sort((a, b) => byKey(a) - byKey(b));
    expect(dumped.every((f) => f.otherMatch.length === 0 && f.actions.every((a) => a.type !== "other"))).toBe(true);
    expect(dumped.map(printed)).toEqual(flows.sort((a, b) => byKey(a) - byKey(b)).map(printed));
  });

  it("dumps IPv6 matches and actions back as rendered, whatever form the addresses were written in (RFC 5952, as OVS prints them)", async () => {
    const flows: Flow[] = [
      {
        table: 0,
        priority: 100,
        cookie: OWNER,
        match: {
          protocol: "tcp6",
          in_port: 1,
          ipv6_src: "2001:DB8:0:0::/64",
          ipv6_dst: "2001:db8:0:0:0:0:0:100",
          tp_dst: 80,
          tcp_flags: { syn: true, ack: false },
        },
        actions: [{ type: "ct", commit: true, table: 1, zone: 7, nat: { kind: "dst", ip: "2001:db8:1::0:5", port: 8080 } }],
      },
      {
        table: 0,
        priority: 101,
        cookie: OWNER,
        match: { protocol: "udp6", ipv6_dst: "2001:db8:1:0:1:0:0:1", nw_frag: "yes" },
        actions: [{ type: "ct", commit: true, zone: 7, nat: { kind: "dst", ip: "2001:0db8::5" } }],
      },
      {
        table: 0,
        priority: 102,
        cookie: OWNER,
        match: { protocol: "icmp6", ipv6_dst: "2001:db8::100", icmp_type: 2, icmp_code: 0 },
        actions: [
          { type: "set_field", field: "ipv6_dst", value: "2001:DB8::9" },
          { type: "ct", table: 63, zone: 7, nat: { kind: "existing" } },
        ],
      },
      { table: 0, priority: 103, cookie: OWNER, match: { protocol: "ipv6", ipv6_src: "2001:db8::1:0:0:1" }, actions: [{ type: "drop" }] },
    ];
    const bridge = await bridgeWith("br-ipv6");
    await bridge.applyBundle(flows.map((flow) => ({ op: "add-flow", flow })));
    const printed = (f: Flow | DumpedFlow) => ({ key: flowKey(f), cookie: f.cookie, actions: actionsText(f.actions) });
    const dumped = (await bridge.dumpFlows({ cookie: OWNER, mask: ALL_ONES })).sort((a, b) => a.priority - b.priority);
    expect(dumped.every((f) => f.otherMatch.length === 0 && f.actions.every((a) => a.type !== "other"))).toBe(true);
    expect(dumped.map(printed)).toEqual(flows.map(printed));
    // A select group hashing both families' addresses (a dual-stack VIP's fields).
    const dual: Group = { ...lb, groupId: 11, fields: ["ip_src", "ip_dst", "ipv6_src", "ipv6_dst", "nw_proto", "tcp_src", "tcp_dst"] };
    await bridge.applyBundle([{ op: "add-group", group: dual }]);
    expect(await bridge.dumpGroup(11)).toEqual(toGroupEntry(dual));
  });

  it("inserts and removes buckets by id and leaves the other buckets untouched", async () => {
    const bridge = await bridgeWith("br-buckets", [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ]);
    const sent = await bridge.applyBundle([
      { op: "insert-buckets", groupId: 10, commandBucketId: 10, buckets: [bucket(15, 4)] },
      { op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [bucket(40, 4)] },
      { op: "remove-buckets", groupId: 10, commandBucketId: 20 },
    ]);
    expect(sent.messages).toBe(3);
    const [b10, , b30] = toGroupEntry(lb).buckets;
    const group = await bridge.dumpGroup(10);
    // command_bucket_id=N inserts just after bucket N on OVS 3.1 (the man page says before).
    expect(group?.buckets.map((b) => b.bucketId)).toEqual([10, 15, 30, 40]);
    expect(group?.buckets[0]).toEqual(b10);
    expect(group?.buckets[2]).toEqual(b30);
    expect(group?.buckets[1]).toEqual({
      bucketId: 15,
      weight: 100,
      actions: [
        { type: "set_field", field: "eth_dst", value: "02:00:00:00:00:04" },
        { type: "output", port: 4 },
      ],
    });
    expect(group?.fields).toEqual(["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst"]);
  });

  it("leaves the bridge exactly as it was when the last operation of a bundle fails", async () => {
    const bridge = await bridgeWith("br-atomic", [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ]);
    const before = await snapshot(bridge);
    const good: Modification[] = [
      { op: "add-flow", flow: { ...vip, priority: 101, match: { protocol: "udp", nw_dst: "10.0.0.100", tp_dst: 53 } } },
      { op: "delete-flow", table: 0, priority: 100, match: vip.match, cookie: OWNER },
      { op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [bucket(40, 4)] },
      { op: "remove-buckets", groupId: 10, commandBucketId: 20 },
    ];

    const unknownBucket = await rejection(bridge.applyBundle([...good, { op: "remove-buckets", groupId: 10, commandBucketId: 999 }]));
    expect(unknownBucket.code).toBe("OFPGMFC_UNKNOWN_BUCKET");
    expect(unknownBucket.codes).toContain("OFPBFC_MSG_FAILED");
    expect(unknownBucket.line).toEqual({ index: 4, text: "group remove_bucket group_id=10,command_bucket_id=999" });
    expect(unknownBucket.message).toMatch(/^sandbox: bridge unix:\/.*br-atomic\.mgmt: OFPGMFC_UNKNOWN_BUCKET at bundle line 5 /);
    expect(await snapshot(bridge)).toEqual(before);

    const unknownGroup = await rejection(bridge.applyBundle([...good, { op: "modify-group", group: { ...lb, groupId: 999 } }]));
    expect(unknownGroup.code).toBe("OFPGMFC_UNKNOWN_GROUP");
    expect(unknownGroup.line?.index).toBe(4);
    expect(await snapshot(bridge)).toEqual(before);

    const noGroup = await rejection(bridge.applyBundle([...good, { op: "remove-buckets", groupId: 998, commandBucketId: 1 }]));
    expect(noGroup.code).toBe("OFPGMFC_UNKNOWN_GROUP");
    expect(await snapshot(bridge)).toEqual(before);

    // The same operations without the failing one do apply.
    await bridge.applyBundle(good);
    expect((await bridge.dumpGroup(10))?.buckets.map((b) => b.bucketId)).toEqual([10, 30, 40]);
  });

  it("reports OFPGMFC_BUCKET_EXISTS and OFPGMFC_GROUP_EXISTS at the failing line", async () => {
    const bridge = await bridgeWith("br-exists", [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ]);
    const before = await snapshot(bridge);
    const extra: Modification = { op: "add-flow", flow: { ...vip, priority: 5 } };
    const exists = await rejection(
      bridge.applyBundle([extra, { op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [bucket(20, 4)] }, extra]),
    );
    expect(exists.code).toBe("OFPGMFC_BUCKET_EXISTS");
    expect(exists.line?.index).toBe(1);
    const group = await rejection(bridge.applyBundle([{ op: "add-group", group: lb }, extra]));
    expect(group.code).toBe("OFPGMFC_GROUP_EXISTS");
    expect(group.line?.index).toBe(0);
    expect(await snapshot(bridge)).toEqual(before);
  });

  it("maps bad actions, ovs-ofctl refusals and connection failures", async () => {
    const bridge = await bridgeWith("br-errors");
    const badGroup = await rejection(bridge.applyBundle([{ op: "add-flow", flow: { ...vip, actions: [{ type: "group", groupId: 77 }] } }]));
    expect(badGroup.code).toBe("OFPBAC_BAD_OUT_GROUP");

    const inconsistent = await rejection(
      bridge.applyBundle([
        { op: "add-flow", flow: vip },
        { op: "add-flow", flow: { ...vip, match: { protocol: "udp" }, actions: [{ type: "set_field", field: "tcp_dst", value: 1 }] } },
      ]),
    );
    expect(inconsistent.code).toBe("OFPBAC_MATCH_INCONSISTENT");
    expect(inconsistent.line?.index).toBe(1);
    expect(await bridge.dumpFlows({ cookie: OWNER, mask: ALL_ONES })).toEqual([]);

    const gone = new OpenFlowBridge(sandbox.runner, `unix:${sandbox.dir}/missing.mgmt`);
    expect((await rejection(gone.dumpGroups())).code).toBe("OFCTL_CONNECT");
  });

  it("modifies and deletes only flows that carry the owner's cookie", async () => {
    const foreign: Flow = { ...vip, priority: 90, cookie: 0x99n };
    const bridge = await bridgeWith("br-owner", [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
      { op: "add-flow", flow: foreign },
    ]);
    const drop = [{ type: "drop" } as const];
    await bridge.applyBundle([
      { op: "modify-flow", flow: { ...vip, actions: drop } },
      { op: "modify-flow", flow: { ...foreign, cookie: OWNER, actions: drop } },
      { op: "delete-flow", table: 0, priority: 90, match: foreign.match, cookie: OWNER },
    ]);
    const flows = await bridge.dumpFlows({ cookie: 0n, mask: 0n, table: 0 });
    expect(flows.find((f) => f.cookie === OWNER)?.actions).toEqual([{ type: "drop" }]);
    expect(flows.find((f) => f.cookie === 0x99n)?.actions).toEqual([{ type: "group", groupId: 10 }]);

    await bridge.applyBundle([{ op: "delete-flows", cookie: OWNER, mask: ALL_ONES }]);
    expect(await bridge.dumpFlows({ cookie: OWNER, mask: ALL_ONES })).toEqual([]);
    // Deleting a group deletes the flows that output to it, whoever owns them.
    await bridge.applyBundle([{ op: "delete-group", groupId: 10 }]);
    expect(await bridge.dumpFlows({ cookie: 0x99n, mask: ALL_ONES })).toEqual([]);
  });

  it("stages a bundle that applies only on commit; an aborted one, or one whose host loses its input, is never applied", async () => {
    const bridge = await bridgeWith("br-staged");
    const mods: Modification[] = [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ];
    const empty = await snapshot(bridge);

    const staged = await bridge.stageBundle(mods);
    // Staged is on the host, not on the bridge: nothing is sent before the commit.
    expect(await snapshot(bridge)).toEqual(empty);
    expect(await staged.commit()).toEqual({ lines: renderBundle(mods), bytes: renderBundle(mods).join("\n").length + 1, messages: 2 });
    expect(await bridge.dumpGroup(10)).toEqual(toGroupEntry(lb));
    await expect(staged.commit()).rejects.toThrow(/committed or aborted already/);
    await bridge.applyBundle([
      { op: "delete-flows", cookie: OWNER, mask: ALL_ONES },
      { op: "delete-group", groupId: 10 },
    ]);

    const withdrawn = await bridge.stageBundle(mods);
    await withdrawn.abort();
    expect(await snapshot(bridge)).toEqual(empty);

    // The host's input ends before the commit line (the provider gone): dropped, and the exit says so.
    let cutInput = () => undefined as void;
    const cut: CommandRunner = {
      hostName: "sandbox",
      run: (argv, opts = {}) => {
        const toHost = new PassThrough();
        opts.stdinFrom!.on("data", (d: Buffer) => void (toHost.writableEnded || toHost.write(d)));
        cutInput = () => void toHost.end();
        return sandbox.runner.run(argv, { ...opts, stdinFrom: toHost });
      },
    };
    const orphan = await new OpenFlowBridge(cut, bridge.address).stageBundle(mods);
    cutInput();
    const err = await rejection(orphan.commit());
    expect(err.kind).toBe("refused");
    expect(err.message).toMatch(/bundle staged but not committed: its input ended without the commit line/);
    expect(await snapshot(bridge)).toEqual(empty);

    // OVS's refusal at commit reads as applyBundle's, with the failing line.
    const refusing = await bridge.stageBundle([...mods, { op: "remove-buckets", groupId: 10, commandBucketId: 999 }]);
    const refused = await rejection(refusing.commit());
    expect(refused.code).toBe("OFPGMFC_UNKNOWN_BUCKET");
    expect(refused.line?.index).toBe(2);
    expect(await snapshot(bridge)).toEqual(empty);
  });

  it("sends nothing for an empty bundle", async () => {
    let calls = 0;
    const counting: CommandRunner = { hostName: "sandbox", run: (argv, opts) => (calls++, sandbox.runner.run(argv, opts)) };
    const bridge = new OpenFlowBridge(counting, sandbox.addBridge("br-empty"));
    expect(await bridge.applyBundle([])).toEqual({ lines: [], bytes: 0, messages: 0 });
    expect(calls).toBe(0);
  });
});

describe("traceBucket against ovs-vswitchd 3.1", () => {
  it("shows stable selection: a new bucket takes flows only for itself, a dead port moves only its own", async () => {
    await bridgeWith("br-trace", [
      { op: "add-group", group: lb },
      { op: "add-flow", flow: vip },
    ]);
    const packets = clients(300);

    let start = performance.now();
    const one = await traceBucket(sandbox.runner, "br-trace", packets[0]);
    const oneMs = performance.now() - start;
    start = performance.now();
    const before = await traceBuckets(sandbox.runner, "br-trace", packets);
    const batchMs = performance.now() - start;
    console.log(
      `ofproto/trace: 1 packet ${oneMs.toFixed(1)} ms; ${packets.length} packets ${batchMs.toFixed(0)} ms (${(batchMs / packets.length).toFixed(2)} ms each)`,
    );

    expect(one).toBe(before[0]);
    expect(new Set(before)).toEqual(new Set([10, 20, 30]));
    const udp = await traceBucket(sandbox.runner, "br-trace", { ...packets[0], protocol: "udp" });
    expect(udp).toBeUndefined(); // no flow sends UDP to the group

    const bridge = new OpenFlowBridge(sandbox.runner, `unix:${sandbox.dir}/br-trace.mgmt`);
    await bridge.applyBundle([{ op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [bucket(40, 4)] }]);
    const added = await traceBuckets(sandbox.runner, "br-trace", packets);
    const moved = added.filter((b, i) => b !== before[i]);
    expect(moved.length).toBeGreaterThan(0);
    expect(new Set(moved)).toEqual(new Set([40]));

    await bridge.applyBundle([{ op: "remove-buckets", groupId: 10, commandBucketId: 40 }]);
    expect(await traceBuckets(sandbox.runner, "br-trace", packets)).toEqual(before);

    // watch_port: with port 1 down, bucket 10's flows move and no other flow does.
    await runChecked(sandbox.runner, ["ovs-appctl", "netdev-dummy/set-admin-state", "br-trace-p1", "down"]);
    const down = await traceBuckets(sandbox.runner, "br-trace", packets);
    down.forEach((b, i) => (before[i] === 10 ? expect(b).not.toBe(10) : expect(b).toBe(before[i])));
  });
});
