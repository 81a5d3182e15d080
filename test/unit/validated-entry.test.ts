import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:net";
import { handle } from "../../provider/handlers";
import type { Kind } from "../support/fuzz-inputs";

/**
 * No input reaches a host unvalidated (issue 13): create, update, read and
 * delete called straight through the provider's one entry point, with a
 * connection pointing at a TCP listener this test owns, refuse bad inputs
 * before any connection is made: the listener counts none. The same inputs
 * made valid do connect (the count moves), so the test can fail.
 */

let server: Server;
let port = 0;
let connections = 0;

beforeAll(async () => {
  server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const connection = () => ({
  host: "127.0.0.1",
  port,
  user: "ovslb",
  hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAetyAmvoSVFtDMYSfCKth7WDDnRIZSe672y/GwQiADl",
  agent: "/nonexistent/ovslb-test-agent.sock",
  connectTimeoutMs: 2000,
});
const host = () => ({ connection: connection() });

/** A valid input of each kind, and one value that must be refused, at the property named. */
const CASES: Record<Kind, { valid: () => Record<string, unknown>; bad: (v: Record<string, any>) => void; property: string }> = {
  OvsBridge: {
    valid: () => ({ host: host(), name: "br-fuzz" }),
    bad: (v) => (v.name = "br0,actions=drop"),
    property: "name",
  },
  DsrHypervisorFlows: {
    valid: () => ({
      name: "fuzz",
      host: host(),
      bridge: "br-seg",
      vips: [{ address: "10.0.0.100", port: 80, backends: [{ address: "10.0.0.21", port: 8080, mac: "02:00:0a:00:00:15", bridgePort: "vm1" }] }],
    }),
    bad: (v) => (v.vips[0].address = "10.0.0.1,actions=drop"),
    property: "vips[0].address",
  },
  DeferredNatLoadBalancer: {
    valid: () => ({
      name: "fuzz",
      gateways: [{ name: "gw1", host: host(), bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
      hypervisors: [{ name: "hv1" }],
      vips: [
        { address: "10.0.0.100", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.21", port: 8080, mac: "02:00:0a:00:00:15", hypervisor: "hv1" }] },
      ],
    }),
    bad: (v) => (v.vips[0].backends[0].port = 1.5),
    property: "vips[0].backends[0].port",
  },
  DistributorDevice: {
    valid: () => ({ host: host(), deviceId: "dev-fuzz", uplinkBridge: "br-seg" }),
    bad: (v) => (v.host.ovsRundir = "/var/run/openvswitch;reboot"),
    property: "host.ovsRundir",
  },
  DistributorAttachment: {
    valid: () => ({
      host: host(),
      deviceId: "dev-fuzz",
      uplinkBridge: "br-seg",
      attachmentId: "lb-fuzz",
      vip: "10.0.0.100",
      amphorae: [{ name: "a1", mac: "02:00:00:00:00:01", role: "active", slot: 1 }],
    }),
    bad: (v) => Object.defineProperty(v.amphorae[0], "__proto__", { value: { role: "active" }, enumerable: true }),
    property: "amphorae[0].__proto__",
  },
  HealthCheck: {
    valid: () => ({
      loadBalancer: "fuzz",
      northbound: { connection: connection(), socket: "/run/ovn/ovnnb_db.sock" },
      sourceIp: "10.0.0.254",
      vips: [{ address: "10.0.0.100", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.21", port: 8080, logicalPort: "lsp-1" }] }],
    }),
    bad: (v) => (v.northbound.socket = "/run/ovn/ovnnb_db.sock;reboot"),
    property: "northbound.socket",
  },
};

const bad = (kind: Kind) => {
  const v = CASES[kind].valid();
  CASES[kind].bad(v);
  return v;
};

describe.each(Object.keys(CASES) as Kind[])("%s through handle()", (kind) => {
  const refusal = new RegExp(`refused before contacting any host: .*${CASES[kind].property.replace(/[[\]().*"]/g, "\\$&")}: `);

  it("create, update, read and delete refuse a bad input naming the property, and open no connection", async () => {
    const before = connections;
    await expect(handle(kind, "create", [bad(kind)])).rejects.toThrow(refusal);
    // The refusal names the property, never the value given.
    await expect(handle(kind, "create", [bad(kind)])).rejects.not.toThrow(/actions=drop|reboot|1\.5/);
    await expect(handle(kind, "update", ["id", CASES[kind].valid(), bad(kind)])).rejects.toThrow(refusal);
    // Recorded inputs (state) that were tampered with are refused too.
    await expect(handle(kind, "update", ["id", bad(kind), CASES[kind].valid()])).rejects.toThrow(refusal);
    await expect(handle(kind, "read", ["id", bad(kind)])).rejects.toThrow(refusal);
    await expect(handle(kind, "delete", ["id", bad(kind)])).rejects.toThrow(refusal);
    expect(connections - before).toBe(0);
  });

  it("the same input made valid does reach the listener (so the count can move)", async () => {
    const before = connections;
    await expect(handle(kind, "create", [CASES[kind].valid()])).rejects.toThrow(/127\.0\.0\.1/);
    expect(connections - before).toBeGreaterThan(0);
  });
});
