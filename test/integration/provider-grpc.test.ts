import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { readFileSync } from "node:fs";
import { OvsBridge } from "../../index";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { labSsh, loadInventory } from "../support/lab";
import { registeredInputs, startProviderPlugin, unwrapSecrets, type PluginCall } from "../support/provider-plugin";

/**
 * The engine boundary: OvsBridge's provider, serialized by a real program
 * run, driven through the real dynamic-provider plugin over gRPC against a
 * lab host: check -> create -> diff -> read -> update -> delete.
 */

const TYPE = "pulumi-nodejs:dynamic/ovslb:OvsBridge";
type Props = Record<string, any>;

let inv: LabInventory;
let plugin: PluginCall;
let gw2: SshSession;
const BRIDGE = "br-ovslb-t";

async function vsctl(...args: string[]): Promise<string> {
  const r = await gw2.run(["ovs-vsctl", ...args]);
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

async function acceptedLogins(): Promise<number> {
  const log = readFileSync(`${inv.labDir}/hosts/gw2/sshd.log`, "utf8");
  return (log.match(/Accepted publickey/g) ?? []).length;
}

beforeAll(async () => {
  inv = loadInventory();
  plugin = await startProviderPlugin();
  gw2 = await labSsh(inv, "gw2");
  await gw2.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
});

afterAll(async () => {
  await gw2?.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
  gw2?.close();
  plugin?.stop();
});

describe("OvsBridge through the dynamic-provider plugin over gRPC", () => {
  let program: Props;
  let secretPaths: string[];

  it("serializes a thin provider that loads the installed ovslb", async () => {
    const privateKey = readFileSync(inv.clientKeyPath, "utf8");
    const h = inv.hosts.gw2;
    const registered = await registeredInputs(TYPE, () => {
      new OvsBridge("t", {
        host: {
          connection: { host: h.address, user: h.user, hostKey: h.hostKey, privateKey },
          ovsRundir: h.ovsRundir,
        },
        name: BRIDGE,
        hwaddr: "02:00:00:00:aa:01",
        externalIds: { team: "lb" },
      });
    });
    secretPaths = [];
    program = unwrapSecrets(registered, secretPaths);
    // The key is a secret from the program on (the SDK may mark an enclosing object).
    expect(secretPaths.some((p) => "host.connection.privateKey".startsWith(p))).toBe(true);
    const text: string = program.__provider;
    expect(text).toContain('require("ovslb/dist/provider/handlers")');
    expect(text).toContain('kind: "OvsBridge"');
    // Nothing of the implementation (no client, socket, class) is captured.
    expect(text).not.toMatch(/SshSession|OvsdbClient|Transaction/);
    expect(text.length).toBeLessThan(6000);
  });

  it("check refuses injection-like values, naming the property, and reaches no host", async () => {
    const before = await acceptedLogins();
    const bad = structuredClone(program);
    bad.name = "br0,actions=drop";
    bad.hwaddr = "$(reboot)";
    bad.host.connection.host = "gw2;reboot";
    bad.host.ovsRundir = "/run/$(reboot)";
    bad.externalIds = { "ovslb:owner": "me" };
    const { failures } = await plugin.check({}, bad);
    const byProperty = Object.fromEntries(failures.map((f) => [f.property, f.reason]));
    expect(byProperty.name).toMatch(/OVS bridge name/);
    expect(byProperty.hwaddr).toMatch(/MAC address/);
    expect(byProperty["host.connection.host"]).toMatch(/DNS name or an IPv4 address/);
    expect(byProperty["host.ovsRundir"]).toMatch(/absolute path/);
    // Reasons never echo the value.
    expect(failures.map((f) => f.reason).join(" ")).not.toContain("reboot");

    const reserved = structuredClone(program);
    reserved.externalIds = { "ovslb:owner": "me" };
    const r2 = await plugin.check({}, reserved);
    expect(r2.failures).toEqual([{ property: "externalIds.ovslb:owner", reason: expect.stringMatching(/reserved/) }]);

    const noHostKey = structuredClone(program);
    delete noHostKey.host.connection.hostKey;
    const r3 = await plugin.check({}, noHostKey);
    expect(r3.failures.map((f) => f.property)).toEqual(["host.connection.hostKey"]);

    expect(await acceptedLogins()).toBe(before);
    expect(await vsctl("list-br")).not.toContain(BRIDGE);
  });

  let id: string;
  let outputs: Props;

  it("check fills defaults; create makes the bridge; outputs hold no plaintext key", async () => {
    const { inputs, failures } = await plugin.check({}, program);
    expect(failures).toEqual([]);
    expect(inputs.failMode).toBe("secure");
    expect(inputs.datapathType).toBe("netdev");
    program = inputs;

    const created = await plugin.create(program);
    id = created.id;
    outputs = created.properties;
    expect(id).toBe(`ovs-bridge/${inv.hosts.gw2.address}/${BRIDGE}`);
    expect(outputs.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(outputs.managementSocket).toBe(`unix:${inv.hosts.gw2.ovsRundir}/${BRIDGE}.mgmt`);
    expect(outputs.host.connection.privateKey).toBeUndefined();
    expect(outputs.sshCredentials["host.connection"].privateKey).toContain("OPENSSH PRIVATE KEY");

    expect(await vsctl("get", "bridge", BRIDGE, "fail_mode")).toBe("secure");
    expect(await vsctl("get", "bridge", BRIDGE, "datapath_type")).toBe("netdev");
    expect(await vsctl("get", "bridge", BRIDGE, "other_config:hwaddr")).toBe('"02:00:00:00:aa:01"');
    expect(await vsctl("get", "bridge", BRIDGE, "external_ids:ovslb\\:owner")).toBe(`"${id}"`);
    expect(await vsctl("get", "bridge", BRIDGE, "external_ids:team")).toBe("lb");
  });

  it("diff: none for the same inputs, an update for a setting, a replace for identity", async () => {
    expect((await plugin.diff(id, outputs, program)).changes).toBe("none");
    const standalone = { ...program, failMode: "standalone" };
    expect(await plugin.diff(id, outputs, standalone)).toEqual({ changes: "some", replaces: [], deleteBeforeReplace: false });
    const renamed = { ...program, name: "br-other" };
    expect(await plugin.diff(id, outputs, renamed)).toEqual({ changes: "some", replaces: ["name"], deleteBeforeReplace: true });
  });

  it("read reflects the host, so a hand edit shows as drift", async () => {
    const same = await plugin.read(id, outputs);
    expect(same.id).toBe(id);
    expect(same.inputs.failMode).toBe("secure");
    expect((await plugin.diff(id, same.properties, program)).changes).toBe("none");

    await vsctl("set", "bridge", BRIDGE, "fail_mode=standalone", "external_ids:team=other");
    const drifted = await plugin.read(id, outputs);
    expect(drifted.inputs.failMode).toBe("standalone");
    expect(drifted.inputs.externalIds).toEqual({ team: "other" });
    expect(drifted.properties.failMode).toBe("standalone");
    expect(drifted.inputs.host.connection.privateKey).toBeUndefined();
    // What `pulumi preview --refresh` would show: a change back to the program.
    expect((await plugin.diff(id, drifted.properties, program)).changes).toBe("some");
    outputs = drifted.properties;
  });

  it("update restores the declared settings", async () => {
    const updated = await plugin.update(id, outputs, program);
    outputs = updated.properties;
    expect(await vsctl("get", "bridge", BRIDGE, "fail_mode")).toBe("secure");
    expect(await vsctl("get", "bridge", BRIDGE, "external_ids:team")).toBe("lb");
    expect((await plugin.diff(id, (await plugin.read(id, outputs)).properties, program)).changes).toBe("none");
  });

  it("refuses to take over a bridge of the same name it does not own", async () => {
    const foreign = { ...program, name: "br-seg" };
    await expect(plugin.create(foreign)).rejects.toThrow(/bridge br-seg already exists and is not owned by ovslb/);
    expect(await vsctl("br-exists", "br-seg").catch(() => "missing")).toBe("");
  });

  it("delete removes the bridge, is idempotent, and read then reports it gone", async () => {
    await plugin.delete(id, outputs);
    expect(await vsctl("list-br")).not.toContain(BRIDGE);
    await plugin.delete(id, outputs);
    const gone = await plugin.read(id, outputs);
    expect(gone.id).toBe("");
  });
});
