import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, expect } from "vitest";
import { asLists, check, diff } from "../../provider/handlers";
import { sameInputs, UNORDERED } from "../../provider/model/validate";
import { liftCredentials, CREDENTIALS_OUTPUT } from "../../provider/secrets";
import deferredNatSchema from "../../schema/deferred-nat-load-balancer.json";

/**
 * Lists whose order means nothing compare as sets in diff: a reordered
 * backend, VIP, gateway, hypervisor, amphora or hash-field list is no
 * change (nothing would be sent), while any real change still is.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string, privateKey: string) => ({ host, user: "root", hostKey: KEY, privateKey });
const reversed = (xs: readonly any[]): any[] => [...xs].reverse();
type Props = Record<string, any>;

/** Checks inputs as the engine does before create or diff, and fails the test on any refusal. */
async function checked(kind: string, inputs: Props): Promise<Props> {
  const { inputs: out, failures } = await check(kind, {}, inputs);
  expect(failures).toEqual([]);
  return asLists(kind, out);
}

/** The outputs a create of `inputs` records (credentials lifted into their secret output, plus state). */
function outputsOf(inputs: Props, state: Props): Props {
  const { value, credentials } = liftCredentials(inputs);
  return { ...value, ...state, [CREDENTIALS_OUTPUT]: credentials };
}

const backend = (i: number, hypervisor = "hv1") => ({
  address: `10.1.0.${i}`,
  port: 8080,
  mac: `02:00:00:00:00:${i.toString(16).padStart(2, "0")}`,
  hypervisor,
});

const lb = (): Props => ({
  name: "web",
  gateways: [
    { name: "gw1", host: { connection: conn("172.30.0.11", "KEY-ONE-----") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" },
    { name: "gw2", host: { connection: conn("172.30.0.12", "KEY-TWO-----") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0c" },
  ],
  hypervisors: [{ name: "hv1" }, { name: "hv2" }, { name: "hv3" }],
  vips: [
    { address: "10.0.0.193", port: 80, protocol: "tcp", backends: [backend(1), backend(2, "hv2"), backend(3, "hv3")] },
    { address: "10.0.0.194", port: 443, protocol: "tcp", backends: [backend(4), { ...backend(5, "hv2"), weight: 3 }] },
  ],
});
const LB_STATE = { groupIds: { "tcp:10.0.0.193:80": 7, "tcp:10.0.0.194:443": 8 }, bucketIds: {}, gatewayStatus: {} };

describe("diff: lists whose order means nothing compare as sets", () => {
  const kind = "DeferredNatLoadBalancer";
  const diffAgainst = async (changed: Props) => diff(kind, "web", outputsOf(await checked(kind, lb()), LB_STATE), await checked(kind, changed));

  it("shows no change when nothing changed", async () => {
    expect(await diffAgainst(lb())).toEqual({ changes: false });
  });

  it("shows no change for reordered backends, VIPs, gateways, hypervisors or hash fields", async () => {
    const backends = lb();
    backends.vips[0].backends = [backends.vips[0].backends[2], backends.vips[0].backends[0], backends.vips[0].backends[1]];
    backends.vips[1].backends = reversed(backends.vips[1].backends);
    expect(await diffAgainst(backends)).toEqual({ changes: false });

    const vips = lb();
    vips.vips = reversed(vips.vips);
    expect(await diffAgainst(vips)).toEqual({ changes: false });

    // Each gateway keeps its own (secret) key through the reorder.
    const gateways = lb();
    gateways.gateways = reversed(gateways.gateways);
    expect(await diffAgainst(gateways)).toEqual({ changes: false });

    const hypervisors = lb();
    hypervisors.hypervisors = reversed(hypervisors.hypervisors);
    expect(await diffAgainst(hypervisors)).toEqual({ changes: false });

    // OVS prints hash fields in its own order: they are a set too.
    const fields: Props = { ...lb(), selectionFields: ["tp_dst", "tp_src", "ip_dst", "ip_src"] };
    expect(await diffAgainst(fields)).toEqual({ changes: false });

    const everything: Props = { ...lb(), selectionFields: ["ip_dst", "ip_src", "tp_dst", "tp_src"] };
    everything.vips = reversed(everything.vips).map((v: Props) => ({ ...v, backends: reversed(v.backends) }));
    everything.gateways = reversed(everything.gateways);
    everything.hypervisors = reversed(everything.hypervisors);
    expect(await diffAgainst(everything)).toEqual({ changes: false });
  });

  it("still shows a real change, reordered or not", async () => {
    const moved = lb();
    moved.vips[0].backends[1] = { ...moved.vips[0].backends[1], port: 8081 };
    moved.vips[0].backends = reversed(moved.vips[0].backends);
    expect(await diffAgainst(moved)).toMatchObject({ changes: true, replaces: [] });

    const removed = lb();
    removed.vips[0].backends = removed.vips[0].backends.slice(1);
    expect(await diffAgainst(removed)).toMatchObject({ changes: true, replaces: [] });

    const added = lb();
    added.vips[1].backends = [backend(9), ...added.vips[1].backends];
    expect(await diffAgainst(added)).toMatchObject({ changes: true, replaces: [] });

    const weight = lb();
    weight.vips[1].backends[1] = { ...weight.vips[1].backends[1], weight: 2 };
    expect(await diffAgainst(weight)).toMatchObject({ changes: true });

    // Two backends trading their MACs: the same multiset of MACs, but not the same backends.
    const swapped = lb();
    const [a, b] = swapped.vips[0].backends;
    swapped.vips[0].backends = [{ ...a, mac: b.mac }, { ...b, mac: a.mac }, swapped.vips[0].backends[2]];
    expect(await diffAgainst(swapped)).toMatchObject({ changes: true });

    // A backend moved from one VIP to the other: the same backends overall, different VIPs.
    const across = lb();
    across.vips[1].backends.push(across.vips[0].backends.pop());
    expect(await diffAgainst(across)).toMatchObject({ changes: true });

    // Gateways trading their keys is a change (credentials restored before comparing).
    const keys = lb();
    keys.gateways[0].host.connection.privateKey = "KEY-TWO-----";
    keys.gateways[1].host.connection.privateKey = "KEY-ONE-----";
    expect(await diffAgainst(keys)).toMatchObject({ changes: true });

    const fewerFields: Props = { ...lb(), selectionFields: ["ip_src", "ip_dst"] };
    expect(await diffAgainst(fewerFields)).toMatchObject({ changes: true });
  });

  it("shows no change when a read listed the same state in another order (refresh)", async () => {
    // After a refresh the old outputs are what read found, in the order the host printed it.
    const read = await checked(kind, lb());
    read.vips = reversed(read.vips).map((v: Props) => ({ ...v, backends: reversed(v.backends) }));
    expect(await diff(kind, "web", outputsOf(read, LB_STATE), await checked(kind, lb()))).toEqual({ changes: false });
  });

  it("reorders amphorae of a distributor attachment as a set; a new role is a change", async () => {
    const host = { connection: conn("172.30.0.31", "KEY-THREE---") };
    const att = (): Props => ({
      host,
      deviceId: "dist1",
      uplinkBridge: "br-up",
      attachmentId: "lb-a",
      vip: "10.0.0.100",
      amphorae: [
        { name: "a1", mac: "02:00:00:00:01:01", role: "active", slot: 1 },
        { name: "a2", mac: "02:00:00:00:01:02", role: "active", slot: 2 },
        { name: "sb", mac: "02:00:00:00:01:03", role: "standby" },
      ],
    });
    const k = "DistributorAttachment";
    const olds = outputsOf(await checked(k, att()), { bridge: "x" });
    const reordered = { ...att(), amphorae: reversed(att().amphorae) };
    expect(await diff(k, "lb-a", olds, await checked(k, reordered))).toEqual({ changes: false });
    const failed = { ...att(), amphorae: reversed(att().amphorae).map((a: Props) => (a.name === "a1" ? { ...a, role: "failed" } : a)) };
    expect(await diff(k, "lb-a", olds, await checked(k, failed))).toMatchObject({ changes: true });
  });

  it("reorders a DSR hypervisor's VIPs and backends as sets", async () => {
    const flows = (): Props => ({
      name: "hv1-web",
      host: { connection: conn("172.30.0.21", "KEY-FOUR----") },
      bridge: "br-int",
      vips: [
        {
          address: "10.0.0.193",
          port: 80,
          protocol: "tcp",
          backends: [
            { address: "10.1.0.1", port: 8080, mac: "02:00:00:00:00:01", bridgePort: "vm1" },
            { address: "10.1.0.2", port: 8080, mac: "02:00:00:00:00:02", bridgePort: "vm2" },
          ],
        },
        { address: "10.0.0.194", port: 53, protocol: "udp", backends: [{ address: "10.1.0.1", port: 5353, mac: "02:00:00:00:00:01", bridgePort: "vm1" }] },
      ],
    });
    const k = "DsrHypervisorFlows";
    const olds = outputsOf(await checked(k, flows()), { cookie: "0x1" });
    const reordered = flows();
    reordered.vips = reversed(reordered.vips).map((v: Props) => ({ ...v, backends: reversed(v.backends) }));
    expect(await diff(k, "hv1-web", olds, await checked(k, reordered))).toEqual({ changes: false });
    const changed = flows();
    changed.vips[0].backends[1].bridgePort = "vm3";
    expect(await diff(k, "hv1-web", olds, await checked(k, changed))).toMatchObject({ changes: true });
  });
});

describe("sameInputs", () => {
  const same = (a: unknown, b: unknown, opts?: Parameters<typeof sameInputs>[3]) => sameInputs(deferredNatSchema, a, b, opts);

  it("compares marked lists as sets, nested ones too, and leaves the inputs untouched", () => {
    const inputs = lb();
    const before = JSON.stringify(inputs);
    const reordered = { ...inputs, vips: reversed(inputs.vips).map((v: Props) => ({ ...v, backends: reversed(v.backends) })) };
    expect(same(inputs, reordered)).toBe(true);
    expect(JSON.stringify(inputs)).toBe(before);
    // Key order never counts, nor a key whose value is undefined.
    expect(same(inputs, Object.fromEntries(Object.entries(inputs).reverse()))).toBe(true);
    expect(same(inputs, { ...inputs, absent: undefined })).toBe(true);
  });

  it("tells any real change, in place or reordered: a value, a list's length, an element swapped for another", () => {
    const inputs = lb();
    const vip = inputs.vips[0] as Props;
    const withVip = (v: Props) => ({ ...inputs, vips: [v, ...inputs.vips.slice(1)] });
    expect(same(inputs, withVip({ ...vip, port: vip.port + 1 }))).toBe(false);
    expect(same(inputs, withVip({ ...vip, backends: [...vip.backends, { ...vip.backends[0], address: "10.0.0.250" }] }))).toBe(false);
    const swapped = [{ ...vip.backends[0], port: 9999 }, ...vip.backends.slice(1)];
    expect(same(inputs, withVip({ ...vip, backends: reversed(swapped) }))).toBe(false);
    // A duplicate in place of another element is not the same set.
    expect(same(inputs, withVip({ ...vip, backends: vip.backends.map(() => vip.backends[0]) }))).toBe(vip.backends.length === 1);
    // Properties the schema does not know (recorded state) compare as they are: their lists keep their order.
    expect(same({ ...inputs, extra: [3, 1, 2] }, { ...inputs, extra: [1, 2, 3] })).toBe(false);
    expect(same({ ...inputs, extra: [3, 1, 2] }, { ...inputs, extra: [3, 1, 2] })).toBe(true);
  });

  it("compares a backend (nothing marked under it) as plain JSON: key order and undefined keys aside, types and values count", () => {
    const inputs = lb();
    const vip = inputs.vips[0] as Props;
    const withFirst = (b: Props) => ({ ...inputs, vips: [{ ...vip, backends: [b, ...vip.backends.slice(1)] }, ...inputs.vips.slice(1)] });
    const first = vip.backends[0] as Props;
    expect(same(inputs, withFirst(Object.fromEntries(Object.entries(first).reverse())))).toBe(true);
    expect(same(inputs, withFirst({ ...first, weight: undefined }))).toBe(true);
    expect(same(inputs, withFirst({ ...first, port: String(first.port) }))).toBe(false);
    expect(same(inputs, withFirst({ ...first, weight: 1 }))).toBe(false);
    const { hypervisor: _h, ...missing } = first;
    expect(same(inputs, withFirst({ ...missing, hv: first.hypervisor }))).toBe(false);
    expect(same(withFirst({ ...first, extra: { a: [1, 2] } }), withFirst({ ...first, extra: { a: [1, 2] } }))).toBe(true);
    expect(same(withFirst({ ...first, extra: { a: [1, 2] } }), withFirst({ ...first, extra: { a: [2, 1] } }))).toBe(false);
    expect(same(withFirst({ ...first, extra: null }), withFirst({ ...first, extra: {} }))).toBe(false);
  });

  it("with reach, counts each connection as what reach makes of it", () => {
    const inputs = lb();
    const rotated = {
      ...inputs,
      gateways: inputs.gateways.map((g: Props) => ({ ...g, host: { ...g.host, connection: { ...g.host.connection, user: "ops" } } })),
    };
    const hostOnly = { reach: (c: Record<string, unknown>) => ({ host: c.host }) };
    expect(same(inputs, rotated)).toBe(false);
    expect(same(inputs, rotated, hostOnly)).toBe(true);
    const moved = {
      ...inputs,
      gateways: inputs.gateways.map((g: Props) => ({ ...g, host: { ...g.host, connection: { ...g.host.connection, host: "192.0.2.99" } } })),
    };
    expect(same(inputs, moved, hostOnly)).toBe(false);
  });
});

describe("schema", () => {
  /** Every array schema in schema/, with where it is. */
  function arrays(node: unknown, at: string, out: Array<{ at: string; node: Props }>) {
    if (!node || typeof node !== "object") return out;
    const n = node as Props;
    if (n.type === "array") out.push({ at, node: n });
    for (const [k, v] of Object.entries(n)) arrays(v, `${at}/${k}`, out);
    return out;
  }
  const dir = join(__dirname, "..", "..", "schema");
  const files = readdirSync(dir).filter((f) => f.endsWith(".json"));

  it(`says of every list whether its order means anything ("${UNORDERED}": true or false)`, () => {
    const all = files.flatMap((f) => arrays(JSON.parse(readFileSync(join(dir, f), "utf8")), f, []));
    expect(all.length).toBeGreaterThan(0);
    const undecided = all.filter((a) => typeof a.node[UNORDERED] !== "boolean").map((a) => a.at);
    expect(undecided).toEqual([]);
  });

  it("marks the lists whose order means nothing", () => {
    const marked = files
      .flatMap((f) => arrays(JSON.parse(readFileSync(join(dir, f), "utf8")), f, []))
      .filter((a) => a.node[UNORDERED] === true)
      .map((a) =>
        a.at
          .split("/")
          .filter((p) => !["properties", "items", "definitions"].includes(p))
          .join("/"),
      );
    expect(marked).toEqual(
      expect.arrayContaining([
        "deferred-nat-load-balancer.json/gateways",
        "deferred-nat-load-balancer.json/hypervisors",
        "deferred-nat-load-balancer.json/vips",
        "deferred-nat-load-balancer.json/vips/backends",
        "deferred-nat-load-balancer.json/selectionFields",
        "distributor-attachment.json/amphorae",
        "dsr-hypervisor-flows.json/vips",
        "dsr-hypervisor-flows.json/vip/backends",
      ]),
    );
  });
});
