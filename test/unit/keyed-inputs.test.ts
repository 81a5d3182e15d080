import { describe, expect, it } from "vitest";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { asKeyed, asLists, check, diff } from "../../provider/handlers";
import { UNKNOWN, keyedInputs, listedInputs } from "../../provider/model/keyed";
import { KEY, UNORDERED, reachesUnder, resolveRef, type SchemaNode } from "../../provider/model/validate";
import { smallBackend, smallLoadBalancer } from "../support/small-load-balancer";

/**
 * Sets keyed by identity in what check returns (provider/model/keyed.ts):
 * the keyed form, the way back in the order of record, and the cases left
 * as lists.
 */

type Props = Record<string, any>;
const backend = smallBackend;
const lb = (): Props =>
  smallLoadBalancer([
    { address: "10.0.0.194", port: 443, protocol: "tcp", backends: [backend(4)] },
    { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(3), backend(1), backend(2)] },
  ]);

const KIND = "DeferredNatLoadBalancer";

async function checked(inputs: Props): Promise<Props> {
  const r = await check(KIND, {}, inputs);
  expect(r.failures).toEqual([]);
  return r.inputs;
}

describe("check keys each set by its elements' identity", () => {
  it("VIPs by address:port/protocol, backends by address:port, hypervisors by name; gateways (they hold a connection) stay a list", async () => {
    const out = await checked(lb());
    expect(Object.keys(out.vips)).toEqual(["10.0.0.194:443/tcp", "10.0.0.193:80/tcp"]);
    expect(Object.keys(out.vips["10.0.0.193:80/tcp"].backends)).toEqual(["10.1.0.3:8080", "10.1.0.1:8080", "10.1.0.2:8080"]);
    expect(out.vips["10.0.0.193:80/tcp"].backends["10.1.0.1:8080"]).toMatchObject({ address: "10.1.0.1", port: 8080, weight: 1 });
    expect(out.hypervisors).toEqual({ hv1: { name: "hv1" } });
    expect(Array.isArray(out.gateways)).toBe(true);
  });

  it("takes its own output back (the engine may check recorded inputs again) and returns it unchanged", async () => {
    const once = await checked(lb());
    expect(await checked(once)).toEqual(once);
  });

  it("every other method gets lists: new elements in key order, recorded ones in their recorded order", async () => {
    const keyed = await checked(lb());
    const fresh: Props = asLists(KIND, keyed);
    expect(fresh.vips.map((v: Props) => v.address)).toEqual(["10.0.0.193", "10.0.0.194"]);
    expect(fresh.vips[0].backends.map((b: Props) => b.address)).toEqual(["10.1.0.1", "10.1.0.2", "10.1.0.3"]);

    const recorded = lb();
    const grown = lb();
    grown.vips[1].backends.push(backend(0));
    grown.vips.push({ address: "10.0.0.190", port: 80, protocol: "tcp", backends: [backend(5)] });
    const listed = listedInputs(schemaOf(KIND), await checked(grown), recorded);
    expect(listed.vips.map((v: Props) => v.address)).toEqual(["10.0.0.194", "10.0.0.193", "10.0.0.190"]);
    expect(listed.vips[1].backends.map((b: Props) => b.address)).toEqual(["10.1.0.3", "10.1.0.1", "10.1.0.2", "10.1.0.0"]);
  });

  it("leaves a set a list where its identity is not known yet (a preview's unknown) or repeats", () => {
    const schema = schemaOf(KIND);
    const unknown = lb();
    unknown.vips[1].backends[1].address = UNKNOWN;
    const out = keyedInputs(schema, unknown);
    expect(Object.keys(out.vips)).toEqual(["10.0.0.194:443/tcp", "10.0.0.193:80/tcp"]);
    expect(Array.isArray(out.vips["10.0.0.193:80/tcp"].backends)).toBe(true);
    expect(out.vips["10.0.0.194:443/tcp"].backends).toEqual({ "10.1.0.4:8080": backend(4) });

    const twice = lb();
    twice.vips[1].backends.push(backend(3));
    expect(Array.isArray(keyedInputs(schema, twice).vips["10.0.0.193:80/tcp"].backends)).toBe(true);
    // And a list given where a keyed set is expected is taken as it is.
    expect(listedInputs(schema, twice)).toEqual(twice);
  });

  it("brackets an IPv6 address in a key of several parts, so address and port stay apart", () => {
    const v6 = { vips: [{ address: "2001:db8::1", port: 80, protocol: "tcp", backends: [{ address: "2001:db8::10", port: 8080 }] }] };
    const out = keyedInputs(schemaOf(KIND), v6) as Props;
    expect(Object.keys(out.vips)).toEqual(["[2001:db8::1]:80/tcp"]);
    expect(Object.keys(out.vips["[2001:db8::1]:80/tcp"].backends)).toEqual(["[2001:db8::10]:8080"]);
  });

  it("a DSR VIP without a protocol is keyed with the default, tcp", () => {
    const out = keyedInputs(schemaOf("DsrHypervisorFlows"), { vips: [{ address: "10.0.0.9", port: 80, backends: [] }] }) as Props;
    expect(Object.keys(out.vips)).toEqual(["10.0.0.9:80/tcp"]);
  });

  it("diff of recorded lists against keyed inputs: no change for the same set in any order, a change for one more backend", async () => {
    const recorded = asLists(KIND, await checked(lb()));
    const outputs = { ...recorded, groupIds: {}, bucketIds: {} };
    const reordered = lb();
    reordered.vips.reverse();
    reordered.vips[0].backends.reverse();
    expect(await diff(KIND, "web", outputs, await checked(reordered))).toEqual({ changes: false });
    const grown = lb();
    grown.vips[0].backends.push(backend(5));
    expect(await diff(KIND, "web", outputs, await checked(grown))).toEqual({ changes: true, replaces: [], deleteBeforeReplace: false });
    expect(asKeyed(KIND, recorded)).toEqual(await checked(lb()));
  });
});

const SCHEMA_DIR = join(__dirname, "..", "..", "schema");
const SCHEMAS: Record<string, object> = {
  DeferredNatLoadBalancer: JSON.parse(readFileSync(join(SCHEMA_DIR, "deferred-nat-load-balancer.json"), "utf8")),
  DsrHypervisorFlows: JSON.parse(readFileSync(join(SCHEMA_DIR, "dsr-hypervisor-flows.json"), "utf8")),
};
function schemaOf(kind: string): object {
  return SCHEMAS[kind];
}

describe("x-key in schema/", () => {
  /** Every array node with x-key, with its document. */
  function keyedNodes(node: unknown, doc: object, at: string, out: Array<{ at: string; node: SchemaNode; doc: object }>) {
    if (!node || typeof node !== "object") return;
    const n = node as SchemaNode & Record<string, unknown>;
    if (typeof n[KEY] === "string") out.push({ at, node: n, doc });
    for (const [k, v] of Object.entries(n)) if (k !== "$ref") keyedNodes(v, doc, `${at}/${k}`, out);
  }

  const files = readdirSync(SCHEMA_DIR).filter((f) => f.endsWith(".json"));
  const found = files.flatMap((f) => {
    const doc = JSON.parse(readFileSync(join(SCHEMA_DIR, f), "utf8")) as object;
    const out: Array<{ at: string; node: SchemaNode; doc: object }> = [];
    keyedNodes(doc, doc, f, out);
    return out;
  });

  it("is on sets only, of objects with no connection under them, naming properties the elements have", () => {
    expect(found.length).toBeGreaterThanOrEqual(9);
    for (const { at, node, doc } of found) {
      expect(node[UNORDERED], at).toBe(true);
      let items = node.items;
      let itemsDoc = doc;
      while (items?.$ref) ({ node: items, doc: itemsDoc } = resolveRef(items.$ref, itemsDoc));
      expect(items?.type, at).toBe("object");
      expect(reachesUnder(node.items, doc), `${at}: a connection under a keyed set would lose its secrets' marks`).toBe(false);
      for (const [, field] of node[KEY]!.matchAll(/\{([A-Za-z0-9_]+)/g)) expect(Object.keys(items!.properties ?? {}), `${at}: {${field}}`).toContain(field);
    }
  });
});
