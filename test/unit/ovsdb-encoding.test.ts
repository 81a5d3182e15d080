import { describe, expect, it } from "vitest";
import {
  type ColumnType,
  type ValueInput,
  NamedUuid,
  Uuid,
  decodeRow,
  decodeValue,
  encodeRow,
  encodeValue,
  parseDatabaseSchema,
} from "../../provider/ovsdb/encoding";
import { JsonStreamParser } from "../../provider/transport/json-stream";

const U1 = "98f32b2f-f9e6-4a4e-a593-73914dc3bef2";
const U2 = "252fc389-24c6-47a8-8d58-e5e66bd112d2";

const scalar: ColumnType = { key: "string", min: 1, max: 1 };
const optional: ColumnType = { key: "integer", min: 0, max: 1 };
const uuidSet: ColumnType = { key: "uuid", min: 0, max: "unlimited" };
const stringMap: ColumnType = { key: "string", value: "string", min: 0, max: "unlimited" };

describe("encodeValue", () => {
  it("encodes atoms bare and uuids tagged", () => {
    expect(encodeValue("br0")).toEqual("br0");
    expect(encodeValue(7)).toEqual(7);
    expect(encodeValue(false)).toEqual(false);
    expect(encodeValue(new Uuid(U1))).toEqual(["uuid", U1]);
    expect(encodeValue(new NamedUuid("br"))).toEqual(["named-uuid", "br"]);
  });

  it("encodes every array as a set, including empty and single-element ones", () => {
    expect(encodeValue([])).toEqual(["set", []]);
    expect(encodeValue([new Uuid(U1)])).toEqual(["set", [["uuid", U1]]]);
    expect(encodeValue([1, 2])).toEqual(["set", [1, 2]]);
  });

  it("encodes Maps and plain objects as maps", () => {
    expect(encodeValue(new Map([[1, new Uuid(U2)]]))).toEqual(["map", [[1, ["uuid", U2]]]]);
    expect(encodeValue({ "ovslb:owner": "lb-1", a: "b" })).toEqual([
      "map",
      [
        ["ovslb:owner", "lb-1"],
        ["a", "b"],
      ],
    ]);
    expect(encodeValue({})).toEqual(["map", []]);
  });

  it("refuses values OVSDB cannot carry", () => {
    expect(() => encodeValue(Number.NaN)).toThrow(/finite/);
    expect(() => new Uuid("br0")).toThrow(/not a UUID/);
    expect(() => new NamedUuid("1abc")).toThrow(/uuid-name/);
    expect(() => new NamedUuid("a-b")).toThrow(/uuid-name/);
  });

  it("encodes a row column by column", () => {
    expect(encodeRow({ name: "br0", ports: [new NamedUuid("p")], external_ids: { k: "v" } })).toEqual({
      name: "br0",
      ports: ["set", [["named-uuid", "p"]]],
      external_ids: ["map", [["k", "v"]]],
    });
  });
});

describe("decodeValue", () => {
  it("gives a set column an array even when the server sends one element bare", () => {
    expect(decodeValue(["uuid", U1], uuidSet)).toEqual([new Uuid(U1)]);
    expect(
      decodeValue(
        [
          "set",
          [
            ["uuid", U1],
            ["uuid", U2],
          ],
        ],
        uuidSet,
      ),
    ).toEqual([new Uuid(U1), new Uuid(U2)]);
    expect(decodeValue(["set", []], uuidSet)).toEqual([]);
  });

  it("decodes an optional column as a set of zero or one element", () => {
    expect(decodeValue(["set", []], optional)).toEqual([]);
    expect(decodeValue(5, optional)).toEqual([5]);
  });

  it("decodes a scalar column as its atom", () => {
    expect(decodeValue("br0", scalar)).toEqual("br0");
    expect(decodeValue(["set", ["br0"]], scalar)).toEqual("br0");
    expect(() => decodeValue(["set", []], scalar)).toThrow(/expected one value/);
  });

  it("decodes maps to Map, empty or not", () => {
    expect(decodeValue(["map", []], stringMap)).toEqual(new Map());
    expect(decodeValue(["map", [["k", "v"]]], stringMap)).toEqual(new Map([["k", "v"]]));
    expect(decodeValue(["map", [[1, ["uuid", U1]]]])).toEqual(new Map([[1, new Uuid(U1)]]));
  });

  it("without a type, decodes the value as sent", () => {
    expect(decodeValue(["uuid", U1])).toEqual(new Uuid(U1));
    expect(decodeValue(["set", [1]])).toEqual([1]);
  });

  it("refuses what is not an OVSDB value", () => {
    expect(() => decodeValue(null)).toThrow(/not an OVSDB atom/);
    expect(() => decodeValue(["named-uuid", "x"])).toThrow(/not an OVSDB atom/);
    expect(() => decodeValue(["set", [1]], stringMap)).toThrow(/not an OVSDB map/);
  });

  it("round-trips every shape through its column type", () => {
    // [value, column type, its RFC 7047 wire form, what decoding that gives back]
    const cases: [ValueInput, ColumnType, unknown, unknown][] = [
      ["br0", scalar, "br0", "br0"],
      [[], optional, ["set", []], []],
      [[4095], optional, ["set", [4095]], [4095]],
      [[], uuidSet, ["set", []], []],
      [[new Uuid(U1)], uuidSet, ["set", [["uuid", U1]]], [new Uuid(U1)]],
      [
        [new Uuid(U1), new Uuid(U2)],
        uuidSet,
        [
          "set",
          [
            ["uuid", U1],
            ["uuid", U2],
          ],
        ],
        [new Uuid(U1), new Uuid(U2)],
      ],
      [new Map(), stringMap, ["map", []], new Map()],
      [
        new Map([
          ["a", "1"],
          ["b", "2"],
        ]),
        stringMap,
        [
          "map",
          [
            ["a", "1"],
            ["b", "2"],
          ],
        ],
        new Map([
          ["a", "1"],
          ["b", "2"],
        ]),
      ],
      [{ "é€": "😀" }, stringMap, ["map", [["é€", "😀"]]], new Map([["é€", "😀"]])],
    ];
    for (const [value, type, wire, decoded] of cases) {
      expect(encodeValue(value)).toEqual(wire);
      expect(decodeValue(wire, type)).toEqual(decoded);
      expect(decodeValue(encodeValue(value), type)).toEqual(decoded);
    }
  });
});

describe("decodeRow", () => {
  it("decodes listed columns by their type and _uuid as sent", () => {
    const table = { columns: { name: scalar, ports: uuidSet, external_ids: stringMap } };
    const row = decodeRow({ _uuid: ["uuid", U1], name: "br0", ports: ["uuid", U2], external_ids: ["map", []] }, table);
    expect(row).toEqual({ _uuid: new Uuid(U1), name: "br0", ports: [new Uuid(U2)], external_ids: new Map() });
  });

  it("names the column it could not decode", () => {
    expect(() => decodeRow({ name: {} })).toThrow(/column name: not an OVSDB atom/);
  });
});

describe("parseDatabaseSchema", () => {
  it("normalizes the bare and object forms of column types", () => {
    const schema = parseDatabaseSchema({
      name: "Open_vSwitch",
      version: "8.3.1",
      cksum: "1 2",
      tables: {
        Bridge: {
          indexes: [["name"]],
          columns: {
            name: { type: "string", mutable: false },
            ports: { type: { key: { type: "uuid", refTable: "Port" }, min: 0, max: "unlimited" } },
            datapath_id: { type: { key: "string", min: 0 }, ephemeral: true },
            external_ids: { type: { key: "string", value: "string", min: 0, max: "unlimited" } },
          },
        },
      },
    });
    expect(schema).toEqual({
      name: "Open_vSwitch",
      version: "8.3.1",
      tables: {
        Bridge: {
          columns: {
            name: { key: "string", min: 1, max: 1 },
            ports: { key: "uuid", min: 0, max: "unlimited" },
            datapath_id: { key: "string", min: 0, max: 1 },
            external_ids: { key: "string", value: "string", min: 0, max: "unlimited" },
          },
        },
      },
    });
  });

  it("refuses an unknown atomic type", () => {
    expect(() => parseDatabaseSchema({ name: "x", version: "1", tables: { T: { columns: { c: { type: "blob" } } } } })).toThrow(/unknown type "blob" for T.c/);
  });
});

describe("JsonStreamParser", () => {
  const messages = [
    { id: 1, result: ["Open_vSwitch", "_Server"], error: null },
    { id: null, method: "update", params: ["m", { T: { [U1]: { new: { s: 'a } { " \\" \\\\' } } } }] },
    { id: "echo", method: "echo", params: ["é", "€ 😀", "日本語", "{", "}"] },
  ];
  const bytes = Buffer.from(messages.map((m) => JSON.stringify(m)).join("") + "\n");

  function parseInChunks(chunks: Buffer[]): unknown[] {
    const parser = new JsonStreamParser();
    return chunks.flatMap((chunk) => parser.push(chunk));
  }

  it("splits back-to-back objects in one chunk", () => {
    expect(parseInChunks([bytes])).toEqual(messages);
  });

  it("gives the same messages however the bytes are split in two", () => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(parseInChunks([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(messages);
    }
  });

  it("survives one byte at a time, splitting every multi-byte UTF-8 character", () => {
    const oneByOne = [...bytes].map((byte) => Buffer.from([byte]));
    expect(parseInChunks(oneByOne)).toEqual(messages);
  });

  it("skips whitespace between messages", () => {
    expect(parseInChunks([Buffer.from(' {"a":1}\r\n\t{"b":"}"} ')])).toEqual([{ a: 1 }, { b: "}" }]);
  });

  it("refuses bytes that cannot start a JSON-RPC message", () => {
    expect(() => parseInChunks([Buffer.from('{"a":1}[1]')])).toThrow(/expected a JSON object/);
  });
});
