import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { asLists, check } from "../../provider/handlers";
import { actionsText, flowKey, sameBucket, toGroupEntry } from "../../provider/openflow";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { flowsOf, groupsOf, inputsOf, renderAccepted, type Kind } from "../support/fuzz-inputs";
import { labSsh, loadInventory, sshTo } from "../support/lab";

/**
 * Fuzzed inputs against a real ovs-vswitchd (issue 13): a sample of the
 * generated inputs that pass check, for every kind that programs flows, has
 * its planned bundle sent by the provider's own transport to a scratch
 * bridge of this test's own on a lab host; OVS accepts every bundle, and
 * dumps back exactly the flows and groups that were rendered.
 */

const BRIDGE = "br-fuzz";
const HOST = "hv3";
const PER_KIND = Number(process.env.OVSLB_FUZZ_OVS_SAMPLES ?? 8);
const KINDS: Kind[] = ["DsrHypervisorFlows", "DeferredNatLoadBalancer", "DistributorAttachment"];

let inv: LabInventory;
let admin: SshSession;
let session: SshSession;
let bridge: OpenFlowBridge;

beforeAll(async () => {
  inv = loadInventory();
  admin = await labSsh(inv, HOST);
  const made = await admin.run([
    "ovs-vsctl",
    "--may-exist",
    "add-br",
    BRIDGE,
    "--",
    "set",
    "bridge",
    BRIDGE,
    "datapath_type=netdev",
    "fail_mode=secure",
    "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15",
  ]);
  expect(made.exitCode, made.stderr).toBe(0);
  session = await SshSession.connect(sshTo(inv, HOST));
  bridge = new OpenFlowBridge(session, `unix:${inv.hosts[HOST].ovsRundir}/${BRIDGE}.mgmt`);
});

afterAll(async () => {
  session?.close();
  await admin?.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
  admin?.close();
});

/** Accepted inputs of a kind, from a fixed seed so a failure reruns the same. */
async function acceptedSample(kind: Kind, seed: number): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (const inputs of fc.sample(inputsOf(kind), { numRuns: 2000, seed })) {
    const r = await check(kind, {}, inputs);
    if (r.failures.length === 0) out.push(asLists(kind, r.inputs));
    if (out.length >= PER_KIND) break;
  }
  return out;
}

async function clear() {
  for (const argv of [
    ["ovs-ofctl", "-O", "OpenFlow15", "del-flows", BRIDGE],
    ["ovs-ofctl", "-O", "OpenFlow15", "del-groups", BRIDGE],
  ]) {
    const r = await admin.run(argv);
    expect(r.exitCode, r.stderr).toBe(0);
  }
}

describe("accepted fuzzed inputs on a real ovs-vswitchd", () => {
  it.each(KINDS)("%s: OVS accepts every planned bundle and dumps back what was rendered", async (kind) => {
    const sample = await acceptedSample(kind, 1300 + KINDS.indexOf(kind));
    expect(sample.length).toBeGreaterThan(0);
    let flowsChecked = 0;
    let groupsChecked = 0;
    for (const inputs of sample) {
      await clear();
      const { mods } = renderAccepted(kind, inputs);
      const sent = await bridge.applyBundle(mods);
      expect(sent.messages).toBe(mods.length);
      const wantFlows = flowsOf(mods);
      const wantGroups = groupsOf(mods);
      const dumped = await bridge.dumpFlows();
      expect(dumped.length, JSON.stringify(inputs)).toBe(wantFlows.length);
      const byKey = new Map(dumped.map((f) => [flowKey(f), f]));
      for (const want of wantFlows) {
        const got = byKey.get(flowKey(want));
        expect(got, `${kind}: flow ${flowKey(want)} not dumped back`).toBeDefined();
        expect(got!.otherMatch).toEqual([]);
        expect(got!.cookie).toBe(want.cookie);
        expect(actionsText(got!.actions), flowKey(want)).toBe(actionsText(want.actions));
        flowsChecked++;
      }
      const groups = await bridge.dumpGroups();
      expect(groups.length).toBe(wantGroups.length);
      for (const g of wantGroups) {
        const want = toGroupEntry(g);
        const got = groups.find((x) => x.groupId === want.groupId);
        expect(got, `group ${want.groupId}`).toBeDefined();
        expect({ ...got!, buckets: [] }).toEqual({ ...want, buckets: [] });
        expect(got!.buckets.length).toBe(want.buckets.length);
        want.buckets.forEach((b, i) => expect(sameBucket(got!.buckets[i], b), `group ${want.groupId} bucket ${i}`).toBe(true));
        groupsChecked++;
      }
    }
    expect(flowsChecked).toBeGreaterThan(0);
    console.log(`${kind}: ${sample.length} accepted inputs, ${flowsChecked} flows and ${groupsChecked} groups accepted by OVS and dumped back alike`);
    await clear();
  });
});
