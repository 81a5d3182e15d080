import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LabInventory } from "../lab/topology";
import { inNamespace, loadInventory, sshTo } from "../support/lab";
import { copyPackagedOvslb, hoistDependencies, removeBridgeProject, runProgram, urnOf, writeBridgeLibrary, type Registration } from "../support/project";
import { startProviderPlugin, type PluginCall } from "../support/provider-plugin";
import { loadFixture } from "../support/state-fixtures";

/**
 * ovslb as a dependency of a component library, not of the program:
 *
 *   project/                      the program (index.js) depends on lib only
 *   project/node_modules/lib/     a component library wrapping an OvsBridge
 *   project/node_modules/lib/node_modules/ovslb/   ovslb, installed under lib
 *
 * The plugin evaluates the serialized provider with a `require` that looks in
 * project/node_modules (and NODE_PATH) only, so `ovslb` does not resolve by
 * name there. The provider this ovslb serializes still finds the ovslb the
 * program loaded; the text older ovslb serialized does not (shown below).
 * The program runs in the project root and the plugin is started there the
 * way the CLI starts it. Needs `npm run build` (the copy is of dist/).
 */

const BRIDGE = "nested-br";

let inv: LabInventory;
let project: string;
let plugin: PluginCall;
let bridge: Registration;

const bridgesOnHv3 = () => inNamespace(inv.hosts.hv3.namespace, ["ovs-vsctl", `--db=unix:${inv.hosts.hv3.dbSock}`, "list-br"]).split("\n");

beforeAll(async () => {
  inv = loadInventory();
  project = mkdtempSync(join(tmpdir(), "ovslb-nested-"));
  const modules = join(project, "node_modules");
  hoistDependencies(modules);
  // The component library, and ovslb installed under it (a copy of what the package ships).
  const lib = join(modules, "lib");
  writeBridgeLibrary(lib);
  copyPackagedOvslb(join(lib, "node_modules", "ovslb"));
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "nested-program", private: true, dependencies: { lib: "1.0.0", "@pulumi/pulumi": "*" } }),
  );
  writeFileSync(
    join(project, "index.js"),
    `const { LabBridge } = require("lib");
new LabBridge("nested", JSON.parse(process.env.NESTED_ARGS));
`,
  );
  const h = inv.hosts.hv3;
  const args = { host: { connection: sshTo(inv, "hv3"), ovsRundir: h.ovsRundir }, name: BRIDGE, externalIds: { purpose: "nested-dependency-test" } };
  const registered = await runProgram(project, "index.js", { NESTED_ARGS: JSON.stringify(args) });
  bridge = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:OvsBridge")!;
  plugin = await startProviderPlugin({ projectRoot: project });
});

afterAll(() => removeBridgeProject(project, plugin, bridge, `ovs-bridge/${inv.hosts.hv3.address}/${BRIDGE}`));

describe("ovslb installed under a component library the program uses", () => {
  it("from the project root, ovslb does not resolve by name: only lib does", () => {
    expect(() => require.resolve("ovslb/dist/provider/handlers", { paths: [project] })).toThrow(/Cannot find module/);
    expect(require.resolve("lib", { paths: [project] })).toBe(join(project, "node_modules", "lib", "index.js"));
  });

  it("the program registers the library's component and its OvsBridge; the provider records where the program found ovslb", () => {
    expect(bridge).toBeDefined();
    const text: string = bridge.inputs.__provider;
    expect(text).toContain('kind: "OvsBridge"');
    expect(text).toContain('installed: "node_modules/lib/node_modules/ovslb"');
    // The name comes first, as in every text before: a project that has ovslb itself uses that one.
    expect(text).toContain('require("ovslb/dist/provider/handlers")');
  });

  it("the text an older ovslb serialized cannot find ovslb from this project root (what this fixes)", async () => {
    const old = loadFixture("OvsBridge").inputs.__provider;
    await expect(plugin.at(urnOf(bridge)).check({}, { ...bridge.inputs, __provider: old })).rejects.toThrow(
      /Cannot find module 'ovslb\/dist\/provider\/handlers'/,
    );
  });

  it("through the plugin started in the project root: check, create, read and delete on hv3", async () => {
    const at = plugin.at(urnOf(bridge));
    const checked = await at.check({}, bridge.inputs);
    expect(checked.failures).toEqual([]);
    expect(checked.inputs).toMatchObject({ name: BRIDGE, datapathType: "netdev", failMode: "secure" });
    const created = await at.create(checked.inputs);
    expect(created.id).toBe(`ovs-bridge/${inv.hosts.hv3.address}/${BRIDGE}`);
    expect(bridgesOnHv3()).toContain(BRIDGE);
    const read = await at.read(created.id, created.properties);
    expect(read.id).toBe(created.id);
    expect(read.inputs.externalIds).toEqual({ purpose: "nested-dependency-test" });
    await at.delete(created.id, created.properties);
    expect(bridgesOnHv3()).not.toContain(BRIDGE);
    expect((await at.read(created.id, created.properties)).id).toBe("");
  });
});
