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

/**
 * Two sites, two logins: `ovslb:ssh.profiles` (secret with `ovslb:ssh`)
 * names a login for each, and each host of `ovslb:hosts` picks its own by
 * `connection.sshProfile`. Two hosts of the test's own, each whose sshd
 * accepts only its site's key; their sshd logs name the key of every login
 * (its fingerprint).
 */
describe("ovslb:ssh.profiles: two sites, each host logging in with its own site's key", () => {
  const PROFILE_BRIDGE = "br-sp";
  let site1: FaultHost;
  let site2: FaultHost;
  let profileProject: string;
  let fingerprint: Record<"a" | "b", string>;
  const identity = (h: FaultHost) => {
    const { user: _user, privateKeyPath: _path, ...where } = h.connection;
    return where;
  };
  const hosts = (profile1: string, profile2: string) => ({
    s1: { connection: { ...identity(site1), sshProfile: profile1 }, ovsRundir: site1.rundir },
    s2: { connection: { ...identity(site2), sshProfile: profile2 }, ovsRundir: site2.rundir },
  });
  const ssh = (profiles: Record<string, unknown> = { "site-a": { privateKey: keyA.private }, "site-b": { privateKey: keyB.private } }) => ({
    user: "root",
    connectTimeoutMs: 5000,
    profiles,
  });
  const openSites = (o: { hosts?: object; ssh?: object } = {}) =>
    Harness.open({
      cwd: profileProject,
      config: { bridge: PROFILE_BRIDGE, hosts: ["s1", "s2"], ...(o.hosts ? { "ovslb:hosts": o.hosts } : {}) },
      secretConfig: { "ovslb:ssh": o.ssh ?? ssh() },
      passphrase: "stack-config-test",
    });
  const log = (h: FaultHost) => readFileSync(join(h.dir, "sshd.log"), "utf8");
  /** The fingerprints of the keys each login was accepted with, in the log since `from`. */
  const acceptedKeys = (h: FaultHost, from: number) =>
    [
      ...log(h)
        .slice(from)
        .matchAll(/Accepted publickey for root from \S+ port \d+ ssh2: \S+ (\S+)/g),
    ].map((m) => m[1]);
  const failed = async (run: Promise<unknown>) => {
    const error = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HarnessError);
    return (error as HarnessError).result.diagnostics.map((d) => d.message).join("\n");
  };

  beforeAll(async () => {
    fingerprint = {
      a: execFileSync("ssh-keygen", ["-l", "-f", join(keys, "a.pub")], { encoding: "utf8" }).split(" ")[1],
      b: execFileSync("ssh-keygen", ["-l", "-f", join(keys, "b.pub")], { encoding: "utf8" }).split(" ")[1],
    };
    const inv = loadInventory();
    site1 = await new FaultHost(inv, "sp1", 213).up();
    site2 = await new FaultHost(inv, "sp2", 214).up();
    site1.authorize([keyA.public]);
    site2.authorize([keyB.public]);
    profileProject = tempProject(resolve(__dirname, "..", "fixtures", "harness", "stack-ssh-profiles"), {
      "Pulumi.dev.yaml": stackConfigYaml({ "ovslb:hosts": hosts("site-a", "site-b") }),
    });
  }, 120_000);

  afterAll(async () => {
    for (const h of [site1, site2]) h?.authorize([keyA.public, keyB.public]);
    if (profileProject) await (await openSites()).destroy().catch(() => undefined);
    site1?.down();
    site2?.down();
    removeTempProject(profileProject);
  }, 120_000);

  it("up logs in to each host with its own profile's key; only the profile's name is in the inputs, no key in the state", async () => {
    const from = [site1, site2].map((h) => log(h).length);
    const stack = await openSites();
    await stack.up();
    for (const h of [site1, site2]) expect(h.vsctl("list-br").split("\n")).toContain(PROFILE_BRIDGE);
    const accepted = [site1, site2].map((h, i) => acceptedKeys(h, from[i]));
    expect(accepted[0].length).toBeGreaterThan(0);
    expect(accepted[1].length).toBeGreaterThan(0);
    expect(new Set(accepted[0])).toEqual(new Set([fingerprint.a]));
    expect(new Set(accepted[1])).toEqual(new Set([fingerprint.b]));
    const bridges = stack.resources().filter((r) => r.custom);
    expect(bridges.map((r) => r.inputs.host.connection.sshProfile).sort()).toEqual(["site-a", "site-b"]);
    for (const r of bridges) {
      expect(Object.keys(r.inputs.host.connection).sort()).toEqual(["host", "hostKey", "port", "sshProfile"]);
      expect(r.outputs.sshCredentials).toEqual({});
      expect(r.secretPaths.inputs).toEqual([]);
    }
    const state = readFileSync(stack.statePath, "utf8");
    for (const k of [keyA, keyB]) for (let i = 0; i + 32 <= body(k.private).length; i += 16) expect(state).not.toContain(body(k.private).slice(i, i + 32));
    await stack.preview({ refresh: true, expectNoChanges: true });
  }, 180_000);

  it("a host switched to the other site's profile is refused, naming that host and the key's user; nothing recorded, the other host untouched", async () => {
    const from = [site1, site2].map((h) => log(h).length);
    const before = site2.dataplane() + site2.vsctl("show");
    const stack = await openSites({ hosts: hosts("site-a", "site-a") });
    const text = await failed(stack.up());
    expect(text).toMatch(
      new RegExp(`root@${site2.address.replace(/\./g, "\\.")}:22: OvsBridge \\S+: authentication refused: the host did not accept the key for root`),
    );
    expect(text).not.toContain(site1.address);
    expect(text).not.toContain(body(keyA.private).slice(0, 32));
    expect(acceptedKeys(site2, from[1])).toEqual([]);
    expect(site2.dataplane() + site2.vsctl("show")).toBe(before);
    // Nothing recorded: the state still says site-b, and logs in that way.
    const recorded = stack.resources().find((r) => r.custom && r.inputs.host.connection.host === site2.address)!;
    expect(recorded.inputs.host.connection.sshProfile).toBe("site-b");
    await (await openSites()).preview({ refresh: true, expectNoChanges: true });
  }, 180_000);

  it("a profile the stack does not have, and a bad value in one, are refused at check naming the property, before any login", async () => {
    const from = [site1, site2].map((h) => log(h).length);
    const missing = await failed((await openSites({ hosts: hosts("site-a", "site-x") })).preview());
    expect(missing).toMatch(/host\.connection\.sshProfile: profile "site-x" is not in ovslb:ssh\.profiles/);
    const bad = await failed(
      (await openSites({ ssh: ssh({ "site-a": { privateKey: keyA.private }, "site-b": { privateKey: keyB.private, port: 70000 } }) })).preview(),
    );
    expect(bad).toMatch(/ovslb:ssh\.profiles\.site-b\.port: must be SSH port/);
    expect(bad).not.toContain("70000");
    expect(bad).not.toContain(body(keyB.private).slice(0, 32));
    expect([site1, site2].map((h, i) => acceptedKeys(h, from[i]))).toEqual([[], []]);
  }, 180_000);

  it("switching a host's profile is an update of how it is reached only: one login the new way, nothing on the host changed", async () => {
    site2.authorize([keyA.public, keyB.public]);
    const from = [site1, site2].map((h) => log(h).length);
    const before = site2.dataplane() + site2.vsctl("show");
    const stack = await openSites({ hosts: hosts("site-a", "site-a") });
    const preview = await stack.preview();
    expect(
      preview.steps
        .filter((s) => s.custom)
        .map((s) => s.op)
        .sort(),
    ).toEqual(["same", "update"]);
    const up = await stack.up();
    expect(up.steps.filter((s) => s.op === "update").map((s) => s.urn)).toEqual([expect.stringMatching(/br-s2$/)]);
    expect(acceptedKeys(site2, from[1])).toEqual([fingerprint.a]);
    expect(acceptedKeys(site1, from[0])).toEqual([]);
    expect(site2.dataplane() + site2.vsctl("show")).toBe(before);
    const recorded = stack.resources().find((r) => r.custom && r.inputs.host.connection.host === site2.address)!;
    expect(recorded.inputs.host.connection.sshProfile).toBe("site-a");
    // The site's old key is revoked: the next refresh logs in with the profile now recorded.
    site2.authorize([keyA.public]);
    await stack.preview({ refresh: true, expectNoChanges: true });
  }, 180_000);
});
