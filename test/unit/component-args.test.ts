import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as pulumi from "@pulumi/pulumi";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ActiveActiveLoadBalancerArgs, DeferredNatServiceArgs, TransparentDsrArgs } from "../../index";
import { mockResources, type Registered } from "../support/mocks";

/**
 * The components' arguments: every scalar may be an Output; refusals name
 * the property, the same way whether a value is plain (thrown at
 * construction, nothing registered) or resolved later (the program fails
 * with that error: a child's input rejects with it and the runner reports
 * the unhandled rejection); unknown values in a preview refuse nothing.
 */

let registered: Registered[] = [];
/** What the program failed with: rejections nobody handled (as the language host reports them). */
const failures: string[] = [];
const onRejection = (e: unknown) => failures.push(e instanceof Error ? e.message : String(e));

async function mocks(preview: boolean) {
  failures.length = 0;
  registered = await mockResources(preview);
}

beforeEach(async () => {
  process.on("unhandledRejection", onRejection);
  await mocks(false);
});
afterEach(() => {
  process.off("unhandledRejection", onRejection);
});

/** Until every registration the program started has been answered (the runtime's queue drains), and any failure is reported. */
async function programDone(): Promise<void> {
  await pulumi.runtime.disconnect();
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Until the program fails, with what: the failing child's dependents (and
 * the component's registered outputs) never resolve, so the runtime's queue
 * never drains; the language host ends the program at the first failure.
 */
async function programFailed(): Promise<string[]> {
  while (failures.length === 0) await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  return failures.map((f) => f.replace(/^(error serializing property "\w+": )+/, ""));
}

const SECRET = "4dabf18193072939515e22adb298388d";
/** A registered input as the provider gets it once decrypted; `secret` says whether it was sent as a secret. */
const reveal = (v: any): { secret: boolean; value: any } =>
  v && typeof v === "object" && SECRET in v ? { secret: true, value: v.value } : { secret: false, value: v };

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const host = (address: pulumi.Input<string>) => ({ connection: { host: address, user: "root", hostKey: KEY, privateKeyPath: "/k" } });
/** A value another resource would give later: an Output resolved after a turn of the event loop. */
const later = <T>(v: T): pulumi.Output<T> => pulumi.output(new Promise<T>((resolve) => setImmediate(() => resolve(v)))) as pulumi.Output<T>;
const backend = (n: number, hypervisor: string) => ({
  address: `10.0.0.${100 + n}` as pulumi.Input<string>,
  port: 8080 as pulumi.Input<number>,
  mac: `02:00:0a:00:00:${(100 + n).toString(16)}`,
  hypervisor,
  bridgePort: `vm${n}`,
});
const service = (): DeferredNatServiceArgs => ({
  gateways: [{ name: "gw1", host: host("172.30.0.11"), bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b", tunnelAddress: "172.16.11.2" }],
  hypervisors: [
    { name: "hv1", host: host("172.30.0.21"), bridge: "br-seg", tunnelAddress: "172.16.21.2" },
    { name: "hv2", host: host("172.30.0.22"), bridge: "br-seg", tunnelAddress: "172.16.22.2" },
  ],
  vips: [{ address: "10.0.0.200", port: 80, protocol: "tcp", backends: [backend(1, "hv1"), backend(2, "hv1"), backend(11, "hv2")] }],
});
const flowsOf = (name: string) => registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DsrHypervisorFlows" && r.name === name)?.inputs;
const loadBalancer = () => registered.find((r) => r.type === "pulumi-nodejs:dynamic/ovslb:DeferredNatLoadBalancer")?.inputs;

describe("DeferredNatService arguments", () => {
  it("Output-fed backends, hosts and delivery: the children get the resolved values", async () => {
    const { DeferredNatService } = await import("../../index");
    const args = service();
    args.delivery = later("gre" as const);
    args.hypervisors = [{ ...args.hypervisors[0], host: host(later("172.30.0.21")), tunnelAddress: later("172.16.21.2") }, args.hypervisors[1]];
    args.vips[0].backends[0].address = later("10.0.0.101");
    args.vips[0].backends[2].port = pulumi.secret(8081);
    new DeferredNatService("web", args);
    await programDone();
    expect(failures).toEqual([]);
    const hv1 = flowsOf("web-hv1")!;
    expect(hv1.host.connection.host).toBe("172.30.0.21");
    expect(hv1.mode).toBe("gre");
    expect(hv1.gre.allowedSources).toEqual(["172.16.11.2"]);
    expect(hv1.vips[0].backends.map((b: any) => [b.address, b.port, b.bridgePort])).toEqual([
      ["10.0.0.101", 8080, "vm1"],
      ["10.0.0.102", 8080, "vm2"],
    ]);
    // A secret backend value makes that child's vips a secret: it stays one.
    const hv2 = reveal(flowsOf("web-hv2")!.vips);
    expect(hv2.secret).toBe(true);
    expect(hv2.value[0].backends.map((b: any) => b.port)).toEqual([8081]);
    const lb = loadBalancer()!;
    expect(lb.delivery).toBe("gre");
    expect(lb.hypervisors).toEqual([
      { name: "hv1", tunnelAddress: "172.16.21.2" },
      { name: "hv2", tunnelAddress: "172.16.22.2" },
    ]);
    expect(reveal(lb.vips).value[0].backends.map((b: any) => b.address)).toEqual(["10.0.0.101", "10.0.0.102", "10.0.0.111"]);
  });

  describe("refusals name the property: plain at construction, before anything is registered", () => {
    const cases: [string, (a: DeferredNatServiceArgs) => unknown, string][] = [
      ["an unknown property", (a) => Object.assign(a, { vipz: [] }), 'DeferredNatService "bad": args.vipz: is not a known property'],
      [
        "an unknown property of a backend",
        (a) => Object.assign(a.vips[0].backends[1], { wieght: 2 }),
        'DeferredNatService "bad": args.vips[0].backends[1].wieght: is not a known property',
      ],
      [
        "a backend without a hypervisor",
        (a) => delete (a.vips[0].backends[2] as Partial<ReturnType<typeof backend>>).hypervisor,
        'DeferredNatService "bad": args.vips[0].backends[2].hypervisor: is required',
      ],
      [
        "a backend on an unknown hypervisor",
        (a) => (a.vips[0].backends[2].hypervisor = "hv9"),
        'DeferredNatService "bad": args.vips[0].backends[2].hypervisor: "hv9" is not the name of one of hypervisors (hv1, hv2)',
      ],
      [
        "a hypervisor named twice",
        (a) => (a.hypervisors = [...a.hypervisors, { ...a.hypervisors[1], host: host("172.30.0.23") }]),
        `DeferredNatService "bad": args.hypervisors[2].name: "hv2" is also hypervisors[1]'s: give each hypervisor once`,
      ],
      [
        "a badly formed address",
        (a) => (a.vips[0].address = "10.0.0.256"),
        'DeferredNatService "bad": args.vips[0].address: must be an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)',
      ],
      [
        "a missing tunnel end",
        (a) => ((a.delivery = "gre"), delete a.hypervisors[1].tunnelAddress),
        `DeferredNatService "bad": args.hypervisors[1].tunnelAddress: is required with gre delivery: it is one end of the gateways' tunnels`,
      ],
      [
        "second chance without gre",
        (a) => (a.secondChance = {}),
        'DeferredNatService "bad": args.secondChance: needs gre delivery: hypervisors[0] (hv1) is reached by mac; args.secondChance: needs gre delivery: hypervisors[1] (hv2) is reached by mac',
      ],
      [
        "a hypervisor name from an Output",
        (a) => (a.hypervisors[1].name = pulumi.output("hv2") as unknown as string),
        `DeferredNatService "bad": args.hypervisors[1].name: must be a plain value, not an Output or a Promise: it names the hypervisor's DsrHypervisorFlows`,
      ],
    ];
    for (const [what, spoil, message] of cases) {
      it(what, async () => {
        const { DeferredNatService } = await import("../../index");
        const args = service();
        spoil(args);
        expect(() => new DeferredNatService("bad", args)).toThrow(message);
        await programDone();
        expect(registered).toEqual([]);
      });
    }
  });

  describe("refusals name the property: Output-fed, once resolved (the program fails with the same message; no child is registered)", () => {
    const cases: [string, (a: DeferredNatServiceArgs) => unknown, string][] = [
      [
        "second chance, delivery from an Output",
        (a) => ((a.secondChance = {}), (a.hypervisors[1].delivery = later("mac" as const)), (a.delivery = "gre")),
        'DeferredNatService "bad": args.secondChance: needs gre delivery: hypervisors[1] (hv2) is reached by mac',
      ],
      [
        "a badly formed address from an Output",
        (a) => (a.vips[0].backends[1].address = later("10.0.0.300")),
        'DeferredNatService "bad": args.vips[0].backends[1].address: must be an IPv4 address (10.0.0.10) or an IPv6 address (2001:db8::10)',
      ],
      [
        "two hypervisors on one host and bridge, a host from an Output",
        (a) => (a.hypervisors[1].host = host(later("172.30.0.21"))),
        'DeferredNatService "bad": args.hypervisors[1]: is on the same host and bridge as hypervisors[0]: give each hypervisor once',
      ],
      [
        "a missing tunnel end, delivery from an Output",
        (a) => ((a.delivery = later("gre" as const)), delete a.gateways[0].tunnelAddress),
        `DeferredNatService "bad": args.gateways[0].tunnelAddress: is required with gre delivery: it is one end of the gateways' tunnels`,
      ],
    ];
    for (const [what, spoil, message] of cases) {
      it(what, async () => {
        const { DeferredNatService } = await import("../../index");
        const args = service();
        spoil(args);
        new DeferredNatService("bad", args);
        // The SDK names the child's property it could not send ("error serializing property ..."); the reason is the component's.
        expect(new Set(await programFailed())).toEqual(new Set([message]));
        expect(registered.filter((r) => r.type.startsWith("pulumi-nodejs:dynamic/"))).toEqual([]);
      });
    }
  });

  it("in a preview, values not known yet refuse nothing (what is known is still checked)", async () => {
    await mocks(true);
    const { DeferredNatService } = await import("../../index");
    const args = service();
    args.secondChance = {};
    // Unknown in a preview: another resource's output not created yet. Known, it would be refused (mac).
    args.delivery = pulumi.output(pulumi.unknown) as unknown as pulumi.Output<"gre">;
    new DeferredNatService("web", args);
    await programDone();
    expect(failures).toEqual([]);
    expect(registered.map((r) => r.name).sort()).toEqual(["web", "web", "web-hv1", "web-hv2"]);

    await mocks(true);
    const known = service();
    known.delivery = pulumi.output(pulumi.unknown) as unknown as pulumi.Output<"gre">;
    known.vips[0].backends[0].hypervisor = "hv9";
    expect(() => new DeferredNatService("bad", known)).toThrow(/args\.vips\[0\]\.backends\[0\]\.hypervisor: "hv9" is not the name of one of hypervisors/);
  });
});

describe("TransparentDsr arguments", () => {
  const tdsr = (): TransparentDsrArgs => {
    const s = service();
    return {
      loadBalancer: { allowedSources: ["172.16.41.2"], key: 47 },
      hypervisors: s.hypervisors.map(({ name, host, bridge }) => ({ name, host, bridge })),
      vips: s.vips,
    };
  };

  it("Output-fed: the flows get the resolved values", async () => {
    const { TransparentDsr } = await import("../../index");
    const args = tdsr();
    args.loadBalancer = { allowedSources: [later("172.16.41.2")], key: later(47) };
    args.vips[0].backends[2].address = pulumi.secret("10.0.0.111");
    new TransparentDsr("edge", args);
    await programDone();
    expect(failures).toEqual([]);
    expect(flowsOf("edge-hv1")!.gre).toEqual({ allowedSources: ["172.16.41.2"], key: 47 });
    expect(reveal(flowsOf("edge-hv2")!.vips).value[0].backends[0].address).toBe("10.0.0.111");
  });

  it("an IPv6 VIP of IPv6 backends: each hypervisor's flows get it, its backends on that hypervisor", async () => {
    const { TransparentDsr } = await import("../../index");
    const args = tdsr();
    args.vips = [
      {
        address: "fd00:22::c8",
        port: 80,
        protocol: "tcp",
        backends: args.vips[0].backends.map((b, i) => ({ ...b, address: `fd00:10::${(101 + i).toString(16)}` })),
      },
    ];
    new TransparentDsr("edge6", args);
    await programDone();
    expect(failures).toEqual([]);
    expect(flowsOf("edge6-hv1")!.vips[0].address).toBe("fd00:22::c8");
    expect(flowsOf("edge6-hv1")!.vips[0].backends.map((b: any) => b.address)).toEqual(["fd00:10::65", "fd00:10::66"]);
    expect(flowsOf("edge6-hv2")!.vips[0].backends.map((b: any) => b.address)).toEqual(["fd00:10::67"]);
  });

  it("refuses an unknown property and an unknown hypervisor at construction; Output-fed rules once resolved", async () => {
    const { TransparentDsr } = await import("../../index");
    const extra = Object.assign(tdsr(), { vipz: [] });
    expect(() => new TransparentDsr("bad", extra)).toThrow('TransparentDsr "bad": args.vipz: is not a known property');
    const unknown = tdsr();
    unknown.vips[0].backends[0].hypervisor = "hv9";
    expect(() => new TransparentDsr("bad", unknown)).toThrow(
      'TransparentDsr "bad": args.vips[0].backends[0].hypervisor: "hv9" is not the name of one of hypervisors (hv1, hv2)',
    );
    const twice = tdsr();
    twice.hypervisors[1].bridge = later("br-seg");
    twice.hypervisors[1].host = host(later("172.30.0.21"));
    new TransparentDsr("twice", twice);
    expect(new Set(await programFailed())).toEqual(
      new Set(['TransparentDsr "twice": args.hypervisors[1]: is on the same host and bridge as hypervisors[0]: give each hypervisor once']),
    );
  });
});

describe("ActiveActiveLoadBalancer arguments", () => {
  const amphorae = () => [
    { name: "a", mac: "02:00:00:00:00:01", role: "active" as pulumi.Input<"active" | "standby" | "failed">, hypervisor: "hv1" },
    { name: "s", mac: "02:00:00:00:00:02", role: "standby" as pulumi.Input<"active" | "standby" | "failed">, hypervisor: "hv2" },
  ];

  it("Output-fed id, VIP and amphorae: the attachment gets the resolved values, slots filled", async () => {
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const { derivedFrontendMac } = await import("../../provider/resources/distributor-attachment/plan");
    const d1 = new DistributorDevice("d1", { host: host("172.30.0.31"), deviceId: "d1", uplinkBridge: "br-seg" });
    const d2 = new DistributorDevice("d2", { host: host("172.30.0.32"), deviceId: "d2", uplinkBridge: "br-seg" });
    const amps = amphorae();
    amps[0].mac = later("02:00:00:00:00:0a") as unknown as string;
    const args: ActiveActiveLoadBalancerArgs = {
      devices: [
        { device: d1, nextHop: "10.0.0.41" },
        { device: d2, nextHop: "10.0.0.42" },
      ],
      loadBalancerId: later("lb-a"),
      vip: later("10.0.0.100"),
      amphorae: amps,
    };
    new ActiveActiveLoadBalancer("lb", args);
    await programDone();
    expect(failures).toEqual([]);
    const attachments = registered.filter((r) => r.type.endsWith("DistributorAttachment"));
    expect(attachments.map((a) => [a.name, a.inputs.attachmentId, a.inputs.vip, a.inputs.frontendMac])).toEqual([
      ["lb-attachment-10.0.0.41", "lb-a", "10.0.0.100", derivedFrontendMac("lb-a/10.0.0.41")],
      ["lb-attachment-10.0.0.42", "lb-a", "10.0.0.100", derivedFrontendMac("lb-a/10.0.0.42")],
    ]);
    expect(attachments[0].inputs.amphorae).toEqual([
      { name: "a", mac: "02:00:00:00:00:0a", role: "active", slot: 1 },
      { name: "s", mac: "02:00:00:00:00:02", role: "standby" },
    ]);
  });

  it("refuses an unknown property at construction, and the N+1 rule once an Output-fed role resolves", async () => {
    const { ActiveActiveLoadBalancer, DistributorDevice } = await import("../../index");
    const device = new DistributorDevice("d1", { host: host("172.30.0.31"), deviceId: "d1", uplinkBridge: "br-seg" });
    expect(
      () => new ActiveActiveLoadBalancer("bad", Object.assign({ device, loadBalancerId: "lb-a", vip: "10.0.0.100", amphorae: amphorae() }, { vipz: "x" })),
    ).toThrow('ActiveActiveLoadBalancer "bad": args.vipz: is not a known property');
    const amps = amphorae();
    amps[1].role = later("active" as const);
    new ActiveActiveLoadBalancer("later", { device, loadBalancerId: "lb-a", vip: "10.0.0.100", amphorae: amps });
    expect(new Set(await programFailed())).toEqual(new Set(['ActiveActiveLoadBalancer "later": args.amphorae: at least 1 standby amphora is required, got 0']));
    expect(registered.filter((r) => r.type.endsWith("DistributorAttachment"))).toEqual([]);
  });
});

describe("schema/components", () => {
  it("every list says whether its order matters (x-unordered), as the resource schemas do", () => {
    const dir = join(__dirname, "..", "..", "schema", "components");
    const arrays: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}/${i}`));
      if (!node || typeof node !== "object") return;
      const o = node as Record<string, unknown>;
      if (o.type === "array") arrays.push(typeof o["x-unordered"] === "boolean" ? "" : at);
      for (const [k, v] of Object.entries(o)) walk(v, `${at}/${k}`);
    };
    const files = readdirSync(dir).filter((f) => f.endsWith(".json"));
    expect(files.sort()).toEqual(["active-active-load-balancer.json", "deferred-nat-service.json", "transparent-dsr.json"]);
    for (const f of files) walk(JSON.parse(readFileSync(join(dir, f), "utf8")), f);
    expect(arrays.length).toBeGreaterThan(0);
    expect(arrays.filter((a) => a !== "")).toEqual([]);
  });
});
