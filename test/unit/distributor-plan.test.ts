import { describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import type { DistributorAttachmentInputs } from "../../provider/model/inputs.generated";
import {assignSlots, attachmentNames, checkRules, desiredDataplane, planIds, planModifications, withDefaults,} from "../../provider/resources/distributor-attachment/plan";
import { toFlowEntry, toGroupEntry } from "../../provider/openflow";
import { nPlusOneViolations, withSlots } from "../../components/active-active-load-balancer";
import { deleteRefusal, parseOvsVersion } from "../../provider/resources/distributor-device/plan";

const host = { connection: { host: "172.30.0.31", user: "root", hostKey: "ssh-ed25519 AAAA", privateKeyPath: "/k" } };
const base = (over: Partial<DistributorAttachmentInputs> = {}): DistributorAttachmentInputs => ({
  host, deviceId: "dev", uplinkBridge: "br-seg", attachmentId: "lb-a", vip: "10.0.0.100",
  amphorae: [
    { name: "a1", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
    { name: "a2", mac: "02:00:00:00:00:02", role: "active", slot: 2 },
    { name: "sb", mac: "02:00:00:00:00:03", role: "standby" },
  ],
  ...over,
});

/** What the bridge would hold after applying `inputs` from scratch. */
function actualFor(inputs: DistributorAttachmentInputs) {
  const { slots } = assignSlots(inputs.amphorae);
  const desired = desiredDataplane(inputs, planIds(inputs, slots.map((s) => s.slot), undefined));
  return { flows: desired.flows.map((f) => toFlowEntry(f)), group: toGroupEntry(desired.group) };
}

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
    expect(assignSlots(failed).slots).toEqual([
      { slot: 1, amphora: "sb", mac: "02:00:00:00:00:03", takenOver: "a1" },
      { slot: 2, amphora: "a2", mac: "02:00:00:00:00:02" },
    ]);
    const both = failed.map((a) => (a.name === "a2" ? { ...a, role: "failed" as const } : a));
    expect(assignSlots(both)).toMatchObject({ slots: [{ slot: 1, amphora: "sb" }], vacant: [2] });
  });

  it("promotion is one remove + one insert of the same bucket id at the same position; nothing else changes", () => {
    const before = base();
    const after = base({ amphorae: before.amphorae.map((a) => (a.name === "a1" ? { ...a, role: "failed" as const } : a)) });
    const ids = planIds(before, [1, 2], undefined);
    const mods = planModifications(desiredDataplane(after, ids), actualFor(before));
    expect(mods).toEqual([
      { op: "remove-buckets", groupId: ids.groupId, commandBucketId: ids.bucketIds.get(1) },
      { op: "insert-buckets", groupId: ids.groupId, commandBucketId: "first", buckets: [expect.objectContaining({ bucketId: ids.bucketIds.get(1) })] },
    ]);
    const inserted = (mods[1] as unknown as { buckets: { actions: unknown[] }[] }).buckets[0].actions;
    expect(inserted).toContainEqual({ type: "set_field", field: "eth_dst", value: "02:00:00:00:00:03" });
    expect(inserted.at(-1)).toEqual({ type: "in_port" });
  });

  it("adding a slot only adds a bucket; the same inputs plan nothing", () => {
    const grown = base({ amphorae: [...base().amphorae, { name: "a4", mac: "02:00:00:00:00:04", role: "active", slot: 3 }] });
    const ids = planIds(grown, [1, 2, 3], undefined);
    const mods = planModifications(desiredDataplane(grown, ids), actualFor(base()));
    expect(mods.map((m) => m.op)).toEqual(["insert-buckets"]);
    expect(planModifications(desiredDataplane(base(), planIds(base(), [1, 2], undefined)), actualFor(base()))).toEqual([]);
  });

  it("affinity picks the hash fields; hairpin adds one reply flow per serving amphora", () => {
    const ids = planIds(base(), [1, 2], undefined);
    expect(toGroupEntry(desiredDataplane(base({ affinity: "source-ip" }), ids).group).fields).toEqual(["ip_src"]);
    expect(toGroupEntry(desiredDataplane(base(), ids).group).fields).toEqual(["ip_src", "ip_dst", "nw_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst"]);
    const hairpin = desiredDataplane(base({ returnPath: "hairpin", gatewayMac: "02:00:0a:00:00:02" }), ids).flows.filter((f) => f.priority === 150);
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
    expect(checkRules(bad).map((f) => f.property)).toEqual([
      "amphorae[1].name", "amphorae[1].mac", "amphorae[1].slot", "amphorae[2].slot", "amphorae", "gatewayMac",
    ]);
  });
});

describe("distributor device and component rules", () => {
  it("device helpers", () => {
    expect(parseOvsVersion("ovs-vswitchd (Open vSwitch) 3.1.0\n")).toBe("3.1.0");
    expect(deleteRefusal("d", [])).toBeUndefined();
    expect(deleteRefusal("d", ["lb-a"])).toMatch(/still has 1 attachment\(s\) \(lb-a\)/);
  });

  it("the N+1 rule: at least one active, exactly one standby, distinct hypervisors", () => {
    expect(nPlusOneViolations([{ name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv1" }, { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv2" }])).toEqual([]);
    expect(nPlusOneViolations([{ name: "s", mac: "02:00:00:00:00:02", role: "standby" }])).toEqual(["amphorae: at least 1 active amphora is required, got 0"]);
    expect(nPlusOneViolations([{ name: "a", mac: "02:00:00:00:00:01", role: "active" }])).toEqual(["amphorae: exactly 1 standby amphora is required, got 0"]);
    expect(nPlusOneViolations([
      { name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv3" },
      { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv3" },
    ])).toEqual(["amphorae: a and s are both on hypervisor hv3; amphorae must be on distinct hypervisors"]);
    expect(withSlots([
      { name: "a", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
      { name: "b", mac: "02:00:00:00:00:02", role: "active" },
      { name: "s", mac: "02:00:00:00:00:03", role: "standby", hypervisor: "hv1" },
    ])).toEqual([
      { name: "a", mac: "02:00:00:00:00:01", role: "active", slot: 1 },
      { name: "b", mac: "02:00:00:00:00:02", role: "active", slot: 2 },
      { name: "s", mac: "02:00:00:00:00:03", role: "standby" },
    ]);
  });

  it("the component registers one attachment on the device, and refuses a cluster without a standby before registering anything", async () => {
    const registered: { type: string; inputs: Record<string, unknown> }[] = [];
    pulumi.runtime.setMocks({
      newResource: (args) => (registered.push({ type: args.type, inputs: args.inputs }), { id: `${args.name}-id`, state: args.inputs }),
      call: (args) => args.inputs,
    }, "project", "stack", false);
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const device = new DistributorDevice("dev", { host, deviceId: "dev", uplinkBridge: "br-seg" });
    expect(() => new ActiveActiveLoadBalancer("bad", { device, loadBalancerId: "lb-x", vip: "10.0.0.100", amphorae: [{ name: "a", mac: "02:00:00:00:00:01", role: "active" }] }))
      .toThrow(/exactly 1 standby/);
    new ActiveActiveLoadBalancer("lb", {
      device, loadBalancerId: "lb-a", vip: "10.0.0.100",
      amphorae: [
        { name: "a", mac: "02:00:00:00:00:01", role: "active", hypervisor: "hv1" },
        { name: "s", mac: "02:00:00:00:00:02", role: "standby", hypervisor: "hv2" },
      ],
    });
    for (let i = 0; i < 100 && registered.filter((r) => r.type.endsWith("DistributorAttachment")).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const attachments = registered.filter((r) => r.type.endsWith("DistributorAttachment"));
    expect(attachments).toHaveLength(1);
    expect(attachments[0].inputs).toMatchObject({ deviceId: "dev", attachmentId: "lb-a", amphorae: [{ name: "a", slot: 1 }, { name: "s", role: "standby" }] });
  });
});
