import { describe, expect, it } from "vitest";
import { type CommandResult, type CommandRunner } from "../../provider/transport/exec";
import { OpenFlowBridge, OpenFlowError } from "../../provider/transport/openflow-bridge";
import {
  OpenFlowParseError,
  actionText,
  flowStreamParser,
  groupStreamParser,
  parseAction,
  parseFlows,
  parseGroups,
  renderAction,
  splitTopLevel,
  type Action,
  type DumpedFlow,
  type GroupEntry,
} from "../../provider/openflow";
import { chosenBucket } from "../../provider/transport/openflow-trace";
import { slotChoice } from "../../provider/openflow/trace";

// Captured from ovs-ofctl 3.1.0 (-O OpenFlow15 --no-names) against ovs-vswitchd 3.1.0.
const GROUPS = `OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):
 group_id=20,type=all,bucket=bucket_id:0,actions=output:1,bucket=bucket_id:1,actions=output:2
 group_id=21,type=indirect,bucket=bucket_id:5,actions=output:1
 group_id=10,type=select,selection_method=hash,fields(ip_src,ip_dst,nw_proto,tcp_src,tcp_dst),bucket=bucket_id:100,weight:100,watch_port:1,actions=set_field:02:00:00:00:00:01->eth_dst,output:1,bucket=bucket_id:150,weight:100,actions=output:3,bucket=bucket_id:200,weight:100,actions=set_field:02:00:00:00:00:02->eth_dst,output:2
 group_id=25,type=select,selection_method=hash,selection_method_param=7,fields(eth_dst,ip_src=255.255.255.0,tcp_src),bucket=bucket_id:4294967040,weight:65535,actions=output:1
 group_id=22,type=ff,bucket=bucket_id:1,watch_port:1,actions=output:1,bucket=bucket_id:2,watch_port:2,actions=output:2
 group_id=26,type=select,selection_method=hash,bucket=bucket_id:1,weight:0,actions=output:1
 group_id=23,type=select,selection_method=hash,fields=ip_src,bucket=bucket_id:8,weight:3,actions=output:3,bucket=bucket_id:1,weight:10,actions=output:1,bucket=bucket_id:7,weight:3,actions=output:3,bucket=bucket_id:9,weight:0,actions=output:2
 group_id=4294967040,type=select,selection_method=hash,bucket=bucket_id:1,actions=output:1
 group_id=24,type=select,bucket=bucket_id:1,actions=output:1
 group_id=50,type=select,selection_method=hash,fields=ip_src
`;

const FLOWS = `OFPST_FLOW reply (OF1.5) (xid=0x2):
 cookie=0xdead00000000beef, duration=476.502s, table=0, n_packets=0, n_bytes=0, idle_age=476, priority=300,ip,in_port=1,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.0/24,nw_dst=10.0.0.100 actions=ct(table=1,zone=7)
 cookie=0xdead00000000beef, duration=476.502s, table=0, n_packets=0, n_bytes=0, idle_age=476, priority=200,arp,arp_tpa=10.0.0.100,arp_op=1 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:02:00:00:00:00:aa->eth_src,set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:02:00:00:00:00:aa->arp_sha,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:10.0.0.100->arp_spa,IN_PORT
 cookie=0xabc, duration=523.944s, table=0, n_packets=1, n_bytes=118, idle_age=0, priority=100,tcp,nw_dst=10.0.0.100,tp_dst=80 actions=group:10
 cookie=0xdead00000000beef, duration=0.010s, table=1, n_packets=0, n_bytes=0, idle_age=0, priority=301,ct_state=+est-rel+trk,ct_zone=7,tcp actions=ct(zone=7,nat),set_field:0x1/0xf->reg0,set_field:02:00:00:00:00:01->eth_dst,resubmit(,2)
 cookie=0x9, duration=327.521s, table=9, n_packets=0, n_bytes=0, idle_age=327, priority=8,ip actions=ct(commit,zone=3,nat(dst=10.1.0.5:80),exec(set_field:0x5->ct_mark))
 cookie=0x9, duration=0.006s, table=9, n_packets=0, n_bytes=0, idle_age=0, actions=drop
 cookie=0x9, duration=0.006s, table=9, n_packets=0, n_bytes=0, idle_timeout=100, send_flow_rem importance=3, idle_age=0, priority=7 actions=drop
 cookie=0x0, duration=3.298s, table=0, n_packets=0, n_bytes=0, idle_age=3, priority=0 actions=NORMAL
`;

// Two packets' traces, as ovs-vswitchd answers ofproto/trace, one after the other; the first recirculates through ct().
const TRACES = `Flow: tcp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.5,nw_dst=10.0.0.100,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=80,tcp_flags=0

bridge("br0")
-------------
 0. ip,in_port=1,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.0/24,nw_dst=10.0.0.100, priority 300, cookie 0xdead00000000beef
    ct(table=1,zone=7)
    drop
     -> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table 1.
     -> Sets the packet to an untracked state, and clears all the conntrack fields.

Final flow: unchanged
Megaflow: recirc_id=0,eth,ip,in_port=1,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.0/24,nw_dst=10.0.0.100,nw_frag=no
Datapath actions: ct(zone=7),recirc(0x2)

===============================================================================
recirc(0x2) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)
===============================================================================

Flow: recirc_id=0x2,ct_state=new|trk,ct_zone=7,eth,tcp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.5,nw_dst=10.0.0.100,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=80,tcp_flags=0

bridge("br0")
-------------
    thaw
        Resuming from table 1
 1. ct_state=+new+trk,ip, priority 300, cookie 0xdead00000000beef
    ct(commit,zone=7,nat(dst=10.1.0.5))
    nat(dst=10.1.0.5)
     -> Sets the packet to an untracked state, and clears all the conntrack fields.
    resubmit(,2)
 2. ip, priority 2, cookie 0xdead00000000beef
    drop

Final flow: recirc_id=0x2,eth,tcp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=02:00:00:00:00:aa,nw_src=10.0.0.5,nw_dst=10.0.0.100,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=80,tcp_flags=0
Megaflow: recirc_id=0x2,ct_state=+new-est-rel+trk,ct_zone=7,eth,ip,in_port=1,nw_frag=no
Datapath actions: ct(commit,zone=7,nat(dst=10.1.0.5))
Flow: tcp,in_port=2,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.9.0.1,nw_dst=10.0.0.100,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1234,tp_dst=80,tcp_flags=0

bridge("br0")
-------------
 0. tcp,nw_dst=10.0.0.100,tp_dst=80, priority 100, cookie 0xabc
    group:10
     -> bucket 100: score 6004100
     -> bucket 150: score 5503900
     -> bucket 200: score 1900000
     -> using bucket 100
    bucket 100
            set_field:02:00:00:00:00:01->eth_dst
            output:1

Final flow: unchanged
Megaflow: recirc_id=0,eth,tcp,in_port=2,dl_dst=00:00:00:00:00:00,nw_src=10.9.0.1,nw_dst=10.0.0.100,nw_frag=no,tp_src=1234,tp_dst=80
Datapath actions: set(eth(dst=02:00:00:00:00:01)),4
`;

describe("parse: dump-groups", () => {
  it("refuses, with a clear reason, a dump holding a group OVS could not decode (seen past ~1,000 buckets)", () => {
    const dump = [
      "OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):",
      " group_id=7,type=select,selection_method=hash,fields(ip_src),bucket=bucket_id:1,weight:100,actions=IN_PORT",
      "00000000  06 13 13 68 00 00 00 02-00 07 00 00 00 00 00 00 |...h............|",
    ].join("\n");
    expect(() => parseGroups(dump)).toThrow(/a reply OVS could not decode .*the bridge's groups cannot be read/);
  });

  const groups = parseGroups(GROUPS);

  it("reads a select group with hash fields, bucket ids, weights and watch_port", () => {
    expect(groups.find((g) => g.groupId === 10)).toEqual({
      groupId: 10,
      type: "select",
      selectionMethod: "hash",
      fields: ["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst"],
      buckets: [
        {
          bucketId: 100,
          weight: 100,
          watchPort: 1,
          actions: [
            { type: "set_field", field: "eth_dst", value: "02:00:00:00:00:01" },
            { type: "output", port: 1 },
          ],
        },
        { bucketId: 150, weight: 100, actions: [{ type: "output", port: 3 }] },
        {
          bucketId: 200,
          weight: 100,
          actions: [
            { type: "set_field", field: "eth_dst", value: "02:00:00:00:00:02" },
            { type: "output", port: 2 },
          ],
        },
      ],
    });
  });

  it("fills in the weights OVS leaves out and keeps bucket order", () => {
    const byId = new Map(groups.map((g) => [g.groupId, g]));
    expect(byId.get(23)?.fields).toEqual(["ip_src"]);
    expect(byId.get(23)?.buckets.map((b) => [b.bucketId, b.weight])).toEqual([
      [8, 3],
      [1, 10],
      [7, 3],
      [9, 0],
    ]);
    expect(byId.get(4294967040)?.buckets[0].weight).toBe(1);
    expect(byId.get(26)?.buckets[0].weight).toBe(0);
    expect(byId.get(20)?.buckets.map((b) => b.weight)).toEqual([0, 0]);
    expect(byId.get(22)?.buckets.map((b) => b.watchPort)).toEqual([1, 2]);
    expect(byId.get(25)).toMatchObject({ selectionMethodParam: 7n, fields: ["eth_dst", "ip_src=255.255.255.0", "tcp_src"] });
    expect(byId.get(24)).toEqual({ groupId: 24, type: "select", fields: [], buckets: [{ bucketId: 1, weight: 1, actions: [{ type: "output", port: 1 }] }] });
    expect(byId.get(50)?.buckets).toEqual([]);
    expect(groups.map((g) => g.groupId)).toEqual([20, 21, 10, 25, 22, 26, 23, 4294967040, 24, 50]);
  });

  it("reads an empty dump and refuses lines it does not understand", () => {
    expect(parseGroups("OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):\n")).toEqual([]);
    expect(() => parseGroups(" group_id=1,type=select,bucket=weight:1,actions=drop\n")).toThrow(OpenFlowParseError);
    expect(() => parseGroups(" group_id=1,type=frobnicate\n")).toThrow(/unexpected "type=frobnicate"/);
    expect(() => parseGroups(" group_id=1\n")).toThrow(/no type/);
  });
});

describe("parse: dump-flows", () => {
  const flows = parseFlows(FLOWS);

  it("reads cookie, table, priority, the match and actions typed, and counters", () => {
    expect(flows[0]).toEqual({
      cookie: 0xdead00000000beefn,
      table: 0,
      priority: 300,
      match: { protocol: "ip", in_port: 1, dl_dst: "02:00:00:00:00:aa", nw_src: "10.0.0.0/24", nw_dst: "10.0.0.100" },
      otherMatch: [],
      actions: [{ type: "ct", table: 1, zone: 7 }],
      nPackets: 0n,
      nBytes: 0n,
    });
    expect(flows[2]).toMatchObject({ cookie: 0xabcn, nPackets: 1n, nBytes: 118n, actions: [{ type: "group", groupId: 10 }] });
  });

  it("types ct(), move and set_field actions whole; keeps what ovslb does not write as its text", () => {
    expect(flows[1].actions).toHaveLength(8);
    expect(flows[1].actions[0]).toEqual({ type: "move", src: "NXM_OF_ETH_SRC", dst: "NXM_OF_ETH_DST" });
    expect(flows[1].actions[2]).toEqual({ type: "set_field", field: "arp_op", value: 2 });
    expect(flows[1].actions.at(-1)).toEqual({ type: "in_port" });
    expect(flows[3]).toMatchObject({
      priority: 301,
      match: { ct_state: { est: true, rel: false, trk: true }, ct_zone: 7, protocol: "tcp" },
      actions: [
        { type: "ct", zone: 7, nat: { kind: "existing" } },
        { type: "other", text: "set_field:0x1/0xf->reg0" },
        { type: "set_field", field: "eth_dst", value: "02:00:00:00:00:01" },
        { type: "resubmit", table: 2 },
      ],
    });
    expect(flows[4].actions).toEqual([{ type: "ct", commit: true, zone: 3, nat: { kind: "dst", ip: "10.1.0.5", port: 80 }, mark: 5 }]);
  });

  it("reads the default priority, an empty match and flow flags", () => {
    expect(flows[5]).toMatchObject({ table: 9, priority: 32768, match: {}, actions: [{ type: "drop" }] });
    expect(flows[6]).toMatchObject({ priority: 7, match: {}, actions: [{ type: "drop" }] });
    expect(flows[7]).toMatchObject({ cookie: 0n, priority: 0, actions: [{ type: "other", text: "NORMAL" }] });
  });

  it("every parsed action renders back to exactly the text OVS printed", () => {
    // The actions of FLOWS's lines, one by one, as ovs-ofctl 3.1.0 printed them.
    const printed = [
      ["ct(table=1,zone=7)"],
      [
        "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
        "set_field:02:00:00:00:00:aa->eth_src",
        "set_field:2->arp_op",
        "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]",
        "set_field:02:00:00:00:00:aa->arp_sha",
        "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]",
        "set_field:10.0.0.100->arp_spa",
        "IN_PORT",
      ],
      ["group:10"],
      ["ct(zone=7,nat)", "set_field:0x1/0xf->reg0", "set_field:02:00:00:00:00:01->eth_dst", "resubmit(,2)"],
      ["ct(commit,zone=3,nat(dst=10.1.0.5:80),exec(set_field:0x5->ct_mark))"],
      ["drop"],
      ["drop"],
      ["NORMAL"],
    ];
    expect(flows.map((f) => f.actions.map(actionText))).toEqual(printed);
    // Typed actions are rendered (not kept as text), and their text parses back to the same action.
    const typed = flows.flatMap((f) => f.actions.filter((a) => a.type !== "other"));
    expect(typed.map((a) => renderAction(a))).toEqual(printed.flat().filter((t) => t !== "set_field:0x1/0xf->reg0" && t !== "NORMAL"));
    for (const a of typed) expect(parseAction(renderAction(a))).toEqual(a);
  });

  it("keeps match fields and action forms it does not write as text, so they still identify a flow exactly", () => {
    const [odd] = parseFlows(
      " cookie=0x1, duration=1s, table=0, n_packets=0, n_bytes=0, priority=5,arp6,reg0=0x1,in_port=LOCAL,nw_dst=10.0.0.300 actions=ct(commit,force),output:0,set_field:0x1->tcp_dst\n",
    );
    expect(odd.match).toEqual({});
    expect(odd.otherMatch).toEqual(["arp6", "reg0=0x1", "in_port=LOCAL", "nw_dst=10.0.0.300"]);
    const texts: Action[] = [
      { type: "other", text: "ct(commit,force)" },
      { type: "other", text: "output:0" },
      { type: "other", text: "set_field:0x1->tcp_dst" },
    ];
    expect(odd.actions).toEqual(texts);
  });

  it("splits only at top-level commas", () => {
    expect(splitTopLevel("ct(commit,nat(dst=10.1.0.5:80),exec(set_field:0x5->ct_mark)),output:1")).toEqual([
      "ct(commit,nat(dst=10.1.0.5:80),exec(set_field:0x5->ct_mark))",
      "output:1",
    ]);
  });
});

describe("parse: ofproto/trace", () => {
  it("finds the bucket used, after a recirculation too", () => {
    // Each trace is one reply: the second starts at its own Flow line (the first's second Flow line follows its ==== banner).
    const second = TRACES.indexOf("\nFlow: tcp,in_port=2");
    const traces = [TRACES.slice(0, second), TRACES.slice(second + 1)];
    expect(traces.map(chosenBucket)).toEqual([undefined, 100]);
  });

  it("reads the live bucket chosen when another is down", () => {
    const trace = `     -> bucket 100: not live due to port 1
     -> bucket 150: score 5503900
     -> bucket 200: score 1900000
     -> using bucket 150`;
    expect(chosenBucket(trace)).toBe(150);
  });

  it("reads a second-chance gateway's slot, key, MAC and port, through a failed-over owner group; slot 0 shows in no final flow", () => {
    const via = (reg12: string) => ` 0. tcp,in_port=1,nw_dst=10.0.0.196,tp_dst=80, priority 100, cookie 0xb5e0a707f9060df
    multipath(symmetric_l3l4,0,modulo_n,1024,0,NXM_NX_REG12[0..9])
     -> NXM_NX_REG12[0..9] = ${reg12 || 0}
    resubmit(,70)
70. tcp,reg12=${reg12 || 0},nw_dst=10.0.0.196,tp_dst=80, priority 100, cookie 0xb5e0a707f9060df
    set_field:0xac101502->tun_id
    group:77
     -> bucket 0: not live due to port 62001
     -> bucket 1: live
    set_field:0->tun_id
    group:9
     -> using bucket 3
    bucket 3
            set_field:02:00:0a:00:00:0b->eth_src
            set_field:02:00:0a:00:00:6f->eth_dst
            output:61002

Final flow: tcp,${reg12 ? `reg12=${reg12},` : ""}tun_id=0,in_port=1,dl_src=02:00:0a:00:00:0b,dl_dst=02:00:0a:00:00:6f,nw_dst=10.0.0.196,tp_dst=80
`;
    expect(slotChoice(via("0x2a"))).toEqual({ slot: 42, key: 0, mac: "02:00:0a:00:00:6f", output: 61002 });
    expect(slotChoice(via(""))).toEqual({ slot: 0, key: 0, mac: "02:00:0a:00:00:6f", output: 61002 });
    expect(slotChoice("Final flow: unchanged")).toEqual({});
  });
});

/** A runner that answers every command with one captured result. */
function replay(result: Partial<CommandResult>): CommandRunner & { argv?: readonly string[]; stdin?: string } {
  const runner: CommandRunner & { argv?: readonly string[]; stdin?: string } = {
    hostName: "gw-1",
    run: async (argv, opts) => {
      runner.argv = argv;
      runner.stdin = opts?.stdin;
      return { stdout: "", stderr: "", exitCode: 1, ...result };
    },
  };
  return runner;
}

async function failure(stderr: string, lines: number): Promise<OpenFlowError> {
  const bridge = new OpenFlowBridge(replay({ stderr }), "unix:/var/run/openvswitch/br-lb.mgmt");
  const mods = Array.from({ length: lines }, (_, i) => ({ op: "delete-group", groupId: i + 1 }) as const);
  const err = await bridge.applyBundle(mods).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenFlowError);
  return err as OpenFlowError;
}

describe("parse: ovs-ofctl errors", () => {
  it("maps a rolled-back bundle to the failing message's code and line", async () => {
    // Five lines, the third failing: the bundled messages had xids 0x2..0x6, the commit 0x9.
    const err = await failure(
      `Error OFPGMFC_UNKNOWN_BUCKET for: OFPT_GROUP_MOD (OF1.5) (xid=0x4):
 REMOVE_BUCKET command_bucket_id:4242,group_id=10
Error OFPBFC_MSG_FAILED for: OFPT_BUNDLE_CONTROL (OF1.5) (xid=0x9):
 bundle_id=0 type=COMMIT_REQUEST flags=atomic ordered
ovs-ofctl: talking to unix:/var/run/openvswitch/br-lb.mgmt (Protocol error)
`,
      5,
    );
    expect(err.code).toBe("OFPGMFC_UNKNOWN_BUCKET");
    expect(err.codes).toEqual(["OFPGMFC_UNKNOWN_BUCKET", "OFPBFC_MSG_FAILED"]);
    expect(err.line).toEqual({ index: 2, text: "group delete group_id=3" });
    expect(err.message).toBe(
      "gw-1: bridge unix:/var/run/openvswitch/br-lb.mgmt: OFPGMFC_UNKNOWN_BUCKET at bundle line 3 (group delete group_id=3): " +
        "bundle not applied; OVS: OFPT_GROUP_MOD (OF1.5) (xid=0x4): REMOVE_BUCKET command_bucket_id:4242,group_id=10",
    );
  });

  it("maps a flow mod error printed on one line", async () => {
    const err = await failure(
      `Error OFPBAC_BAD_OUT_GROUP for: OFPT_FLOW_MOD (OF1.5) (xid=0x6): ADD priority=5,ip actions=group:77
Error OFPBFC_MSG_FAILED for: OFPT_BUNDLE_CONTROL (OF1.5) (xid=0x9):
 bundle_id=0 type=COMMIT_REQUEST flags=atomic ordered
ovs-ofctl: talking to unix:/tmp/sbx/br0.mgmt (Protocol error)
`,
      1,
    );
    expect(err.code).toBe("OFPBAC_BAD_OUT_GROUP");
    expect(err.line?.index).toBe(0);
  });

  it("maps ovs-ofctl's refusal of a line, with the OpenFlow code when it gives one", async () => {
    const bad = await failure(
      "2026-11-30T05:48:55Z|00001|ofp_actions|WARN|set_field tcp_dst lacks correct prerequisites\novs-ofctl: -:2: actions are invalid with specified match (OFPBAC_MATCH_INCONSISTENT)\n",
      2,
    );
    expect(bad.code).toBe("OFPBAC_MATCH_INCONSISTENT");
    expect(bad.line).toEqual({ index: 1, text: "group delete group_id=2" });
    const parse = await failure("ovs-ofctl: -:1: unknown action frobnicate\n", 1);
    expect(parse.code).toBe("OFCTL_PARSE");
  });

  it("maps connection failures", async () => {
    const err = await failure("ovs-ofctl: connecting to unix:/var/run/openvswitch/br-lb.mgmt (No such file or directory)\n", 1);
    expect(err.code).toBe("OFCTL_CONNECT");
    expect(err.message).toContain("gw-1");
  });

  it("sends the bundle on stdin, never in argv", async () => {
    const runner = replay({ exitCode: 0 });
    const sent = await new OpenFlowBridge(runner, "unix:/run/br0.mgmt").applyBundle([{ op: "delete-group", groupId: 7 }]);
    // Staged whole on the host (WHOLE_BUNDLE), then `ovs-ofctl bundle BR -`: the byte count and ovs-ofctl's argv are arguments of the fixed script.
    expect(runner.argv?.slice(0, 2)).toEqual(["sh", "-c"]);
    expect(runner.argv?.slice(3)).toEqual(["ovslb-bundle", "24", "ovs-ofctl", "-O", "OpenFlow15", "bundle", "unix:/run/br0.mgmt"]);
    expect(runner.stdin).toBe("group delete group_id=7\n");
    expect(sent).toEqual({ lines: ["group delete group_id=7"], bytes: 24, messages: 1 });
  });
});

describe("parse: the second-chance vocabulary (printed by OVS 3.1)", () => {
  // Lines as ovs-ofctl dump-flows printed them for flows written in these exact forms.
  const dump = [
    " cookie=0x1, duration=0.1s, table=0, n_packets=0, n_bytes=0, priority=100,tcp,in_port=1,nw_dst=10.0.0.205,tp_dst=80 actions=multipath(symmetric_l3l4,0,modulo_n,1024,0,NXM_NX_REG12[0..9]),resubmit(,70)",
    " cookie=0x1, duration=0.1s, table=70, n_packets=0, n_bytes=0, priority=100,tcp,reg12=0x5,nw_dst=10.0.0.205,tp_dst=80 actions=set_field:02:00:00:00:00:01->eth_dst,set_field:0xc0a83202->tun_id,output:10",
    " cookie=0x1, duration=0.1s, table=0, n_packets=0, n_bytes=0, priority=1000,tcp,tun_src=192.168.50.3,in_port=20,nw_dst=10.0.0.205,tp_dst=80 actions=set_field:0x1->reg13,ct(table=61,zone=5,nat)",
    " cookie=0x1, duration=0.1s, table=61, n_packets=0, n_bytes=0, priority=250,ct_state=+trk,ct_zone=5,reg13=0x1 actions=drop",
    " cookie=0x1, duration=0.1s, table=61, n_packets=0, n_bytes=0, priority=200,ct_state=+new+trk,ct_zone=5,tcp,dl_dst=02:00:00:00:00:01,nw_dst=10.0.0.205,tp_dst=80,tcp_flags=+syn-ack actions=ct(commit,zone=5,nat(dst=10.0.0.101:8080)),output:1",
    " cookie=0x1, duration=0.1s, table=61, n_packets=0, n_bytes=0, priority=190,ct_state=+new+trk,ct_zone=5,tcp,tun_id=0,nw_dst=10.0.0.205,tp_dst=80 actions=ct(commit,zone=5,nat(dst=10.0.0.101:8080)),output:1",
    " cookie=0x1, duration=0.1s, table=61, n_packets=0, n_bytes=0, priority=180,ct_state=+new+trk,ct_zone=5,tcp,nw_dst=10.0.0.205,tp_dst=80 actions=move:NXM_NX_TUN_ID[0..31]->NXM_NX_TUN_IPV4_DST[],set_field:0->tun_id,set_field:0.0.0.0->tun_src,IN_PORT",
  ].join("\n");

  it("types every match field and action (nothing is left as text) and renders each back to what OVS printed", () => {
    const flows = parseFlows(dump);
    for (const f of flows) {
      expect(f.otherMatch).toEqual([]);
      expect(f.actions.filter((a) => a.type === "other")).toEqual([]);
    }
    expect(flows[0].actions[0]).toEqual({ type: "multipath", fields: "symmetric_l3l4", basis: 0, links: 1024, dst: "NXM_NX_REG12", bits: 10 });
    expect(flows[1].match.reg12).toBe(5);
    expect(flows[1].actions[1]).toEqual({ type: "set_field", field: "tun_id", value: 0xc0a83202 });
    expect(flows[3].match).toMatchObject({ reg13: 1, ct_state: { trk: true } });
    expect(flows[4].match.tcp_flags).toEqual({ syn: true, ack: false });
    expect(flows[5].match.tun_id).toBe(0);
    expect(flows[6].actions[0]).toEqual({ type: "move", src: "NXM_NX_TUN_ID", dst: "NXM_NX_TUN_IPV4_DST", srcBits: [0, 31] });
    // Rendered back, action by action: the text after " actions=" on each line above.
    expect(flows.map((f) => f.actions.map((a) => renderAction(a)))).toEqual([
      ["multipath(symmetric_l3l4,0,modulo_n,1024,0,NXM_NX_REG12[0..9])", "resubmit(,70)"],
      ["set_field:02:00:00:00:00:01->eth_dst", "set_field:0xc0a83202->tun_id", "output:10"],
      ["set_field:0x1->reg13", "ct(table=61,zone=5,nat)"],
      ["drop"],
      ["ct(commit,zone=5,nat(dst=10.0.0.101:8080))", "output:1"],
      ["ct(commit,zone=5,nat(dst=10.0.0.101:8080))", "output:1"],
      ["move:NXM_NX_TUN_ID[0..31]->NXM_NX_TUN_IPV4_DST[]", "set_field:0->tun_id", "set_field:0.0.0.0->tun_src", "IN_PORT"],
    ]);
  });

  it("refuses a multipath that cannot fit its register bits and a move whose bits do not fill the destination", () => {
    expect(() => renderAction({ type: "multipath", fields: "symmetric_l3l4", basis: 0, links: 2048, dst: "NXM_NX_REG12", bits: 10 })).toThrow(/links/);
    expect(() => renderAction({ type: "move", src: "NXM_NX_TUN_ID", dst: "NXM_NX_TUN_IPV4_DST", srcBits: [0, 15] })).toThrow(/do not fill/);
  });
});

describe("parse: streamed dumps", () => {
  const dump = [
    "OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):",
    " group_id=7,type=select,selection_method=hash,fields(ip_src),bucket=bucket_id:1,weight:100,actions=set_field:02:00:0a:00:00:65->eth_dst,IN_PORT",
    " group_id=8,type=select,selection_method=hash,fields=ip_src,bucket=bucket_id:2,weight:100,actions=IN_PORT",
    "",
  ].join("\n");

  it("gives the same groups as the buffered parse, however the bytes are cut (also inside a UTF-8 character)", () => {
    const bytes = Buffer.from(`${dump} group_id=9,type=all,bucket=bucket_id:3,actions=set_field:\u00e9->eth_dst\n`, "utf8");
    const want = parseGroups(bytes.toString("utf8").replace(/ group_id=9.*\n/, ""));
    for (const size of [1, 2, 7, 64, bytes.length]) {
      const got: GroupEntry[] = [];
      const stderr: string[] = [];
      const p = groupStreamParser((g) => got.push(g));
      try {
        for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
        p.end();
      } catch (e) {
        stderr.push((e as Error).message);
      }
      // group 9's action is not ovslb's: kept as text, and the split é arrives whole.
      expect(got.slice(0, 2)).toEqual(want);
      expect(got[2]?.buckets[0].actions).toEqual([{ type: "other", text: "set_field:\u00e9->eth_dst" }]);
      expect(stderr).toEqual([]);
    }
  });

  it("parses a last line with no newline, and flows alike", () => {
    const flows = [
      "OFPST_FLOW reply (OF1.5) (xid=0x2):",
      " cookie=0x1, duration=1.1s, table=0, n_packets=0, n_bytes=0, idle_age=1, priority=100,tcp,in_port=1,nw_dst=10.0.0.1,tp_dst=80 actions=group:7",
      " cookie=0x0, duration=2.2s, table=0, n_packets=5, n_bytes=300, idle_age=1, priority=0 actions=NORMAL",
    ].join("\n");
    const got: DumpedFlow[] = [];
    const p = flowStreamParser((f) => got.push(f));
    p.push(flows.slice(0, 100));
    p.push(flows.slice(100));
    p.end();
    const want: DumpedFlow[] = [
      {
        cookie: 1n,
        table: 0,
        priority: 100,
        match: { protocol: "tcp", in_port: 1, nw_dst: "10.0.0.1", tp_dst: 80 },
        otherMatch: [],
        actions: [{ type: "group", groupId: 7 }],
        nPackets: 0n,
        nBytes: 0n,
      },
      { cookie: 0n, table: 0, priority: 0, match: {}, otherMatch: [], actions: [{ type: "other", text: "NORMAL" }], nPackets: 5n, nBytes: 300n },
    ];
    expect(got).toEqual(want);
    // The streamed parser and the whole-text one agree.
    expect(parseFlows(flows)).toEqual(want);
  });

  it("refuses a hex dump line when it arrives", () => {
    const p = groupStreamParser(() => undefined);
    expect(() => p.push("00000000  06 13 13 68 00 00 00 02-00 07 00 00 00 00 00 00 |...h............|\n")).toThrow(/a reply OVS could not decode/);
  });
});
