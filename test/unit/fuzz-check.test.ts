import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { asLists, check } from "../../provider/handlers";
import { actionsText, flowKey, parseFlows, parseGroups, sameBucket, splitTopLevel, toGroupEntry } from "../../provider/openflow";
import { bridgeSocket } from "../../provider/transport/ovs-host";
import {
  KINDS,
  SCHEMAS,
  SECRET_KEY,
  SECRET_PASSPHRASE,
  flowsOf,
  groupsOf,
  inputsOf,
  propertySteps,
  renderAccepted,
  schemaHasPath,
  type Kind,
} from "../support/fuzz-inputs";

/**
 * Property-based fuzzing of every resource's inputs (issue 13): generated
 * valid and hostile inputs either fail check, each failure naming a property
 * the schema declares and a reason (never a secret), or pass and plan flows
 * and groups whose every line the provider's own parser reads back as the
 * same flow or group: no value adds, drops or changes a field.
 */

const RUNS = Number(process.env.OVSLB_FUZZ_RUNS ?? 300);
const COVERAGE_RUNS = 2_000;
const COVERAGE_SEED = 13;

/** A `flow add` bundle line as dump-flows would print the flow (counters first, then the match, then " actions="). */
function asDumpLine(line: string): string {
  const body = line.slice("flow add ".length);
  const at = body.indexOf(",actions=");
  const tokens = splitTopLevel(body.slice(0, at));
  const get = (name: string) => tokens.find((t) => t.startsWith(`${name}=`))!.slice(name.length + 1);
  const match = tokens.filter((t) => !/^(table|priority|cookie)=/.test(t));
  return ` cookie=${get("cookie")}, duration=0.001s, table=${get("table")}, n_packets=0, n_bytes=0, priority=${get("priority")}${match.length ? "," : ""}${match.join(",")} actions=${body.slice(at + ",actions=".length)}`;
}

const stringsIn = (v: unknown): string[] =>
  typeof v === "string" ? [v] : Array.isArray(v) ? v.flatMap(stringsIn) : v && typeof v === "object" ? Object.values(v).flatMap(stringsIn) : [];

describe.each(KINDS)("fuzzed %s inputs", (kind: Kind) => {
  it("fail check naming a declared property and a reason (no secret echoed), or plan flows and groups that parse back unchanged", async () => {
    await fc.assert(
      fc.asyncProperty(inputsOf(kind), async (inputs) => {
        const { inputs: out, failures } = await check(kind, {}, inputs);
        const checked = asLists(kind, out);
        if (failures.length > 0) {
          for (const f of failures) {
            expect(typeof f.property).toBe("string");
            // An unknown key is named itself; its parent must be declared.
            const steps = propertySteps(f.property);
            const declared = f.reason === "is not a known property" ? steps.slice(0, -1) : steps;
            expect(schemaHasPath(SCHEMAS[kind], declared), `${f.property}: ${f.reason}`).toBe(true);
            expect(f.reason.length).toBeGreaterThan(2);
            expect(f.reason).not.toContain(SECRET_PASSPHRASE);
            expect(f.reason).not.toContain("OPENSSH PRIVATE KEY");
            expect(f.reason).not.toContain(SECRET_KEY.split("\n")[1].slice(0, 32));
            // Nor any hostile value: reasons say what was expected, not what was given.
            for (const given of ["actions=drop", "$(reboot)", "rm -rf", "`id`", "priority=65535", "../../etc"]) expect(f.reason).not.toContain(given);
          }
          return;
        }
        // Accepted: nothing unusual made it through.
        expect(Object.prototype.hasOwnProperty.call(checked, "__proto__")).toBe(false);
        // (externalIds values are free text stored as OVSDB JSON strings; connections, the OVSDB sockets' too, are never put in a flow or command line.)
        const sockets = [checked.northbound, checked.southbound].map((db) => (db as { socket?: unknown } | undefined)?.socket);
        for (const s of stringsIn({
          ...checked,
          host: undefined,
          gateways: undefined,
          externalIds: undefined,
          northbound: undefined,
          southbound: undefined,
          sockets,
        })) {
          expect(s).not.toMatch(/[\n\r\0`$;|&]/);
        }
        const hosts = [checked.host, ...((checked.gateways as { host: unknown }[] | undefined) ?? []).map((g) => g.host)].filter(Boolean);
        for (const bridge of [
          checked.bridge,
          checked.name,
          checked.uplinkBridge,
          ...((checked.gateways as { bridge: string }[] | undefined) ?? []).map((g) => g.bridge),
        ]) {
          // Every address ovs-ofctl is given is a unix socket path of plain characters.
          if (typeof bridge === "string" && hosts[0]) expect(bridgeSocket(hosts[0] as never, bridge)).toMatch(/^unix:\/[A-Za-z0-9_./-]+$/);
        }
        const { mods, lines } = renderAccepted(kind, checked);
        expect(mods.every((m) => m.op === "add-flow" || m.op === "add-group")).toBe(true);
        const flows = flowsOf(mods);
        const groups = groupsOf(mods);
        let f = 0;
        let g = 0;
        for (const line of lines) {
          expect(line).not.toMatch(/[\n\r\0]/);
          if (line.startsWith("flow add ")) {
            const want = flows[f++];
            const [got] = parseFlows(asDumpLine(line));
            expect(got.otherMatch).toEqual([]);
            expect(flowKey(got)).toBe(flowKey(want));
            expect(`0x${got.cookie.toString(16)}`).toBe(`0x${want.cookie.toString(16)}`);
            expect(actionsText(got.actions)).toBe(actionsText(want.actions));
            expect(got.actions.filter((a) => a.type === "other")).toEqual([]);
          } else {
            expect(line.startsWith("group add ")).toBe(true);
            const want = toGroupEntry(groups[g++]);
            const [got] = parseGroups(` ${line.slice("group add ".length)}`);
            expect({ ...got, buckets: [] }).toEqual({ ...want, buckets: [] });
            expect(got.buckets.length).toBe(want.buckets.length);
            got.buckets.forEach((b, i) => expect(sameBucket(b, want.buckets[i]), `bucket ${i}`).toBe(true));
          }
        }
        expect([f, g]).toEqual([flows.length, groups.length]);
      }),
      { numRuns: RUNS },
    );
    // The generators must exercise both paths, or the property proves little. Counted on a larger sample from a
    // fixed seed: the count does not depend on the seed the property ran with (DsrHypervisorFlows accepts about
    // 7% of its inputs, too close to 5% for 300 random ones).
    let accepted = 0;
    let refused = 0;
    let acceptedIpv6 = 0;
    for (const inputs of fc.sample(inputsOf(kind), { numRuns: COVERAGE_RUNS, seed: COVERAGE_SEED })) {
      if ((await check(kind, {}, inputs)).failures.length > 0) refused++;
      else {
        accepted++;
        if (Array.isArray(inputs.vips) && (inputs.vips as { address: string }[]).some((v) => v.address.includes(":"))) acceptedIpv6++;
      }
    }
    expect(refused).toBeGreaterThan(COVERAGE_RUNS / 10);
    // IPv6 VIPs are planned too (rendered, parsed back), not only refused.
    if (kind === "DsrHypervisorFlows" || kind === "DeferredNatLoadBalancer") expect(acceptedIpv6).toBeGreaterThan(0);
    if (kind !== "DeferredNatLoadBalancer") expect(accepted).toBeGreaterThan(COVERAGE_RUNS / 20);
    else expect(accepted).toBeGreaterThan(0);
  });
});
