import { describe, expect, it } from "vitest";
import dnlbSchema from "../../schema/deferred-nat-load-balancer.json";
import bridgeSchema from "../../schema/ovs-bridge.json";
import type { SshConnection } from "../../provider/model/inputs.generated";
import { loginsToVerify } from "../../provider/model/reach";
import { withSshDefaults } from "../../provider/stack-ssh";

/**
 * The pure half of a reach-only update (provider/model/reach.ts): which
 * logins prove the new connections. One per distinct host, port, user,
 * host-key pin, credentials and jump host; timeouts make no second login.
 */

const KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYnkLOOoqbrVixJRMnImzisJj+rtUPYSUIgzfja1VT1";
const conn = (host: string, extra: Partial<SshConnection> = {}): SshConnection => ({ host, user: "root", hostKey: KEY_A, privateKeyPath: "/k", ...extra });

const gateway = (name: string, connection: SshConnection) => ({ name, host: { connection }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0f:00:00:01" });
const lb = (connections: SshConnection[], northbound?: SshConnection) => ({
  name: "lb",
  gateways: connections.map((c, i) => gateway(`g${i}`, c)),
  hypervisors: [{ name: "hv1" }],
  vips: [],
  ...(northbound ? { ovn: { northbound: { connection: northbound, socket: "/run/ovn/nb.sock" }, router: "lr0" } } : {}),
});

describe("loginsToVerify", () => {
  it("finds a bridge's one connection, as declared", () => {
    expect(loginsToVerify(bridgeSchema, { host: { connection: conn("10.0.0.1") }, name: "br0" })).toEqual([conn("10.0.0.1")]);
  });

  it("finds every connection of a load balancer, the northbound's too, in the order the inputs name them", () => {
    const logins = loginsToVerify(dnlbSchema, lb([conn("10.0.0.1"), conn("10.0.0.2")], conn("10.0.0.9")));
    expect(logins.map((c) => c.host)).toEqual(["10.0.0.1", "10.0.0.2", "10.0.0.9"]);
  });

  it("logs in once where two connections are one login: the same host, port, user, pin, key and jump (timeouts aside)", () => {
    const logins = loginsToVerify(
      dnlbSchema,
      lb([conn("10.0.0.1"), conn("10.0.0.1", { port: 22, connectTimeoutMs: 900 })], conn("10.0.0.1", { commandTimeoutMs: 5000 })),
    );
    expect(logins).toEqual([conn("10.0.0.1")]);
  });

  it.each<[string, Partial<SshConnection>]>([
    ["another port", { port: 2222 }],
    ["another user", { user: "ovslb" }],
    ["another host-key pin", { hostKey: KEY_B }],
    ["known hosts instead of a pin", { hostKey: undefined, knownHosts: `10.0.0.1 ${KEY_A}` }],
    ["an inline key", { privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n" }],
    ["a passphrase", { passphrase: "pass" }],
    ["an agent", { agent: "/run/agent.sock" }],
    ["a jump host", { jumpHost: conn("10.0.0.50") }],
  ])("logs in twice to one host reached two ways: %s", (_what, extra) => {
    const other = { ...conn("10.0.0.1"), ...extra };
    expect(loginsToVerify(dnlbSchema, lb([conn("10.0.0.1"), other]))).toEqual([conn("10.0.0.1"), other]);
  });

  it("tells jump hosts apart by their own pin", () => {
    const a = conn("10.0.0.1", { jumpHost: conn("10.0.0.50") });
    const b = conn("10.0.0.1", { jumpHost: conn("10.0.0.50", { hostKey: KEY_B }) });
    expect(loginsToVerify(dnlbSchema, lb([a, b, a]))).toEqual([a, b]);
  });

  it("logs in with each connection as the transport uses it: the stack's ovslb:ssh under it, so settings it fills in make two declarations one login", () => {
    const asUsed = (c: SshConnection) => withSshDefaults(c, { user: "ovslb", privateKey: "KEY", jumpHost: { host: "10.0.0.50", hostKey: KEY_B } });
    const bare = { host: "10.0.0.1", hostKey: KEY_A };
    const logins = loginsToVerify(dnlbSchema, lb([bare, { ...bare, user: "ovslb" }]), asUsed);
    expect(logins).toEqual([{ ...bare, user: "ovslb", privateKey: "KEY", jumpHost: { host: "10.0.0.50", hostKey: KEY_B, user: "ovslb", privateKey: "KEY" } }]);
  });

  it("finds none in inputs without connections, and changes nothing in the inputs", () => {
    expect(loginsToVerify(dnlbSchema, { name: "lb" })).toEqual([]);
    const inputs = lb([conn("10.0.0.1")]);
    const copy = structuredClone(inputs);
    loginsToVerify(dnlbSchema, inputs, (c) => ({ ...c, user: "changed" }));
    expect(inputs).toEqual(copy);
  });
});
