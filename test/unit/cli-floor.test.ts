import { describe, expect, it } from "vitest";
import { PULUMI_CLI_FLOOR, PULUMI_CLI_RANGE, cliFloorError, cliFloorFailures } from "../../provider/cli-floor";
import { inVersionRange, versionRangeRefusal } from "../harness/version-range";

/**
 * The CLI floor's pure parts: what an answer of the SDK's
 * requirePulumiVersion means for ovslb, and the range check the harness
 * answers it with (the engine's syntax). Both sides through the harness:
 * test/integration/cli-floor.test.ts.
 */

describe("what the engine's answer means", () => {
  it("names the floor and the engine's reason when the engine refuses", () => {
    const error = cliFloorError(new Error('2 UNKNOWN: Pulumi CLI version 3.138.0 does not satisfy the version range ">=3.139.0"'));
    expect(PULUMI_CLI_RANGE).toBe(">=3.139.0");
    expect(error?.message).toBe(
      `ovslb needs the Pulumi CLI >=3.139.0, the first that passes the stack's config (ovslb:ssh) to dynamic providers: 2 UNKNOWN: Pulumi CLI version 3.138.0 does not satisfy the version range ">=3.139.0"`,
    );
  });

  it("lets through a CLI too old to say its version (before 3.217.0: it may well be at the floor) and an answer of yes", () => {
    const sdkMessage = "The installed version of the CLI does not support the `RequirePulumiVersion` RPC. Please upgrade the Pulumi CLI.";
    expect(cliFloorError(new Error(sdkMessage))).toBeUndefined();
    expect(cliFloorError(undefined)).toBeUndefined();
  });
});

describe("in the provider's process", () => {
  const plugin = "/p/node_modules/@pulumi/pulumi/cmd/dynamic-provider/index.js";

  it("refuses a CLI that started the provider without the project (before 3.139.0: no stack config either), as ovslb:ssh", () => {
    const [failure, ...more] = cliFloorFailures({}, plugin);
    expect(more).toEqual([]);
    expect(failure.property).toBe("ovslb:ssh");
    expect(failure.reason).toContain("ovslb needs the Pulumi CLI >=3.139.0, the first that passes the stack's config to dynamic providers");
    expect(cliFloorFailures({ PULUMI_PROJECT: "" }, "/p/node_modules/@pulumi/pulumi/cmd/dynamic-provider")).toHaveLength(1);
  });

  it("takes a CLI that named the project (3.139.0 and later), and leaves in-process callers alone", () => {
    expect(cliFloorFailures({ PULUMI_PROJECT: "web" }, plugin)).toEqual([]);
    expect(cliFloorFailures({ PULUMI_NODEJS_PROJECT: "web" }, plugin)).toEqual([]);
    expect(cliFloorFailures({}, "/repo/node_modules/vitest/vitest.mjs")).toEqual([]);
  });
});

describe("the harness's version ranges (github.com/blang/semver ParseRange)", () => {
  it("compares against the floor as the engine does", () => {
    expect(inVersionRange(PULUMI_CLI_FLOOR, PULUMI_CLI_RANGE)).toBe(true);
    expect(inVersionRange("3.138.9", PULUMI_CLI_RANGE)).toBe(false);
    expect(inVersionRange("3.248.0", PULUMI_CLI_RANGE)).toBe(true);
    expect(inVersionRange("4.0.0", PULUMI_CLI_RANGE)).toBe(true);
    expect(versionRangeRefusal("3.138.0", PULUMI_CLI_RANGE)).toBe('Pulumi CLI version 3.138.0 does not satisfy the version range ">=3.139.0"');
    expect(versionRangeRefusal("3.139.0", PULUMI_CLI_RANGE)).toBeUndefined();
  });

  it("ANDs with spaces, ORs with ||, and knows every comparator", () => {
    expect(inVersionRange("3.7.7", ">=3.5.0 !3.7.7")).toBe(false);
    expect(inVersionRange("3.7.8", ">=3.5.0 !3.7.7")).toBe(true);
    expect(inVersionRange("3.5.0", "<3.4.0 || >3.8.0")).toBe(false);
    expect(inVersionRange("3.9.0", "<3.4.0 || >3.8.0")).toBe(true);
    expect([">3.1.0", "<3.1.0", "<=3.1.0", "=3.1.0", "==3.1.0", "3.1.0", "!=3.1.0"].map((r) => inVersionRange("3.1.0", r))).toEqual([
      false,
      false,
      true,
      true,
      true,
      true,
      false,
    ]);
  });

  it("refuses what it cannot read", () => {
    expect(() => inVersionRange("3.139.0-alpha", PULUMI_CLI_RANGE)).toThrow(/not MAJOR.MINOR.PATCH/);
    expect(() => inVersionRange("3.139.0", ">=3.0.0 || ")).toThrow(/empty alternative/);
  });
});
