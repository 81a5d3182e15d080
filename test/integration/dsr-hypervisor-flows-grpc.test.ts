import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asLists } from "../../provider/handlers";
import { readFileSync } from "node:fs";
import { DsrHypervisorFlows } from "../../index";
import { cookieOf } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { parseFlows } from "../../provider/openflow";
import { type SshSession } from "../../provider/transport/ssh";
import type { LabBackend, LabInventory } from "../lab/topology";
import { labSsh, inNamespace, loadInventory } from "../support/lab";
import { TcpClients } from "../support/tcp-clients";
import { registeredInputs, startProviderPlugin, unwrapSecrets, type PluginCall } from "../support/provider-plugin";

/**
 * The engine boundary for DsrHypervisorFlows: the provider serialized by a
 * real program run, driven through the real dynamic-provider plugin over gRPC
 * against hv2, with a real connection through the VIP.
 */

const TYPE = "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows";
const VIP = "10.0.0.222";
type Props = Record<string, any>;

let inv: LabInventory;
let plugin: PluginCall;
let hv2: SshSession;
let vm3: LabBackend;
let vm4: LabBackend;
let id: string;

const flowsOf = async (cookie: bigint) =>
  parseFlows((await hv2.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-flows", "br-seg", `cookie=0x${cookie.toString(16)}/-1`])).stdout);

/** One connection from the client namespace: the greeting and the peer the client sees. */
async function connect(target: string): Promise<{ greeting: string; peer: string }> {
  const clients = await TcpClients.open(inv.client.namespace, [target], { greetingTimeoutMs: 10_000 });
  clients.close();
  const [c] = clients.connections;
  if (c.error) throw new Error(`connection to ${target}: ${c.error}`);
  return { greeting: c.greeting, peer: c.remote };
}

beforeAll(async () => {
  inv = loadInventory();
  plugin = await startProviderPlugin({ urn: "urn:pulumi:stack::project::pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows::t" });
  hv2 = await labSsh(inv, "hv2");
  vm3 = inv.backends.find((b) => b.name === "hv2-vm3")!;
  vm4 = inv.backends.find((b) => b.name === "hv2-vm4")!;
});

afterAll(async () => {
  try {
    inNamespace(inv.client.namespace, ["ip", "neigh", "del", VIP, "dev", "eth0"]);
  } catch {
    // not pinned
  }
  if (hv2 && id) await hv2.run(["ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-seg", `cookie=0x${cookieOf(id).toString(16)}/-1`]);
  hv2?.close();
  plugin?.stop();
});

describe("DsrHypervisorFlows through the dynamic-provider plugin over gRPC", () => {
  let program: Props;
  let outputs: Props;

  it("serializes a thin provider; check refuses bad input by property and fills defaults", async () => {
    const h = inv.hosts.hv2;
    const backend = (b: LabBackend) => ({ address: b.address, port: inv.backendPort, mac: b.mac.toUpperCase(), bridgePort: b.port });
    const registered = await registeredInputs(TYPE, () => {
      new DsrHypervisorFlows("t", {
        name: "dsr-grpc",
        host: {
          connection: { host: h.address, user: h.user, hostKey: h.hostKey, privateKey: readFileSync(inv.clientKeyPath, "utf8") },
          ovsRundir: h.ovsRundir,
        },
        bridge: "br-seg",
        vips: [{ address: VIP, port: 80, protocol: "tcp", backends: [backend(vm3), backend(vm4)] }],
      });
    });
    const secretPaths: string[] = [];
    program = unwrapSecrets(registered, secretPaths);
    expect(secretPaths.some((p) => "host.connection.privateKey".startsWith(p))).toBe(true);
    expect(program.__provider).toContain('kind: "DsrHypervisorFlows"');
    expect(program.__provider).not.toMatch(/SshSession|OpenFlowBridge|desiredFlows/);

    const bad = structuredClone(program);
    bad.vips[0].backends.push({ ...bad.vips[0].backends[0] });
    bad.vips.push({ address: vm3.address, port: 80, backends: [{ ...bad.vips[0].backends[1], address: "10.0.0.300" }] });
    const { failures } = await plugin.check({}, bad);
    expect(failures).toEqual([{ property: "vips[1].backends[0].address", reason: expect.stringMatching(/IPv4 address/) }]);
    bad.vips.pop();
    expect((await plugin.check({}, bad)).failures).toEqual([
      { property: "vips[0].backends[2]", reason: "duplicates vips[0].backends[0]: the same address and port" },
    ]);

    const checked = await plugin.check({}, program);
    expect(checked.failures).toEqual([]);
    expect(checked.inputs.mode).toBe("mac");
    program = { ...asLists("DsrHypervisorFlows", checked.inputs), __provider: checked.inputs.__provider };
    expect(program.vips[0].backends[0].mac).toBe(vm3.mac);
  });

  it("create programs hv2: a client reaches the VIP and gets the backend's answer with source = VIP", async () => {
    const created = await plugin.create(program);
    id = created.id;
    outputs = created.properties;
    expect(id).toBe(`dsr-hypervisor-flows/${inv.hosts.hv2.address}/br-seg/dsr-grpc`);
    expect(outputs.host.connection.privateKey).toBeUndefined();
    expect(JSON.stringify(outputs)).not.toContain("PRIVATE KEY-----\n");
    expect(Object.keys(outputs.ofports).sort()).toEqual(["vm3", "vm4"]);
    expect((await flowsOf(cookieOf(id))).length).toBe(7); // 2 requests, 2 deliveries, 2 replies, the forward

    inNamespace(inv.client.namespace, ["ip", "neigh", "replace", VIP, "lladdr", vm4.mac, "dev", "eth0", "nud", "permanent"]);
    const answer = await connect(`${VIP}:80`);
    expect(answer.peer).toBe(`${VIP}:80`);
    expect(answer.greeting).toMatch(new RegExp(`^hv2-vm4 (::ffff:)?10\\.0\\.0\\.2:\\d+ (::ffff:)?${vm4.address}:8080$`));
  });

  it("diff is none for the same inputs; a hand-deleted reply flow reads as that backend missing; update restores it", async () => {
    expect((await plugin.diff(id, outputs, program)).changes).toBe("none");
    const r = await hv2.run([
      "ovs-ofctl",
      "-O",
      "OpenFlow15",
      "del-flows",
      "--strict",
      "br-seg",
      `priority=1000,cookie=0x${cookieOf(id).toString(16)}/-1,ct_state=-trk,tcp,in_port=${outputs.ofports.vm3},nw_src=${vm3.address},tp_src=8080`,
    ]);
    expect(r.exitCode).toBe(0);
    const drifted = await plugin.read(id, outputs);
    expect((asLists("DsrHypervisorFlows", drifted.inputs) as Props).vips[0].backends.map((b: Props) => b.bridgePort)).toEqual(["vm4"]);
    expect((await plugin.diff(id, drifted.properties, program)).changes).toBe("some");
    expect((await plugin.diff(id, drifted.properties, program)).replaces).toEqual([]);

    const updated = await plugin.update(id, drifted.properties, program);
    outputs = updated.properties;
    expect((await flowsOf(cookieOf(id))).length).toBe(7); // 2 requests, 2 deliveries, 2 replies, the forward
    const again = await plugin.read(id, outputs);
    expect((await plugin.diff(id, again.properties, program)).changes).toBe("none");
  });

  it("a bridge change is a replace; delete removes its flows, is idempotent, and read reports it gone", async () => {
    expect((await plugin.diff(id, outputs, { ...program, bridge: "br-phy" })).replaces).toEqual(["bridge"]);
    await plugin.delete(id, outputs);
    expect(await flowsOf(cookieOf(id))).toEqual([]);
    await plugin.delete(id, outputs);
    expect((await plugin.read(id, outputs)).id).toBe("");
    const normal = parseFlows((await hv2.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-flows", "br-seg"])).stdout);
    expect(normal.filter((f) => f.priority === 0).map((f) => f.actions)).toEqual([[{ type: "other", text: "NORMAL" }]]);
  });
});
