import { describe, expect, it } from "vitest";
import {
  type Action,
  actionText,
  type Flow,
  type Group,
  type Modification,
  OpenFlowValueError,
  renderBundle,
  renderModification,
  toFlowEntry,
  toGroupEntry,
} from "../../provider/openflow";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { type CommandRunner } from "../../provider/transport/exec";

const group: Group = {
  groupId: 10,
  type: "select",
  selectionMethod: "hash",
  fields: ["tcp_dst", "ip_dst", "ip_src", "tcp_src", "nw_proto"],
  buckets: [
    {
      bucketId: 100,
      weight: 100,
      watchPort: 1,
      actions: [
        { type: "set_field", field: "eth_dst", value: "02:00:00:00:00:0A" },
        { type: "output", port: 1 },
      ],
    },
    { bucketId: 200, weight: 100, actions: [{ type: "set_field", field: "eth_dst", value: "02:00:00:00:00:02" }, { type: "in_port" }] },
  ],
};

const flow: Flow = {
  table: 0,
  priority: 100,
  cookie: 0xabcn,
  match: { tp_dst: 80, nw_dst: "10.0.0.100", protocol: "tcp" },
  actions: [{ type: "group", groupId: 10 }],
};

/** The ARP responder of the active/active distributor, which answers ARP for the VIP itself out of the port the request came in on. */
const arpResponder: Action[] = [
  { type: "move", src: "NXM_OF_ETH_SRC", dst: "NXM_OF_ETH_DST" },
  { type: "set_field", field: "eth_src", value: "02:00:00:00:00:aa" },
  { type: "set_field", field: "arp_op", value: 2 },
  { type: "move", src: "NXM_NX_ARP_SHA", dst: "NXM_NX_ARP_THA" },
  { type: "set_field", field: "arp_sha", value: "02:00:00:00:00:aa" },
  { type: "move", src: "NXM_OF_ARP_SPA", dst: "NXM_OF_ARP_TPA" },
  { type: "set_field", field: "arp_spa", value: "10.0.0.100" },
  { type: "in_port" },
];

function refusal(mod: unknown): OpenFlowValueError {
  try {
    renderBundle([mod as Modification]);
  } catch (err) {
    expect(err).toBeInstanceOf(OpenFlowValueError);
    return err as OpenFlowValueError;
  }
  throw new Error("not refused");
}

describe("render: bundle lines", () => {
  it("renders a select group with hash fields in OVS's order, weights and watch_port", () => {
    expect(renderModification({ op: "add-group", group })).toBe(
      "group add group_id=10,type=select,selection_method=hash,fields(ip_src,ip_dst,nw_proto,tcp_src,tcp_dst)," +
        "bucket=bucket_id:100,weight:100,watch_port:1,actions=set_field:02:00:00:00:00:0a->eth_dst,output:1," +
        "bucket=bucket_id:200,weight:100,actions=set_field:02:00:00:00:00:02->eth_dst,IN_PORT",
    );
  });

  it("renders flow mods, strict ones guarded by the owner's cookie", () => {
    expect(
      renderBundle([
        { op: "add-flow", flow },
        { op: "modify-flow", flow: { ...flow, actions: [{ type: "drop" }] } },
        { op: "delete-flow", table: 0, priority: 100, match: flow.match, cookie: 0xabcn },
        { op: "delete-flows", cookie: 0xab00n, mask: 0xff00n },
        { op: "delete-flows", cookie: 0xabcn, mask: (1n << 64n) - 1n, table: 3 },
      ]),
    ).toEqual([
      "flow add table=0,priority=100,cookie=0xabc,tcp,nw_dst=10.0.0.100,tp_dst=80,actions=group:10",
      "flow modify_strict table=0,priority=100,cookie=0xabc/-1,tcp,nw_dst=10.0.0.100,tp_dst=80,actions=drop",
      "flow delete_strict table=0,priority=100,cookie=0xabc/-1,tcp,nw_dst=10.0.0.100,tp_dst=80",
      "flow delete cookie=0xab00/0xff00",
      "flow delete table=3,cookie=0xabc/-1",
    ]);
  });

  it("renders group mods by id", () => {
    const bucket = { bucketId: 150, weight: 100, actions: [{ type: "output", port: 3 }] } as const;
    expect(
      renderBundle([
        { op: "insert-buckets", groupId: 10, commandBucketId: 100, buckets: [bucket] },
        { op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [bucket, { ...bucket, bucketId: 151 }] },
        { op: "insert-buckets", groupId: 10, commandBucketId: "first", buckets: [bucket] },
        { op: "remove-buckets", groupId: 10, commandBucketId: 150 },
        { op: "remove-buckets", groupId: 10, commandBucketId: "all" },
        { op: "modify-group", group: { groupId: 11, type: "ff", buckets: [{ bucketId: 1, watchPort: 2, actions: [{ type: "output", port: 2 }] }] } },
        { op: "add-group", group: { groupId: 12, type: "all", buckets: [] } },
        { op: "delete-group", groupId: 0xffffff00 },
      ]),
    ).toEqual([
      "group insert_bucket group_id=10,command_bucket_id=100,bucket=bucket_id:150,weight:100,actions=output:3",
      "group insert_bucket group_id=10,command_bucket_id=last,bucket=bucket_id:150,weight:100,actions=output:3,bucket=bucket_id:151,weight:100,actions=output:3",
      "group insert_bucket group_id=10,command_bucket_id=first,bucket=bucket_id:150,weight:100,actions=output:3",
      "group remove_bucket group_id=10,command_bucket_id=150",
      "group remove_bucket group_id=10,command_bucket_id=all",
      "group modify group_id=11,type=ff,bucket=bucket_id:1,watch_port:2,actions=output:2",
      "group add group_id=12,type=all",
      "group delete group_id=4294967040",
    ]);
  });

  it("renders the ARP responder and ct actions as OVS prints them", () => {
    const arp: Flow = { table: 0, priority: 200, cookie: 1n, match: { protocol: "arp", arp_op: 1, arp_tpa: "10.0.0.100" }, actions: arpResponder };
    expect(renderModification({ op: "add-flow", flow: arp })).toBe(
      "flow add table=0,priority=200,cookie=0x1,arp,arp_op=1,arp_tpa=10.0.0.100,actions=" +
        "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:02:00:00:00:00:aa->eth_src,set_field:2->arp_op," +
        "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:02:00:00:00:00:aa->arp_sha," +
        "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:10.0.0.100->arp_spa,IN_PORT",
    );
    const ct: Flow = {
      table: 1,
      priority: 300,
      cookie: 1n,
      match: { ct_state: { trk: true, new: true, est: false }, ct_zone: 7, ct_mark: 5, protocol: "ip", nw_src: "10.0.0.0/24" },
      actions: [
        { type: "ct", zone: 7, mark: 10, nat: { kind: "dst", ip: "10.1.0.5", port: 8080 }, table: 2, commit: true },
        { type: "ct", zone: 7, nat: { kind: "existing" } },
        { type: "resubmit", table: 2 },
      ],
    };
    expect(toFlowEntry(ct)).toEqual({
      cookie: 1n,
      table: 1,
      priority: 300,
      match: { protocol: "ip", ct_state: "+new-est+trk", ct_zone: "7", ct_mark: "0x5", nw_src: "10.0.0.0/24" },
      actions: ["ct(commit,table=2,zone=7,nat(dst=10.1.0.5:8080),exec(set_field:0xa->ct_mark))", "ct(zone=7,nat)", "resubmit(,2)"],
    });
  });

  it("gives the text form dumps are compared against", () => {
    const entry = toGroupEntry(group);
    expect({ ...entry, buckets: entry.buckets.map((b) => ({ ...b, actions: b.actions.map(actionText) })) }).toEqual({
      groupId: 10,
      type: "select",
      selectionMethod: "hash",
      fields: ["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst"],
      buckets: [
        { bucketId: 100, weight: 100, watchPort: 1, actions: ["set_field:02:00:00:00:00:0a->eth_dst", "output:1"] },
        { bucketId: 200, weight: 100, actions: ["set_field:02:00:00:00:00:02->eth_dst", "IN_PORT"] },
      ],
    });
    expect(toFlowEntry({ ...flow, match: { protocol: "ip", nw_dst: "10.0.0.7/32", dl_dst: "02:AB:00:00:00:01" } }).match).toEqual({
      protocol: "ip",
      dl_dst: "02:ab:00:00:00:01",
      nw_dst: "10.0.0.7",
    });
  });
});

describe("render: refusals name the field", () => {
  const withMatch = (match: unknown) => ({ op: "add-flow", flow: { ...flow, match } });
  const withActions = (actions: unknown) => ({ op: "add-flow", flow: { ...flow, actions } });

  it.each([
    ["10.0.0.1,actions=drop", "modifications[0].flow.match.nw_dst"],
    ["$(reboot)", "modifications[0].flow.match.nw_dst"],
    ["10.0.0.1\nflow delete", "modifications[0].flow.match.nw_dst"],
    ["10.0.0.300", "modifications[0].flow.match.nw_dst"],
    ["10.0.0.7/24", "modifications[0].flow.match.nw_dst"],
    ["010.0.0.1", "modifications[0].flow.match.nw_dst"],
  ])("nw_dst %j", (value, field) => {
    const err = refusal(withMatch({ protocol: "tcp", nw_dst: value }));
    expect(err.field).toBe(field);
    expect(err.message).toContain(JSON.stringify(value));
  });

  it("refuses values injected into other fields", () => {
    expect(refusal(withMatch({ protocol: "ip", dl_dst: "$(reboot)" })).field).toBe("modifications[0].flow.match.dl_dst");
    expect(refusal(withMatch({ protocol: "tcp", tp_dst: "80,actions=drop" })).field).toBe("modifications[0].flow.match.tp_dst");
    expect(refusal(withMatch({ protocol: "tcp,actions=drop" })).field).toBe("modifications[0].flow.match.protocol");
    expect(refusal(withMatch({ ct_state: { "trk,actions=drop": true } })).field).toBe("modifications[0].flow.match.ct_state.trk,actions=drop");
    expect(refusal(withMatch({ "nw_dst=1.2.3.4,actions": "x" })).field).toBe("modifications[0].flow.match.nw_dst=1.2.3.4,actions");
    expect(refusal(withActions([{ type: "set_field", field: "eth_dst", value: "02:00:00:00:00:01->eth_src,output:9" }])).field).toBe(
      "modifications[0].flow.actions[0].value",
    );
    expect(refusal(withActions([{ type: "set_field", field: "reg0", value: "1" }])).field).toBe("modifications[0].flow.actions[0].field");
    expect(refusal(withActions([{ type: "output", port: "1,output:2" }])).field).toBe("modifications[0].flow.actions[0].port");
    expect(refusal(withActions([{ type: "controller" }])).field).toBe("modifications[0].flow.actions[0].type");
    expect(refusal(withActions([{ type: "ct", commit: true, nat: { kind: "dst", ip: "10.1.0.5),exec(" } }])).field).toBe(
      "modifications[0].flow.actions[0].nat.ip",
    );
    expect(refusal(withActions([{ type: "move", src: "NXM_OF_IP_SRC", dst: "NXM_OF_ETH_DST" }])).field).toBe("modifications[0].flow.actions[0]");
    expect(refusal({ op: "add-flow", flow: { ...flow, cookie: "0x1,table=3" } }).field).toBe("modifications[0].flow.cookie");
  });

  it("refuses match fields whose prerequisites are missing (OVS would drop them silently)", () => {
    const err = refusal(withMatch({ nw_dst: "10.0.0.1" }));
    expect(err.field).toBe("modifications[0].flow.match.nw_dst");
    expect(err.message).toContain("needs protocol");
    expect(refusal(withMatch({ protocol: "ip", tp_dst: 80 })).field).toBe("modifications[0].flow.match.tp_dst");
  });

  it("refuses drop with other actions, and no actions", () => {
    expect(refusal(withActions([{ type: "drop" }, { type: "output", port: 1 }])).field).toBe("modifications[0].flow.actions");
    expect(refusal(withActions([])).field).toBe("modifications[0].flow.actions");
  });

  it("refuses out-of-range and missing group values", () => {
    const select = (change: Record<string, unknown>) => ({ op: "add-group", group: { ...group, ...change } });
    expect(refusal(select({ groupId: 0xffffff01 })).field).toBe("modifications[0].group.groupId");
    expect(refusal(select({ selectionMethod: "dp_hash" })).field).toBe("modifications[0].group.selectionMethod");
    expect(refusal(select({ fields: ["ip_src),bucket=actions=drop"] })).field).toBe("modifications[0].group.fields[0]");
    expect(refusal(select({ fields: [] })).field).toBe("modifications[0].group.fields");
    const bucket = { bucketId: 1, weight: 1, actions: [{ type: "output", port: 1 }] };
    expect(refusal(select({ buckets: [{ ...bucket, bucketId: 0xffffff01 }] })).field).toBe("modifications[0].group.buckets[0].bucketId");
    expect(refusal(select({ buckets: [bucket, bucket] })).field).toBe("modifications[0].group.buckets[1].bucketId");
    expect(refusal(select({ buckets: [{ ...bucket, weight: 65536 }] })).field).toBe("modifications[0].group.buckets[0].weight");
    expect(refusal({ op: "add-group", group: { groupId: 1, type: "all", buckets: [bucket] } }).field).toBe("modifications[0].group.buckets[0].weight");
    expect(refusal({ op: "add-group", group: { groupId: 1, type: "ff", buckets: [{ bucketId: 1, actions: [{ type: "drop" }] }] } }).field).toBe(
      "modifications[0].group.buckets[0].watchPort",
    );
    expect(refusal({ op: "insert-buckets", groupId: 10, commandBucketId: "last", buckets: [{ bucketId: 5, actions: [{ type: "drop" }] }] }).field).toBe(
      "modifications[0].buckets[0].weight",
    );
    expect(refusal({ op: "insert-buckets", groupId: 10, commandBucketId: "after", buckets: [bucket] }).field).toBe("modifications[0].commandBucketId");
    expect(refusal({ op: "remove-buckets", groupId: 10, commandBucketId: "first" }).field).toBe("modifications[0].commandBucketId");
    expect(refusal({ op: "replace-flows" }).field).toBe("modifications[0].op");
  });

  it("refuses a bridge address that is not a safe unix: path", () => {
    const runner: CommandRunner = { hostName: "h", run: () => Promise.reject(new Error("not called")) };
    for (const address of ["tcp:10.0.0.1:6653", "unix:relative.mgmt", "unix:/run/br0.mgmt; reboot", "unix:/run/$(x)", "br0", "unix:/run/br0\n"]) {
      expect(() => new OpenFlowBridge(runner, address)).toThrow(OpenFlowValueError);
    }
    expect(new OpenFlowBridge(runner, "unix:/var/run/openvswitch/br-lb_0.mgmt").address).toBe("unix:/var/run/openvswitch/br-lb_0.mgmt");
  });
});
