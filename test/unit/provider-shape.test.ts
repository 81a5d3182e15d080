import { describe, it, expect } from "vitest";
import { check, diff } from "../../provider/handlers";
import { liftCredentials, restoreCredentials } from "../../provider/secrets";
import deferredNatSchema from "../../schema/deferred-nat-load-balancer.json";
import { validateAgainstSchema } from "../../provider/model/validate";
import bridgeSchema from "../../schema/ovs-bridge.json";

const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const inputs = () => ({
  host: { connection: { host: "172.30.0.11", user: "root", hostKey: KEY, privateKey: "-----BEGIN KEY-----x" } },
  name: "br-lb",
});

describe("check", () => {
  it("names every bad property with the reason, never the value", async () => {
    const bad = {
      host: { connection: { host: "a b", user: "Root", hostKey: "rsa zzz", port: 70000, bogus: 1 } },
      name: "br0,actions=drop",
      failMode: "open",
    };
    const { failures } = await check("OvsBridge", {}, bad);
    const props = failures.map((f) => f.property).sort();
    expect(props).toEqual([
      "failMode",
      "host.connection.bogus",
      "host.connection.host",
      "host.connection.hostKey",
      "host.connection.port",
      "host.connection.user",
      "name",
    ]);
    expect(failures.find((f) => f.property === "failMode")!.reason).toBe('must be one of "secure", "standalone"');
    expect(failures.find((f) => f.property === "host.connection.port")!.reason).toMatch(/SSH port/);
    expect(JSON.stringify(failures)).not.toContain("actions=drop");
  });

  it("reports a missing required property by its full path", () => {
    const failures = validateAgainstSchema(bridgeSchema, { host: { connection: { host: "h" } } });
    expect(failures).toContainEqual({ property: "name", reason: "is required" });
  });

  it("requires a login name, which may come from the stack's ovslb:ssh instead", async () => {
    const { user: _none, ...withoutUser } = inputs().host.connection;
    const { failures } = await check("OvsBridge", {}, { ...inputs(), host: { connection: withoutUser } });
    expect(failures).toEqual([{ property: "host.connection.user", reason: "is required: give it here or in the stack's ovslb:ssh" }]);
  });

  it("lets values unknown during preview through, and fills defaults once all are known", async () => {
    const preview = { ...inputs(), name: UNKNOWN };
    expect((await check("OvsBridge", {}, preview)).failures).toEqual([]);
    const { inputs: checked } = await check("OvsBridge", {}, inputs());
    expect(checked).toMatchObject({ datapathType: "netdev", failMode: "secure", externalIds: {} });
  });

  it("refuses an unknown resource kind clearly", async () => {
    await expect(check("Nope", {}, {})).rejects.toThrow(/unknown resource kind "Nope"/);
  });
});

describe("diff", () => {
  const outputsOf = (i: ReturnType<typeof inputs>) => {
    const { value, credentials } = liftCredentials(i);
    return { ...value, datapathType: "netdev", failMode: "secure", externalIds: {}, uuid: "u", sshCredentials: credentials };
  };
  const full = () => ({ ...inputs(), datapathType: "netdev", failMode: "secure", externalIds: {} });

  it("compares recorded inputs (credentials restored) with the new inputs", async () => {
    expect(await diff("OvsBridge", "id", outputsOf(inputs()), full())).toEqual({ changes: false });
    const rotated = full();
    rotated.host.connection.privateKey = "-----BEGIN KEY-----y";
    expect(await diff("OvsBridge", "id", outputsOf(inputs()), rotated)).toEqual({ changes: true, replaces: [], deleteBeforeReplace: false });
  });

  it("replaces only on identity: the host's address or the bridge name", async () => {
    const moved = full();
    moved.host.connection.host = "172.30.0.12";
    expect((await diff("OvsBridge", "id", outputsOf(inputs()), moved)).replaces).toEqual(["host.connection.host"]);
    const portChange = full() as any;
    portChange.host.connection.port = 2222;
    expect((await diff("OvsBridge", "id", outputsOf(inputs()), portChange)).replaces).toEqual([]);
  });
});

describe("credentials", () => {
  it("are lifted out of nested connections and restored in place", () => {
    const v = { gateways: [{ connection: { host: "a", privateKey: "k1", jumpHost: { host: "j", passphrase: "p" } } }] };
    const { value, credentials } = liftCredentials(v);
    expect(JSON.stringify(value)).not.toMatch(/k1|"p"/);
    expect(credentials).toEqual({ "gateways[0].connection": { privateKey: "k1" }, "gateways[0].connection.jumpHost": { passphrase: "p" } });
    expect(restoreCredentials(value, credentials)).toEqual(v);
  });

  it("with the resource's schema, lift walks only where a connection can be and shares the rest; restore copies only the paths", () => {
    const connection = {
      host: "172.30.0.11",
      user: "root",
      hostKey: "k",
      privateKey: "KEY-1",
      jumpHost: { host: "j", user: "u", hostKey: "k", passphrase: "PW" },
    };
    const backends = [{ address: "10.1.0.1", port: 80, mac: "02:00:00:00:00:01", hypervisor: "hv1", privateKey: "not-a-credential-here" }];
    const lb = {
      name: "web",
      gateways: [{ name: "gw1", host: { connection }, bridge: "br", segmentPort: "p", mac: "02:00:0a:00:00:0b" }],
      hypervisors: [{ name: "hv1" }],
      vips: [{ address: "10.0.0.1", port: 80, protocol: "tcp", backends }],
    };
    const { value, credentials } = liftCredentials(lb, deferredNatSchema);
    expect(credentials).toEqual({ "gateways[0].host.connection": { privateKey: "KEY-1" }, "gateways[0].host.connection.jumpHost": { passphrase: "PW" } });
    expect(JSON.stringify(value)).not.toMatch(/KEY-1|PW/);
    // No connection under the VIPs: they are shared, not copied (nor walked: a field there is not a connection's).
    expect(value.vips).toBe(lb.vips);
    // The same lift as the schema-free walk wherever a connection can be.
    expect(value.gateways).toEqual(liftCredentials({ gateways: lb.gateways }).value.gateways);
    const before = JSON.stringify(value);
    const restored = restoreCredentials(value, credentials);
    expect(restored).toEqual(lb);
    expect(JSON.stringify(value)).toBe(before);
    expect(restored.vips).toBe(value.vips);
    expect(restoreCredentials(value, { "gateways[5].host.connection": { privateKey: "x" }, "nowhere.at.all": { passphrase: "y" } })).toEqual(value);
  });
});
