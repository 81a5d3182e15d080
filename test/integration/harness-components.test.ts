import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { Harness, HarnessError, type Result, type Step } from "../harness/engine";
import { asLists } from "../../provider/handlers";
import { runChecked } from "../../provider/transport/exec";
import { derivedFrontendMac } from "../../provider/resources/distributor-attachment/plan";
import { greKeyOf } from "../../provider/resources/deferred-nat-load-balancer/plan";
import type { LabInventory } from "../lab/topology";
import { labSsh, loadInventory } from "../support/lab";
import { removeTempProject, stackConfigYaml, tempProject } from "../support/temp-project";

/**
 * Each component as `pulumi preview` sees it, through the test harness: the
 * real program runner and the real dynamic-provider plugin (check and
 * nothing else, so no host is touched). Checks the component's type token,
 * its children (each parented to it) and the children's inputs as derived
 * from the component's arguments. Needs `npm run build`. Then a component
 * fed by another resource's Outputs, applied on the lab (up, no change on a
 * second preview, destroy), and refused by name when a resolved value is bad.
 */

const fixture = resolve(__dirname, "..", "fixtures", "harness", "components");
const DYNAMIC = "pulumi-nodejs:dynamic/ovslb:";
const projects: string[] = [];
let inv: LabInventory;

const host = (name: string) => {
  const h = inv.hosts[name];
  return { connection: { host: h.address, port: h.sshPort, user: h.user, hostKey: h.hostKey, privateKeyPath: inv.clientKeyPath }, ovsRundir: h.ovsRundir };
};

async function preview(config: Record<string, unknown>): Promise<Result> {
  const dir = tempProject(fixture, { "Pulumi.dev.yaml": stackConfigYaml(config) });
  projects.push(dir);
  const stack = await Harness.open({ cwd: dir });
  return stack.preview();
}

const urn = (qualifiedType: string, name: string) => `urn:pulumi:dev::harness-components::${qualifiedType}::${name}`;
const STACK = urn("pulumi:pulumi:Stack", "harness-components-dev");
/** A component's children's steps, by name: they come in the order their registrations were answered, which means nothing. */
const nameOf = (s: Step) => s.urn.split("::").pop()!;
/** A custom resource's step with its checked inputs as lists (check keys each set by identity: provider/model/keyed.ts). */
const listed = (s: Step): Step => (s.custom && s.inputs ? { ...s, inputs: asLists(s.type.split(":").at(-1)!, s.inputs) } : s);
const children = (r: Result, parent: string): Step[] =>
  r.steps
    .filter((s) => s.parent === parent)
    .sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : 1))
    .map(listed);

beforeAll(() => {
  inv = loadInventory();
});

afterAll(() => projects.forEach(removeTempProject));

describe("components through the harness (preview)", () => {
  it("DeferredNatService: the load balancer and one DsrHypervisorFlows per hypervisor with backends, all its children", async () => {
    const backend = (name: string) => {
      const vm = inv.backends.find((b) => b.name === name)!;
      return { address: vm.address, port: inv.backendPort, mac: vm.mac, hypervisor: vm.hypervisor, bridgePort: vm.port };
    };
    const args = {
      delivery: "gre",
      gateways: ["gw1", "gw2"].map((g) => ({
        name: g,
        host: host(g),
        bridge: "br-seg",
        segmentPort: "seg0",
        mac: inv.hosts[g].segment!.mac,
        tunnelAddress: inv.hosts[g].underlay!.address,
      })),
      hypervisors: ["hv1", "hv2", "hv3"].map((h) => ({ name: h, host: host(h), bridge: "br-seg", tunnelAddress: inv.hosts[h].underlay!.address })),
      vips: [{ address: "10.0.0.230", port: 80, protocol: "tcp", backends: ["hv1-vm1", "hv1-vm2", "hv2-vm1"].map(backend) }],
    };
    const r = await preview({ component: "DeferredNatService", args });
    const svc = urn("ovslb:index:DeferredNatService", "svc");
    const component = r.steps.find((s) => s.urn === svc)!;
    expect(component).toMatchObject({ type: "ovslb:index:DeferredNatService", op: "create", custom: false, parent: STACK });
    const kids = children(r, svc);
    expect(kids.map((k) => [k.type, nameOf(k)])).toEqual([
      [`${DYNAMIC}DeferredNatLoadBalancer`, "svc"],
      [`${DYNAMIC}DsrHypervisorFlows`, "svc-hv1"],
      [`${DYNAMIC}DsrHypervisorFlows`, "svc-hv2"],
    ]);
    // hv3 hosts no backend: no flows there. Nothing else in the stack.
    expect(r.steps.filter((s) => s.custom).length).toBe(3);
    for (const k of kids) expect(k.urn).toContain("ovslb:index:DeferredNatService$pulumi-nodejs:dynamic/ovslb:");
    const [lb, hv1, hv2] = kids;
    expect(hv1.inputs).toMatchObject({
      name: "svc",
      bridge: "br-seg",
      mode: "gre",
      host: { connection: { host: inv.hosts.hv1.address } },
      gre: { allowedSources: [inv.hosts.gw1.underlay!.address, inv.hosts.gw2.underlay!.address], key: greKeyOf({ name: "svc" }) },
    });
    expect(hv1.inputs!.vips).toEqual([
      { address: "10.0.0.230", port: 80, protocol: "tcp", backends: [backend("hv1-vm1"), backend("hv1-vm2")].map(({ hypervisor: _h, ...b }) => b) },
    ]);
    expect(hv2.inputs!.vips[0].backends.map((b: any) => b.bridgePort)).toEqual([backend("hv2-vm1").bridgePort]);
    expect(lb.inputs).toMatchObject({ name: "svc", delivery: "gre" });
    expect(lb.inputs!.gateways.map((g: any) => [g.name, g.tunnelAddress])).toEqual(args.gateways.map((g) => [g.name, g.tunnelAddress]));
    expect(lb.inputs!.hypervisors).toEqual(args.hypervisors.map((h) => ({ name: h.name, tunnelAddress: h.tunnelAddress })));
    // The gateways' backends lose the hypervisor port (only the hypervisor's flows need it).
    expect(lb.inputs!.vips[0].backends).toEqual(args.vips[0].backends.map(({ bridgePort: _p, ...b }) => ({ ...b, weight: 1 })));
    // The hypervisors' flows come first: the load balancer depends on them.
    expect(lb.dependencies).toEqual(expect.arrayContaining([hv1.urn, hv2.urn]));
  });

  it("TransparentDsr: one gre DsrHypervisorFlows per hypervisor with backends, the balancer's GRE settings on each", async () => {
    const loadBalancer = { allowedSources: [inv.l3dsr!.underlay.address], key: 4242 };
    const args = {
      loadBalancer,
      hypervisors: ["hv1", "hv2"].map((h) => ({ name: h, host: host(h), bridge: "br-phy" })),
      vips: [
        {
          address: "10.0.0.180",
          port: 80,
          protocol: "tcp",
          backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", hypervisor: "hv2", bridgePort: "vm1" }],
        },
      ],
    };
    const r = await preview({ component: "TransparentDsr", args });
    const tdsr = urn("ovslb:index:TransparentDsr", "tdsr");
    expect(r.steps.find((s) => s.urn === tdsr)).toMatchObject({ type: "ovslb:index:TransparentDsr", custom: false, parent: STACK });
    const kids = children(r, tdsr);
    expect(kids.map((k) => [k.type, k.urn.split("::").pop()])).toEqual([[`${DYNAMIC}DsrHypervisorFlows`, "tdsr-hv2"]]);
    expect(kids[0].inputs).toMatchObject({
      name: "tdsr",
      bridge: "br-phy",
      mode: "gre",
      gre: loadBalancer,
      host: { connection: { host: inv.hosts.hv2.address } },
      vips: [
        { address: "10.0.0.180", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" }] },
      ],
    });
  });

  it("ActiveActiveLoadBalancer: one DistributorAttachment per device, parented to it, slots filled, depending on its device", async () => {
    const device = (name: string, i: number) => ({ device: { host: host(name), deviceId: `dist${i}`, uplinkBridge: "br-up" }, nextHop: `10.20.0.${10 + i}` });
    const amphorae = [
      { name: "amp1", mac: "02:00:00:00:a0:01", role: "active", hypervisor: "hv1" },
      { name: "amp2", mac: "02:00:00:00:a0:02", role: "active", hypervisor: "hv2" },
      { name: "amp3", mac: "02:00:00:00:a0:03", role: "standby", hypervisor: "hv3" },
    ];
    const r = await preview({
      component: "ActiveActiveLoadBalancer",
      args: { loadBalancerId: "lb-harness", vip: "10.20.0.100", amphorae },
      devices: [device("dist1", 1), device("dist2", 2)],
    });
    const aa = urn("ovslb:index:ActiveActiveLoadBalancer", "aa");
    expect(r.steps.find((s) => s.urn === aa)).toMatchObject({ type: "ovslb:index:ActiveActiveLoadBalancer", custom: false, parent: STACK });
    const kids = children(r, aa);
    expect(kids.map((k) => [k.type, k.urn.split("::").pop()])).toEqual([
      [`${DYNAMIC}DistributorAttachment`, "aa-attachment-10.20.0.11"],
      [`${DYNAMIC}DistributorAttachment`, "aa-attachment-10.20.0.12"],
    ]);
    // The devices are the program's, not the component's.
    for (const d of ["dev1", "dev2"]) expect(r.steps.find((s) => s.urn === urn(`${DYNAMIC}DistributorDevice`, d))!.parent).toBe(STACK);
    kids.forEach((k, i) => {
      expect(k.inputs).toMatchObject({
        host: { connection: { host: inv.hosts[`dist${i + 1}`].address } },
        deviceId: `dist${i + 1}`,
        uplinkBridge: "br-up",
        attachmentId: "lb-harness",
        loadBalancerId: "lb-harness",
        vip: "10.20.0.100",
        nextHop: `10.20.0.${11 + i}`,
        frontendMac: derivedFrontendMac(`lb-harness/10.20.0.${11 + i}`),
      });
      // Active amphorae get the lowest free slots; placement is the component's check, not an input.
      expect(k.inputs!.amphorae).toEqual([
        { name: "amp1", mac: "02:00:00:00:a0:01", role: "active", slot: 1 },
        { name: "amp2", mac: "02:00:00:00:a0:02", role: "active", slot: 2 },
        { name: "amp3", mac: "02:00:00:00:a0:03", role: "standby" },
      ]);
      expect(k.dependencies).toContain(urn(`${DYNAMIC}DistributorDevice`, `dev${i + 1}`));
    });
  });
});

describe("a component fed by Outputs (up on the lab)", () => {
  const VIP = "10.0.0.176";
  const SOURCE_BRIDGE = "br-cmp-out";
  let dir: string;
  let stack: Harness;
  const lab = (backendAddress?: string) => {
    const vm = inv.backends.find((b) => b.name === "hv2-vm3")!;
    return {
      host: host("hv2"),
      sourceBridge: SOURCE_BRIDGE,
      bridge: "br-seg",
      allowedSource: inv.l3dsr!.underlay.address,
      key: 4243,
      vip: VIP,
      backend: { address: backendAddress ?? vm.address, port: inv.backendPort, mac: vm.mac, bridgePort: vm.port },
    };
  };
  /** The flows on hv2's bridge that carry `cookie`, as ovs-ofctl prints them. */
  const flowsWith = async (cookie: string) => {
    const ssh = await labSsh(inv, "hv2");
    try {
      return await runChecked(ssh, ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", "dump-flows", "br-seg", `cookie=${cookie}/-1`]);
    } finally {
      ssh.close();
    }
  };
  const bridges = async () => {
    const ssh = await labSsh(inv, "hv2");
    try {
      return (await runChecked(ssh, ["ovs-vsctl", "list-br"])).split("\n");
    } finally {
      ssh.close();
    }
  };

  beforeAll(async () => {
    dir = tempProject(resolve(__dirname, "..", "fixtures", "harness", "components-outputs"), { "Pulumi.dev.yaml": stackConfigYaml({ lab: lab() }) });
    projects.push(dir);
    stack = await Harness.open({ cwd: dir });
  });
  afterAll(async () => void (await stack?.destroy().catch(() => undefined)));

  it("up: the hypervisor's flows hold the values the other resource gave (host, backend address), the GRE key from a Promise, the address kept secret", async () => {
    const up = await stack.up();
    const custom = up.steps.filter((s) => s.custom).map((s) => `${s.op} ${s.type.split(":").at(-1)}`);
    expect(custom.sort()).toEqual(["create DsrHypervisorFlows", "create OvsBridge"]);
    const recorded = stack.resources().find((r) => r.type.endsWith(":DsrHypervisorFlows"))!;
    const flows = { ...recorded, inputs: asLists("DsrHypervisorFlows", recorded.inputs) as Record<string, any> };
    expect(flows.name).toBe("tdsr-out-hv2");
    expect(flows.inputs.host.connection.host).toBe(inv.hosts.hv2.address);
    expect(flows.inputs.gre).toMatchObject({ allowedSources: [inv.l3dsr!.underlay.address], key: 4243 });
    const { backend } = lab();
    expect(flows.inputs.vips).toEqual([{ address: VIP, port: 80, protocol: "tcp", backends: [backend] }]);
    // The secret backend address keeps the child's vips secret in the state.
    expect(flows.secretPaths.inputs).toContain("vips");
    // On the host: the VIP's flows DNAT to the backend the bridge's output named.
    const dumped = await flowsWith(flows.outputs.cookie as string);
    expect(dumped).toContain(`nw_dst=${VIP}`);
    expect(dumped).toContain(`nat(dst=${backend.address}:${backend.port})`);
    expect(await bridges()).toContain(SOURCE_BRIDGE);
    // The Outputs resolve to the same values again: nothing to change.
    await stack.preview({ expectNoChanges: true });
  }, 120_000);

  it("a bad value from an Output is refused by the component, naming the property, in the preview, before any host is changed", async () => {
    const bad = tempProject(resolve(__dirname, "..", "fixtures", "harness", "components-outputs"), {
      "Pulumi.dev.yaml": stackConfigYaml({ lab: { ...lab("10.0.0.300"), sourceBridge: "br-cmp-bad" } }),
    });
    projects.push(bad);
    const error = await (await Harness.open({ cwd: bad })).preview().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HarnessError);
    const diagnostics = (error as HarnessError).result.diagnostics.map((d) => d.message).join("\n");
    // The refusal alone, as the program runner reports a RunError: no SDK wrapping, no stack.
    expect(diagnostics).toContain(
      'TransparentDsr "tdsr-out": args.vips[0].backends[0].address: must be an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)',
    );
    expect(diagnostics).not.toMatch(/error serializing|\n\s+at /);
    expect(await bridges()).not.toContain("br-cmp-bad");
  }, 120_000);

  it("destroy removes the flows and the source bridge", async () => {
    const cookie = stack.resources().find((r) => r.type.endsWith(":DsrHypervisorFlows"))!.outputs.cookie as string;
    await stack.destroy();
    expect(stack.resources().filter((r) => r.custom)).toEqual([]);
    expect(await flowsWith(cookie)).not.toContain(`nw_dst=${VIP}`);
    expect(await bridges()).not.toContain(SOURCE_BRIDGE);
  }, 120_000);
});
