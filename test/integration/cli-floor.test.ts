import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { Harness, HarnessError, type Result } from "../harness/engine";
import { loadInventory, sshTo } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";
import { PULUMI_CLI_RANGE } from "../../provider/cli-floor";

/**
 * The Pulumi CLI floor, both sides, through the harness playing a CLI of a
 * given version: below 3.139.0 the engine gives the dynamic provider neither
 * the stack config nor the project, and every resource's check is refused
 * naming the floor; from 3.139.0 the program runs, whether the CLI can answer
 * the SDK's requirePulumiVersion (3.217.0 and later) or not. Preview only:
 * nothing is made on the host.
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "bridges");
let project: string;

beforeAll(() => {
  const inv = loadInventory();
  const host = { connection: sshTo(inv, "gw1"), ovsRundir: inv.hosts.gw1.ovsRundir };
  project = tempProject(fixture, { "Pulumi.dev.yaml": stackConfigYaml({ host, bridgeA: "br-floor-a", bridgeB: "br-floor-b", hwaddr: "02:00:00:00:ee:31" }) });
});
afterAll(() => removeTempProject(project));

const preview = (pulumiVersion?: string) => Harness.open({ cwd: project, pulumiVersion, passphrase: "floor" }).then((h) => h.preview());
const creates = (r: Result) => r.steps.filter((s) => s.custom).map((s) => s.op);

describe("the Pulumi CLI floor", () => {
  it(`refuses every resource under a CLI below ${PULUMI_CLI_RANGE}, naming the floor, at check`, async () => {
    const error = await preview("3.138.0").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HarnessError);
    const result = (error as HarnessError).result;
    const messages = [(error as Error).message, ...result.diagnostics.map((d) => d.message)].join("\n");
    expect(messages).toContain(`ovslb needs the Pulumi CLI ${PULUMI_CLI_RANGE}, the first that passes the stack's config to dynamic providers`);
    expect(messages).toContain("ovslb:ssh");
    expect(creates(result)).toEqual([]);
  });

  it(`runs under ${PULUMI_CLI_RANGE}: a CLI that cannot answer requirePulumiVersion (before 3.217.0), and one that answers it`, async () => {
    expect(creates(await preview("3.139.0"))).toEqual(["create", "create"]);
    expect(creates(await preview())).toEqual(["create", "create"]);
  });
});
