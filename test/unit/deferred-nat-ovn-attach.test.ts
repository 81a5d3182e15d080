import { describe, it, expect } from "vitest";
import type { DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import { withDefaults, type DeferredNatDefaulted as Inputs } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { applyNorthbound, readNorthbound } from "../../provider/resources/deferred-nat-load-balancer/ovn";
import { handle } from "../../provider/handlers";
import { TransactionResults, Uuid, type Transaction, type DatabaseModel } from "../../provider/ovsdb";
import type { OvsdbClient } from "../../provider/transport/ovsdb-client";

/**
 * ovn.attach: the northbound rows are attached to the router only when asked
 * (a stock OVN would balance an attached row's VIPs statefully itself; the
 * integration test deferred-nat-ovn-stock.test.ts shows it on a real
 * ovn-controller). Here: what apply sends and what read reports, against a
 * northbound that answers every select with the rows given.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const northbound = { connection: conn("172.30.0.10"), socket: "/run/ovn/ovnnb_db.sock" };

function lb(ovn: Partial<NonNullable<DeferredNatLoadBalancerInputs["ovn"]>> = {}): Inputs {
  return withDefaults({
    name: "web",
    gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
    hypervisors: [{ name: "hv1" }],
    vips: [
      { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [{ address: "10.0.0.101", port: 8080, mac: "02:00:0a:00:00:65", hypervisor: "hv1" }] },
    ],
    ovn: { northbound, router: "lr0", ...ovn },
  });
}

const ROW_UUID = "6b7f2a8e-52a1-4c8e-9d34-1f0b8f5e3c11";
/** An owned row as the client decodes it (sets as arrays, maps as Maps). */
const ownedRow = {
  _uuid: new Uuid(ROW_UUID),
  name: "ovslb-web-tcp",
  protocol: ["tcp"],
  vips: new Map([["10.0.0.193:80", "10.0.0.101:8080"]]),
  selection_fields: ["ip_dst", "ip_src", "tp_dst", "tp_src"],
  ip_port_mappings: new Map(),
  options: new Map([["deferred-nat", "true"]]),
  health_check: [],
  external_ids: new Map([["ovslb:owner", "deferred-nat/web"]]),
};

/** A northbound holding `rows` (Load_Balancer) and router lr0 with `attached`; records every transaction. */
function fakeNorthbound(rows: object[], attached: string[]) {
  const sent: Transaction<DatabaseModel>[] = [];
  const db = {
    host: undefined,
    async run(t: Transaction<DatabaseModel>) {
      sent.push(t);
      const results = t.operations.map((op) => {
        if (op.op !== "select") return op.op === "insert" ? { uuid: new Uuid("00000000-0000-4000-8000-000000000001") } : { count: 1 };
        if (op.table === "Load_Balancer") return { rows };
        if (op.table === "Logical_Router") return { rows: [{ name: "lr0", load_balancer: attached.map((u) => new Uuid(u)) }] };
        return { rows: [] };
      });
      return new TransactionResults(results as never, t);
    },
  };
  return { db: db as unknown as OvsdbClient, sent };
}

const routerMutations = (sent: Transaction<DatabaseModel>[]) =>
  sent.flatMap((t) => t.operations).flatMap((op) => (op.op === "mutate" && op.table === "Logical_Router" ? [op.mutations.map((m) => m[1])] : []));

describe("ovn.attach", () => {
  it("check accepts true, false and absent, and refuses a non-boolean naming ovn.attach", async () => {
    const failures = async (inputs: unknown) =>
      ((await handle("DeferredNatLoadBalancer", "check", [{}, inputs])) as { failures: { property: string }[] }).failures.map((f) => f.property);
    for (const attach of [true, false, undefined]) expect(await failures(lb(attach === undefined ? {} : { attach }))).toEqual([]);
    expect(await failures(lb({ attach: "yes" as unknown as boolean }))).toEqual(["ovn.attach"]);
  });

  it("absent (the default, and every stack written before it): the row is written but never attached", async () => {
    const { db, sent } = fakeNorthbound([], []);
    await applyNorthbound(lb(), db);
    expect(routerMutations(sent)).toEqual([]);
    const inserted = sent.flatMap((t) => t.operations).filter((op) => op.op === "insert" && op.table === "Load_Balancer");
    expect(inserted.length).toBe(1);
  });

  it("true: the row is attached to the router in the same transaction", async () => {
    const { db, sent } = fakeNorthbound([], []);
    await applyNorthbound(lb({ attach: true }), db);
    expect(routerMutations(sent)).toEqual([["insert"]]);
  });

  it("false on a row an earlier ovslb attached: update detaches it (from every router) and attaches it nowhere", async () => {
    const { db, sent } = fakeNorthbound([ownedRow], [ROW_UUID]);
    await applyNorthbound(lb({ attach: false }), db);
    expect(routerMutations(sent)).toEqual([["delete"]]);
  });

  it("read reports an attached row as drift unless attach is true, and an unattached one only when it is", async () => {
    const attachedNow = fakeNorthbound([ownedRow], [ROW_UUID]).db;
    const detachedNow = fakeNorthbound([ownedRow], []).db;
    const details = async (inputs: Inputs, db: OvsdbClient) => (await readNorthbound(inputs, db)).findings.map((f) => f.detail);
    expect(await details(lb(), attachedNow)).toEqual([
      "attached to router lr0 while ovn.attach is not true (a stock OVN balances an attached row's VIPs itself)",
    ]);
    expect(await details(lb(), detachedNow)).toEqual([]);
    expect(await details(lb({ attach: true }), attachedNow)).toEqual([]);
    expect(await details(lb({ attach: true }), detachedNow)).toEqual(["not attached to router lr0"]);
  });
});
