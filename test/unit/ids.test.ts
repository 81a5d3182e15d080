import { describe, it, expect } from "vitest";
import { COOKIE_TAG, MAX_BUCKET_ID, derivedId, interfaceName, ownerCookie } from "../../provider/model/ids";
import { operationLock } from "../../provider/transport/ovs-host";

describe("deterministic ids", () => {
  it("cookies carry the ovslb tag and differ per resource", () => {
    const a = ownerCookie("DeferredNatLoadBalancer", "web");
    expect(a >> 48n).toBe(COOKIE_TAG);
    expect(ownerCookie("DeferredNatLoadBalancer", "web")).toBe(a);
    expect(ownerCookie("DeferredNatLoadBalancer", "api")).not.toBe(a);
    expect(ownerCookie("DsrHypervisorFlows", "web")).not.toBe(a);
  });

  it("derives the cookies recorded in state as before (state is a contract: remembering them must not change them)", () => {
    expect(ownerCookie("DeferredNatLoadBalancer", "web")).toBe(0xb5e32a94745fa9cn);
    expect(ownerCookie("DsrHypervisorFlows", "web")).toBe(0xb5e57b8dcffcd6fn);
    // Kind and id are told apart by the kind's length, as the derivation does: "ab"+"c" is not "a"+"bc".
    expect(ownerCookie("ab", "c")).not.toBe(ownerCookie("a", "bc"));
  });

  it("derives the same id from the same parts and probes past taken ids deterministically", () => {
    const first = derivedId(["10.0.0.5:80"], MAX_BUCKET_ID);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(MAX_BUCKET_ID);
    const second = derivedId(["10.0.0.5:80"], MAX_BUCKET_ID, (id) => id === first);
    expect(second).not.toBe(first);
    expect(derivedId(["10.0.0.5:80"], MAX_BUCKET_ID, (id) => id === first)).toBe(second);
    expect(() => derivedId(["x"], 1, () => true)).toThrow(/no free id/);
  });

  it("spreads ids: 10,000 backends in a 32-bit space rarely collide", () => {
    const ids = new Set(Array.from({ length: 10_000 }, (_, i) => derivedId([`10.${i >> 8}.${i & 255}.1:80`], MAX_BUCKET_ID)));
    expect(ids.size).toBeGreaterThan(9_990);
  });

  it("builds interface names within 15 characters from a hash, refusing long prefixes", () => {
    const n = interfaceName("lbfe-", "tenant-a/lb-1");
    expect(n).toMatch(/^lbfe-[0-9a-f]{8}$/);
    expect(n.length).toBeLessThanOrEqual(15);
    expect(interfaceName("lbfe-", "tenant-b/lb-1")).not.toBe(n);
    expect(() => interfaceName("much-too-long-", "x")).toThrow(/no room/);
  });
});

describe("operation locks", () => {
  it("are OVSDB ids (what ovsdb-server accepts as a lock name), one per resource id, the same every time", () => {
    const ids = ["deferred-nat/web", "dsr-hypervisor-flows/10.0.0.1/br-int/web", "deferred-nat/ünïcode lb", ""];
    const names = ids.map((id) => operationLock(id).name);
    for (const n of names) expect(n).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
    expect(new Set(names).size).toBe(ids.length);
    expect(operationLock("deferred-nat/web")).toEqual({ resource: "deferred-nat/web", name: names[0] });
  });
});
