import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { Harness, HarnessError } from "../harness/engine";
import { loadInventory, sshTo } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";
import { PULUMI_CLI_RANGE } from "../../provider/cli-floor";

/**
 * The Pulumi CLI floor, both sides, through the harness playing a CLI of a
 * given version (its RequirePulumiVersion answers as the engine's does): a
 * program declaring ovslb resources under a CLI below the floor fails naming
 * it, before any resource reaches the engine; at the floor it runs. Preview
 * only: nothing is made on the host.
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "bridges");
let project: string;

beforeAll(() => {
  const inv = loadInventory();
  const host = { connection: sshTo(inv, "gw1"), ovsRundir: inv.hosts.gw1.ovsRundir };
  project = tempProject(fixture, { "Pulumi.dev.yaml": stackConfigYaml({ host, bridgeA: "br-floor-a", bridgeB: "br-floor-b", hwaddr: "02:00:00:00:ee:31" }) });
});
afterAll(() => removeTempProject(project));

const preview = (pulumiVersion: string) => Harness.open({ cwd: project, pulumiVersion, passphrase: "floor" }).then((h) => h.preview());

describe("the Pulumi CLI floor", () => {
  it(`refuses a CLI below ${PULUMI_CLI_RANGE}, naming the floor, before any resource is registered`, async () => {
    const error = await preview("3.138.0").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HarnessError);
    const result = (error as HarnessError).result;
    const messages = [(error as Error).message, ...result.diagnostics.map((d) => d.message)].join("\n");
    expect(messages).toContain(`ovslb needs the Pulumi CLI ${PULUMI_CLI_RANGE}`);
    expect(messages).toContain('Pulumi CLI version 3.138.0 does not satisfy the version range ">=3.139.0"');
    expect(result.steps.filter((s) => s.custom)).toEqual([]);
  });

  it(`runs under a CLI at ${PULUMI_CLI_RANGE}`, async () => {
    const r = await preview("3.139.0");
    expect(r.steps.filter((s) => s.custom).map((s) => s.op)).toEqual(["create", "create"]);
  });
});
