import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { LabInventory } from "../lab/topology";
import { inNamespace, loadInventory, sshTo } from "../support/lab";
import { copyPackagedOvslb, hoistDependencies, removeBridgeProject, runProgram, urnOf, writeBridgeLibrary, type Registration } from "../support/project";
import { startProviderPlugin, type PluginCall } from "../support/provider-plugin";

/**
 * A program in an npm workspace, where ovslb and the component library that
 * uses it are workspace packages (npm links them: node_modules/ovslb ->
 * ../packages/ovslb):
 *
 *   ws/package.json               "workspaces": ["packages/*"]; the program (index.js) uses lib
 *   ws/packages/lib/              a component library wrapping an OvsBridge
 *   ws/packages/ovslb/            ovslb (a copy of what the package ships)
 *   ws/node_modules/{lib,ovslb}   symlinks to the packages; the SDK and ovslb's dependencies hoisted
 *
 * @pulumi/pulumi 3.249+ changed how its closure code treats workspaces (it
 * globs the workspaces' package.json files with fs/promises.glob, which Node
 * 20 lacks). Here, on whatever Node and SDK run the tests (CI: Node 20 with
 * the lockfile's SDK, and tools/node-runtime.sh: Node 22 with the newest),
 * the SDK finds the workspace root, the program serializes a thin provider
 * that records where it found ovslb (packages/ovslb, the link's target), and
 * that text works through the plugin started in the workspace root as the
 * CLI starts it: check, create, read and delete on hv3. Needs `npm run build`.
 */

const BRIDGE = "wsp-br";

let inv: LabInventory;
let ws: string;
let plugin: PluginCall;
let bridge: Registration;

const bridgesOnHv3 = () => inNamespace(inv.hosts.hv3.namespace, ["ovs-vsctl", `--db=unix:${inv.hosts.hv3.dbSock}`, "list-br"]).split("\n");

beforeAll(async () => {
  inv = loadInventory();
  ws = realpathSync(mkdtempSync(join(tmpdir(), "ovslb-workspace-")));
  const modules = join(ws, "node_modules");
  hoistDependencies(modules);
  // The workspace packages, linked as npm links them.
  copyPackagedOvslb(join(ws, "packages", "ovslb"));
  const lib = join(ws, "packages", "lib");
  writeBridgeLibrary(lib);
  symlinkSync("../packages/ovslb", join(modules, "ovslb"));
  symlinkSync("../packages/lib", join(modules, "lib"));
  writeFileSync(
    join(ws, "package.json"),
    JSON.stringify({ name: "ws-program", private: true, workspaces: ["packages/*"], dependencies: { lib: "1.0.0", "@pulumi/pulumi": "*" } }),
  );
  writeFileSync(join(ws, "index.js"), `const { LabBridge } = require("lib");\nnew LabBridge("ws", JSON.parse(process.env.WS_ARGS));\n`);
  const h = inv.hosts.hv3;
  const args = { host: { connection: sshTo(inv, "hv3"), ovsRundir: h.ovsRundir }, name: BRIDGE, externalIds: { purpose: "npm-workspace-test" } };
  const registered = await runProgram(ws, "index.js", { WS_ARGS: JSON.stringify(args) });
  bridge = registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:OvsBridge")!;
  plugin = await startProviderPlugin({ projectRoot: ws });
});

afterAll(() => removeBridgeProject(ws, plugin, bridge, `ovs-bridge/${inv.hosts.hv3.address}/${BRIDGE}`));

describe("ovslb as a package of the npm workspace the program is in", () => {
  it("this runtime's SDK finds the workspace root from a workspace package (the code 3.249+ changed)", async () => {
    const sdk = dirname(require.resolve("@pulumi/pulumi/package.json", { paths: [ws] }));
    const { findWorkspaceRoot } = require(join(sdk, "runtime", "closure", "codePaths"));
    expect(typeof findWorkspaceRoot).toBe("function");
    expect(resolve(await findWorkspaceRoot(join(ws, "packages", "ovslb")))).toBe(ws);
  });

  it("the program registers the library's OvsBridge with a thin provider recording the workspace package", () => {
    expect(bridge).toBeDefined();
    const text: string = bridge.inputs.__provider;
    expect(text).toContain('kind: "OvsBridge"');
    expect(text).toContain('require("ovslb/dist/provider/handlers")');
    expect(text).toContain('installed: "packages/ovslb"');
    // Nothing of the SDK, ssh2 or ovslb's implementation is captured.
    expect(text.length).toBeLessThan(8_000);
    expect(text).not.toMatch(/ssh2|SshSession|grpc/);
  });

  it("through the plugin started in the workspace root: check, create, read and delete on hv3", async () => {
    const at = plugin.at(urnOf(bridge));
    const checked = await at.check({}, bridge.inputs);
    expect(checked.failures).toEqual([]);
    const created = await at.create(checked.inputs);
    expect(created.id).toBe(`ovs-bridge/${inv.hosts.hv3.address}/${BRIDGE}`);
    expect(bridgesOnHv3()).toContain(BRIDGE);
    const read = await at.read(created.id, created.properties);
    expect(read.id).toBe(created.id);
    expect(read.inputs.externalIds).toEqual({ purpose: "npm-workspace-test" });
    expect(await at.diff(created.id, created.properties, checked.inputs)).toEqual({ changes: "none", replaces: [], deleteBeforeReplace: false });
    await at.delete(created.id, created.properties);
    expect(bridgesOnHv3()).not.toContain(BRIDGE);
    expect((await at.read(created.id, created.properties)).id).toBe("");
  });
});
