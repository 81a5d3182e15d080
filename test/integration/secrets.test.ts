import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OvsBridge } from "../../index";
import { MGMT_UNUSED, type LabInventory } from "../lab/topology";
import { labSsh, loadInventory } from "../support/lab";
import { registeredInputs, startProviderPlugin, unwrapSecrets, type PluginCall } from "../support/provider-plugin";

/**
 * Secrets (issue 13): a real passphrase-protected key, made for this test and
 * authorized on the lab hosts while it runs, goes through check, create,
 * read, diff, update and delete by the real dynamic-provider plugin, and
 * through failures (a wrong passphrase, an unreachable host, a host key that
 * does not match). The key, any 32-character window of its base64 body, and
 * the passphrase appear nowhere: not in the outputs (but the secret
 * `sshCredentials`), check failures, error messages, the plugin's stdout and
 * stderr, or the serialized provider.
 */

const TYPE = "pulumi-nodejs:dynamic/ovslb:OvsBridge";
const BRIDGE = "br-secrets";
const PASSPHRASE = "ovslb-test-Passphrase-7d3f19";
const MARK = "ovslb-secrets-test";
type Props = Record<string, any>;

let inv: LabInventory;
let plugin: PluginCall;
let dir: string;
let key: string;
let program: Props;
/** Every text the engine or a user could see, collected as the test goes. */
const seen: { where: string; text: string }[] = [];
const saw = (where: string, v: unknown) => seen.push({ where, text: typeof v === "string" ? v : JSON.stringify(v) });

const authorizedKeys = () => join(inv.labDir, "authorized_keys");

beforeAll(async () => {
  inv = loadInventory();
  dir = mkdtempSync(join(tmpdir(), "ovslb-secrets-"));
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", PASSPHRASE, "-C", "", "-f", join(dir, "key")]);
  key = readFileSync(join(dir, "key"), "utf8");
  // Authorized on every lab host (they share one authorized_keys) until afterAll.
  appendFileSync(authorizedKeys(), `${readFileSync(join(dir, "key.pub"), "utf8").trim().split(" ").slice(0, 2).join(" ")} ${MARK}\n`);
  plugin = await startProviderPlugin();
  const h = inv.hosts.hv2;
  const registered = await registeredInputs(TYPE, () => {
    new OvsBridge("secret", {
      host: { connection: { host: h.address, user: h.user, hostKey: h.hostKey, privateKey: key, passphrase: PASSPHRASE }, ovsRundir: h.ovsRundir },
      name: BRIDGE,
    });
  });
  program = unwrapSecrets(registered);
  saw("serialized provider", program.__provider);
});

afterAll(async () => {
  const lines = readFileSync(authorizedKeys(), "utf8")
    .split("\n")
    .filter((l) => !l.endsWith(MARK));
  writeFileSync(authorizedKeys(), lines.join("\n"));
  plugin?.stop();
  const s = await labSsh(inv, "hv2");
  await s.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]).finally(() => s.close());
  rmSync(dir, { recursive: true, force: true });
});

/** The outputs as the engine stores them in plain state: everything but the secret credentials output. */
const plain = (props: Props) => Object.fromEntries(Object.entries(props).filter(([k]) => k !== "sshCredentials"));

async function failure(where: string, call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
  } catch (e) {
    const err = e as Error & { details?: string; initFailed?: unknown };
    saw(where, `${err.message}\n${err.details ?? ""}\n${JSON.stringify(err.initFailed ?? null)}`);
    return err.message;
  }
  throw new Error(`${where}: expected a failure`);
}

describe("secrets through the dynamic-provider plugin", () => {
  let id: string;
  let outs: Props;

  it("a passphrase-protected key works end to end: check, create, read, diff, update, delete", async () => {
    expect(program.host.connection.passphrase).toBe(PASSPHRASE);
    const checked = await plugin.check({}, program);
    // (check's inputs are the program's inputs, secret in the engine as they were given: its failures are what it adds.)
    saw("check failures", checked.failures);
    expect(checked.failures).toEqual([]);
    const created = await plugin.create(checked.inputs);
    ({ id } = created);
    outs = created.properties;
    saw("create outputs", plain(outs));
    // The credentials are there, as a secret output only.
    expect(JSON.stringify(outs.sshCredentials)).toContain("passphrase");
    const read = await plugin.read(id, outs, checked.inputs);
    saw("read outputs", plain(read.properties));
    saw("read inputs", read.inputs);
    expect(read.properties.ovsVersions).toBeDefined();
    const diff = await plugin.diff(id, read.properties, checked.inputs);
    expect(diff.changes).toBe("none");
    const next = { ...checked.inputs, externalIds: { team: "secrets" } };
    const updated = await plugin.update(id, read.properties, next);
    outs = updated.properties;
    saw("update outputs", plain(outs));
    expect(outs.externalIds).toEqual({ team: "secrets" });
  });

  it("failures say what failed and which host, and carry no secret", async () => {
    const h = inv.hosts.hv2;
    const wrong = structuredClone(program);
    wrong.host.connection.passphrase = "not-the-passphrase";
    expect(await failure("create, wrong passphrase", () => plugin.create(wrong))).toMatch(new RegExp(`${h.address}.*(passphrase|decrypt|parse)`, "i"));
    const noPassphrase = structuredClone(program);
    delete noPassphrase.host.connection.passphrase;
    expect(await failure("create, no passphrase", () => plugin.create(noPassphrase))).toMatch(new RegExp(h.address));
    const unreachable = structuredClone(program);
    unreachable.host.connection.host = MGMT_UNUSED;
    unreachable.host.connection.connectTimeoutMs = 1500;
    expect(await failure("create, unreachable", () => plugin.create(unreachable))).toMatch(new RegExp(MGMT_UNUSED.replaceAll(".", "\\.")));
    const mismatch = structuredClone(program);
    mismatch.host.connection.hostKey = inv.hosts.gw1.hostKey;
    expect(await failure("create, host key mismatch", () => plugin.create(mismatch))).toMatch(/host key verification failed/);
    // The same failures where state is read back (read, update, delete get the outputs).
    const badOuts = structuredClone(outs);
    badOuts.host.connection.hostKey = inv.hosts.gw1.hostKey;
    expect(await failure("read, host key mismatch", () => plugin.read(id, badOuts))).toMatch(/host key verification failed/);
    expect(await failure("update, wrong passphrase", () => plugin.update(id, outs, wrong))).toMatch(new RegExp(h.address));
    expect(await failure("delete, host key mismatch", () => plugin.delete(id, badOuts))).toMatch(/host key verification failed/);
    const refused = structuredClone(program);
    refused.name = "br0,actions=drop";
    saw("check failures", (await plugin.check({}, refused)).failures);
  });

  it("deletes with the key", async () => {
    await plugin.delete(id, outs);
    const s = await labSsh(inv, "hv2");
    try {
      expect((await s.run(["ovs-vsctl", "list-br"])).stdout).not.toContain(BRIDGE);
    } finally {
      s.close();
    }
  });

  it("the key, any 32-character window of it, and the passphrase appear nowhere", () => {
    const logs = plugin.logs();
    saw("plugin stdout", logs.stdout);
    saw("plugin stderr", logs.stderr);
    const body = key
      .split("\n")
      .filter((l) => l && !l.startsWith("-----"))
      .join("");
    const windows = new Set<string>();
    for (let i = 0; i + 32 <= body.length; i += 4) windows.add(body.slice(i, i + 32));
    expect(windows.size).toBeGreaterThan(50);
    // Sanity: the search finds the key where it is (the program's inputs), so finding none elsewhere means something.
    expect(JSON.stringify(program).includes(body.slice(0, 32))).toBe(true);
    expect(seen.length).toBeGreaterThan(10);
    for (const { where, text } of seen) {
      // JSON escapes newlines: search the text with them unescaped too.
      for (const t of [text, text.replace(/\\n/g, "\n")]) {
        expect(t.includes(PASSPHRASE), `${where}: passphrase`).toBe(false);
        expect(t.includes("PRIVATE KEY"), `${where}: key armor`).toBe(false);
        for (const w of windows) if (t.includes(w)) throw new Error(`${where}: contains a 32-character window of the key`);
      }
    }
  });
});
