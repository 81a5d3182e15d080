import { describe, expect, it } from "vitest";
import { check, handle } from "../../provider/handlers";
import { planBridge, type ObservedBridge } from "../../provider/engine/plan";
import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { renderBundle, toFlowEntry, toGroupEntry, type Flow } from "../../provider/openflow";
import { renderFinding } from "../../provider/model/drift";
import { handOnKey } from "../../provider/model/ids";
import {
  actualInputs,
  assignIds,
  gatewayIntent,
  tunnelPorts,
  withDefaults,
  type DeferredNatDefaulted,
  type RecordedIds,
} from "../../provider/resources/deferred-nat-load-balancer/plan";
import { SLOT_TABLE, planAllSlots, recordAllSlots } from "../../provider/resources/deferred-nat-load-balancer/second-chance";
import {
  actualInputs as dsrActual,
  cookieOf as dsrCookie,
  desiredFlows,
  withDefaults as dsrDefaults,
} from "../../provider/resources/dsr-hypervisor-flows/plan";

/** secondChance as pure data: the gateways' slot flows, what a change sends, the hypervisors' pipeline, and the refusals. */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const hvAddress: Record<string, string> = { hv1: "172.16.21.2", hv2: "172.16.22.2", hv3: "172.16.23.2" };
const backend = (i: number, hypervisor: string, extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.0.0.${100 + i}`,
  port: 8080,
  mac: `02:00:0a:00:00:${(100 + i).toString(16)}`,
  hypervisor,
  ...extra,
});
const four = [backend(1, "hv1"), backend(2, "hv1"), backend(3, "hv2"), backend(4, "hv2")];

function lb(backends: DeferredNatBackend[], extra: Partial<DeferredNatLoadBalancerInputs> = {}): DeferredNatDefaulted {
  return withDefaults({
    name: "sc",
    delivery: "gre",
    secondChance: {},
    gateways: [
      { name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b", tunnelAddress: "172.16.11.2" },
    ],
    hypervisors: Object.entries(hvAddress).map(([name, tunnelAddress]) => ({ name, tunnelAddress })),
    vips: [{ address: "10.0.0.196", port: 80, protocol: "tcp", backends }],
    ...extra,
  });
}
const gw = {
  segmentOfport: 1,
  mac: "02:00:0a:00:00:0b",
  tunnelOfports: new Map([
    ["hv1", 61001],
    ["hv2", 61002],
    ["hv3", 61003],
  ]),
  bfdOfports: new Map([
    ["hv1", 62001],
    ["hv2", 62002],
    ["hv3", 62003],
  ]),
};
const NO_IDS: RecordedIds = { groupIds: {}, bucketIds: {} };
const ip = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
const VIP = "tcp:10.0.0.196:80";

/** The gateway's intent for `inputs`, planned over `recorded` tables and ids as an update would. */
function intent(inputs: DeferredNatDefaulted, recorded?: Parameters<typeof planAllSlots>[1], recordedIds: RecordedIds = NO_IDS) {
  const slots = planAllSlots(inputs, recorded);
  const ids = assignIds(inputs, recordedIds, new Set());
  return { slots, ids, intent: gatewayIntent(inputs, ids, gw, slots.tables) };
}
const asObserved = (i: ReturnType<typeof gatewayIntent>): ObservedBridge => ({
  ports: new Map(),
  flows: i.flows.map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n })),
  groups: i.groups.map((g) => toGroupEntry(g)),
});
const slotOf = (f: Flow) => f.match.reg12!;
const action = (f: Flow, field: string) => f.actions.find((a) => a.type === "set_field" && a.field === field) as { value: string | number } | undefined;
const groupOf = (f: Flow) => (f.actions.find((a) => a.type === "group") as { groupId: number }).groupId;
/** Owner group id -> the owner's MAC. */
const macOfGroup = (i: ReturnType<typeof gatewayIntent>) =>
  new Map(
    i.groups.map((g) => [g.groupId, String((g.buckets[0].actions.find((a) => a.type === "set_field" && a.field === "eth_dst") as { value: string }).value)]),
  );

describe("secondChance on the gateways", () => {
  it("holds, per VIP, an entry flow hashing into reg12, one flow per slot pointing at its owner's group, and one group per backend; tunnels send the key from the flow", () => {
    const { intent: it_, ids } = intent(lb(four));
    expect(it_.groups.map((g) => g.type)).toEqual(["indirect", "indirect", "indirect", "indirect"]);
    expect(it_.groups.map((g) => g.groupId).sort()).toEqual(Object.values(ids.ownerGroupIds![VIP]).sort());
    expect(renderBundle([{ op: "add-group", group: it_.groups[0] }])[0]).toBe(
      `group add group_id=${it_.groups[0].groupId},type=indirect,bucket=bucket_id:0,actions=set_field:02:00:0a:00:00:0b->eth_src,set_field:02:00:0a:00:00:65->eth_dst,output:61001`,
    );
    const [entry, ...slots] = it_.flows;
    expect(renderBundle([{ op: "add-flow", flow: entry }])[0]).toMatch(/multipath\(symmetric_l3l4,0,modulo_n,1024,0,NXM_NX_REG12\[0\.\.9\]\),resubmit\(,70\)$/);
    expect(slots).toHaveLength(1024);
    expect(new Set(slots.map(slotOf)).size).toBe(1024);
    expect(slots.every((f) => f.table === SLOT_TABLE && action(f, "tun_id")!.value === 0)).toBe(true);
    expect(renderBundle([{ op: "add-flow", flow: slots[0] }])[0]).toMatch(
      /,reg12=(0x[0-9a-f]+|0),nw_dst=10\.0\.0\.196,tp_dst=80,actions=set_field:0->tun_id,group:\d+$/,
    );
    // 256 slots each.
    const perGroup = new Map<number, number>();
    for (const f of slots) perGroup.set(groupOf(f), (perGroup.get(groupOf(f)) ?? 0) + 1);
    expect([...perGroup.values()]).toEqual([256, 256, 256, 256]);
    for (const f of slots) toFlowEntry(f);
    expect(tunnelPorts(lb(four), lb(four).gateways[0])[0].options).toMatchObject({ in_key: expect.any(String), out_key: "flow" });
  });

  it("with healthCheck.bfd, an owner group fails over (key 0) to the VIP's select group over the active backends, both watching the BFD ports; the select group comes first", () => {
    const inputs = lb([...four.slice(0, 3), backend(4, "hv2", { state: "draining" })], { healthCheck: { bfd: {} } });
    const { intent: it_, ids } = intent(inputs);
    const [select, ...owners] = it_.groups;
    expect(select.groupId).toBe(ids.groupIds[VIP]);
    expect(select.type).toBe("select");
    expect(select.buckets.map((b) => b.watchPort)).toEqual([62001, 62001, 62002]);
    expect(owners).toHaveLength(3);
    const lines = renderBundle(owners.map((group) => ({ op: "add-group" as const, group })));
    expect(lines[0]).toBe(
      `group add group_id=${owners[0].groupId},type=ff,bucket=bucket_id:0,watch_port:62001,actions=set_field:02:00:0a:00:00:0b->eth_src,set_field:02:00:0a:00:00:65->eth_dst,output:61001,` +
        `bucket=bucket_id:1,watch_group:${select.groupId},actions=set_field:0->tun_id,group:${select.groupId}`,
    );
    // The BFD ports carry only BFD.
    expect(it_.flows.filter((f) => f.actions[0]?.type === "drop").map((f) => f.match.in_port)).toEqual([62001, 62002, 62003]);
    // Planned from nothing: the select group is added before the owner groups that use it.
    const mods = planBridge("gw1", it_, { ports: new Map(), flows: [], groups: [] });
    expect(mods.slice(0, 4).map((m) => (m.op === "add-group" ? m.group.groupId : m.op))).toEqual([select.groupId, ...owners.map((g) => g.groupId)]);
  });

  it("adding a backend adds its group and modifies exactly the slots it takes, each naming the previous owner's hypervisor in the key (0 when it is the same hypervisor)", () => {
    const before = intent(lb(four));
    const after = intent(lb([...four, backend(5, "hv3")]), recordAllSlots(before.slots.tables), before.ids);
    const mods = planBridge("gw1", after.intent, asObserved(before.intent));
    const fifth = after.ids.ownerGroupIds![VIP]["10.0.0.105:8080"];
    expect(mods[0]).toMatchObject({ op: "add-group", group: { groupId: fifth } });
    expect(mods.slice(1).every((m) => m.op === "modify-flow")).toBe(true);
    expect(mods).toHaveLength(1 + after.slots.moves[VIP].moved);
    expect(after.slots.moves[VIP]).toEqual({ moved: 204, minimum: 204 });
    // The kept backends keep their groups.
    expect(after.ids.ownerGroupIds![VIP]).toMatchObject(before.ids.ownerGroupIds![VIP]);
    const owners = new Map(four.map((b) => [b.mac, b.hypervisor]));
    const macBefore = macOfGroup(before.intent);
    const beforeBySlot = new Map(before.intent.flows.slice(1).map((f) => [slotOf(f), f]));
    const previousHvOf = (f: Flow) => owners.get(macBefore.get(groupOf(beforeBySlot.get(slotOf(f))!))!)!;
    for (const m of mods.slice(1)) {
      const f = (m as { flow: Flow }).flow;
      expect(groupOf(f)).toBe(fifth);
      expect(ip(Number(action(f, "tun_id")!.value))).toBe(hvAddress[previousHvOf(f)]);
    }
    // The same change on the same table sends nothing.
    expect(planBridge("gw1", after.intent, asObserved(after.intent))).toEqual([]);
    // A backend added on hv1: slots taken from hv1's backends carry key 0 (hv1's own conntrack knows them), from hv2's hv2's address.
    const local = intent(lb([...four, backend(6, "hv1")]), recordAllSlots(before.slots.tables), before.ids);
    const keys = new Map<string, Set<number>>();
    for (const m of planBridge("gw1", local.intent, asObserved(before.intent))) {
      if (m.op !== "modify-flow") continue;
      keys.set(previousHvOf(m.flow), (keys.get(previousHvOf(m.flow)) ?? new Set()).add(Number(action(m.flow, "tun_id")!.value)));
    }
    expect([...keys.get("hv1")!]).toEqual([0]);
    expect([...keys.get("hv2")!].map(ip)).toEqual([hvAddress.hv2]);
  });

  it("a stack recorded before owner groups (slot flows carrying the owner's MACs and port) reads back with no drift, and the next update takes it over in one bundle: the groups first, then every slot flow pointed at its owner's group, with the same key", () => {
    const inputs = lb(four);
    const { slots, intent: now } = intent(inputs);
    const macOf = macOfGroup(now);
    const portOf = new Map(four.map((b) => [b.mac, gw.tunnelOfports.get(b.hypervisor)!]));
    // The slot flows as ovslb 0.2.0 wrote them.
    const old = now.flows.map((f) =>
      f.table !== SLOT_TABLE
        ? f
        : {
            ...f,
            actions: [
              { type: "set_field" as const, field: "eth_src" as const, value: gw.mac },
              { type: "set_field" as const, field: "eth_dst" as const, value: macOf.get(groupOf(f))! },
              { type: "set_field" as const, field: "tun_id" as const, value: action(f, "tun_id")!.value as number },
              { type: "output" as const, port: portOf.get(macOf.get(groupOf(f))!)! },
            ],
          },
    );
    const observed = { ports: new Map(), flows: old.map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n })), groups: [] };
    // A refresh of that stack (its state has no ownerGroupIds) finds it as its inputs, with no drift.
    const read = actualInputs(inputs, NO_IDS, [{ name: "gw1", port: gw, observed }], slots.tables);
    expect([read.inputs, read.observations[0].findings]).toEqual([inputs, []]);
    const mods = planBridge("gw1", now, observed);
    expect(mods.slice(0, 4).every((m) => m.op === "add-group")).toBe(true);
    expect(mods.slice(4).map((m) => m.op)).toEqual(Array(slots.tables[VIP].size).fill("modify-flow"));
    const oldBySlot = new Map(old.slice(1).map((f) => [slotOf(f), f]));
    for (const m of mods.slice(4)) {
      const f = (m as { flow: Flow }).flow;
      const was = oldBySlot.get(slotOf(f))!;
      expect([macOf.get(groupOf(f)), action(f, "tun_id")!.value]).toEqual([action(was, "eth_dst")!.value, action(was, "tun_id")!.value]);
    }
  });

  it("reads its own slot flows and groups back as its inputs; a slot flow deleted by hand, or an owner group changed, reads as its owner missing and says so", () => {
    const inputs = lb(four);
    const { slots, ids, intent: it_ } = intent(inputs);
    const observed = asObserved(it_);
    const g = { name: "gw1", port: gw, observed };
    expect(actualInputs(inputs, ids, [g], slots.tables).inputs).toEqual(inputs);
    const [entry, first, ...rest] = observed.flows;
    const owner = macOfGroup(it_).get(groupOf(first))!;
    const cut = actualInputs(inputs, ids, [{ ...g, observed: { ...observed, flows: [entry, ...rest] } }], slots.tables);
    expect(cut.inputs.vips[0].backends.map((b) => b.mac)).toEqual(four.map((b) => b.mac).filter((m) => m !== owner));
    expect(cut.observations[0].findings.map(renderFinding)).toEqual(["gw1: VIP tcp:10.0.0.196:80: 1 slot flows missing or changed"]);
    expect(actualInputs(inputs, ids, [{ ...g, observed: { ...observed, flows: rest } }], slots.tables).inputs.vips).toEqual([]);
    // An owner group sent elsewhere by hand.
    const [g0, ...others] = observed.groups;
    const changed = { ...g0, buckets: [{ ...g0.buckets[0], actions: [{ type: "output" as const, port: 9 }] }] };
    const edited = actualInputs(inputs, ids, [{ ...g, observed: { ...observed, groups: [changed, ...others] } }], slots.tables);
    expect(edited.inputs.vips[0].backends.map((b) => b.mac)).toEqual(four.map((b) => b.mac).filter((m) => m !== macOfGroup(it_).get(g0.groupId)));
    expect(edited.observations[0].findings.map((f) => f.kind)).toEqual(["bucket-changed"]);
  });

  it("check refuses what second chance cannot carry, naming the property", async () => {
    const failures = async (i: DeferredNatLoadBalancerInputs) => (await check("DeferredNatLoadBalancer", {}, i as unknown as Record<string, unknown>)).failures;
    const by = async (i: DeferredNatLoadBalancerInputs) => Object.fromEntries((await failures(i)).map((f) => [f.property, f.reason]));
    expect(await failures(lb(four))).toEqual([]);
    expect((await by(lb(four, { delivery: "mac" })))["hypervisors[0].delivery"]).toMatch(/must be gre with secondChance/);
    expect((await by(lb(four, { selectionFields: ["ip_src", "tp_src"] }))).selectionFields).toMatch(/multipath can hash/);
    // BFD liveness goes with second chance (the owner groups fail over).
    expect(await failures(lb(four, { healthCheck: { bfd: {} } }))).toEqual([]);
    expect((await by(lb(four.map((b) => ({ ...b, state: "draining" as const })))))["vips[0].backends"]).toMatch(/all draining/);
    const stateless = { ...lb([backend(1, "hv1", { state: "draining" })]) };
    delete stateless.secondChance;
    expect((await by(stateless))["vips[0].backends[0].state"]).toMatch(/draining needs secondChance/);
  });
});

describe("secondChance on the hypervisors", () => {
  const ID = "dsr-hypervisor-flows/172.30.0.21/br-seg/sc";
  const dsr = () =>
    dsrDefaults({
      name: "sc",
      host: { connection: conn("172.30.0.21") },
      bridge: "br-seg",
      mode: "gre",
      gre: { allowedSources: ["172.16.11.2", "172.16.12.2"], secondChance: { peers: ["172.16.22.2", "172.16.23.2"] } },
      vips: [
        {
          address: "10.0.0.196",
          port: 80,
          backends: [
            { address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", bridgePort: "vm1" },
            { address: "10.0.0.102", port: 8080, mac: "02:00:0a:00:00:66", bridgePort: "vm2" },
          ],
        },
      ],
    });
  const placement = {
    cookie: dsrCookie(ID),
    zone: 77,
    ofports: new Map([
      ["vm1", 2],
      ["vm2", 3],
    ]),
    greOfport: 60001,
  };
  const lines = () => desiredFlows(dsr(), placement).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0]);

  it("looks every request up in conntrack first; delivers what conntrack knows; commits only SYNs (or mid-stream packets with no previous owner); hands the rest to the hypervisor the key names, once; drops what was handed on and is unknown", () => {
    const all = lines();
    expect(all.filter((l) => l.includes("table=0,priority=1000,") && l.endsWith("actions=ct(table=61,zone=77,nat)"))).toHaveLength(4);
    expect(all.filter((l) => l.includes("priority=1001") && l.includes("set_field:0x1->reg13,ct(table=61,zone=77,nat)"))).toHaveLength(2);
    expect(all).toContain("flow add table=61,priority=250,cookie=0x" + dsrCookie(ID).toString(16) + ",ct_zone=77,reg13=0x1,actions=drop");
    expect(all.filter((l) => l.includes("tcp_flags=+syn-ack") && l.includes("ct(commit,zone=77,nat(dst=10.0.0.10"))).toHaveLength(2);
    expect(all.filter((l) => l.includes("tun_id=0,") && l.includes("ct(commit"))).toHaveLength(2);
    expect(
      all.filter((l) => l.endsWith("move:NXM_NX_TUN_ID[0..31]->NXM_NX_TUN_IPV4_DST[],set_field:0->tun_id,set_field:0.0.0.0->tun_src,IN_PORT")),
    ).toHaveLength(1);
    // Whatever conntrack knows (DNATed to the backend) goes to the backend, whatever its state: +inv too.
    expect(
      all.filter(
        (l) =>
          l.includes("table=61,priority=300,") &&
          l.includes("ct_state=+trk,") &&
          /nw_dst=10\.0\.0\.10[12],tp_dst=8080,actions=set_field:02:00:0a:00:00:6[56]->eth_dst,output:[23]$/.test(l),
      ),
    ).toHaveLength(2);
    expect(all.filter((l) => l.includes("+est"))).toEqual([]);
  });

  it("over an IPv6 underlay: one hand-on flow per peer, matching its key (handOnKey) and setting tun_ipv6_dst; peers canonical; read back as the inputs", async () => {
    const v6 = dsrDefaults({
      ...dsr(),
      gre: { allowedSources: ["fd00:16:11::2"], secondChance: { peers: ["FD00:16:22:0::2", "fd00:16:23::2"] } },
    });
    expect(v6.gre!.secondChance!.peers).toEqual(["fd00:16:22::2", "fd00:16:23::2"]);
    const all = desiredFlows(v6, placement).map((f) => renderBundle([{ op: "add-flow", flow: f }])[0]);
    const handOn = all.filter((l) => l.includes("priority=180,"));
    expect(handOn).toEqual(
      ["fd00:16:22::2", "fd00:16:23::2"].map((peer) =>
        expect.stringMatching(
          new RegExp(
            `,tun_id=0x${handOnKey(peer).toString(16)},.*actions=set_field:${peer}->tun_ipv6_dst,set_field:0->tun_id,set_field:::->tun_ipv6_src,IN_PORT$`,
          ),
        ),
      ),
    );
    // Handed-on packets are accepted from the peers by their IPv6 tunnel source.
    expect(all.filter((l) => l.includes("priority=1001") && /tun_ipv6_src=fd00:16:2[23]::2,/.test(l))).toHaveLength(2);
    expect((await check("DsrHypervisorFlows", {}, v6)).failures).toEqual([]);
    const owned = desiredFlows(v6, placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    const portNames = new Map([
      [2, "vm1"],
      [3, "vm2"],
    ]);
    expect(dsrActual(v6, owned, { ...placement, portNames })).toEqual(v6);
  });

  it("reads its own flows back as exactly its inputs, and refuses a fixed gre.key with second chance", async () => {
    const owned = desiredFlows(dsr(), placement).map((f) => ({ ...f, otherMatch: [], nPackets: 0n, nBytes: 0n }));
    const portNames = new Map([
      [2, "vm1"],
      [3, "vm2"],
    ]);
    expect(dsrActual(dsr(), owned, { ...placement, portNames })).toEqual(dsr());
    const bad = { ...dsr(), gre: { ...dsr().gre!, key: 5 } };
    const { failures } = await check("DsrHypervisorFlows", {}, bad);
    expect(failures).toContainEqual({ property: "gre.key", reason: expect.stringMatching(/must not be set with gre.secondChance/) });
  });
});

describe("secondChance refusals that need the recorded table", () => {
  it("update takes a 6th backend right after a 5th to the hosts; it refuses, before touching any host, a change whose shares live history would keep off by more than the bound, naming the VIP and when the history expires; release lets it through", async () => {
    // 192.0.2.1 is this machine's documentation range: any connection attempt would fail differently (and slowly).
    const unreachable = (i: DeferredNatLoadBalancerInputs) => ({
      ...i,
      gateways: i.gateways.map((g) => ({ ...g, host: { connection: { ...conn("192.0.2.1"), connectTimeoutMs: 1000 } } })),
    });
    const five = [...four, backend(5, "hv3")];
    const added = intent(lb(five), recordAllSlots(intent(lb(four)).slots.tables));
    const olds = (i: DeferredNatLoadBalancerInputs, tables: ReturnType<typeof recordAllSlots>) => ({
      ...unreachable(i),
      slotTables: tables,
      groupIds: {},
      bucketIds: {},
    });
    const sixth = unreachable(lb([...five, backend(6, "hv3")]));
    await expect(
      handle("DeferredNatLoadBalancer", "update", ["deferred-nat/sc", olds(lb(five), recordAllSlots(added.slots.tables)), sixth]),
    ).rejects.not.toThrow(/secondChance: this change/);
    // Drain one, then weigh the others 4: the 5th holds slots whose previous owner drains, more than its new quota allows.
    const draining = [backend(1, "hv1", { state: "draining" }), ...five.slice(1)];
    const drained = intent(lb(draining), recordAllSlots(added.slots.tables));
    const news = unreachable(lb(draining.map((b, i) => (i > 0 && i < 4 ? { ...b, weight: 4 } : b))));
    const recorded = olds(lb(draining), recordAllSlots(drained.slots.tables));
    const started = Date.now();
    await expect(handle("DeferredNatLoadBalancer", "update", ["deferred-nat/sc", recorded, news])).rejects.toThrow(
      /secondChance: this change would leave shares off their weights by more than 1\/16.*tcp:10\.0\.0\.196:80 \(\d+ slots, history live until \d{4}-\d\d-\d\dT.*secondChance\.release: true to release the history of just those slots/,
    );
    expect(Date.now() - started).toBeLessThan(500);
    const released = { ...news, secondChance: { release: true } };
    await expect(handle("DeferredNatLoadBalancer", "update", ["deferred-nat/sc", recorded, released])).rejects.not.toThrow(/secondChance: this change/);
  });

  it("check refuses a holdSeconds below 0 or over a week, naming it", async () => {
    for (const holdSeconds of [-1, 604801]) {
      const { failures } = await check("DeferredNatLoadBalancer", {}, lb(four, { secondChance: { holdSeconds } }));
      expect(failures).toContainEqual({ property: "secondChance.holdSeconds", reason: expect.stringMatching(/^must be seconds, 0 to 604800/) });
    }
  });

  it("check takes a VIP of more than 1,000 buckets' worth of backends, and refuses weights the slot table cannot share out", async () => {
    const many = Array.from({ length: 300 }, (_, i) =>
      backend(i, "hv1", {
        address: `10.1.${i >> 8}.${i & 255}`,
        mac: `02:00:0b:00:${(i >> 8).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
        weight: 4,
      }),
    );
    expect((await check("DeferredNatLoadBalancer", {}, lb(many) as unknown as Record<string, unknown>)).failures).toEqual([]);
    const tooMany = lb(
      many.map((b) => ({ ...b, weight: 64 })),
      { secondChance: { slots: 65536 } },
    );
    const { failures } = await check("DeferredNatLoadBalancer", {}, tooMany);
    expect(failures).toContainEqual({
      property: "vips[0].backends",
      reason: expect.stringMatching(/^weigh 19200 in all: 65536 slots give under 16 per unit of weight/),
    });
  });
});
