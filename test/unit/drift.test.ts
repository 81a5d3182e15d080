import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { confinedVip, driftOutputs, recordedFindings, renderFinding, type DriftFinding } from "../../provider/model/drift";

/**
 * The `drift` output's sentences are read by users' programs and
 * pipelines: rendered from findings, they must say exactly what they said
 * when they were written as strings. Each literal below is a sentence an
 * earlier ovslb recorded.
 */
const VIP = "tcp:10.0.0.187:80";
const at = (kind: DriftFinding["kind"], object: string, extra: Partial<DriftFinding> = {}): DriftFinding => ({ host: "gw2", kind, object, vip: VIP, ...extra });

const SENTENCES: [DriftFinding, string][] = [
  [at("bucket-missing", "bucket 123 (10.0.3.53:8080#0)"), "gw2: VIP tcp:10.0.0.187:80: bucket 123 (10.0.3.53:8080#0) missing"],
  [at("bucket-changed", "bucket 123 (10.0.3.53:8080#0)"), "gw2: VIP tcp:10.0.0.187:80: bucket 123 (10.0.3.53:8080#0) changed"],
  [at("bucket-stray", "bucket 4242"), "gw2: VIP tcp:10.0.0.187:80: bucket 4242 is not declared"],
  [at("flow-changed", "flow"), "gw2: VIP tcp:10.0.0.187:80: flow missing or changed"],
  [at("flow-changed", "entry flow"), "gw2: VIP tcp:10.0.0.187:80: entry flow missing or changed"],
  [at("group-missing", "group 77"), "gw2: VIP tcp:10.0.0.187:80: group 77 missing"],
  [at("selection-changed", "selection", { detail: "default on no fields" }), "gw2: VIP tcp:10.0.0.187:80: selection is default on no fields"],
  [at("slot-flows-changed", "3 slot flows"), "gw2: VIP tcp:10.0.0.187:80: 3 slot flows missing or changed"],
  [at("tunnel-port", "tunnel port to hypervisor hv1"), "gw2: VIP tcp:10.0.0.187:80: tunnel port to hypervisor hv1 missing or changed"],
  [at("bfd-port", "BFD port to hypervisor hv1"), "gw2: VIP tcp:10.0.0.187:80: BFD port to hypervisor hv1 missing, changed, or not dropping data"],
  [
    { host: "root@172.31.204.2:22 (g2)", kind: "not-applied", object: "this change", detail: "OpenFlow bundle refused: OFPBFC_MSG_FAILED" },
    "root@172.31.204.2:22 (g2): not changed: OpenFlow bundle refused: OFPBFC_MSG_FAILED",
  ],
  [
    { host: "root@172.31.204.2:22 (g2)", kind: "may-be-applied", object: "this change", detail: "connection lost" },
    "root@172.31.204.2:22 (g2): may or may not have been changed: connection lost",
  ],
  [
    { host: "deferred-nat/web", kind: "failed-after-apply", object: "root@10.0.0.1:22 (gw1), root@10.0.0.2:22 (gw2)", detail: "OVN northbound unreachable" },
    "deferred-nat/web: changed every host (root@10.0.0.1:22 (gw1), root@10.0.0.2:22 (gw2)), then failed: OVN northbound unreachable",
  ],
  [
    { host: "deferred-nat/web", kind: "gateway-removal-failed", object: "gw3, gw4", detail: "connect failed" },
    "deferred-nat/web: changed every listed gateway; removing it from gw3, gw4 failed: connect failed",
  ],
  [{ host: "northbound", kind: "northbound-row", object: "OVN Load_Balancer ovslb-web-tcp", detail: "missing" }, "OVN Load_Balancer ovslb-web-tcp missing"],
  [
    { host: "northbound", kind: "northbound-row", object: "OVN Load_Balancer ovslb-web-tcp", detail: "not attached to router lr0" },
    "OVN Load_Balancer ovslb-web-tcp not attached to router lr0",
  ],
  [
    { host: "northbound", kind: "northbound-column", object: "OVN Load_Balancer ovslb-web-tcp", detail: "selectionFields differs" },
    "OVN Load_Balancer ovslb-web-tcp: selectionFields differs",
  ],
  [
    { host: "northbound", kind: "northbound-column", object: "OVN Load_Balancer ovslb-web-tcp", detail: "health check of VIP 10.0.0.2:80 missing" },
    "OVN Load_Balancer ovslb-web-tcp: health check of VIP 10.0.0.2:80 missing",
  ],
];

describe("renderFinding: today's sentences, literally", () => {
  it.each(SENTENCES)("%j", (finding, sentence) => {
    expect(renderFinding(finding)).toBe(sentence);
  });

  it("covers every kind the schema declares", () => {
    const schema = JSON.parse(readFileSync(join(__dirname, "..", "..", "schema", "common.json"), "utf8"));
    expect(new Set(SENTENCES.map(([f]) => f.kind))).toEqual(new Set(schema.definitions.driftFinding.properties.kind.enum));
  });

  it("drift is the findings rendered, in order", () => {
    const findings = SENTENCES.map(([f]) => f);
    expect(driftOutputs(findings)).toEqual({ drift: SENTENCES.map(([, s]) => s), driftFindings: findings });
  });
});

describe("what a finding confines a repair to", () => {
  it("a VIP's group, bucket or flow: that VIP; a gateway's tunnel or BFD port, a host, the northbound: nothing less than everything", () => {
    const confined = SENTENCES.filter(([f]) => confinedVip(f) !== undefined).map(([f]) => f.kind);
    expect(new Set(confined)).toEqual(
      new Set(["bucket-missing", "bucket-changed", "bucket-stray", "flow-changed", "group-missing", "selection-changed", "slot-flows-changed"]),
    );
    expect(confinedVip(at("bucket-missing", "bucket 1 (10.0.0.1:80#0)"))).toBe(VIP);
    // The kind alone does not confine: a finding without its VIP is not one VIP's.
    expect(confinedVip({ host: "gw1", kind: "flow-changed", object: "flow" })).toBeUndefined();
  });

  it("state recorded before findings were: its sentences are not parsed; non-empty drift has no known findings", () => {
    expect(recordedFindings({ drift: ["gw2: VIP tcp:10.0.0.187:80: flow missing or changed"] })).toBeUndefined();
    expect(recordedFindings({ drift: [] })).toEqual([]);
    expect(recordedFindings({})).toEqual([]);
    const f = at("flow-changed", "flow");
    expect(recordedFindings({ drift: [renderFinding(f)], driftFindings: [f] })).toEqual([f]);
  });
});
