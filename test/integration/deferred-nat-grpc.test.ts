import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { asLists } from "../../provider/handlers";
import { readFileSync } from "node:fs";
import { DeferredNatLoadBalancer } from "../../index";
import type { LabInventory } from "../lab/topology";
import { labBackend, labLoadBalancer } from "../support/deferred-nat";
import { loadInventory } from "../support/lab";
import { registeredInputs, startProviderPlugin, unwrapSecrets, type PluginCall } from "../support/provider-plugin";

/**
 * DeferredNatLoadBalancer at the engine boundary: serialized by a real
 * program run, driven through the real dynamic-provider plugin over gRPC.
 * check refuses every bad input before any host is contacted.
 */

const TYPE = "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer";
type Props = Record<string, any>;
let inv: LabInventory;
let plugin: PluginCall;
let program: Props;

/** Accepted SSH logins on the gateways so far: check must add none. */
function logins(): number {
  return ["gw1", "gw2"]
    .map((g) => (readFileSync(`${inv.labDir}/hosts/${g}/sshd.log`, "utf8").match(/Accepted publickey/g) ?? []).length)
    .reduce((a, b) => a + b, 0);
}

beforeAll(async () => {
  inv = loadInventory();
  plugin = await startProviderPlugin();
  const [b1, b2] = inv.backends;
  const args = labLoadBalancer(inv, "grpc", [{ address: "10.0.0.199", port: 443, protocol: "tcp", backends: [labBackend(inv, b1), labBackend(inv, b2)] }]);
  program = unwrapSecrets(await registeredInputs(TYPE, () => new DeferredNatLoadBalancer("lb", args)));
});

afterAll(() => plugin?.stop());

describe("DeferredNatLoadBalancer through the dynamic-provider plugin", () => {
  it("check refuses each bad input, naming the property, and contacts no host", async () => {
    const before = logins();
    const cases: [string, (p: Props) => void, string, RegExp][] = [
      ["dp_hash", (p) => (p.selectionMethod = "dp_hash"), "selectionMethod", /dp_hash remaps most connections/],
      ["no selection fields", (p) => (p.selectionFields = []), "selectionFields", /at least one field/],
      ["duplicate backend", (p) => p.vips[0].backends.push({ ...p.vips[0].backends[0] }), "vips[0].backends[2]", /listed twice/],
      ["backend without MAC", (p) => delete p.vips[0].backends[0].mac, "vips[0].backends[0].mac", /is required/],
      ["unknown hypervisor", (p) => (p.vips[0].backends[0].hypervisor = "hv9"), "vips[0].backends[0].hypervisor", /does not know/],
      ["VIP equal to a backend", (p) => (p.vips[0].backends[0].address = "10.0.0.199"), "vips[0].backends[0].address", /equals the VIP/],
      ["flow injection in an address", (p) => (p.vips[0].address = "10.0.0.1,actions=drop"), "vips[0].address", /IPv4 address/],
      ["shell in a bridge name", (p) => (p.gateways[0].bridge = "$(reboot)"), "gateways[0].bridge", /OVS bridge name/],
      ["shell in a MAC", (p) => (p.gateways[1].mac = "02:00:00:00:00:01;reboot"), "gateways[1].mac", /MAC address/],
      ["weight out of range", (p) => (p.vips[0].backends[1].weight = 1000), "vips[0].backends[1].weight", /1-64/],
    ];
    for (const [what, mutate, property, reason] of cases) {
      const bad = structuredClone(program);
      mutate(bad);
      const { failures } = await plugin.check({}, bad);
      expect(failures, what).toContainEqual({ property, reason: expect.stringMatching(reason) });
    }
    expect(logins()).toBe(before);
  });

  it("creates, reads, diffs and deletes on both gateways", async () => {
    const checked = await plugin.check({}, program);
    expect(checked.failures).toEqual([]);
    // As lists, to change below; the serialized provider kept (the plugin runs the resource's own).
    const inputs: Props = { ...asLists("DeferredNatLoadBalancer", checked.inputs), __provider: checked.inputs.__provider };
    // What an interrupted earlier run left on the gateways goes first (delete by the derived id's cookie).
    await plugin.delete("", checked.inputs);
    const created = await plugin.create(checked.inputs);
    expect(created.id).toBe("deferred-nat/grpc");
    expect(created.properties.lastApply.gw1.operations).toEqual({ "add-group": 1, "add-flow": 1 });
    expect(JSON.stringify(created.properties)).not.toContain("PRIVATE KEY");
    const read = await plugin.read(created.id, created.properties);
    expect(read.properties.drift).toEqual([]);
    expect((await plugin.diff(created.id, read.properties, inputs)).changes).toBe("none");
    const more = structuredClone(inputs);
    more.vips[0].backends.push(labBackend(inv, inv.backends[2]));
    expect(await plugin.diff(created.id, read.properties, more)).toEqual({ changes: "some", replaces: [], deleteBeforeReplace: false });
    expect((await plugin.diff(created.id, read.properties, { ...inputs, name: "other" })).replaces).toEqual(["name"]);
    await plugin.delete(created.id, read.properties);
    expect((await plugin.read(created.id, read.properties)).id).toBe("");
  });
});
