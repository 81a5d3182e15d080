import { describe, expect, it } from "vitest";
import { Uuid } from "../../provider/ovsdb/encoding";
import { OPEN_VSWITCH, OVN_NORTHBOUND } from "../../provider/ovsdb/models.generated";
import { OWNER_KEY, OwnedTransaction, describeOwner, ownerMark, ownerOf } from "../../provider/ovsdb/owned";
import { where } from "../../provider/ovsdb/transaction";

const U1 = "98f32b2f-f9e6-4a4e-a593-73914dc3bef2";
const U2 = "252fc389-24c6-47a8-8d58-e5e66bd112d2";
const OWNED = ["external_ids", "includes", ["map", [["ovslb:owner", "lb-1"]]]];

describe("OwnedTransaction", () => {
  it("starts with its comment and inserts rows carrying the owner mark, added to the external_ids given", () => {
    const tx = new OwnedTransaction(OPEN_VSWITCH, ownerMark("lb-1"), "ovslb: ensure bridge br0");
    const bridge = tx.insertOwned("Bridge", { name: "br0", external_ids: { team: "net" } }, "br");
    tx.insertOwned("Port", { name: "p0", external_ids: new Map([["x", "y"]]) });
    expect(bridge.name).toBe("br");
    expect(tx.operations).toEqual([
      { op: "comment", comment: "ovslb: ensure bridge br0" },
      {
        op: "insert",
        table: "Bridge",
        row: {
          name: "br0",
          external_ids: [
            "map",
            [
              ["team", "net"],
              ["ovslb:owner", "lb-1"],
            ],
          ],
        },
        "uuid-name": "br",
      },
      {
        op: "insert",
        table: "Port",
        row: {
          name: "p0",
          external_ids: [
            "map",
            [
              ["x", "y"],
              ["ovslb:owner", "lb-1"],
            ],
          ],
        },
        "uuid-name": "row1",
      },
    ]);
  });

  it("asserts absence (a free name) and presence (a router to mutate) with waits that fail at once", () => {
    const tx = new OwnedTransaction(OVN_NORTHBOUND, ownerMark("lb-1"));
    expect(tx.requireAbsent("Load_Balancer", [where("name", "==", "lb-tcp")])).toBe(0);
    expect(tx.requirePresent("Logical_Router", [where("name", "==", "lr0")])).toBe(1);
    expect(tx.operations).toEqual([
      { op: "wait", table: "Load_Balancer", where: [["name", "==", "lb-tcp"]], columns: ["_uuid"], until: "==", rows: [], timeout: 0 },
      { op: "wait", table: "Logical_Router", where: [["name", "==", "lr0"]], columns: ["_uuid"], until: "!=", rows: [], timeout: 0 },
    ]);
  });

  it("guards an owned row: same uuid, still carrying the mark, and the columns read unchanged", () => {
    const tx = new OwnedTransaction(OVN_NORTHBOUND, ownerMark("lb-1"));
    const row = { _uuid: new Uuid(U1), name: "lb-tcp", vips: new Map([["10.0.0.1:80", "10.0.1.1:80"]]) };
    tx.requireOwned("Load_Balancer", row);
    tx.requireOwned("Load_Balancer", row, ["name", "vips"]);
    expect(tx.operations).toEqual([
      {
        op: "wait",
        table: "Load_Balancer",
        where: [["_uuid", "==", ["uuid", U1]], OWNED],
        columns: ["_uuid"],
        until: "==",
        rows: [{ _uuid: ["uuid", U1] }],
        timeout: 0,
      },
      {
        op: "wait",
        table: "Load_Balancer",
        where: [["_uuid", "==", ["uuid", U1]], OWNED],
        columns: ["_uuid", "name", "vips"],
        until: "==",
        rows: [{ _uuid: ["uuid", U1], name: "lb-tcp", vips: ["map", [["10.0.0.1:80", "10.0.1.1:80"]]] }],
        timeout: 0,
      },
    ]);
  });

  it("updates and deletes an owned row behind that guard; new external_ids keep the mark", () => {
    const tx = new OwnedTransaction(OVN_NORTHBOUND, ownerMark("lb-1"));
    const row = { _uuid: new Uuid(U1), name: "lb-tcp" };
    tx.updateOwned("Load_Balancer", row, { vips: { "10.0.0.1:80": "10.0.1.2:80" }, external_ids: {} }, ["name"]);
    tx.deleteOwned("Load_Balancer", { _uuid: new Uuid(U2) });
    const guard = (uuid: string, columns: string[], rows: object[]) => ({
      op: "wait",
      table: "Load_Balancer",
      where: [["_uuid", "==", ["uuid", uuid]], OWNED],
      columns,
      until: "==",
      rows,
      timeout: 0,
    });
    expect(tx.operations).toEqual([
      guard(U1, ["_uuid", "name"], [{ _uuid: ["uuid", U1], name: "lb-tcp" }]),
      {
        op: "update",
        table: "Load_Balancer",
        where: [["_uuid", "==", ["uuid", U1]]],
        row: { vips: ["map", [["10.0.0.1:80", "10.0.1.2:80"]]], external_ids: ["map", [["ovslb:owner", "lb-1"]]] },
      },
      guard(U2, ["_uuid"], [{ _uuid: ["uuid", U2] }]),
      { op: "delete", table: "Load_Balancer", where: [["_uuid", "==", ["uuid", U2]]] },
    ]);
  });

  it("marks the root row under another key, guarded by requireUnchanged, and removes only its own mark", () => {
    const mark = ownerMark("dev-1", "ovslb:distributor-device");
    const tx = new OwnedTransaction(OPEN_VSWITCH, mark);
    const root = { _uuid: new Uuid(U1), external_ids: new Map([["system-id", "gw1"]]) };
    tx.requireUnchanged("Open_vSwitch", root, ["external_ids"]);
    tx.addMark("Open_vSwitch", root);
    tx.removeMark("Open_vSwitch", root);
    expect(tx.operations).toEqual([
      {
        op: "wait",
        table: "Open_vSwitch",
        where: [["_uuid", "==", ["uuid", U1]]],
        columns: ["_uuid", "external_ids"],
        until: "==",
        rows: [{ _uuid: ["uuid", U1], external_ids: ["map", [["system-id", "gw1"]]] }],
        timeout: 0,
      },
      {
        op: "mutate",
        table: "Open_vSwitch",
        where: [["_uuid", "==", ["uuid", U1]]],
        mutations: [["external_ids", "insert", ["map", [["ovslb:distributor-device", "dev-1"]]]]],
      },
      {
        op: "mutate",
        table: "Open_vSwitch",
        where: [["_uuid", "==", ["uuid", U1]]],
        mutations: [["external_ids", "delete", ["map", [["ovslb:distributor-device", "dev-1"]]]]],
      },
    ]);
  });

  it("refuses to guard a column that was not read", () => {
    const tx = new OwnedTransaction(OPEN_VSWITCH, ownerMark("lb-1"));
    const partial = { _uuid: new Uuid(U1) } as { _uuid: Uuid; name: string };
    expect(() => tx.requireOwned("Bridge", partial, ["name"])).toThrow(/column name was not read/);
  });

  it("checks at compile time that only tables with external_ids can be owned", () => {
    const tx = new OwnedTransaction(OPEN_VSWITCH, ownerMark("lb-1"));
    // @ts-expect-error no such table
    expect(() => tx.requireOwned("Nope", { _uuid: new Uuid(U1) })).not.toThrow();
    // @ts-expect-error not a Bridge column
    tx.insertOwned("Bridge", { nme: "br0" });
  });
});

describe("ownerOf and describeOwner", () => {
  it("read the mark from external_ids as read", () => {
    const row = {
      external_ids: new Map([
        [OWNER_KEY, "lb-1"],
        ["ovslb:distributor-device", "dev-1"],
      ]),
    };
    expect(ownerOf(row)).toBe("lb-1");
    expect(ownerOf(row, "ovslb:distributor-device")).toBe("dev-1");
    expect(describeOwner(row)).toBe("owned by lb-1");
    expect(describeOwner({ external_ids: new Map() })).toBe("not owned by ovslb");
    expect(ownerOf({ external_ids: "not a map" })).toBeUndefined();
  });
});
