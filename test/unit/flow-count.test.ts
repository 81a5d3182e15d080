import { describe, expect, it } from "vitest";
import { ownedFlowCountAfter } from "../../provider/engine/plan";
import { OpenFlowParseError, parseAggregate } from "../../provider/openflow";

describe("owned flow counts (what a scoped update checks a gateway still holds)", () => {
  it("parses ovs-ofctl dump-aggregate as OVS 3.1 prints it", () => {
    expect(parseAggregate("OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=352 byte_count=27048 flow_count=1\n")).toEqual({
      packets: 352n,
      bytes: 27048n,
      flows: 1,
    });
    expect(() => parseAggregate("ovs-ofctl: br-seg is not a bridge or a socket")).toThrow(OpenFlowParseError);
  });

  it("counts a bundle's adds and deletes; modifies and group changes keep the count", () => {
    const flow = { table: 0, priority: 100, cookie: 1n, match: { nw_dst: "10.0.0.1" }, actions: [] };
    expect(
      ownedFlowCountAfter(5, [
        { op: "add-flow", flow },
        { op: "add-flow", flow },
        { op: "modify-flow", flow },
        { op: "delete-flow", table: 0, priority: 100, match: {}, cookie: 1n },
        { op: "delete-group", groupId: 3 },
      ]),
    ).toBe(6);
    expect(() => ownedFlowCountAfter(1, [{ op: "delete-flows", cookie: 1n, mask: 1n }])).toThrow(/bulk/);
  });
});
