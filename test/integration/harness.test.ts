import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, HarnessError, type Result, type Step } from "../harness/engine";
import { UNKNOWN } from "../harness/state";
import { FaultHost } from "../support/fault-host";
import { loadInventory } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";

/**
 * The test harness (test/harness) plays `pulumi up` for real: a program run
 * by the SDK's own runner, its two OvsBridges (in a component, the second
 * taking the first's uuid) sent to the real dynamic-provider plugin, against
 * a host of this test's own (its own sshd, whose log counts every login: no
 * other test logs in there). Needs `npm run build` (the program loads
 * ovslb's dist/).
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "bridges");
const BRIDGE_A = "br-hx-a";
const BRIDGE_B = "br-hx-b";
const BRIDGE_B2 = "br-hx-b2";
const PAIR = "urn:pulumi:dev::harness-bridges::harness:index:BridgePair::pair";
const urnOf = (name: string) => `urn:pulumi:dev::harness-bridges::harness:index:BridgePair$pulumi-nodejs:dynamic/ovslb:OvsBridge::${name}`;
const STACK = "urn:pulumi:dev::harness-bridges::pulumi:pulumi:Stack::harness-bridges-dev";

let host: FaultHost;
let project: string;
let stack: Harness;
let privateKey: string;
const config = { bridgeA: BRIDGE_A, bridgeB: BRIDGE_B, hwaddr: "02:00:00:00:ee:01" };

const step = (r: Result, name: string): Step => {
  const s = r.steps.find((x) => x.urn === urnOf(name));
  if (!s) throw new Error(`no step for ${name} in ${JSON.stringify(r.steps.map((x) => x.urn))}`);
  return s;
};
const logins = () => (readFileSync(join(host.dir, "sshd.log"), "utf8").match(/Accepted publickey/g) ?? []).length;
const bridges = () =>
  host
    .vsctl("list-br")
    .trim()
    .split("\n")
    .filter((b) => b.startsWith("br-hx-"))
    .sort();

async function open(extra: Record<string, unknown> = {}) {
  return Harness.open({
    cwd: project,
    config: { ...config, ...extra },
    // The key is given inline and secret, as `pulumi config set --secret` would.
    secretConfig: { secretHost: { connection: { ...host.connection, privateKeyPath: undefined, privateKey }, ovsRundir: host.rundir } },
    passphrase: "harness-test",
  });
}

beforeAll(async () => {
  const inv = loadInventory();
  privateKey = readFileSync(inv.clientKeyPath, "utf8");
  host = await new FaultHost(inv, "hx", 210).up();
  project = tempProject(fixture, { "Pulumi.dev.yaml": stackConfigYaml({ host: host.ovsHost }) });
  stack = await open();
});

afterAll(async () => {
  // Whatever a failed test left: destroy through the harness, then the host goes.
  await stack?.destroy().catch(() => undefined);
  host?.down();
  removeTempProject(project);
});

describe("the harness runs a program as pulumi up does", () => {
  it("up creates the component's bridges; the second takes the first's uuid; parents and dependencies as declared; one login for both", async () => {
    const before = logins();
    const r = await stack.up();
    // Two resources on this host, one run of the provider: one SSH login, shared by both creates.
    expect(logins() - before).toBe(1);
    expect(r.steps.filter((s) => s.custom).map((s) => [s.urn, s.op])).toEqual([
      [urnOf("pair-a"), "create"],
      [urnOf("pair-b"), "create"],
    ]);
    const byUrn = new Map(r.resources.map((x) => [x.urn, x]));
    const a = byUrn.get(urnOf("pair-a"))!;
    const b = byUrn.get(urnOf("pair-b"))!;
    expect(byUrn.get(PAIR)!.parent).toBe(STACK);
    expect(a.parent).toBe(PAIR);
    expect(b.parent).toBe(PAIR);
    expect(b.dependencies).toContain(a.urn);
    expect(b.propertyDependencies?.externalIds).toContain(a.urn);
    expect(a.outputs.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.outputs.externalIds.peer).toBe(a.outputs.uuid);
    expect(r.outputs).toEqual({ firstUuid: a.outputs.uuid, secondPeer: a.outputs.uuid });
    // On the host, as declared.
    expect(bridges()).toEqual([BRIDGE_A, BRIDGE_B]);
    expect(host.vsctl("get", "bridge", BRIDGE_B, "external_ids:peer").trim()).toBe(`"${host.vsctl("get", "bridge", BRIDGE_A, "_uuid").trim()}"`);
  });

  it("keeps secrets secret: the same-named output and additionalSecretOutputs are marked, and the state file holds no key", () => {
    const a = stack.resources().find((x) => x.urn === urnOf("pair-a"))!;
    expect(a.secretPaths.inputs).toContain("host");
    expect(a.secretPaths.outputs).toEqual(expect.arrayContaining(["host", "sshCredentials"]));
    const text = readFileSync(stack.statePath, "utf8");
    const keyBody = privateKey.split("\n")[1];
    expect(keyBody.length).toBeGreaterThan(20);
    expect(text).not.toContain(keyBody);
    expect(text).toContain('"ciphertext"');
  });

  it("a second up with nothing changed changes nothing", async () => {
    const r = await stack.up({ expectNoChanges: true });
    expect(r.changes).toBe(false);
    expect(r.steps.every((s) => s.op === "same")).toBe(true);
  });

  it("preview of a change says update for the MAC and replace for the name, passes unknowns on, and logs in nowhere", async () => {
    const before = logins();
    const changed = await open({ hwaddr: "02:00:00:00:ee:02", bridgeB: BRIDGE_B2 });
    const r = await changed.preview();
    const a = step(r, "pair-a");
    const b = step(r, "pair-b");
    expect([a.op, a.keys]).toEqual(["update", ["hwaddr"]]);
    expect(b.op).toBe("replace");
    expect(b.replaces).toContain("name");
    // pair-a's uuid is not known until its update ran: the second bridge was registered with it unknown.
    expect(b.inputs!.externalIds.peer).toBe(UNKNOWN);
    expect(r.outputs.firstUuid).toBe(UNKNOWN);
    expect(logins()).toBe(before);
    expect(bridges()).toEqual([BRIDGE_A, BRIDGE_B]);
    expect(host.vsctl("get", "bridge", BRIDGE_A, "other_config:hwaddr").trim()).toBe('"02:00:00:00:ee:01"');
    // Preview writes no state.
    expect(stack.resources().find((x) => x.urn === urnOf("pair-a"))!.inputs.hwaddr).toBe("02:00:00:00:ee:01");
  });

  it("preview --expect-no-changes fails when something would change", async () => {
    const changed = await open({ hwaddr: "02:00:00:00:ee:02" });
    await expect(changed.preview({ expectNoChanges: true })).rejects.toThrow(HarnessError);
  });

  it("refresh after a hand edit shows the drift; up converges; then preview --refresh shows no changes", async () => {
    host.vsctl("set", "bridge", BRIDGE_A, "other_config:hwaddr=02:00:00:00:ee:99");
    const r = await stack.refresh();
    const a = step(r, "pair-a");
    expect(a.op).toBe("refresh");
    expect(a.changedPaths).toContain("hwaddr");
    expect(step(r, "pair-b").changedPaths).not.toContain("hwaddr");
    expect(r.changes).toBe(true);
    expect(stack.resources().find((x) => x.urn === urnOf("pair-a"))!.outputs.hwaddr).toBe("02:00:00:00:ee:99");
    // The host differs from the program: up puts it back.
    const u = await stack.up();
    expect(step(u, "pair-a").op).toBe("update");
    // (host differs too: the inputs read back carry no private key.)
    expect(step(u, "pair-a").keys).toContain("hwaddr");
    expect(step(u, "pair-b").op).toBe("same");
    expect(host.vsctl("get", "bridge", BRIDGE_A, "other_config:hwaddr").trim()).toBe('"02:00:00:00:ee:01"');
    // Outputs only read reports (ovsVersions) are recorded by a refresh; from then on nothing differs.
    await stack.refresh();
    const p = await stack.preview({ refresh: true, expectNoChanges: true });
    expect(p.changes).toBe(false);
  });

  it("up of the changed program updates in place and replaces (ovslb asks to delete the old bridge first)", async () => {
    const changed = await open({ hwaddr: "02:00:00:00:ee:02", bridgeB: BRIDGE_B2 });
    const r = await changed.up();
    expect(step(r, "pair-a").op).toBe("update");
    expect(step(r, "pair-b").op).toBe("replace");
    expect(step(r, "pair-b").deleteBeforeReplace).toBe(true);
    expect(bridges()).toEqual([BRIDGE_A, BRIDGE_B2]);
    const a = r.resources.find((x) => x.urn === urnOf("pair-a"))!;
    expect(r.resources.find((x) => x.urn === urnOf("pair-b"))!.outputs.externalIds.peer).toBe(a.outputs.uuid);
    expect(r.resources.filter((x) => x.urn === urnOf("pair-b"))).toHaveLength(1);
    stack = changed;
  });

  it("destroy removes everything, dependents first, logging in once", async () => {
    const before = logins();
    const r = await stack.destroy();
    expect(logins() - before).toBe(1);
    expect(r.steps.map((s) => s.urn)).toEqual([urnOf("pair-b"), urnOf("pair-a"), PAIR, STACK]);
    expect(r.resources).toEqual([]);
    expect(bridges()).toEqual([]);
    expect(stack.resources()).toEqual([]);
  });
});
