import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LabInventory } from "../lab/topology";
import { inNamespace, loadInventory, lockLab } from "../support/lab";
import { startProviderPlugin, type PluginCall } from "../support/provider-plugin";
import { asKeyed } from "../../provider/handlers";
import { FIXTURE_KINDS, loadFixture, rebase, type FixtureKind, type StateFixture } from "../support/state-fixtures";

/**
 * State compatibility (docs/state-contract.md): state written by an older
 * ovslb keeps working with this one. For each fixture (one resource of each
 * kind, as the engine stored it after a create by commit 6c13b74), through
 * the real dynamic-provider plugin over gRPC and the fixture's OWN
 * serialized provider (`__provider`), against the lab:
 *
 * - create from the fixture's inputs derives the fixture's id, cookie and
 *   recorded ids (the derivation contract), so the host is in the state the
 *   fixture describes;
 * - check of the recorded inputs returns them with each set keyed by its
 *   elements' identity (what the engine records and diffs since keyed
 *   lists), and check of that returns it unchanged, so after one `up` the
 *   engine sees no change;
 * - read(fixture id, fixture outputs) returns the fixture's inputs, keyed;
 * - diff(fixture outputs, fixture inputs) is no change, and so is the diff
 *   after an upgrade (the inputs keyed and carrying this ovslb's provider
 *   text, the outputs the old one's lists); a read with this ovslb's text
 *   returns them too;
 * - update(fixture outputs -> fixture inputs) sends nothing: lastApply
 *   shows 0 messages, no bundle reaches any bridge (bundle observers in the
 *   plugin's process), and the OVSDB rows are not modified (_version);
 * - delete(fixture id, fixture outputs) removes it, and a read says gone.
 * Needs `npm run build` (the plugin requires ovslb/dist/...).
 */

type Props = Record<string, any>;

/** Outputs a host assigns or observes (row uuids, ofports, what an apply sent): not derived, so not part of the contract. */
const OBSERVED: Record<FixtureKind, string[]> = {
  OvsBridge: ["uuid", "ovsVersions"],
  DsrHypervisorFlows: ["ofports", "lastApply", "ovsVersions"],
  // driftFindings: recorded since (the fixtures have drift only), checked below as what drift is rendered from.
  DeferredNatLoadBalancer: ["lastApply", "gatewayPorts", "gatewayFlows", "lastRead", "ovsVersions", "driftFindings"],
  DistributorDevice: ["ovsVersion", "attachments", "attachmentHealth", "ovsVersions"],
  DistributorAttachment: ["bridgeUuid", "lastApply", "slotLiveness", "ovsVersions"],
};

/** Modules whose observeBundles sees the bundles sent in the plugin's process (whichever this ovslb has). */
const BUNDLE_OBSERVERS = ["ovslb/dist/provider/engine/bridge", "ovslb/dist/provider/resources/dsr-hypervisor-flows/handler"];

let inv: LabInventory;
let unlock: () => void;
let scratch: string;
let bundleLog: string;
const fixtures = {} as Record<FixtureKind, StateFixture>;
/** The provider text this ovslb serializes for each kind (what the next `pulumi up` puts in the inputs). */
const currentText = {} as Record<FixtureKind, string>;
const plugins = {} as Record<FixtureKind, PluginCall>;

const without = (o: Props, keys: string[]) => Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));
const bundles = () =>
  readFileSync(bundleLog, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.host);

/** A row's _version (changes whenever OVSDB modifies the row), straight from the host's db.sock. */
function rowVersions(host: string, table: string, names: string[]): string[] {
  const h = inv.hosts[host];
  const query = JSON.stringify(["Open_vSwitch", { op: "select", table, where: [], columns: ["name", "_version"] }]);
  const [result] = JSON.parse(inNamespace(h.namespace, ["ovsdb-client", "transact", `unix:${h.dbSock}`, query]));
  return (result.rows as Props[])
    .filter((r) => names.includes(r.name))
    .map((r) => `${r.name}=${r._version[1]}`)
    .sort();
}

/** The OVSDB rows each kind owns, to show an update leaves them untouched. */
function ownedRows(kind: FixtureKind): string[] {
  const f = fixtures[kind];
  if (kind === "OvsBridge") return rowVersions("hv3", "Bridge", [f.inputs.name]);
  if (kind === "DistributorAttachment") {
    return [...rowVersions("dist1", "Bridge", [f.outputs.bridge]), ...rowVersions("dist1", "Port", [f.outputs.frontendPort, f.outputs.uplinkPort])];
  }
  return [];
}

beforeAll(async () => {
  inv = loadInventory();
  unlock = await lockLab("distributor");
  const current = {
    labDir: inv.labDir,
    clientKeyPath: inv.clientKeyPath,
    hostKeys: Object.fromEntries(Object.values(inv.hosts).map((h) => [h.name, h.hostKey])),
  };
  for (const kind of FIXTURE_KINDS) {
    const f = loadFixture(kind);
    fixtures[kind] = rebase(f, f.fixture.lab, current);
  }

  // Serialized as a program serializes it (the SDK's closure serializer over the built provider object).
  const { serializeFunction } = require("@pulumi/pulumi/runtime/closure/serializeClosure");
  const { dynamicProvider } = require(join(__dirname, "..", "..", "dist", "provider", "dynamic"));
  for (const kind of FIXTURE_KINDS) {
    const provider = dynamicProvider(kind);
    currentText[kind] = (await serializeFunction(() => provider, { allowSecrets: true })).text;
  }

  // The plugins load a preload that registers bundle observers in their own process and logs every bundle.
  scratch = mkdtempSync(join(tmpdir(), "ovslb-state-compat-"));
  bundleLog = join(scratch, "bundles.jsonl");
  const preload = join(scratch, "observe-bundles.js");
  writeFileSync(bundleLog, "");
  writeFileSync(
    preload,
    `const { appendFileSync } = require("node:fs");
const log = ${JSON.stringify(bundleLog)};
for (const m of ${JSON.stringify(BUNDLE_OBSERVERS)}) {
  let mod;
  try { mod = require(m); } catch { continue; }
  if (typeof mod.observeBundles !== "function") continue;
  mod.observeBundles((host, sent) => appendFileSync(log, JSON.stringify({ module: m, host, messages: sent.messages }) + "\\n"));
  appendFileSync(log, JSON.stringify({ registered: m, pid: process.pid }) + "\\n");
}
`,
  );
  const saved = process.env.NODE_OPTIONS;
  try {
    for (const kind of FIXTURE_KINDS) {
      // The plugin's environment is taken when it is spawned, synchronously: set only for it.
      process.env.NODE_OPTIONS = `${saved ?? ""} --require ${preload}`.trim();
      const started = startProviderPlugin({ urn: fixtures[kind].urn });
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
      plugins[kind] = await started;
    }
  } finally {
    if (saved === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = saved;
  }
  // Anything an interrupted earlier run left behind goes first (delete is idempotent).
  for (const kind of [...FIXTURE_KINDS].reverse()) await plugins[kind].delete(fixtures[kind].id, fixtures[kind].outputs);
});

afterAll(async () => {
  for (const kind of [...FIXTURE_KINDS].reverse()) {
    await plugins[kind]?.delete(fixtures[kind].id, fixtures[kind].outputs).catch(() => undefined);
  }
  for (const kind of FIXTURE_KINDS) plugins[kind]?.stop();
  unlock?.();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("state written by ovslb 6c13b74 works with this ovslb, through the plugin and the state's own provider", () => {
  it("the fixtures are the engine's records: thin serialized provider requiring ovslb/dist/provider/handlers, no secrets", () => {
    for (const kind of FIXTURE_KINDS) {
      const f = fixtures[kind];
      expect(f.type).toBe(`pulumi-nodejs:dynamic/ovslb:${kind}`);
      expect(f.inputs.__provider).toBe(f.outputs.__provider);
      expect(f.inputs.__provider).toContain(`kind: "${kind}"`);
      expect(f.inputs.__provider).toContain('require("ovslb/dist/provider/handlers").handle(kind, "read", [id, props])');
      expect(JSON.stringify(f)).not.toMatch(/PRIVATE KEY|privateKey"|passphrase"/);
      expect(f.outputs.sshCredentials).toEqual({});
    }
    // The bundle observers are live in every plugin process.
    const registered = readFileSync(bundleLog, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((e) => e.registered);
    expect(new Set(registered.map((e) => e.pid)).size).toBe(FIXTURE_KINDS.length);
  });

  for (const kind of FIXTURE_KINDS) {
    it(`${kind}: create from the fixture's inputs derives the fixture's id, cookie and recorded ids`, async () => {
      const f = fixtures[kind];
      const created = await plugins[kind].create(f.inputs);
      expect(created.id).toBe(f.id);
      expect(without(created.properties, OBSERVED[kind])).toEqual(without(f.outputs, OBSERVED[kind]));
      if (created.properties.lastApply) {
        const sent = Object.values(kind === "DeferredNatLoadBalancer" ? created.properties.lastApply : { only: created.properties.lastApply });
        expect(sent.every((s: any) => s.messages > 0)).toBe(true);
      }
    });
  }

  it("creating them sent bundles that the observers saw (so seeing none later means something)", () => {
    expect(bundles().some((b) => b.messages > 0)).toBe(true);
  });

  for (const kind of FIXTURE_KINDS) {
    it(`${kind}: check and read return the fixture's inputs; diff is no change; update sends nothing`, async () => {
      const f = fixtures[kind];
      const plugin = plugins[kind];
      const keyed = asKeyed(kind, f.inputs);
      const checked = await plugin.check(f.inputs, f.inputs);
      expect(checked.failures).toEqual([]);
      expect(checked.inputs).toEqual(keyed);
      // The engine records the keyed inputs; checked again (the next run), they are the same: no change to show.
      expect(await plugin.check(checked.inputs, checked.inputs)).toEqual(checked);

      const read = await plugin.read(f.id, f.outputs);
      expect(read.id).toBe(f.id);
      expect(read.inputs).toEqual(keyed);
      if (kind === "DeferredNatLoadBalancer") expect([read.properties.drift, read.properties.driftFindings]).toEqual([[], []]);

      expect(await plugin.diff(f.id, f.outputs, f.inputs)).toEqual({ changes: "none", replaces: [], deleteBeforeReplace: false });

      // After an upgrade: the program's inputs, checked (keyed), carry this ovslb's text, the state the old one.
      const upgraded = { ...keyed, __provider: currentText[kind] };
      expect(currentText[kind]).not.toBe(f.inputs.__provider);
      expect(await plugin.diff(f.id, f.outputs, upgraded)).toEqual({ changes: "none", replaces: [], deleteBeforeReplace: false });
      const reread = await plugin.read(f.id, { ...f.outputs, __provider: currentText[kind] });
      expect(reread.inputs).toEqual(upgraded);

      const rows = ownedRows(kind);
      const seen = bundles().length;
      const updated = await plugin.update(f.id, f.outputs, upgraded);
      expect(bundles().length).toBe(seen);
      expect(ownedRows(kind)).toEqual(rows);
      const lastApply = updated.properties.lastApply;
      if (kind === "DeferredNatLoadBalancer") {
        expect(Object.keys(lastApply).sort()).toEqual(["gw1", "gw2"]);
        for (const gw of Object.values<Props>(lastApply)) expect(gw).toEqual({ messages: 0, bytes: 0, operations: {} });
      } else if (lastApply !== undefined || kind === "DsrHypervisorFlows" || kind === "DistributorAttachment") {
        expect(lastApply).toEqual({ messages: 0, bytes: 0, operations: {} });
      }
      // Everything recorded stays as it was, lists in their recorded order; only the provider text is this ovslb's.
      expect(updated.properties.__provider).toBe(currentText[kind]);
      const ignored = [...OBSERVED[kind], "lastApply", "__provider"];
      expect(without(updated.properties, ignored)).toEqual(without(f.outputs, ignored));
    });
  }

  for (const kind of [...FIXTURE_KINDS].reverse()) {
    it(`${kind}: delete(fixture id, fixture outputs) removes it; read says gone`, async () => {
      const f = fixtures[kind];
      await plugins[kind].delete(f.id, f.outputs);
      expect((await plugins[kind].read(f.id, f.outputs)).id).toBe("");
      expect(ownedRows(kind)).toEqual([]);
    });
  }
});
