import { describe, expect, it } from "vitest";
import { asLists, check, diff } from "../../provider/handlers";
import { propertyDiffText } from "../harness/diff-text";
import { smallBackend, smallLoadBalancer } from "../support/small-load-balancer";

/**
 * What a reviewer reads in `pulumi preview --diff` of a load balancer's
 * change. A dynamic provider returns no detailed diff, so the CLI prints the
 * engine's own diff of the old and new checked inputs (test/harness/diff-text.ts
 * renders it as the CLI does). With each set keyed by identity in the checked
 * inputs, each change reads as what it is.
 */

type Props = Record<string, any>;
const backend = smallBackend;
const lb = (): Props => smallLoadBalancer([{ address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(1), backend(2), backend(3)] }]);
/** The whole text of a change within VIP 10.0.0.193:80/tcp's backends: `lines`, nested as the CLI nests them. */
const inBackends = (...lines: string[]) =>
  ["  ~ vips           : {", "      ~ 10.0.0.193:80/tcp: {", "          ~ backends: {", ...lines, "            }", "        }", "    }", ""].join("\n");

const KIND = "DeferredNatLoadBalancer";
const checked = async (inputs: Props) => {
  const r = await check(KIND, {}, inputs);
  expect(r.failures).toEqual([]);
  return r.inputs;
};
/** The preview's property lines for a change from lb() to `changed`, and whether the provider's diff calls it a change. */
async function preview(change: (p: Props) => void): Promise<{ text: string; changes: boolean }> {
  const before = await checked(lb());
  const after = lb();
  change(after);
  const news = await checked(after);
  const outputs = { ...asLists(KIND, before), groupIds: {}, bucketIds: {} };
  return { text: propertyDiffText(before, news), changes: (await diff(KIND, "web", outputs, news)).changes };
}

describe("preview of a DeferredNatLoadBalancer change", () => {
  it("one backend added in the middle: one added backend, named by its address and port", async () => {
    const p = await preview((lb) => lb.vips[0].backends.splice(1, 0, backend(5)));
    expect(p.changes).toBe(true);
    expect(p.text).toBe(
      inBackends(
        "              + 10.1.0.5:8080: {",
        '                  + address   : "10.1.0.5"',
        '                  + hypervisor: "hv1"',
        '                  + mac       : "02:00:00:00:00:05"',
        "                  + port      : 8080",
        "                  + weight    : 1",
        "                }",
      ),
    );
  });

  it("one backend removed: one removed backend", async () => {
    const p = await preview((lb) => lb.vips[0].backends.splice(0, 1));
    expect(p.changes).toBe(true);
    expect(p.text.split("\n").filter((l) => /^\s*[+-] /.test(l))).toEqual([
      "              - 10.1.0.1:8080: {",
      '                  - address   : "10.1.0.1"',
      '                  - hypervisor: "hv1"',
      '                  - mac       : "02:00:00:00:00:01"',
      "                  - port      : 8080",
      "                  - weight    : 1",
    ]);
  });

  it("a weight changed: one changed value", async () => {
    const p = await preview((lb) => (lb.vips[0].backends[1].weight = 3));
    expect(p.text).toBe(inBackends("              ~ 10.1.0.2:8080: {", "                  ~ weight    : 1 => 3", "                }"));
  });

  it("backends reordered: no change at all", async () => {
    const p = await preview((lb) => lb.vips[0].backends.reverse());
    expect(p).toEqual({ text: "", changes: false });
  });

  it("a new VIP: one added VIP with its backends", async () => {
    const p = await preview((lb) => lb.vips.push({ address: "10.0.0.194", port: 443, protocol: "tcp", backends: [backend(4)] }));
    const lines = p.text.split("\n");
    expect(lines.slice(0, 3)).toEqual(["  ~ vips           : {", "      + 10.0.0.194:443/tcp: {", '          + address : "10.0.0.194"']);
    expect(lines.filter((l) => /^\s*~ /.test(l))).toEqual(["  ~ vips           : {"]);
    expect(lines.filter((l) => /^\s*- /.test(l))).toEqual([]);
  });

  it("as lists (what the engine recorded before keyed sets): the same add reads as two changed backends and one added", () => {
    const before = lb();
    const after = lb();
    after.vips[0].backends.splice(1, 0, backend(5));
    const text = propertyDiffText(before, after);
    expect(text.split("\n").filter((l) => /^\s*[~+] \[\d\]/.test(l))).toEqual([
      "      ~ [0]: {",
      "                  ~ [1]: {",
      "                  ~ [2]: {",
      "                  + [3]: {",
    ]);
  });
});
