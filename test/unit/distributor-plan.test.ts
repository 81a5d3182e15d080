import { describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import type { DistributorAttachmentInputs } from "../../provider/model/inputs.generated";
import { planBridge } from "../../provider/engine/plan";
import {
  type AttachmentDefaulted,
  actualInputs,
  assignSlots,
  attachmentIntent,
  attachmentNames,
  checkRules,
  derivedFrontendMac,
  desiredDataplane,
  planIds,
  withDefaults,
  type DataplaneIds,
} from "../../provider/resources/distributor-attachment/plan";
import { ndAnnouncement, parseFlows, renderBundle, toGroupEntry } from "../../provider/openflow";
import { observedFrom, recordedDump, type RecordedDump } from "../support/recorded-dumps";
import { nPlusOneViolations, withSlots } from "../../components/active-active-load-balancer";
import { deleteRefusal } from "../../provider/resources/distributor-device/plan";
import { parseOvsVersion } from "../../provider/model/ovs-versions";
import { mockResources } from "../support/mocks";

const host = { connection: { host: "172.30.0.31", user: "root", hostKey: "ssh-ed25519 AAAA", privateKeyPath: "/k" } };
const base = (over: Partial<DistributorAttachmentInputs> = {}): AttachmentDefaulted =>
  withDefaults({
    host,
    deviceId: "dev",
    uplinkBridge: "br-seg",
    attachmentId: "lb-a",
    vip: "10.0.0.100",
    amphorae: [
      { name: "a1", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
      { name: "a2", mac: "02:00:00:00:00:02", role: "active", slot: 2 },
      { name: "sb", mac: "02:00:00:00:00:03", role: "standby" },
    ],
    ...over,
  });

/** A recorded attachment: its inputs, the ids and slots its outputs recorded, and its bridge as OVS dumped it. */
function recorded(name: string) {
  const dump: RecordedDump = recordedDump(name);
  const inputs = withDefaults(dump.inputs as DistributorAttachmentInputs);
  const previous = dump.outputs as { groupId: number; slots: { slot: number; bucketId: number; amphora: string; takenOver?: string }[] };
  const ids: DataplaneIds = { ...planIds(inputs, [], previous), bucketIds: new Map(previous.slots.map((x) => [x.slot, x.bucketId])) };
  return { inputs, previous, ids, observed: observedFrom(dump) };
}

/** The bundle that takes a recorded attachment to `next`, as the handler plans it. */
function planFrom(r: ReturnType<typeof recorded>, next: AttachmentDefaulted) {
  const { slots } = assignSlots(next.amphorae, r.previous.slots);
  const ids = planIds(
    next,
    slots.map((x) => x.slot),
    r.previous,
  );
  return planBridge("dist1", attachmentIntent(next, ids, slots), r.observed);
}

const amp = (n: number, role: "active" | "standby" | "failed", slot?: number) => ({
  name: `c${n}`,
  mac: `02:00:00:00:0c:0${n}`,
  role,
  ...(slot ? { slot } : {}),
});

describe("distributor attachment planning", () => {
  it("names, group id and frontend MAC come from the attachment id, never the VIP; names fit 15 characters", () => {
    const a = planIds(base(), [1, 2], undefined);
    const sameVipOtherTenant = planIds(base({ attachmentId: "lb-b" }), [1, 2], undefined);
    expect(sameVipOtherTenant.groupId).not.toBe(a.groupId);
    expect(planIds(base({ vip: "10.0.0.7" }), [1, 2], undefined).groupId).toBe(a.groupId);
    expect(withDefaults(base()).frontendMac).not.toBe(withDefaults(base({ attachmentId: "lb-b" })).frontendMac);
    for (const name of Object.values(attachmentNames({ attachmentId: "x".repeat(63) }))) expect(name.length).toBeLessThanOrEqual(15);
    // Sticky: recorded ids are reused whatever the derivation would say.
    expect(planIds(base(), [1], { groupId: 7, slots: [{ slot: 1, bucketId: 99 }] }).bucketIds.get(1)).toBe(99);
  });

  it("a failed slot is taken over by the standby in place; a second failure with no standby is left vacant", () => {
    const failed = base().amphorae.map((a) => (a.name === "a1" ? { ...a, role: "failed" as const } : a));
    const first = assignSlots(failed);
    expect(first.slots).toEqual([
      { slot: 1, amphora: "sb", mac: "02:00:00:00:00:03", takenOver: "a1" },
      { slot: 2, amphora: "a2", mac: "02:00:00:00:00:02" },
    ]);
    const both = failed.map((a) => (a.name === "a2" ? { ...a, role: "failed" as const } : a));
    const recordedSlots = first.slots.map((x, i) => ({ ...x, bucketId: i + 1 }));
    expect(assignSlots(both, recordedSlots)).toMatchObject({ slots: [{ slot: 1, amphora: "sb", takenOver: "a1" }], vacant: [2] });
  });

  it("the standby keeps the slot it took whatever fails next (the lower slot too); a new standby fills the vacant one", () => {
    const promoted = [
      { slot: 1, bucketId: 11, amphora: "c1" },
      { slot: 2, bucketId: 12, amphora: "c4", takenOver: "c2" },
      { slot: 3, bucketId: 13, amphora: "c3" },
    ];
    const second = [amp(1, "failed", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby")];
    expect(assignSlots(second, promoted)).toEqual({
      slots: [
        { slot: 2, amphora: "c4", mac: amp(4, "standby").mac, takenOver: "c2" },
        { slot: 3, amphora: "c3", mac: amp(3, "active").mac },
      ],
      vacant: [1],
    });
    // Without the record the standby would move to slot 1: the defect this guards against.
    expect(assignSlots(second).slots[0]).toMatchObject({ slot: 1, amphora: "c4" });
    expect(assignSlots([...second, amp(5, "standby")], promoted).slots.map((x) => [x.slot, x.amphora])).toEqual([
      [1, "c5"],
      [2, "c4"],
      [3, "c3"],
    ]);
    // Declaring the promoted standby active on its slot changes nothing.
    expect(
      assignSlots([amp(1, "failed", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "active", 2)], promoted).slots.map((x) => [x.slot, x.amphora]),
    ).toEqual([
      [2, "c4"],
      [3, "c3"],
    ]);
  });

  it("against the attachment recorded from OVS: the same inputs plan nothing; promotion is one remove + one insert of the same bucket id at the same position", () => {
    const r = recorded("distributor");
    expect(planFrom(r, r.inputs)).toEqual([]);
    expect(actualInputs(r.inputs, r.ids, { flows: r.observed.flows, group: r.observed.groups[0] }, r.previous.slots)).toEqual(r.inputs);
    const slot2 = r.ids.bucketIds.get(2)!;
    const mods = planFrom(r, { ...r.inputs, amphorae: [amp(1, "active", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby")] });
    expect(mods).toEqual([
      { op: "remove-buckets", groupId: r.ids.groupId, commandBucketId: slot2 },
      { op: "insert-buckets", groupId: r.ids.groupId, commandBucketId: r.ids.bucketIds.get(1), buckets: [expect.objectContaining({ bucketId: slot2 })] },
    ]);
    const inserted = (mods[1] as unknown as { buckets: { actions: unknown[] }[] }).buckets[0].actions;
    expect(inserted).toContainEqual({ type: "set_field", field: "eth_dst", value: "02:00:00:00:0c:04" });
    expect(inserted.at(-1)).toEqual({ type: "in_port" });
  });

  it("against the promoted attachment recorded from OVS: a second failure removes only that slot's bucket", () => {
    const r = recorded("distributor-promoted");
    expect(planFrom(r, r.inputs)).toEqual([]);
    const mods = planFrom(r, { ...r.inputs, amphorae: [amp(1, "failed", 1), amp(2, "failed", 2), amp(3, "active", 3), amp(4, "standby")] });
    expect(mods).toEqual([{ op: "remove-buckets", groupId: r.ids.groupId, commandBucketId: r.ids.bucketIds.get(1) }]);
  });

  it("adding a slot only adds a bucket, at the end", () => {
    const r = recorded("distributor");
    const mods = planFrom(r, { ...r.inputs, amphorae: [...r.inputs.amphorae, amp(5, "active", 4)] });
    expect(mods.map((m) => [m.op, "commandBucketId" in m ? m.commandBucketId : undefined])).toEqual([["insert-buckets", "last"]]);
  });

  it("affinity picks the hash fields; hairpin adds one reply flow per serving amphora", () => {
    const ids = planIds(base(), [1, 2], undefined);
    const slots = assignSlots(base().amphorae).slots;
    expect(toGroupEntry(desiredDataplane(base({ affinity: "source-ip" }), ids, slots).group).fields).toEqual(["ip_src"]);
    expect(toGroupEntry(desiredDataplane(base(), ids, slots).group).fields).toEqual([
      "ip_src",
      "ip_dst",
      "nw_proto",
      "tcp_src",
      "tcp_dst",
      "udp_src",
      "udp_dst",
    ]);
    const hairpin = desiredDataplane(base({ returnPath: "hairpin", gatewayMac: "02:00:0a:00:00:02" }), ids, slots).flows.filter((f) => f.priority === 150);
    expect(hairpin.map((f) => f.match.dl_src)).toEqual(["02:00:00:00:00:01", "02:00:00:00:00:02"]);
  });

  it("check rules name the property and reason", () => {
    const bad = base({
      returnPath: "hairpin",
      amphorae: [
        { name: "a1", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
        { name: "a1", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
        { name: "s1", mac: "02:00:00:00:00:05", role: "standby", slot: 3 },
        { name: "s2", mac: "02:00:00:00:00:06", role: "standby" },
      ],
    });
    expect(checkRules(bad).map((f) => f.property)).toEqual(["amphorae[1].name", "amphorae[1].mac", "amphorae[1].slot", "amphorae[2].slot", "gatewayMac"]);
  });
});

describe("an IPv6 VIP on a distributor attachment", () => {
  const v6 = (over: Partial<DistributorAttachmentInputs> = {}) => base({ vip: "FD00:20:0::7", nextHop: "fd00:10::41", ...over });

  it("is recorded in RFC 5952 form; the ND responder answers for the VIP and the next hop as OVS prints it; the VIP flow and the group use IPv6 fields", () => {
    const d = v6();
    expect([d.vip, d.nextHop]).toEqual(["fd00:20::7", "fd00:10::41"]);
    const ids = planIds(d, [1, 2], undefined);
    const { flows, group } = desiredDataplane(d, ids, assignSlots(d.amphorae).slots);
    const lines = renderBundle(flows.map((flow) => ({ op: "add-flow" as const, flow })));
    const fe = d.frontendMac;
    // The actions exactly as ovs-ofctl dump-flows printed them on OVS 3.1: the solicitation made an advertisement in table 0, its option's address set in table 1.
    expect(lines[0]).toContain(
      `table=0,priority=200,cookie=0x${ids.cookie.toString(16)},icmp6,in_port=1,icmp_type=135,nd_target=fd00:20::7,actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:${fe}->eth_src,move:NXM_NX_IPV6_SRC[]->NXM_NX_IPV6_DST[],set_field:fd00:20::7->ipv6_src,set_field:136->icmpv6_type,set_field:1610612736->nd_reserved,set_field:2->nd_options_type,resubmit(,1)`,
    );
    expect(lines[1]).toContain(
      `table=1,priority=200,cookie=0x${ids.cookie.toString(16)},icmp6,in_port=1,icmp_type=136,nd_target=fd00:20::7,actions=set_field:${fe}->nd_tll,IN_PORT`,
    );
    expect(lines[2]).toContain("icmp_type=135,nd_target=fd00:10::41");
    expect(lines[4]).toContain(`ipv6,in_port=1,dl_dst=${fe},ipv6_dst=fd00:20::7,actions=group:${ids.groupId}`);
    expect(toGroupEntry(group).fields).toEqual(["ipv6_src", "ipv6_dst", "nw_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst"]);
    expect(toGroupEntry(desiredDataplane(v6({ affinity: "source-ip" }), ids, assignSlots(d.amphorae).slots).group).fields).toEqual(["ipv6_src"]);
    const hairpin = desiredDataplane(v6({ returnPath: "hairpin", gatewayMac: "02:00:0a:00:00:02" }), ids, assignSlots(d.amphorae).slots).flows.filter(
      (f) => f.priority === 150,
    );
    expect(hairpin.map((f) => [f.match.protocol, f.match.ipv6_src])).toEqual([
      ["ipv6", "fd00:20::7"],
      ["ipv6", "fd00:20::7"],
    ]);
  });

  it("read back from the dump OVS prints: the same inputs; a responder removed by hand shows as the next hop gone", () => {
    const d = v6({ affinity: "source-ip" });
    const ids = planIds(d, [1, 2], undefined);
    const { flows, group } = desiredDataplane(d, ids, assignSlots(d.amphorae).slots);
    const dump = (fs: typeof flows) =>
      parseFlows(
        fs
          .map((f) =>
            renderBundle([{ op: "add-flow", flow: f }])[0].replace(
              /^flow add table=(\d+),priority=(\d+),cookie=(0x[0-9a-f]+),/,
              " cookie=$3, duration=1s, table=$1, n_packets=0, n_bytes=0, priority=$2,",
            ),
          )
          .map((l) => l.replace(",actions=", " actions=").replace("priority=0, actions=", "priority=0 actions="))
          .join("\n"),
      );
    const parsed = dump(flows);
    expect(parsed.flatMap((f) => f.otherMatch)).toEqual([]);
    expect(parsed.flatMap((f) => f.actions.filter((a) => a.type === "other"))).toEqual([]);
    expect(actualInputs(d, ids, { flows: parsed, group: toGroupEntry(group) })).toEqual(d);
    const noNextHop = actualInputs(d, ids, { flows: dump(flows.filter((f) => f.match.nd_target !== "fd00:10::41")), group: toGroupEntry(group) });
    expect(noNextHop.nextHop).toBeUndefined();
    expect(noNextHop.vip).toBe("fd00:20::7");
  });

  it("check refuses a next hop of the other family, scoped and IPv4-mapped addresses and prefixes, naming the property", () => {
    const failures = (over: Partial<DistributorAttachmentInputs>) => checkRules(v6(over)).map((f) => `${f.property}: ${f.reason}`);
    expect(failures({ nextHop: "10.0.0.41" })).toEqual(["nextHop: is IPv4 while the VIP is IPv6: the router reaches a VIP through a next hop of its family"]);
    expect(failures({ vip: "fe80::7%eth0" })).toEqual(['vip: "fe80::7%eth0": a scoped address (%zone) names an interface of one host']);
    expect(failures({ vip: "::ffff:10.0.0.7" })).toEqual(['vip: "::ffff:10.0.0.7": an IPv4-mapped IPv6 address: write the IPv4 address itself']);
    expect(failures({ nextHop: "fd00:10::/64" })).toEqual(['nextHop: "fd00:10::/64": a prefix where an address is needed']);
    expect(failures({})).toEqual([]);
  });

  it("the unsolicited neighbour advertisement: to all nodes, hop limit 255, Override only, the target and its MAC, a checksum that verifies", () => {
    const frame = Buffer.from(ndAnnouncement("02:d1:00:00:00:01", "fd00:10::41"), "hex");
    expect(frame.subarray(0, 14).toString("hex")).toBe("333300000001" + "02d100000001" + "86dd");
    const ip6 = frame.subarray(14, 54);
    expect([ip6[6], ip6[7]]).toEqual([58, 255]);
    const icmp = frame.subarray(54);
    expect(icmp.length).toBe(ip6.readUInt16BE(4));
    expect([icmp[0], icmp[1], icmp[4]]).toEqual([136, 0, 0x20]);
    expect(icmp.subarray(24).toString("hex")).toBe("020102d100000001");
    // The ones' complement sum over the pseudo-header and the message, checksum included, is 0xffff.
    const pseudo = Buffer.concat([ip6.subarray(8, 40), Buffer.from([0, 0, 0, icmp.length, 0, 0, 0, 58]), icmp]);
    let sum = 0;
    for (let i = 0; i < pseudo.length; i += 2) sum += pseudo.readUInt16BE(i);
    while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
    expect(sum).toBe(0xffff);
  });
});

describe("distributor device and component rules", () => {
  it("device helpers", () => {
    expect(parseOvsVersion("ovs-vswitchd (Open vSwitch) 3.1.0\n")).toBe("3.1.0");
    expect(deleteRefusal("d", [])).toBeUndefined();
    expect(deleteRefusal("d", ["lb-a"])).toMatch(/still has 1 attachment\(s\) \(lb-a\)/);
  });

  it("the N+1 rule: at least one active, at least one standby, distinct hypervisors", () => {
    expect(
      nPlusOneViolations([
        { name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv1" },
        { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv2" },
      ]),
    ).toEqual([]);
    expect(nPlusOneViolations([{ name: "s", mac: "02:00:00:00:00:02", role: "standby" }])).toEqual([
      { property: "amphorae", reason: "at least 1 active amphora is required, got 0" },
    ]);
    expect(nPlusOneViolations([{ name: "a", mac: "02:00:00:00:00:01", role: "active" }])).toEqual([
      { property: "amphorae", reason: "at least 1 standby amphora is required, got 0" },
    ]);
    expect(
      nPlusOneViolations([
        { name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv3" },
        { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv3" },
      ]),
    ).toEqual([
      { property: "amphorae[1].hypervisor", reason: "s and amphorae[0] (a) are both on hypervisor hv3: serving amphorae must be on distinct hypervisors" },
    ]);
    expect(
      withSlots([
        { name: "a", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
        { name: "b", mac: "02:00:00:00:00:02", role: "active" },
        { name: "s", mac: "02:00:00:00:00:03", role: "standby", hypervisor: "hv1" },
      ]),
    ).toEqual([
      { name: "a", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
      { name: "b", mac: "02:00:00:00:00:02", role: "active", slot: 2 },
      { name: "s", mac: "02:00:00:00:00:03", role: "standby" },
    ]);
  });

  it("the component registers one attachment on the device, and refuses a cluster without a standby before registering anything", async () => {
    const registered = await mockResources();
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const device = new DistributorDevice("dev", { host, deviceId: "dev", uplinkBridge: "br-seg" });
    expect(
      () =>
        new ActiveActiveLoadBalancer("bad", {
          device,
          loadBalancerId: "lb-x",
          vip: "10.0.0.100",
          amphorae: [{ name: "a", mac: "02:00:00:00:00:01", role: "active" }],
        }),
    ).toThrow('ActiveActiveLoadBalancer "bad": args.amphorae: at least 1 standby amphora is required, got 0');
    new ActiveActiveLoadBalancer("lb", {
      device,
      loadBalancerId: "lb-a",
      vip: "10.0.0.100",
      amphorae: [
        { name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv1" },
        { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv2" },
      ],
    });
    // Every registration the program started has been answered once the runtime's RPC queue drains.
    await pulumi.runtime.disconnect();
    const attachments = registered.filter((r) => r.type.endsWith("DistributorAttachment"));
    expect(attachments).toHaveLength(1);
    expect(attachments[0].inputs).toMatchObject({
      deviceId: "dev",
      attachmentId: "lb-a",
      amphorae: [
        { name: "a", slot: 1 },
        { name: "s", role: "standby" },
      ],
    });
  });

  it("on several devices: one attachment per device, each with the load balancer's id for its group, its own next hop and frontend MAC; devices on one host or one next hop are refused", async () => {
    const registered = await mockResources();
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const d1 = new DistributorDevice("d1", { host, deviceId: "d1", uplinkBridge: "br-seg" });
    const d2 = new DistributorDevice("d2", {
      host: { ...host, connection: { ...host.connection, host: "172.30.0.32" } },
      deviceId: "d2",
      uplinkBridge: "br-seg",
    });
    const amphorae = [
      { name: "a", mac: "02:00:00:00:00:01", role: "active" as const, hypervisor: "hv1" },
      { name: "s", mac: "02:00:00:00:00:02", role: "standby" as const, hypervisor: "hv2" },
    ];
    expect(
      () =>
        new ActiveActiveLoadBalancer("same-host", {
          devices: [
            { device: d1, nextHop: "10.0.0.41" },
            { device: d1, nextHop: "10.0.0.42" },
          ],
          loadBalancerId: "lb-x",
          vip: "10.0.0.100",
          amphorae,
        }),
    ).toThrow(
      'ActiveActiveLoadBalancer "same-host": args.devices[1].device: is on the same host (172.30.0.31) as devices[0]: devices must be on distinct hosts',
    );
    expect(
      () =>
        new ActiveActiveLoadBalancer("same-hop", {
          devices: [
            { device: d1, nextHop: "10.0.0.41" },
            { device: d2, nextHop: "10.0.0.41" },
          ],
          loadBalancerId: "lb-x",
          vip: "10.0.0.100",
          amphorae,
        }),
    ).toThrow('ActiveActiveLoadBalancer "same-hop": args.devices[1].nextHop: is also devices[0]\'s');
    new ActiveActiveLoadBalancer("ha", {
      devices: [
        { device: d1, nextHop: "10.0.0.41" },
        { device: d2, nextHop: "10.0.0.42" },
      ],
      loadBalancerId: "lb-ha",
      vip: "10.0.0.100",
      amphorae,
    });
    await pulumi.runtime.disconnect();
    const attachments = registered.filter((r) => r.type.endsWith("DistributorAttachment"));
    expect(attachments.map((a) => [a.name, a.inputs.deviceId, a.inputs.loadBalancerId, a.inputs.nextHop])).toEqual([
      ["ha-attachment-10.0.0.41", "d1", "lb-ha", "10.0.0.41"],
      ["ha-attachment-10.0.0.42", "d2", "lb-ha", "10.0.0.42"],
    ]);
    expect(attachments[0].inputs.frontendMac).not.toBe(attachments[1].inputs.frontendMac);
    // The same load balancer id gives the same bucket ids on both devices, whatever the attachment's identity.
    const ids = attachments.map((a) => planIds(a.inputs as never, [1, 2], undefined));
    expect([...ids[0].bucketIds]).toEqual([...ids[1].bucketIds]);
  });

  it("an IPv6 VIP on several devices: next hops in RFC 5952 form (two spellings of one are refused as one), resource names without '::'", async () => {
    const registered = await mockResources();
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const d1 = new DistributorDevice("d1", { host, deviceId: "d1", uplinkBridge: "br-seg" });
    const d2 = new DistributorDevice("d2", {
      host: { ...host, connection: { ...host.connection, host: "172.30.0.32" } },
      deviceId: "d2",
      uplinkBridge: "br-seg",
    });
    const amphorae = [
      { name: "a", mac: "02:00:00:00:00:01", role: "active" as const, hypervisor: "hv1" },
      { name: "s", mac: "02:00:00:00:00:02", role: "standby" as const, hypervisor: "hv2" },
    ];
    const lb = (name: string, hops: [string, string]) =>
      new ActiveActiveLoadBalancer(name, {
        devices: [
          { device: d1, nextHop: hops[0] },
          { device: d2, nextHop: hops[1] },
        ],
        loadBalancerId: "lb-6",
        vip: "fd00:21::7",
        amphorae,
      });
    expect(() => lb("same-hop6", ["FD00:10::41", "fd00:10:0::41"])).toThrow(
      'ActiveActiveLoadBalancer "same-hop6": args.devices[1].nextHop: is also devices[0]\'s',
    );
    lb("ha6", ["FD00:10:0::41", "fd00:10::42"]);
    await pulumi.runtime.disconnect();
    const attachments = registered.filter((r) => r.type.endsWith("DistributorAttachment"));
    expect(attachments.map((a) => [a.name, a.inputs.nextHop, a.inputs.vip])).toEqual([
      ["ha6-attachment-fd00-10--41", "fd00:10::41", "fd00:21::7"],
      ["ha6-attachment-fd00-10--42", "fd00:10::42", "fd00:21::7"],
    ]);
    expect(attachments[0].inputs.frontendMac).toBe(derivedFrontendMac("lb-6/fd00:10::41"));
  });
});
