import { describe, expect, it } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { dynamicProvider } from "../../provider/dynamic";
import { handle } from "../../provider/handlers";
import { COOKIE_TAG, MAX_BUCKET_ID, MAX_CT_ZONE, MAX_GROUP_ID, derivedId, interfaceName, ownerCookie } from "../../provider/model/ids";
import { OWNER_KEY as BRIDGE_OWNER_KEY, bridgeId } from "../../provider/resources/ovs-bridge/plan";
import { KIND as DSR_KIND, cookieOf as dsrCookieOf, derivedZone, dsrId } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { KIND as LB_KIND, assignIds, cookieOf as lbCookieOf, lbId } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { deviceResourceId } from "../../provider/resources/distributor-device/plan";
import { ATTACHMENT_KEY, DEVICE_KEY, DISTRIBUTOR_DEVICE_KEY, OWNER_KEY } from "../../provider/ovsdb";
import {
  FRONTEND_OFPORT,
  KIND as ATTACHMENT_KIND,
  attachmentId,
  attachmentNames,
  derivedFrontendMac,
  planIds,
} from "../../provider/resources/distributor-attachment/plan";
import { KIND as HEALTH_CHECK_KIND, healthCheckId, loadBalancerOwner, rowName } from "../../provider/resources/health-check/plan";
import { LOAD_BALANCER_KEY, MAPPINGS_KEY } from "../../provider/ovsdb";
import { FIXTURE_KINDS, loadFixture } from "../support/state-fixtures";

/**
 * The state contract (docs/state-contract.md) as literals: the resource
 * kinds, the module the serialized provider requires, and the id, cookie,
 * group, bucket, zone and name derivations, each pinned to the value the
 * state fixtures (test/fixtures/state, written by commit 6c13b74) recorded.
 * Every stack's state holds these values; refresh and destroy find their
 * resources by them. If one of these tests fails, the change breaks
 * existing stacks: revert it, do not update the literal.
 */

const root = resolve(__dirname, "..", "..");
const hex = (n: bigint) => `0x${n.toString(16)}`;

describe("the resource kinds and the provider's entry point", () => {
  it("the five kinds are exactly these strings, and each is a resource type ovslb:<Kind>", async () => {
    expect(FIXTURE_KINDS).toEqual(["OvsBridge", "DsrHypervisorFlows", "DeferredNatLoadBalancer", "DistributorDevice", "DistributorAttachment"]);
    for (const kind of FIXTURE_KINDS) {
      // check({}, {}) only validates: every kind is known to the one entry point.
      const r = (await handle(kind, "check", [{}, {}])) as { failures: unknown[] };
      expect(r.failures.length, kind).toBeGreaterThan(0);
      expect(loadFixture(kind).type).toBe(`pulumi-nodejs:dynamic/ovslb:${kind}`);
    }
    await expect(handle("LoadBalancer", "check", [{}, {}])).rejects.toThrow(/unknown resource kind "LoadBalancer"/);
  });

  it("HealthCheck (added after the fixtures, none recorded for it yet) is a kind too: its string, id, owner mark and the load balancer's rows it attaches to", async () => {
    expect(HEALTH_CHECK_KIND).toBe("HealthCheck");
    const r = (await handle("HealthCheck", "check", [{}, {}])) as { failures: unknown[] };
    expect(r.failures.length).toBeGreaterThan(0);
    // The id is also the owner mark of its Load_Balancer_Health_Check rows; the rows it attaches to are DeferredNatLoadBalancer's.
    expect(healthCheckId({ loadBalancer: "web" })).toBe("health-check/web");
    expect(loadBalancerOwner({ loadBalancer: "web" })).toBe("deferred-nat/web");
    expect(["tcp", "udp", "sctp"].map((p) => rowName({ loadBalancer: "web" }, p))).toEqual(["ovslb-web-tcp", "ovslb-web-udp", "ovslb-web-sctp"]);
    expect([LOAD_BALANCER_KEY, MAPPINGS_KEY]).toEqual(["ovslb:load-balancer", "ovslb:ip-port-mappings"]);
  });

  it("the serialized provider requires ovslb/dist/provider/handlers and calls handle(kind, method, args): that module never moves", () => {
    const text = loadFixture("OvsBridge").outputs.__provider as string;
    for (const [method, args] of [
      ["check", "olds, news"],
      ["diff", "id, olds, news"],
      ["create", "inputs"],
      ["read", "id, props"],
      ["update", "id, olds, news"],
      ["delete", "id, props"],
    ]) {
      expect(text).toContain(`require("ovslb/dist/provider/handlers").handle(kind, "${method}", [${args}])`);
    }
    // provider/handlers.ts compiles to dist/provider/handlers.js ...
    expect(existsSync(join(root, "provider", "handlers.ts"))).toBe(true);
    const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8"));
    expect(tsconfig.compilerOptions).toMatchObject({ rootDir: ".", outDir: "dist", module: "commonjs" });
    // ... which the package ships and, if it declares exports, exports under that name.
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.name).toBe("ovslb");
    expect((pkg.files as string[]).some((f) => "dist/provider/handlers.js".startsWith(f.replace(/\/?\*?$/, "")))).toBe(true);
    if (pkg.exports !== undefined) expect(JSON.stringify(pkg.exports)).toContain('"./dist/provider/handlers"');
  });
});

describe("the provider object a program serializes", () => {
  it("is one object per kind, so the SDK, which caches a provider's serialized text by object, serializes each kind once per program", () => {
    expect(dynamicProvider("OvsBridge")).toBe(dynamicProvider("OvsBridge"));
    expect(dynamicProvider("OvsBridge")).not.toBe(dynamicProvider("DsrHypervisorFlows"));
  });
});

describe("the marks ovslb leaves on hosts", () => {
  it("cookie kinds and external_ids keys", () => {
    // The kind strings fed to ownerCookie and derivedId (the attachment's is lower case, not its resource kind).
    expect([DSR_KIND, LB_KIND, ATTACHMENT_KIND]).toEqual(["DsrHypervisorFlows", "DeferredNatLoadBalancer", "distributor-attachment"]);
    expect([BRIDGE_OWNER_KEY, OWNER_KEY, DEVICE_KEY, ATTACHMENT_KEY]).toEqual(["ovslb:owner", "ovslb:owner", "ovslb:device", "ovslb:attachment"]);
    expect([DISTRIBUTOR_DEVICE_KEY, DEVICE_KEY]).toEqual(["ovslb:distributor-device", "ovslb:device"]);
    expect(FRONTEND_OFPORT).toBe(1);
  });
});

describe("ids.ts: the primitives", () => {
  it("keeps its constants", () => {
    expect([MAX_GROUP_ID, MAX_BUCKET_ID, MAX_CT_ZONE, COOKIE_TAG]).toEqual([0xffffff00, 0xffffff00, 0xffff, 0x0b5en]);
  });

  it("ownerCookie, derivedId and interfaceName give the recorded values", () => {
    expect(hex(ownerCookie("DsrHypervisorFlows", "dsr-hypervisor-flows/172.30.0.21/br-seg/fixture-dsr"))).toBe("0xb5ef990430e66f2");
    expect(hex(ownerCookie("DeferredNatLoadBalancer", "fixture-dnat"))).toBe("0xb5ea323e240b2e5");
    expect(hex(ownerCookie("distributor-attachment", "distributor-attachment/fixture-device/fixture-lb"))).toBe("0xb5ef5a52ed5f86d");
    expect(derivedId(["deferred-nat/fixture-dnat", "tcp:10.0.0.232:80"], MAX_GROUP_ID)).toBe(2762359939);
    expect(derivedId(["10.0.0.103:8080#0"], MAX_BUCKET_ID)).toBe(313015796);
    expect(derivedId(["DsrHypervisorFlows", "dsr-hypervisor-flows/172.30.0.21/br-seg/fixture-dsr"], MAX_CT_ZONE)).toBe(15574);
    expect(derivedId(["distributor-attachment", "distributor-attachment/fixture-device/fixture-lb", "group"], MAX_GROUP_ID)).toBe(1220357357);
    // Probing: the same parts probe the same sequence.
    const first = derivedId(["10.0.0.103:8080#0"], MAX_BUCKET_ID);
    const probed = derivedId(["10.0.0.103:8080#0"], MAX_BUCKET_ID, (id) => id === first);
    expect(probed).toBe(derivedId(["10.0.0.103:8080#0", "probe-1"], MAX_BUCKET_ID));
    expect(interfaceName("dlb-", "fixture-lb")).toBe("dlb-084a73ef");
    expect(interfaceName("dfe-", "fixture-lb")).toBe("dfe-084a73ef");
    expect(interfaceName("dup-", "fixture-lb")).toBe("dup-084a73ef");
  });
});

describe("each resource's derivations give the fixture's values", () => {
  it("OvsBridge: id", () => {
    const f = loadFixture("OvsBridge");
    expect(bridgeId(f.inputs as any)).toBe("ovs-bridge/172.30.0.23/fixture-br");
    expect(f.id).toBe("ovs-bridge/172.30.0.23/fixture-br");
  });

  it("DsrHypervisorFlows: id, cookie, zone", () => {
    const f = loadFixture("DsrHypervisorFlows");
    expect(dsrId(f.inputs as any)).toBe("dsr-hypervisor-flows/172.30.0.21/br-seg/fixture-dsr");
    expect(f.id).toBe("dsr-hypervisor-flows/172.30.0.21/br-seg/fixture-dsr");
    expect(hex(dsrCookieOf(f.id))).toBe("0xb5ef990430e66f2");
    expect(f.outputs.cookie).toBe("0xb5ef990430e66f2");
    expect(derivedZone(f.id, new Set())).toBe(15574);
    expect(f.outputs.ctZone).toBe(15574);
  });

  it("DeferredNatLoadBalancer: id, cookie, group ids, bucket ids", () => {
    const f = loadFixture("DeferredNatLoadBalancer");
    expect(lbId(f.inputs as any)).toBe("deferred-nat/fixture-dnat");
    expect(f.id).toBe("deferred-nat/fixture-dnat");
    expect(hex(lbCookieOf(f.inputs as any))).toBe("0xb5ea323e240b2e5");
    expect(f.outputs.cookie).toBe("0xb5ea323e240b2e5");
    const recorded = {
      groupIds: { "tcp:10.0.0.232:80": 2762359939 },
      bucketIds: { "tcp:10.0.0.232:80": { "10.0.0.103:8080#0": 313015796, "10.0.0.112:8080#0": 3038571841, "10.0.0.112:8080#1": 2582719011 } },
    };
    expect(assignIds(f.inputs as any, { groupIds: {}, bucketIds: {} }, new Set())).toEqual(recorded);
    expect({ groupIds: f.outputs.groupIds, bucketIds: f.outputs.bucketIds }).toEqual(recorded);
    // Recorded ids are sticky: kept as given even when derivation would say otherwise.
    const sticky = { groupIds: { "tcp:10.0.0.232:80": 7 }, bucketIds: { "tcp:10.0.0.232:80": { "10.0.0.103:8080#0": 9 } } };
    const kept = assignIds(f.inputs as any, sticky, new Set());
    expect(kept.groupIds["tcp:10.0.0.232:80"]).toBe(7);
    expect(kept.bucketIds["tcp:10.0.0.232:80"]["10.0.0.103:8080#0"]).toBe(9);
  });

  it("DistributorDevice: id", () => {
    const f = loadFixture("DistributorDevice");
    expect(deviceResourceId(f.inputs as any)).toBe("distributor-device/fixture-device");
    expect(f.id).toBe("distributor-device/fixture-device");
  });

  it("DistributorAttachment: id, names, frontend MAC, cookie, group id, bucket ids", () => {
    const f = loadFixture("DistributorAttachment");
    expect(attachmentId(f.inputs as any)).toBe("distributor-attachment/fixture-device/fixture-lb");
    expect(f.id).toBe("distributor-attachment/fixture-device/fixture-lb");
    const names = { bridge: "dlb-084a73ef", frontendPort: "dfe-084a73ef", uplinkPort: "dup-084a73ef" };
    expect(attachmentNames(f.inputs as any)).toEqual(names);
    expect({ bridge: f.outputs.bridge, frontendPort: f.outputs.frontendPort, uplinkPort: f.outputs.uplinkPort }).toEqual(names);
    expect(derivedFrontendMac("fixture-lb")).toBe("02:d1:02:67:b7:e4");
    expect(f.inputs.frontendMac).toBe("02:d1:02:67:b7:e4");
    const ids = planIds(f.inputs as any, [1, 2], undefined);
    expect(hex(ids.cookie)).toBe("0xb5ef5a52ed5f86d");
    expect(ids.groupId).toBe(1220357357);
    expect(Object.fromEntries(ids.bucketIds)).toEqual({ 1: 2528356368, 2: 3442007719 });
    expect(f.outputs).toMatchObject({ cookie: "0xb5ef5a52ed5f86d", groupId: 1220357357, frontendOfport: 1 });
    expect(f.outputs.slots.map((s: any) => [s.slot, s.bucketId])).toEqual([
      [1, 2528356368],
      [2, 3442007719],
    ]);
    // Sticky: recorded ids are reused, never re-derived.
    const again = planIds(f.inputs as any, [1, 2, 3], { groupId: 5, slots: [{ slot: 1, bucketId: 6 }] });
    expect(again.groupId).toBe(5);
    expect(again.bucketIds.get(1)).toBe(6);
  });
});
