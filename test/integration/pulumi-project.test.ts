import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { runProgram, urnOf, type Registration } from "../support/project";
import { startProviderPlugin, type PluginCall } from "../support/provider-plugin";
import { loadFixture } from "../support/state-fixtures";
import { loadInventory } from "../support/lab";
import { configEnv, labStackConfig } from "../lab/stack-config";

/**
 * The repository's own Pulumi project (Pulumi.yaml at the repo root): the
 * program it names loads, run as the language host runs it (working
 * directory = the project root), and the providers it serializes work from
 * that root through the plugin started there as the CLI starts it, although
 * nothing at the root resolves `ovslb` by name (no node_modules/ovslb, no
 * NODE_PATH). Needs `npm run build:tools` (the program is
 * dist/examples/lab-deferred-nat/).
 */

type Props = Record<string, any>;
const root = resolve(__dirname, "..", "..");
const DYNAMIC = "pulumi-nodejs:dynamic/ovslb:";

let project: { name: string; runtime: { name: string; options?: Props }; main: string };
let registered: Registration[];
let plugin: PluginCall;

beforeAll(async () => {
  const pulumiDir = dirname(require.resolve("@pulumi/pulumi/package.json"));
  const yaml = require(require.resolve("js-yaml", { paths: [pulumiDir] }));
  project = yaml.load(readFileSync(join(root, "Pulumi.yaml"), "utf8"));
  // The engine hands a dynamic provider the whole stack config (Configure), values as the CLI holds them.
  const config = labStackConfig(loadInventory(), ".");
  plugin = await startProviderPlugin({ projectRoot: root, configure: { args: JSON.parse(configEnv(config).PULUMI_CONFIG) } });
});

afterAll(() => plugin?.stop());

describe("Pulumi.yaml at the repository root", () => {
  it("names a Node.js program that exists", () => {
    expect(project.runtime.name).toBe("nodejs");
    const main = join(root, project.main);
    if (!existsSync(main)) throw new Error(`${project.main} does not exist: run "npm run build:tools" first`);
  });

  it("its program loads in the project root and declares the lab's deferred-NAT service", async () => {
    // The stack config `npm run lab -- up` writes as Pulumi.lab.yaml.
    registered = await runProgram(root, project.main, configEnv(labStackConfig(loadInventory(), ".")), project.name);
    const kinds = registered.filter((r) => r.type.startsWith(DYNAMIC)).map((r) => r.type.slice(DYNAMIC.length));
    expect(kinds).toContain("DeferredNatLoadBalancer");
    expect(kinds.filter((k) => k === "DsrHypervisorFlows").length).toBeGreaterThan(0);
    for (const r of registered.filter((x) => x.type.startsWith(DYNAMIC))) {
      // Serialized in ovslb's own checkout: the program found ovslb at the project root itself.
      expect(r.inputs.__provider).toContain('installed: ""');
    }
  });

  it("from the root, the provider text older ovslb wrote cannot find ovslb by name (what was broken)", async () => {
    const lb = registered.find((r) => r.type === `${DYNAMIC}DeferredNatLoadBalancer`)!;
    const old = loadFixture("DeferredNatLoadBalancer").inputs.__provider;
    await expect(plugin.at(urnOf(lb)).check({}, { ...lb.inputs, __provider: old })).rejects.toThrow(/Cannot find module 'ovslb\/dist\/provider\/handlers'/);
  });

  it("through the plugin started in the root, every resource it declares checks clean, and the load balancer reads from the lab", async () => {
    for (const r of registered.filter((x) => x.type.startsWith(DYNAMIC))) {
      const checked = await plugin.at(urnOf(r)).check({}, r.inputs);
      expect(checked.failures, r.name).toEqual([]);
      if (r.type === `${DYNAMIC}DeferredNatLoadBalancer`) {
        // Reads both gateways: gone ("") unless the demo is applied, then its own id.
        const read = await plugin.at(urnOf(r)).read("deferred-nat/demo", checked.inputs);
        expect(["", "deferred-nat/demo"]).toContain(read.id);
      }
    }
  });
});
