import { describe, it, expect } from "vitest";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import Ajv from "ajv";
import * as pulumi from "@pulumi/pulumi";
import { check } from "../../provider/handlers";
import { CREDENTIALS_OUTPUT } from "../../provider/secrets";
import * as generated from "../../provider/model/resource-outputs.generated";
import { assessVips } from "../../provider/engine/health";
import { driftOutputs } from "../../provider/model/drift";
import type { HealthCheckInputs } from "../../provider/model/inputs.generated";
import type { HealthCheckState } from "../../provider/resources/health-check/handler";
import { FIXTURE_KINDS, loadFixture, type FixtureKind } from "../support/state-fixtures";

/**
 * Each resource's outputs (what it records besides its inputs) are declared
 * once, in its schema's "x-outputs", and generated from there into the
 * handlers' state types and the resource classes' Output properties.
 * These tests hold that declaration to the recorded state fixtures (nothing
 * a stack holds is left undeclared), to the classes (a program can read
 * every one), and hold the generator's --check to every generated file.
 */

const repo = resolve(__dirname, "..", "..");
type Props = Record<string, any>;

/** Every kind: the ones with a state fixture, and HealthCheck (added after the fixtures were recorded). */
const KINDS = [...FIXTURE_KINDS, "HealthCheck"] as const;
type Kind = (typeof KINDS)[number];

const SCHEMA_FILES: Record<Kind, string> = {
  OvsBridge: "ovs-bridge.json",
  DsrHypervisorFlows: "dsr-hypervisor-flows.json",
  DeferredNatLoadBalancer: "deferred-nat-load-balancer.json",
  DistributorDevice: "distributor-device.json",
  DistributorAttachment: "distributor-attachment.json",
  HealthCheck: "health-check.json",
};

/** Outputs added since the fixtures were recorded (commit 6c13b74): a later output is listed here, never dropped from a fixture. */
const ADDED_SINCE_FIXTURES: Record<FixtureKind, string[]> = {
  OvsBridge: ["ovsVersions"],
  DsrHypervisorFlows: ["bfd", "connections", "ovsVersions", "traffic"],
  DeferredNatLoadBalancer: [
    "ovsVersions",
    "greKey",
    "slotTables",
    "slotShares",
    "slotDeviation",
    "slotHistory",
    "slotMoves",
    "ownerGroupIds",
    "bfdKey",
    "health",
    "stale",
    "gatewayPorts",
    "gatewayFlows",
    "lastRead",
    "driftFindings",
    "traffic",
  ],
  DistributorDevice: ["ovsVersions", "attachmentHealth"],
  DistributorAttachment: ["slotLiveness", "ovsVersions"],
};

const schemaOf = (kind: Kind): Props => JSON.parse(readFileSync(join(repo, "schema", SCHEMA_FILES[kind]), "utf8"));
/** "DeferredNatLoadBalancer" -> the generated DEFERRED_NAT_LOAD_BALANCER_OUTPUTS */
const outputNames = (kind: Kind): readonly string[] =>
  (generated as unknown as Record<string, readonly string[]>)[
    `${SCHEMA_FILES[kind]
      .replace(/\.json$/, "")
      .replace(/-/g, "_")
      .toUpperCase()}_OUTPUTS`
  ];

/** The outputs a fixture recorded that are not inputs (nor the provider's own __provider and sshCredentials). */
function recordedOutputs(kind: FixtureKind): Props {
  const f = loadFixture(kind);
  return Object.fromEntries(Object.entries(f.outputs).filter(([k]) => !(k in f.inputs) && k !== CREDENTIALS_OUTPUT));
}

/** An x-outputs validator of a kind's schema (common.json definitions resolved). */
function outputsValidator(kind: Kind) {
  const schema = schemaOf(kind);
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addSchema(JSON.parse(readFileSync(join(repo, "schema", "common.json"), "utf8")), "common.json");
  return ajv.compile({ ...schema["x-outputs"], definitions: schema.definitions ?? {} });
}

describe("outputs are declared once, in the schema", () => {
  it.each(KINDS)("%s: declares its outputs, and the generated output names are the schema's", (kind) => {
    const names = outputNames(kind);
    expect(names, `${kind}: no generated output names`).toBeDefined();
    expect(names.length).toBeGreaterThan(0);
    expect([...names]).toEqual(Object.keys(schemaOf(kind)["x-outputs"].properties));
  });

  it("HealthCheck (no fixture yet): a state as its handler builds it is valid against x-outputs, and one of the wrong shape is not", () => {
    const vips: HealthCheckInputs["vips"] = [
      {
        address: "10.0.0.193",
        port: 80,
        protocol: "tcp",
        backends: [
          { address: "10.0.0.101", port: 8080, logicalPort: "lsp-1", hypervisor: "hv1" },
          { address: "10.0.0.102", port: 8080, logicalPort: "lsp-2" },
        ],
      },
    ];
    const report = assessVips(vips, {
      monitors: [{ logicalPort: "lsp-1", ip: "10.0.0.101", port: 8080, protocol: "tcp", status: "online" }],
      bindings: new Map([
        ["lsp-1", { chassis: "hv1", up: true }],
        ["lsp-2", { up: false }],
      ]),
      bfd: new Map([["gw1", new Map([["hv1", { state: "down", forwarding: false }]])]]),
    });
    const state: HealthCheckState = {
      ...driftOutputs([{ host: "northbound", kind: "northbound-row", object: "OVN Load_Balancer ovslb-web-tcp", detail: "missing" }]),
      health: report.backends,
      stale: report.stale,
      bfdGateways: ["gw1"],
    };
    expect(state.health!.length).toBe(2);
    const validate = outputsValidator("HealthCheck");
    expect(validate(state), JSON.stringify(validate.errors)).toBe(true);
    // Without southbound nor gateways: only drift and bfdGateways.
    expect(validate({ ...driftOutputs([]), bfdGateways: [] })).toBe(true);
    expect(validate({ drift: [] })).toBe(false);
    expect(validate({ ...state, bfdGateways: "gw1" })).toBe(false);
    expect(validate({ ...state, ovsVersions: {} })).toBe(false);
  });

  it.each(FIXTURE_KINDS)("%s: the generated output names are the schema's, and the fixture's recorded outputs plus the ones listed as added later", (kind) => {
    const names = outputNames(kind);
    expect(names, `${kind}: no generated output names`).toBeDefined();
    expect([...names]).toEqual(Object.keys(schemaOf(kind)["x-outputs"].properties));
    const recorded = Object.keys(recordedOutputs(kind));
    expect(recorded.length).toBeGreaterThan(0);
    expect([...names].sort()).toEqual([...recorded, ...ADDED_SINCE_FIXTURES[kind]].sort());
    // Every kind records the Open vSwitch versions it read; only the load balancer has a GRE key.
    expect(names).toContain("ovsVersions");
    expect(names.includes("greKey")).toBe(kind === "DeferredNatLoadBalancer");
  });

  it.each(FIXTURE_KINDS)("%s: the fixture's recorded outputs are valid against the schema's x-outputs (types and required outputs)", (kind) => {
    const validate = outputsValidator(kind);
    const recorded = recordedOutputs(kind);
    expect(validate(recorded), JSON.stringify(validate.errors)).toBe(true);
    // The check can fail: an output of the wrong type is refused.
    for (const [name, value] of Object.entries(recorded)) {
      expect(validate({ ...recorded, [name]: typeof value === "string" ? 7 : "of another type" }), `${kind}.${name} of another type`).toBe(false);
    }
  });

  it("input validation ignores x-outputs: an output given as an input is still refused as unknown", async () => {
    const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    const host = { connection: { host: "172.30.0.23", user: "root", hostKey: KEY, privateKeyPath: "/k" } };
    const ok = (await check("OvsBridge", {}, { host, name: "br-x" })) as { failures: unknown[] };
    expect(ok.failures).toEqual([]);
    const given = (await check("OvsBridge", {}, { host, name: "br-x", uuid: "u" })) as { failures: unknown[] };
    expect(given.failures).toEqual([{ property: "uuid", reason: "is not a known property" }]);
  });
});

describe("each resource class exposes every output", () => {
  const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
  const host = { connection: { host: "172.30.0.11", user: "root", hostKey: KEY, privateKeyPath: "/k" } };
  /** A value the mocked engine returns for an output, distinct per output. */
  const mocked = (name: string) => ({ mockedOutput: name });

  /** The value an Output resolves to (the program is not a preview, so every value is known). */
  const valueOf = (o: pulumi.Output<unknown>) => new Promise<unknown>((done) => o.apply((v) => (done(v), v)));

  it("under mocks, every generated output (ovsVersions, greKey, ...) is an Output on the resource with the value the engine returned", async () => {
    const registered = new Map<string, { type: string; provider: unknown }>();
    await pulumi.runtime.setMocks(
      {
        newResource: (args) => (
          registered.set(args.name, { type: args.type, provider: args.inputs.__provider }),
          {
            id: `${args.name}-id`,
            // The engine returns the inputs and every output the provider recorded (here: every declared one).
            state: { ...args.inputs, ...Object.fromEntries(KINDS.flatMap((k) => outputNames(k)).map((n) => [n, mocked(n)])) },
          }
        ),
        call: (args) => args.inputs,
      },
      "project",
      "stack",
      false,
    );
    const ovslb = await import("../../index");
    const resources: Record<Kind, pulumi.CustomResource> = {
      OvsBridge: new ovslb.OvsBridge("br", { host, name: "br-x" }),
      DsrHypervisorFlows: new ovslb.DsrHypervisorFlows("dsr", { name: "dsr", host, bridge: "br-seg", vips: [] }),
      DeferredNatLoadBalancer: new ovslb.DeferredNatLoadBalancer("lb", { name: "lb", gateways: [], hypervisors: [], vips: [] }),
      DistributorDevice: new ovslb.DistributorDevice("dev", { host, deviceId: "dev", uplinkBridge: "br-seg" }),
      DistributorAttachment: new ovslb.DistributorAttachment("att", {
        host,
        deviceId: "dev",
        uplinkBridge: "br-seg",
        attachmentId: "att",
        vip: "10.0.0.100",
        amphorae: [],
      }),
      HealthCheck: new ovslb.HealthCheck("hc", {
        loadBalancer: "lb",
        northbound: { connection: host.connection, socket: "/run/ovn/ovnnb_db.sock" },
        sourceIp: "10.0.0.254",
        vips: [],
      }),
    };
    // A class that passes no placeholders gets no such property: what the generated names are for.
    class Bare extends pulumi.dynamic.Resource {
      constructor() {
        super({ create: async () => ({ id: "bare" }) }, "bare", {});
      }
    }
    const bare = new Bare() as unknown as Props;
    expect(bare.ovsVersions).toBeUndefined();

    // Each registers as the dynamic resource it always was, its serialized provider the serializer's text (run from source here).
    const { dynamicProvider } = await import("../../provider/dynamic");
    for (const kind of KINDS) {
      const name = String(await valueOf(resources[kind].urn))
        .split("::")
        .pop()!;
      const provider = dynamicProvider(kind);
      const text = (await pulumi.runtime.serializeFunction(() => provider, { allowSecrets: true })).text;
      expect(registered.get(name), kind).toEqual({ type: `pulumi-nodejs:dynamic/ovslb:${kind}`, provider: text });
    }
    for (const kind of KINDS) {
      const r = resources[kind] as unknown as Props;
      for (const name of outputNames(kind)) {
        expect(pulumi.Output.isInstance(r[name]), `${kind}.${name} is not an Output`).toBe(true);
        expect(await valueOf(r[name]), `${kind}.${name}`).toEqual(mocked(name));
      }
    }
    // Typed for programs: the load balancer's GRE key and every kind's versions.
    const lb = resources.DeferredNatLoadBalancer as InstanceType<typeof ovslb.DeferredNatLoadBalancer>;
    const greKey: pulumi.Output<number | undefined> = lb.greKey;
    const versions: pulumi.Output<Record<string, { version?: string; knownIssues: string[] }> | undefined> = (
      resources.OvsBridge as InstanceType<typeof ovslb.OvsBridge>
    ).ovsVersions;
    expect(await valueOf(greKey)).toEqual(mocked("greKey"));
    expect(await valueOf(versions)).toEqual(mocked("ovsVersions"));
    await pulumi.runtime.disconnect();
  });
});

describe("schema/generate-types.js --check", () => {
  const GENERATED = ["inputs.generated.ts", "outputs.generated.ts", "resource-outputs.generated.ts"];

  /** A copy of the generator, the schemas and the generated files, with the repository's node_modules. */
  function copyTree(): string {
    const dir = mkdtempSync(join(tmpdir(), "ovslb-gen-"));
    mkdirSync(join(dir, "schema"));
    mkdirSync(join(dir, "provider", "model"), { recursive: true });
    for (const f of readdirSync(join(repo, "schema")).filter((f) => f.endsWith(".json") || f === "generate-types.js")) {
      copyFileSync(join(repo, "schema", f), join(dir, "schema", f));
    }
    symlinkSync(join(repo, "node_modules"), join(dir, "node_modules"), "dir");
    return dir;
  }
  const run = (dir: string, ...args: string[]) => {
    const r = spawnSync(process.execPath, [join(dir, "schema", "generate-types.js"), ...args], { encoding: "utf8", timeout: 120_000 });
    return { status: r.status, stderr: r.stderr };
  };
  const stale = (stderr: string) => GENERATED.filter((f) => stderr.includes(`/model/${f} is stale`));
  const editSchema = (dir: string, file: string, edit: (s: Props) => void) => {
    const path = join(dir, "schema", file);
    const s = JSON.parse(readFileSync(path, "utf8"));
    edit(s);
    writeFileSync(path, JSON.stringify(s, null, 2));
  };

  it("passes on freshly generated files and names each stale one: an output's description, an input's, a missing file", () => {
    const dir = copyTree();
    try {
      expect(run(dir, "--check").status).toBe(1); // nothing generated yet in the copy
      expect(run(dir).status).toBe(0);
      expect(run(dir, "--check")).toEqual({ status: 0, stderr: "" });
      const generatedNow = GENERATED.map((f) => readFileSync(join(dir, "provider", "model", f), "utf8"));
      expect(generatedNow[1]).toContain("export interface DeferredNatLoadBalancerOutputs");
      expect(generatedNow[2]).toContain('readonly greKey: pulumi.Output<DeferredNatLoadBalancerOutputs["greKey"]>;');

      editSchema(dir, "ovs-bridge.json", (s) => (s["x-outputs"].properties.uuid.description = "the row's uuid, said otherwise"));
      let r = run(dir, "--check");
      expect(r.status).toBe(1);
      expect(stale(r.stderr)).toEqual(["outputs.generated.ts", "resource-outputs.generated.ts"]);

      expect(run(dir).status).toBe(0);
      editSchema(dir, "ovs-bridge.json", (s) => (s.properties.failMode.description = "said otherwise"));
      r = run(dir, "--check");
      expect(r.status).toBe(1);
      expect(stale(r.stderr)).toEqual(["inputs.generated.ts"]);

      expect(run(dir).status).toBe(0);
      unlinkSync(join(dir, "provider", "model", "resource-outputs.generated.ts"));
      r = run(dir, "--check");
      expect(r.status).toBe(1);
      expect(stale(r.stderr)).toEqual(["resource-outputs.generated.ts"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it("takes a schema without outputs (inputs only), and refuses outputs that shadow an input", () => {
    const dir = copyTree();
    try {
      writeFileSync(
        join(dir, "schema", "widget.json"),
        JSON.stringify({
          title: "WidgetInputs",
          type: "object",
          additionalProperties: false,
          properties: { size: { type: "integer", description: "how big" } },
        }),
      );
      expect(run(dir).status).toBe(0);
      const model = (f: string) => readFileSync(join(dir, "provider", "model", f), "utf8");
      expect(model("inputs.generated.ts")).toContain("export interface WidgetInputs");
      expect(model("outputs.generated.ts")).not.toContain("Widget");
      expect(model("resource-outputs.generated.ts")).not.toContain("Widget");
      expect(run(dir, "--check").status).toBe(0);

      editSchema(dir, "ovs-bridge.json", (s) => (s["x-outputs"].properties.name = { type: "string", description: "shadows the input" }));
      const r = run(dir);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("ovs-bridge.json: outputs name are also inputs");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
