import { describe, expect, it } from "vitest";
import { diff } from "../../provider/handlers";
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
};

describe.each(FIXTURE_KINDS)("%s", (kind) => {
  const f = loadFixture(kind);
  const { __provider: _text, ...inputs } = f.inputs as Record<string, Json>;

  it("the recorded inputs against the recorded state: no change", async () => {
    expect(await diff(kind, f.id, f.outputs, f.inputs)).toEqual({ changes: false });
  });

  it("any one value changed: an update in place, or a replace naming exactly the identity it changed", async () => {
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
    for (const kind of FIXTURE_KINDS) {
      const f = loadFixture(kind);
      const replacedOn = new Set<string>();
      for (const { path, value } of leaves(f.inputs).filter((l) => !l.path.startsWith("__provider"))) {
        const r = await diff(kind, f.id, f.outputs, withLeaf(f.inputs, path, changed(value)) as Record<string, unknown>);
        for (const k of r.replaces ?? []) replacedOn.add(k);
      }
      expect([...replacedOn].sort(), kind).toEqual([...IDENTITY[kind]].filter((k) => leaves(f.inputs).some((l) => l.path === k)).sort());
    }
  });
});
