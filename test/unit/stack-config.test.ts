import { generateKeyPairSync } from "node:crypto";
import { CountingListener } from "../support/counting-listener";
import * as pulumi from "@pulumi/pulumi";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { check, configure, create, update } from "../../provider/handlers";
import { liftCredentials } from "../../provider/secrets";
import { stackHost, stackNorthbound } from "../../provider/resources/stack-config";
import { withSshDefaults } from "../../provider/stack-ssh";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
// Real keys (ssh2 parses a key before it connects), made for the test.
const rsaKey = () =>
  generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs1", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } })
    .privateKey;
const KEY_A = rsaKey();
const KEY_B = rsaKey();
const materialOf = (pem: string) => pem.split("\n")[5];

/** As the CLI hands config to a program: every value a string (objects as JSON), secret keys listed. */
function stackConfig(values: Record<string, unknown>, secretKeys: string[] = []) {
  pulumi.runtime.setAllConfig(Object.fromEntries(Object.entries(values).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])), secretKeys);
}

afterEach(() => pulumi.runtime.setAllConfig({}));

describe("ovslb:ssh, the SSH settings every connection takes unless it sets its own", () => {
  afterEach(() => configure(undefined));
  const bare = () => ({ host: { connection: { host: "172.30.0.11", hostKey: HOST_KEY } }, name: "br-cfg" });

  it("lets a connection without user or key pass check, and writes none of them into the inputs", async () => {
    expect((await check("OvsBridge", {}, bare())).failures.map((f) => f.property)).toEqual(["host.connection.user", "host.connection.privateKey"]);
    await configure(JSON.stringify({ user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000 }));
    const { inputs, failures } = await check("OvsBridge", {}, bare());
    expect(failures).toEqual([]);
    expect((inputs as any).host.connection).toEqual({ host: "172.30.0.11", hostKey: HOST_KEY });
    expect(JSON.stringify(inputs)).not.toContain(materialOf(KEY_A));
  });

  it("is under the declared settings: the connection's own win, and jump hosts take them too (once)", () => {
    const d = { user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000, jumpHost: { host: "10.9.0.1", hostKey: HOST_KEY } };
    expect(withSshDefaults({ host: "10.0.0.1", hostKey: HOST_KEY }, d)).toEqual({
      host: "10.0.0.1",
      hostKey: HOST_KEY,
      user: "ovslb",
      privateKey: KEY_A,
      connectTimeoutMs: 5000,
      jumpHost: { host: "10.9.0.1", hostKey: HOST_KEY, user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000 },
    });
    const own = withSshDefaults({ host: "10.0.0.2", user: "root", connectTimeoutMs: 900, jumpHost: { host: "10.9.0.2", hostKey: HOST_KEY } }, d);
    expect(own).toMatchObject({ user: "root", connectTimeoutMs: 900, privateKey: KEY_A });
    expect(own.jumpHost).toEqual({ host: "10.9.0.2", hostKey: HOST_KEY, user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000 });
    expect(withSshDefaults({ host: "10.0.0.3", user: "root" }, undefined)).toEqual({ host: "10.0.0.3", user: "root" });
  });

  it("is refused at check, by every resource, naming its config key and the reason, never the value", async () => {
    await configure(JSON.stringify({ usr: "x", port: 70000, passphrase: 7, host: "10.0.0.1" }));
    const { failures } = await check("OvsBridge", {}, { ...bare(), host: { connection: { ...bare().host.connection, user: "root", privateKey: KEY_A } } });
    expect(failures.map((f) => f.property).sort()).toEqual(["ovslb:ssh.host", "ovslb:ssh.passphrase", "ovslb:ssh.port", "ovslb:ssh.usr"]);
    expect(failures.find((f) => f.property === "ovslb:ssh.usr")!.reason).toBe("is not a known property");
    expect(JSON.stringify(failures)).not.toContain("70000");
    await configure("user: root");
    expect((await check("DistributorDevice", {}, {})).failures[0]).toEqual({ property: "ovslb:ssh", reason: expect.stringMatching(/must be an object/) });
  });
});

describe("ovslb:hosts and ovslb:northbound", () => {
  it("gives a named host as the stack declares it", () => {
    stackConfig({ "ovslb:hosts": { gw1: { connection: { host: "172.30.0.11", hostKey: HOST_KEY }, ovsRundir: "/run/ovs-gw1" } } });
    expect(stackHost("gw1")).toEqual({ connection: { host: "172.30.0.11", hostKey: HOST_KEY }, ovsRundir: "/run/ovs-gw1" });
  });

  it("says which hosts the stack has when a name is missing, and names a bad field by its config key", () => {
    stackConfig({
      "ovslb:hosts": { gw1: { connection: { host: "172.30.0.11", user: "root", hostKey: HOST_KEY } }, gw2: { connection: { host: "a b", user: "root" } } },
    });
    expect(() => stackHost("gw3")).toThrow("ovslb stack config: ovslb:hosts.gw3: is not set (the stack's hosts: gw1, gw2)");
    expect(() => stackHost("gw2")).toThrow(/ovslb:hosts\.gw2\.connection\.host: must be a DNS name or an IPv4 address/);
  });

  it("gives the northbound, and refuses one without its socket", () => {
    stackConfig({ "ovslb:northbound": { connection: { host: "172.30.0.20", hostKey: HOST_KEY }, socket: "/run/ovn/ovnnb_db.sock" } });
    expect(stackNorthbound()).toEqual({ connection: { host: "172.30.0.20", hostKey: HOST_KEY }, socket: "/run/ovn/ovnnb_db.sock" });
    stackConfig({ "ovslb:northbound": { connection: { host: "172.30.0.20", user: "root" } } });
    expect(() => stackNorthbound()).toThrow(/ovslb:northbound\.socket: is required/);
  });
});

describe("rotating a key given in the resource's own inputs", () => {
  // Where the hosts' SSH would be: a listener that counts every connection.
  let listener: CountingListener;
  beforeAll(async () => void (listener = await CountingListener.open()));
  afterAll(() => listener.close());

  const inputs = (privateKey: string, failMode = "secure") => ({
    host: { connection: { host: "127.0.0.1", port: listener.port, user: "root", hostKey: HOST_KEY, privateKey, connectTimeoutMs: 2000 } },
    name: "br-rot",
    datapathType: "netdev",
    failMode,
    externalIds: {},
  });
  const outputsOf = (i: ReturnType<typeof inputs>) => {
    const { value, credentials } = liftCredentials(i);
    return { ...value, uuid: "u-1", managementSocket: "unix:/run/openvswitch/br-rot.mgmt", sshCredentials: credentials };
  };

  // Recorded only once a login the new way succeeds (test/integration/reach-update.test.ts, against real sshd);
  // here the host is no SSH server at all, so the new way is refused.
  it("tries the new key with one connection to the host first, and records nothing when the host refuses it", async () => {
    listener.connections = 0;
    const err = await update("OvsBridge", "br-rot@127.0.0.1", outputsOf(inputs(KEY_A)), inputs(KEY_B)).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(listener.connections).toBe(1);
    expect(err).toBeInstanceOf(Error);
    expect(err!.message.startsWith(`root@127.0.0.1:${listener.port}: OvsBridge br-rot@127.0.0.1: `)).toBe(true);
    // A plain error: no partial state for the engine to record.
    expect(err).not.toHaveProperty("properties");
    expect(err!.message).not.toContain(materialOf(KEY_B));
  });

  it("so does a new user, port or timeout; a change on the host goes to it in full", async () => {
    listener.connections = 0;
    const moved = { ...inputs(KEY_A), host: { connection: { ...inputs(KEY_A).host.connection, user: "ovslb", connectTimeoutMs: 3000 } } };
    await expect(update("OvsBridge", "br-rot@127.0.0.1", outputsOf(inputs(KEY_A)), moved)).rejects.toThrow(
      `ovslb@127.0.0.1:${listener.port}: OvsBridge br-rot@127.0.0.1: `,
    );
    expect(listener.connections).toBe(1);
    listener.connections = 0;
    await expect(update("OvsBridge", "br-rot@127.0.0.1", outputsOf(inputs(KEY_A)), inputs(KEY_B, "standalone"))).rejects.toThrow();
    expect(listener.connections).toBe(1);
    await expect(create("OvsBridge", inputs(KEY_B))).rejects.toThrow();
    expect(listener.connections).toBe(2);
  });
});
