import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asLists } from "../../provider/handlers";
import { DistributorAttachment, DistributorDevice } from "../../index";
import { runChecked } from "../../provider/transport/exec";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { labSsh, loadInventory, lockLab, sshTo } from "../support/lab";
import { registeredInputs, startProviderPlugin, type PluginCall } from "../support/provider-plugin";

/**
 * The engine boundary for the distributor: both resources serialized by a
 * real program run and driven through the real dynamic-provider plugin over
 * gRPC against dist1 (needs `npm run build`).
 */

type Props = Record<string, any>;
const DEVICE = "grpc-device";
let inv: LabInventory;
let plugin: PluginCall;
let dist1: SshSession;
let unlock: () => void;

beforeAll(async () => {
  inv = loadInventory();
  unlock = await lockLab("distributor");
  plugin = await startProviderPlugin();
  dist1 = await labSsh(inv, "dist1");
});

afterAll(async () => {
  plugin?.stop();
  dist1?.close();
  unlock?.();
});

describe("DistributorDevice and DistributorAttachment through the plugin over gRPC", () => {
  let deviceProgram: Props;
  let attachmentProgram: Props;
  let device: { id: string; properties: Props };
  let attachment: { id: string; properties: Props };

  it("serializes thin providers for both kinds", async () => {
    const h = inv.hosts.dist1;
    const host = { connection: sshTo(inv, "dist1"), ovsRundir: h.ovsRundir };
    deviceProgram = await registeredInputs("pulumi-nodejs:dynamic/ovslb:DistributorDevice", () => {
      new DistributorDevice("d", { host, deviceId: DEVICE, uplinkBridge: "br-seg" });
    });
    attachmentProgram = await registeredInputs("pulumi-nodejs:dynamic/ovslb:DistributorAttachment", () => {
      new DistributorAttachment("a", {
        host,
        deviceId: DEVICE,
        uplinkBridge: "br-seg",
        attachmentId: "lb-grpc",
        vip: "10.0.0.212",
        amphorae: [
          { name: "amp-1", mac: "02:00:0a:00:00:79", role: "active", slot: 1 },
          { name: "amp-2", mac: "02:00:0a:00:00:7a", role: "active", slot: 2 },
          { name: "amp-3", mac: "02:00:0a:00:00:7b", role: "standby" },
        ],
      });
    });
    expect(attachmentProgram.__provider).toContain('kind: "DistributorAttachment"');
    expect(attachmentProgram.__provider).toContain('require("ovslb/dist/provider/handlers")');
  });

  it("check refuses bad values at check time, naming the property", async () => {
    const bad = structuredClone(attachmentProgram);
    bad.vip = "10.0.0.1,actions=drop";
    bad.amphorae[0].mac = "$(reboot)";
    delete bad.amphorae[1].slot;
    bad.returnPath = "hairpin";
    const { failures } = await plugin.check({}, bad);
    const props = failures.map((f) => f.property).sort();
    expect(props).toEqual(["amphorae[0].mac", "vip"]);
    const rules = structuredClone(attachmentProgram);
    delete rules.amphorae[1].slot;
    rules.amphorae[2].role = "active";
    rules.amphorae[2].slot = 1;
    rules.returnPath = "hairpin";
    const r = await plugin.check({}, rules);
    expect(Object.fromEntries(r.failures.map((f) => [f.property, f.reason]))).toEqual({
      "amphorae[1].slot": "is required for an active amphora",
      "amphorae[2].slot": "is already served by amphorae[0]",
      gatewayMac: "is required when returnPath is hairpin",
    });
  });

  it("create: device, then attachment; deleting the device while attached is refused", async () => {
    const d = await plugin.check({}, deviceProgram);
    expect(d.failures).toEqual([]);
    device = await plugin.create(d.inputs);
    expect(device.properties).toMatchObject({ reachable: true, openflow15: true });
    const a = await plugin.check({}, attachmentProgram);
    expect(a.failures).toEqual([]);
    attachmentProgram = { ...asLists("DistributorAttachment", a.inputs), __provider: a.inputs.__provider };
    attachment = await plugin.create(attachmentProgram);
    expect(attachment.id).toBe(`distributor-attachment/${DEVICE}/lb-grpc`);
    expect(attachment.properties.slots).toHaveLength(2);
    expect(attachment.properties.host.connection.privateKeyPath).toBe(inv.clientKeyPath);

    await expect(plugin.delete(device.id, device.properties)).rejects.toThrow(/still has 1 attachment\(s\) \(lb-grpc\)/);
    const still = await plugin.read(device.id, device.properties);
    expect(still.id).toBe(device.id);
    expect(still.properties.attachments).toEqual(["lb-grpc"]);
  });

  it("diff, read and an in-place promotion through update", async () => {
    expect((await plugin.diff(attachment.id, attachment.properties, attachmentProgram)).changes).toBe("none");
    const renamed = { ...attachmentProgram, attachmentId: "lb-other" };
    expect((await plugin.diff(attachment.id, attachment.properties, renamed)).replaces).toEqual(["attachmentId"]);
    const read = await plugin.read(attachment.id, attachment.properties);
    expect((await plugin.diff(attachment.id, read.properties, attachmentProgram)).changes).toBe("none");

    const promoted = structuredClone(attachmentProgram);
    promoted.amphorae[0].role = "failed";
    expect((await plugin.diff(attachment.id, attachment.properties, promoted)).changes).toBe("some");
    const bucket1 = attachment.properties.slots[0].bucketId;
    const updated = await plugin.update(attachment.id, attachment.properties, (await plugin.check({}, promoted)).inputs);
    expect(updated.properties.slots[0]).toEqual({ slot: 1, bucketId: bucket1, amphora: "amp-3", mac: "02:00:0a:00:00:7b", takenOver: "amp-1" });
    expect(updated.properties.lastApply.messages).toBe(2);
    attachment = { id: attachment.id, properties: updated.properties };
  });

  it("delete: the attachment (idempotent), then the device", async () => {
    await plugin.delete(attachment.id, attachment.properties);
    await plugin.delete(attachment.id, attachment.properties);
    expect((await plugin.read(attachment.id, attachment.properties)).id).toBe("");
    await plugin.delete(device.id, device.properties);
    expect((await plugin.read(device.id, device.properties)).id).toBe("");
    expect(await runChecked(dist1, ["ovs-vsctl", "list-br"])).toBe("br-phy\nbr-seg\n");
  });
});
