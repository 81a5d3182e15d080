import { describe, expect, it } from "vitest";
import { asLists, check, diff } from "../../provider/handlers";
import { FIXTURE_KINDS, loadFixture } from "../support/state-fixtures";

/**
 * The diff rules, on every kind's recorded state (test/fixtures/state: what
 * real stacks hold): the recorded inputs are no change; changing any one
 * value is an in-place update, except a value of the resource's identity,
 * which alone is a replace; reordering a list whose order means nothing is
 * no change (test/unit/unordered-lists.test.ts has the sets themselves).
 */

type Json = unknown;

/** Every leaf of a value, by path ("vips[0].backends[1].port"). */
function leaves(v: Json, path = "", out: { path: string; value: Json }[] = []): { path: string; value: Json }[] {
  if (Array.isArray(v)) v.forEach((x, i) => leaves(x, `${path}[${i}]`, out));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) leaves(x, path ? `${path}.${k}` : k, out);
  else out.push({ path, value: v });
  return out;
}

/** A copy of `v` with the leaf at `path` replaced. */
function withLeaf(v: Json, path: string, value: Json): Json {
  const copy = structuredClone(v) as Record<string, Json>;
  const steps = path.match(/[^.[\]]+/g)!;
  let at = copy;
  for (const s of steps.slice(0, -1)) at = at[s] as Record<string, Json>;
  at[steps.at(-1)!] = value;
  return copy;
}

const changed = (v: Json): Json => (typeof v === "number" ? v + 1 : typeof v === "boolean" ? !v : `${String(v)}x`);

/** The identity each kind replaces on: top-level names, or dotted paths into the host. */
const IDENTITY: Record<string, string[]> = {
  OvsBridge: ["host.connection.host", "name"],
  DsrHypervisorFlows: ["name", "host.connection.host", "bridge"],
  DeferredNatLoadBalancer: ["name"],
  DistributorDevice: ["host.connection.host", "deviceId"],
  // Its own bridge is patched to the uplink bridge, and the segment knows it by its frontend MAC.
  DistributorAttachment: ["host.connection.host", "deviceId", "uplinkBridge", "attachmentId", "frontendMac"],
  // Its health checks attach to the load balancer's rows, and its id and owner mark are the load balancer's name.
  HealthCheck: ["loadBalancer"],
};

/** Every kind: the ones with a state fixture, and HealthCheck (added after the fixtures were recorded). */
const KINDS = [...FIXTURE_KINDS, "HealthCheck"] as const;

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, port: 22, user: "root", hostKey: HOST_KEY, privateKeyPath: "/k" });

/**
 * HealthCheck has no state fixture yet: its state as the engine would hold it after a create, from checked
 * inputs that use every property (the outputs are the inputs, the provider text, no credentials and its own outputs).
 */
async function healthCheckState(): Promise<{ id: string; inputs: Record<string, Json>; outputs: Record<string, Json> }> {
  const given = {
    loadBalancer: "web",
    northbound: { connection: conn("172.30.0.10"), socket: "/run/ovn/ovnnb_db.sock" },
    southbound: { connection: conn("172.30.0.10"), socket: "/run/ovn/ovnsb_db.sock" },
    sourceIp: "10.0.0.254",
    vips: [{ address: "10.0.0.193", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080, logicalPort: "lsp-1", hypervisor: "hv1" }] }],
    probe: { interval: 7, timeout: 3, successCount: 2, failureCount: 2 },
    enforce: true,
    gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11"), ovsRundir: "/var/run/openvswitch" }, bridge: "br-seg" }],
  };
  const checked = await check("HealthCheck", {}, given);
  expect(checked.failures).toEqual([]);
  const inputs = { ...(asLists("HealthCheck", checked.inputs) as Record<string, Json>), __provider: "provider text" };
  return {
    id: "health-check/web",
    inputs,
    outputs: { ...inputs, sshCredentials: {}, drift: [], driftFindings: [], health: [], stale: [], bfdGateways: ["gw1"] },
  };
}

const stateOf = async (kind: (typeof KINDS)[number]) => (kind === "HealthCheck" ? healthCheckState() : loadFixture(kind));

describe.each(KINDS)("%s", (kind) => {
  it("the recorded inputs against the recorded state: no change", async () => {
    const f = await stateOf(kind);
    expect(await diff(kind, f.id, f.outputs, f.inputs)).toEqual({ changes: false });
  });

  it("any one value changed: an update in place, or a replace naming exactly the identity it changed", async () => {
    const f = await stateOf(kind);
    const { __provider: _text, ...inputs } = f.inputs as Record<string, Json>;
    const all = leaves(inputs).filter((l) => l.value !== null);
    expect(all.length).toBeGreaterThan(3);
    for (const { path, value } of all) {
      const result = await diff(kind, f.id, f.outputs, { ...(withLeaf(inputs, path, changed(value)) as object), __provider: _text });
      const identity = IDENTITY[kind].filter((k) => k === path);
      expect({ path, changes: result.changes, replaces: result.replaces ?? [] }).toEqual({ path, changes: true, replaces: identity });
    }
  });
});

describe("identity", () => {
  it("covers what each kind's handler replaces on, and nothing else", async () => {
    for (const kind of KINDS) {
      const f = await stateOf(kind);
      const replacedOn = new Set<string>();
      for (const { path, value } of leaves(f.inputs).filter((l) => !l.path.startsWith("__provider"))) {
        const r = await diff(kind, f.id, f.outputs, withLeaf(f.inputs, path, changed(value)) as Record<string, unknown>);
        for (const k of r.replaces ?? []) replacedOn.add(k);
      }
      expect([...replacedOn].sort(), kind).toEqual([...IDENTITY[kind]].filter((k) => leaves(f.inputs).some((l) => l.path === k)).sort());
    }
  });
});
