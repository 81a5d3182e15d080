import { generateKeyPairSync } from "node:crypto";
import { CountingListener } from "../support/counting-listener";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import dnlbSchema from "../../schema/deferred-nat-load-balancer.json";
import bridgeSchema from "../../schema/ovs-bridge.json";
import { check, configure, read, update } from "../../provider/handlers";
import type { SshConnection } from "../../provider/model/inputs.generated";
import { loginsToVerify } from "../../provider/model/reach";
import { sameInputs } from "../../provider/model/validate";
import { liftCredentials } from "../../provider/secrets";
import { withSshDefaults, type StackSsh } from "../../provider/stack-ssh";

/**
 * `ovslb:ssh.profiles`: named logins beside the stack's own, one chosen per
 * connection by `sshProfile`. Only the name is in the inputs; the profile
 * is applied in the provider (check, the transport, reach-only updates) as
 * `ovslb:ssh` is. Against a real login: test/integration/stack-config.test.ts.
 */

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
// Real keys (ssh2 parses a key before it connects), made for the test.
const rsaKey = () =>
  generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs1", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } })
    .privateKey;
const KEY_A = rsaKey();
const KEY_B = rsaKey();
const materialOf = (pem: string) => pem.split("\n")[5];

const SSH: StackSsh = {
  user: "root",
  privateKey: KEY_A,
  connectTimeoutMs: 5000,
  profiles: { "site-b": { user: "ops", privateKey: KEY_B, port: 2222 }, "site-c": { user: "ovslb", jumpHost: { host: "10.9.0.1", hostKey: HOST_KEY } } },
};

const bridge = (connection: SshConnection) => ({ host: { connection }, name: "br-prof" });
const at = (host: string, extra: Partial<SshConnection> = {}): SshConnection => ({ host, hostKey: HOST_KEY, ...extra });

afterEach(() => configure(undefined));

describe("a connection's sshProfile, resolved in the provider", () => {
  it("takes the profile instead of ovslb:ssh (what the profile leaves out still from ovslb:ssh), the connection's own settings first", () => {
    expect(withSshDefaults(at("10.0.0.2", { sshProfile: "site-b" }), SSH)).toEqual({
      host: "10.0.0.2",
      hostKey: HOST_KEY,
      user: "ops",
      privateKey: KEY_B,
      port: 2222,
      connectTimeoutMs: 5000,
    });
    expect(withSshDefaults(at("10.0.0.2", { sshProfile: "site-b", user: "admin", port: 22 }), SSH)).toMatchObject({
      user: "admin",
      port: 22,
      privateKey: KEY_B,
    });
    // No profile named: ovslb:ssh, as before profiles.
    expect(withSshDefaults(at("10.0.0.1"), SSH)).toEqual({ host: "10.0.0.1", hostKey: HOST_KEY, user: "root", privateKey: KEY_A, connectTimeoutMs: 5000 });
  });

  it("gives a jump host the profile's login, or its own profile's when it names one; a jump host takes no jump host by default", () => {
    const viaC = withSshDefaults(at("10.0.0.3", { sshProfile: "site-c" }), SSH);
    expect(viaC).toEqual({
      host: "10.0.0.3",
      hostKey: HOST_KEY,
      user: "ovslb",
      privateKey: KEY_A,
      connectTimeoutMs: 5000,
      jumpHost: { host: "10.9.0.1", hostKey: HOST_KEY, user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000 },
    });
    const ownJump = withSshDefaults(at("10.0.0.3", { sshProfile: "site-c", jumpHost: at("10.9.0.2", { sshProfile: "site-b" }) }), SSH);
    expect(ownJump.jumpHost).toEqual({ host: "10.9.0.2", hostKey: HOST_KEY, user: "ops", privateKey: KEY_B, port: 2222, connectTimeoutMs: 5000 });
    // A jump host naming the profile whose jump host it is: taken once, no loop.
    const loop = withSshDefaults(at("10.0.0.4", { jumpHost: at("10.9.0.1", { sshProfile: "site-c" }) }), SSH);
    expect(loop.jumpHost).toEqual({ host: "10.9.0.1", hostKey: HOST_KEY, user: "ovslb", privateKey: KEY_A, connectTimeoutMs: 5000 });
  });

  it("is applied once: a resolved connection resolves to itself (the transport resolves what check already did)", () => {
    for (const c of [at("10.0.0.2", { sshProfile: "site-b" }), at("10.0.0.3", { sshProfile: "site-c" }), at("10.0.0.1")]) {
      const once = withSshDefaults(c, SSH);
      expect(withSshDefaults(once, SSH)).toEqual(once);
    }
  });

  it("passes check with only the profile's name in the inputs, never its login", async () => {
    await configure(JSON.stringify(SSH));
    const { inputs, failures } = await check("OvsBridge", {}, bridge(at("10.0.0.2", { sshProfile: "site-b" })));
    expect(failures).toEqual([]);
    expect((inputs as any).host.connection).toEqual({ host: "10.0.0.2", hostKey: HOST_KEY, sshProfile: "site-b" });
    expect(JSON.stringify(inputs)).not.toContain(materialOf(KEY_B));
    expect(JSON.stringify(inputs)).not.toContain("ops");
  });

  it("refuses at check a profile the stack does not have, naming the connection's property (a jump host's too); nothing else is asked of that connection", async () => {
    await configure(JSON.stringify(SSH));
    expect((await check("OvsBridge", {}, bridge(at("10.0.0.2", { sshProfile: "site-x" })))).failures).toEqual([
      { property: "host.connection.sshProfile", reason: 'profile "site-x" is not in ovslb:ssh.profiles' },
    ]);
    expect((await check("OvsBridge", {}, bridge(at("10.0.0.2", { jumpHost: at("10.9.0.9", { sshProfile: "site-x" }) })))).failures).toEqual([
      { property: "host.connection.jumpHost.sshProfile", reason: 'profile "site-x" is not in ovslb:ssh.profiles' },
    ]);
    // Listed connections are named by their place.
    const lb = {
      name: "lb",
      gateways: ["site-b", "site-y"].map((p, i) => ({
        name: `g${i}`,
        host: { connection: at(`10.0.1.${i + 1}`, { sshProfile: p }) },
        bridge: "br-seg",
        segmentPort: "seg0",
        mac: "02:00:0f:00:00:01",
      })),
      hypervisors: [{ name: "hv1" }],
      vips: [
        { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [{ address: "10.0.3.1", port: 8080, mac: "02:00:0a:00:03:01", hypervisor: "hv1" }] },
      ],
    };
    const failures = (await check("DeferredNatLoadBalancer", {}, lb)).failures;
    expect(failures).toContainEqual({ property: "gateways[1].host.connection.sshProfile", reason: 'profile "site-y" is not in ovslb:ssh.profiles' });
    expect(failures.map((f) => f.property).filter((p) => p.startsWith("gateways[0]"))).toEqual([]);
    // No ovslb:ssh at all: no profile either.
    await configure(undefined);
    expect((await check("OvsBridge", {}, bridge(at("10.0.0.2", { sshProfile: "site-b", user: "root", privateKey: KEY_A })))).failures).toEqual([
      { property: "host.connection.sshProfile", reason: 'profile "site-b" is not in ovslb:ssh.profiles' },
    ]);
  });

  it("refuses a name that is not a profile name by the schema", async () => {
    const { failures } = await check("OvsBridge", {}, bridge(at("10.0.0.2", { sshProfile: "Site B" })));
    expect(failures).toContainEqual({
      property: "host.connection.sshProfile",
      reason: expect.stringMatching(/^must be a profile name in the stack's ovslb:ssh\.profiles/),
    });
  });
});

describe("bad values in ovslb:ssh.profiles", () => {
  it("are refused at check, by every resource, naming the profile's config key and the reason, never the value", async () => {
    await configure(
      JSON.stringify({
        user: "root",
        privateKey: KEY_A,
        profiles: { "site-b": { port: 70000, usr: "ops", hostKey: HOST_KEY, privateKey: KEY_B, passphrase: 7 }, Site_C: { user: "x" } },
      }),
    );
    const { failures } = await check("OvsBridge", {}, bridge(at("10.0.0.1", { user: "root", privateKey: KEY_A })));
    expect(failures.map((f) => f.property).sort()).toEqual([
      "ovslb:ssh.profiles.Site_C",
      "ovslb:ssh.profiles.site-b.hostKey",
      "ovslb:ssh.profiles.site-b.passphrase",
      "ovslb:ssh.profiles.site-b.port",
      "ovslb:ssh.profiles.site-b.usr",
    ]);
    expect(failures.find((f) => f.property === "ovslb:ssh.profiles.site-b.usr")!.reason).toBe("is not a known property");
    expect(failures.find((f) => f.property === "ovslb:ssh.profiles.Site_C")!.reason).toMatch(/^must be a name of 1-63 lowercase letters/);
    const text = JSON.stringify(failures);
    expect(text).not.toContain("70000");
    expect(text).not.toContain(materialOf(KEY_A));
    expect(text).not.toContain(materialOf(KEY_B));
    expect(text).not.toContain("ops");
  });

  it("refuse profiles that are not an object of profiles, and a profile that is not an object", async () => {
    await configure(JSON.stringify({ user: "root", profiles: "site-b" }));
    expect((await check("DistributorDevice", {}, {})).failures[0]).toEqual({ property: "ovslb:ssh.profiles", reason: "must be object" });
    await configure(JSON.stringify({ user: "root", profiles: { "site-b": "ops" } }));
    expect((await check("DistributorDevice", {}, {})).failures[0]).toEqual({ property: "ovslb:ssh.profiles.site-b", reason: "must be object" });
  });
});

describe("changing the profile a connection names", () => {
  const b = (sshProfile?: string) => bridge(at("10.0.0.2", sshProfile ? { sshProfile } : {}));

  it("is a change of how the host is reached only, and logs in the profile's way", () => {
    expect(sameInputs(bridgeSchema, b("site-b"), b("site-c"))).toBe(false);
    expect(sameInputs(bridgeSchema, b("site-b"), b("site-c"), { reach: (c) => ({ host: c.host }) })).toBe(true);
    expect(sameInputs(bridgeSchema, b(), b("site-b"), { reach: (c) => ({ host: c.host }) })).toBe(true);
    const [login] = loginsToVerify(bridgeSchema, b("site-b"), (c) => withSshDefaults(c, SSH));
    expect(login).toMatchObject({ host: "10.0.0.2", user: "ops", port: 2222, privateKey: KEY_B });
  });

  it("makes two logins of two hosts, or of one host, reached with two profiles; one of two profiles alike", () => {
    const asUsed = (c: SshConnection) => withSshDefaults(c, { ...SSH, profiles: { ...SSH.profiles, "site-b2": SSH.profiles!["site-b"] } });
    const lb = (profiles: string[]) => ({
      name: "lb",
      gateways: profiles.map((p, i) => ({
        name: `g${i}`,
        host: { connection: at("10.0.1.1", { sshProfile: p }) },
        bridge: "br",
        segmentPort: "s0",
        mac: "02:00:0f:00:00:01",
      })),
      hypervisors: [{ name: "hv1" }],
      vips: [],
    });
    expect(loginsToVerify(dnlbSchema, lb(["site-b", "site-c"]), asUsed).map((c) => c.user)).toEqual(["ops", "ovslb"]);
    expect(loginsToVerify(dnlbSchema, lb(["site-b", "site-b2"]), asUsed).map((c) => c.user)).toEqual(["ops"]);
  });
});

describe("through the handlers, against a listener that counts connections (where the host's SSH would be)", () => {
  // Where the hosts' SSH would be: a listener that counts every connection.
  let listener: CountingListener;
  beforeAll(async () => void (listener = await CountingListener.open()));
  afterAll(() => listener.close());

  const inputs = (sshProfile?: string) => ({
    host: { connection: { host: "127.0.0.1", hostKey: HOST_KEY, ...(sshProfile ? { sshProfile } : {}) } },
    name: "br-prof",
    datapathType: "netdev",
    failMode: "secure",
    externalIds: {},
  });
  const outputsOf = (i: ReturnType<typeof inputs>) => ({
    ...liftCredentials(i).value,
    uuid: "u-1",
    managementSocket: "unix:/run/openvswitch/br-prof.mgmt",
    sshCredentials: {},
  });
  const stack = () => ({
    user: "root",
    privateKey: KEY_A,
    port: listener.port,
    connectTimeoutMs: 2000,
    profiles: { "site-b": { user: "ops", privateKey: KEY_B } },
  });

  it("an update that only changes the profile tries one login the profile's way first (its user named), and records nothing when refused", async () => {
    await configure(JSON.stringify(stack()));
    listener.connections = 0;
    const err = await update("OvsBridge", "br-prof@127.0.0.1", outputsOf(inputs()), inputs("site-b")).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(listener.connections).toBe(1);
    expect(err!.message.startsWith(`ops@127.0.0.1:${listener.port}: OvsBridge br-prof@127.0.0.1: `)).toBe(true);
    expect(err).not.toHaveProperty("properties");
    expect(err!.message).not.toContain(materialOf(KEY_B));
    expect(err!.message).toMatch(/only how the hosts are reached changed/);
  });

  it("a refresh of a resource whose profile is gone from the stack's config is refused naming the host and the profile, before any connection", async () => {
    await configure(JSON.stringify({ ...stack(), profiles: {} }));
    listener.connections = 0;
    await expect(read("OvsBridge", "br-prof@127.0.0.1", outputsOf(inputs("site-b")))).rejects.toThrow(
      /^127\.0\.0\.1:22: profile "site-b" is not in ovslb:ssh\.profiles: no login to use/,
    );
    expect(listener.connections).toBe(0);
  });
});
