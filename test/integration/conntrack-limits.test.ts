import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseZoneLimits, zoneLimitArgs } from "../../provider/openflow/conntrack";
import { CLIENT } from "../lab/topology";
import { ConntrackFlood, LIMIT, MAXCONNS, SYNS, VIP_A, VIP_B, flood } from "../support/real-networks";
import { loadInventory, lockLab } from "../support/lab";
import { waitUntil } from "../support/wait";
import { openLiveConnections, type LiveConnections } from "../support/tcp-clients";

/**
 * Floods stay in their zone (connectionLimit), real TCP: two services on
 * one hypervisor, each in its own conntrack zone. A bounded SYN flood from
 * spoofed sources at service A's VIP fills conntrack. With the datapath's
 * table made small (dpctl/ct-set-maxconns) and no zone limit, the flood
 * takes the whole table and service B's new connections fail; with A's
 * zone limited, A holds at most its limit and B's established and new
 * connections keep working. The gateways keep no conntrack state at all.
 * (OVS 3.1's userspace flush of a zone can leave entries behind while a
 * flood's tail still arrives, so the phases do not flush in between: the
 * limited one comes first, and the limit's own count is what it reads.)
 * The scenario (resources, flood, reads) is test/support/real-networks.ts,
 * which bench/real-networks.ts measures too.
 */

let s: ConntrackFlood;
let unlock: (() => void) | undefined;
let live: LiveConnections | undefined;

beforeAll(async () => {
  s = new ConntrackFlood(loadInventory());
  unlock = await lockLab("hv1-gre");
  await s.setUp();
});

afterAll(async () => {
  live?.close();
  await s?.tearDown();
  unlock?.();
});

describe("a SYN flood at one service's VIP stays in its conntrack zone (connectionLimit)", () => {
  it(`with connectionLimit ${LIMIT} on A, a flood at A leaves it at most ${LIMIT} entries; B's 20 established and new connections keep working; the gateways hold no conntrack entry`, async () => {
    await s.appctl("hv1", "dpctl/ct-set-maxconns", String(MAXCONNS));
    await s.hvA.update(s.hvInputs("a", LIMIT));
    live = await openLiveConnections(CLIENT.namespace, VIP_B, 80, 20);
    expect(live.initial.filter((c) => c.broken)).toEqual([]);
    const f = flood(VIP_A);
    // The limit's own count: the entries made since it was set.
    await waitUntil(async () => (await s.zoneLimit(s.hvA)).count >= LIMIT, { what: `A's zone at its limit`, timeoutMs: 10_000, intervalMs: 100 });
    // While the flood goes on: B's connections, old and new; A takes no new one.
    const b = s.opened(VIP_B, 20);
    const aNew = s.opened(VIP_A, 5);
    const broken = (await live.round()).filter((c) => c.broken);
    const sent = await f.done;
    const count = await s.settled(s.hvA);
    expect([b, aNew, broken]).toEqual([20, 0, []]);
    expect(count).toBeLessThanOrEqual(LIMIT);
    expect(await s.zoneLimit(s.hvA)).toMatchObject({ limit: LIMIT, own: true, count });
    expect(await s.gatewayEntries()).toEqual({ gw1: 0, gw2: 0 });
    console.log(
      `connectionLimit ${LIMIT}: ${sent} SYNs at A left ${count} entries in A's zone (the table holds ${MAXCONNS}); B kept 20 of 20 established connections and took ${b} of 20 new ones; the gateways held no conntrack entry`,
    );
  });

  it(`without the limit, the same flood takes the datapath's whole table and B's new connections fail while it lasts`, async () => {
    await s.hvA.update(s.hvInputs("a"));
    expect(await s.zoneLimit(s.hvA)).toMatchObject({ own: false });
    const f = flood(VIP_A);
    await waitUntil(async () => (await s.entries(s.hvA)) >= MAXCONNS * 0.9, {
      what: `A's zone at ${MAXCONNS * 0.9} entries`,
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    const b = s.opened(VIP_B, 10);
    const filled = await s.entries(s.hvA);
    expect(await f.done).toBe(SYNS);
    expect(b).toBe(0);
    console.log(`no zone limit: the flood at A filled its zone to ${filled} of the table's ${MAXCONNS} entries; B took ${b} of 10 new connections meanwhile`);
  });

  it("reads the limit back: one taken away by hand (as an ovs-vswitchd restart does) reads as drift, and the next update puts it back", async () => {
    await s.appctl("hv1", "dpctl/ct-set-maxconns", s.maxconns!);
    await s.hvA.update(s.hvInputs("a", LIMIT));
    expect((await s.hvA.read()).inputs.connectionLimit).toBe(LIMIT);
    await s.appctl("hv1", ...zoneLimitArgs.del(s.zoneOf(s.hvA)));
    expect((await s.hvA.read()).inputs.connectionLimit).toBeUndefined();
    await s.hvA.update(s.hvInputs("a", LIMIT));
    expect((await s.zoneLimit(s.hvA)).limit).toBe(LIMIT);
    // Deleting the resource removes its limit too.
    const zone = s.zoneOf(s.hvA);
    await s.hvA.delete();
    s.hvA.id = "";
    expect(parseZoneLimits(await s.appctl("hv1", ...zoneLimitArgs.get(zone)))[0]).toMatchObject({ own: false });
  });
});
