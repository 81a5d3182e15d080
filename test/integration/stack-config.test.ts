import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Harness, HarnessError } from "../harness/engine";
import { FaultHost } from "../support/fault-host";
import { loadInventory } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";

/**
 * Connections configured once per stack: the host from `ovslb:hosts`, the
 * login (user and key) from a secret `ovslb:ssh`, as
 * `pulumi config set --secret --path ovslb:ssh.privateKey` sets it. Run
 * through the harness (the engine hands the stack config to the program and
 * to the dynamic provider's configure) against a host of the test's own,
 * whose sshd log counts every login and whose authorized_keys the test
 * rotates.
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "stack-ssh");
const BRIDGE = "br-sc";
let host: FaultHost;
let project: string;
let keys: string;
const key = (name: string) => ({ private: readFileSync(join(keys, name), "utf8"), public: readFileSync(join(keys, `${name}.pub`), "utf8").trim() });
let keyA: { private: string; public: string };
let keyB: { private: string; public: string };
const logins = () => (readFileSync(join(host.dir, "sshd.log"), "utf8").match(/Accepted publickey/g) ?? []).length;
const body = (pem: string) => pem.split("\n").slice(1, -2).join("");

const open = (ssh: Record<string, unknown>) =>
  Harness.open({ cwd: project, config: { bridge: BRIDGE }, secretConfig: { "ovslb:ssh": ssh }, passphrase: "stack-config-test" });

beforeAll(async () => {
  const inv = loadInventory();
  keys = mkdtempSync(join(tmpdir(), "ovslb-keys-"));
  for (const k of ["a", "b"]) execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `stack-config-${k}`, "-f", join(keys, k)]);
  keyA = key("a");
  keyB = key("b");
  host = await new FaultHost(inv, "sc", 211).up();
  host.authorize([keyA.public]);
  const { user: _user, privateKeyPath: _path, ...identity } = host.connection;
  // Only where the host is and who it is: no user, no key.
  project = tempProject(fixture, { "Pulumi.dev.yaml": stackConfigYaml({ "ovslb:hosts": { h1: { connection: identity, ovsRundir: host.rundir } } }) });
});

afterAll(async () => {
  host?.authorize([keyA.public, keyB.public]);
  await (await open({ user: "root", privateKey: keyB.private })).destroy().catch(() => undefined);
  host?.down();
  removeTempProject(project);
  rmSync(keys, { recursive: true, force: true });
});

describe("ovslb:ssh, a secret login given once for the stack", () => {
  it("up logs in with it; neither the key nor anything of it is in the resource's inputs, outputs or the state file", async () => {
    const stack = await open({ user: "root", privateKey: keyA.private });
    await stack.up();
    expect(host.vsctl("list-br").split("\n")).toContain(BRIDGE);
    const [br] = stack.resources().filter((r) => r.custom);
    expect(br.inputs.host.connection).toEqual({ host: host.address, port: 22, hostKey: host.connection.hostKey });
    expect(br.outputs.sshCredentials).toEqual({});
    // Nothing derived from the key is secret, so nothing else is hidden either: the host reads plainly in a diff.
    expect(br.secretPaths.inputs).toEqual([]);
    const state = readFileSync(stack.statePath, "utf8");
    expect(body(keyA.private).length).toBeGreaterThan(40);
    for (let i = 0; i + 32 <= body(keyA.private).length; i += 16) expect(state).not.toContain(body(keyA.private).slice(i, i + 32));
  }, 120_000);

  it("rotating it changes no resource and logs in nowhere; the next refresh and update use the new key (the old one is already revoked)", async () => {
    host.authorize([keyA.public, keyB.public]);
    const stack = await open({ user: "root", privateKey: keyB.private });
    const before = logins();
    const preview = await stack.preview();
    expect(preview.steps.filter((s) => s.custom).map((s) => s.op)).toEqual(["same"]);
    const up = await stack.up();
    expect(up.changes).toBe(false);
    expect(logins()).toBe(before);

    host.authorize([keyB.public]);
    const refreshed = await stack.refresh();
    expect(refreshed.steps.filter((s) => s.custom).map((s) => s.op)).toEqual(["same"]);
    expect(logins()).toBe(before + 1);
    await stack.preview({ refresh: true, expectNoChanges: true });
  }, 240_000);

  it("a bad ovslb:ssh is refused at check, naming its key and never its value, before any login", async () => {
    const before = logins();
    const stack = await open({ user: "root", privateKey: keyB.private, port: 70000, usr: "root" });
    const error = await stack.preview().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HarnessError);
    const text = (error as HarnessError).result.diagnostics.map((d) => d.message).join("\n");
    expect(text).toMatch(/ovslb:ssh\.port/);
    expect(text).toMatch(/ovslb:ssh\.usr: is not a known property/);
    expect(text).not.toContain("70000");
    expect(text).not.toContain(body(keyB.private).slice(0, 32));
    expect(logins()).toBe(before);
  }, 120_000);

  it("without a key anywhere, check says where to give one", async () => {
    const stack = await open({ user: "root" });
    const error = await stack.preview().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as HarnessError).result.diagnostics.map((d) => d.message).join("\n")).toMatch(
      /host\.connection\.privateKey: give privateKey, privateKeyPath or agent/,
    );
  }, 120_000);
});
