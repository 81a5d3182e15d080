import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * The runtime the tests run on is one ovslb supports (package.json
 * `engines`), with an SDK that supports it (its own `engines`: 3.249+ says
 * Node >= 22) and that ovslb's peer range accepts. CI runs the tests on Node
 * 20 with the lockfile's SDK and, through tools/node-runtime.sh, on Node 22
 * with the newest; the script says which it meant (OVSLB_EXPECT_NODE,
 * OVSLB_EXPECT_PULUMI), so a run cannot pass on another Node or SDK than the
 * one it reports.
 */

const repo = resolve(__dirname, "..", "..");
const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
const sdkDir = dirname(require.resolve("@pulumi/pulumi/package.json"));
const sdk = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8"));
const semver = require(require.resolve("semver", { paths: [sdkDir] }));

describe(`the runtime: Node ${process.version}, @pulumi/pulumi ${sdk.version}`, () => {
  it("this Node is one package.json's engines accepts", () => {
    expect(semver.satisfies(process.version, manifest.engines.node), manifest.engines.node).toBe(true);
  });

  it("this SDK supports this Node (its own engines), and ovslb's peer range accepts it", () => {
    expect(semver.satisfies(process.version, sdk.engines?.node ?? "*"), `@pulumi/pulumi ${sdk.version}: node ${sdk.engines?.node}`).toBe(true);
    expect(semver.satisfies(sdk.version, manifest.peerDependencies["@pulumi/pulumi"])).toBe(true);
  });

  it("Node 20 only with an SDK of at most 3.248 (the newest that declares Node 20)", () => {
    if (semver.major(process.version) < 22) expect(semver.lte(sdk.version, "3.248.0")).toBe(true);
  });

  it("is the Node and SDK the runner asked for, when it says", () => {
    if (process.env.OVSLB_EXPECT_NODE) expect(process.version).toBe(process.env.OVSLB_EXPECT_NODE);
    if (process.env.OVSLB_EXPECT_PULUMI) expect(sdk.version).toBe(process.env.OVSLB_EXPECT_PULUMI);
  });
});
