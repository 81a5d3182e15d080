import fc from "fast-check";
import common from "../../schema/common.json";
import ovsBridgeSchema from "../../schema/ovs-bridge.json";
import dsrSchema from "../../schema/dsr-hypervisor-flows.json";
import dnatSchema from "../../schema/deferred-nat-load-balancer.json";
import deviceSchema from "../../schema/distributor-device.json";
import attachmentSchema from "../../schema/distributor-attachment.json";
import healthCheckSchema from "../../schema/health-check.json";
import type { DeferredNatLoadBalancerInputs, DistributorAttachmentInputs, DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { planBridge, type ObservedBridge } from "../../provider/engine/plan";
import { renderBundle, type Flow, type Group, type Modification } from "../../provider/openflow";
import { assignIds, planGateway, withDefaults as dnatDefaults } from "../../provider/resources/deferred-nat-load-balancer/plan";
import { planAllSlots } from "../../provider/resources/deferred-nat-load-balancer/second-chance";
import { bfdPorts, dsrId, planIntent, withDefaults as dsrDefaults } from "../../provider/resources/dsr-hypervisor-flows/plan";
import { assignSlots, attachmentIntent, planIds, withDefaults as attachmentDefaults } from "../../provider/resources/distributor-attachment/plan";

/**
 * Generated inputs for every resource kind, valid and hostile, and the pure
 * plan of what an accepted input puts on a bridge: shared by the unit fuzz
 * test (check, render, parse back) and the lab one (OVS accepts the flows).
 */

export const KINDS = ["OvsBridge", "DsrHypervisorFlows", "DeferredNatLoadBalancer", "DistributorDevice", "DistributorAttachment", "HealthCheck"] as const;
export type Kind = (typeof KINDS)[number];

export const SCHEMAS: Record<Kind, object> = {
  OvsBridge: ovsBridgeSchema,
  DsrHypervisorFlows: dsrSchema,
  DeferredNatLoadBalancer: dnatSchema,
  DistributorDevice: deviceSchema,
  DistributorAttachment: attachmentSchema,
  HealthCheck: healthCheckSchema,
};

/** Values that try to break out of the grammar they are placed in: flow syntax, shell, OVSDB, unicode, numbers. */
export const HOSTILE_STRINGS = [
  "10.0.0.1,actions=drop",
  "10.0.0.1 actions=drop",
  "10.0.0.1/32,priority=65535",
  "br0,actions=output:1",
  "02:00:00:00:00:01,actions=drop",
  "1,actions=drop",
  "tcp,tp_dst=22",
  "$(reboot)",
  "`id`",
  "; rm -rf /",
  "a|b",
  "a&&b",
  "'quoted'",
  '"dq"',
  "a\nb",
  "a\rb",
  "a\u0000b",
  "..",
  "../../etc/passwd",
  "/var/run/../../etc/shadow",
  "/tmp/x;y",
  "unix:/tmp/x",
  "é",
  "ｂｒ０",
  "br\u200b0",
  "𝔘𝔫𝔦",
  "",
  " ",
  "x".repeat(300),
  "__proto__",
  "constructor",
  "::1",
  "fe80::1",
  "2001:db8::1",
  "::ffff:10.0.0.1",
  "fe80::1%eth0",
  "2001:db8::/64",
  "2001:DB8:0:0:0:0:0:1",
  "2001:db8::1::2",
  "[2001:db8::1]",
  "10.0.0.1/33",
  "10.0.0.256",
  "010.0.0.1",
  " 10.0.0.1",
  "10.0.0.1\n",
  "0x0a000001",
  "ff:ff:ff:ff:ff:ff",
  "03:00:00:00:00:01",
  "02-00-00-00-00-01",
  "ssh-ed25519 AAAA\nssh-rsa AAAA",
  "65536",
  "1e3",
  "NaN",
  "-1",
];

const PROTO_KEYS = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"];

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.constantFrom(NaN, Infinity, -Infinity, -1, -0, 0, 0.5, 1.5, 65535, 65536, 4094, 4095, 2 ** 32, 2 ** 32 - 1, 2 ** 53, -(2 ** 31), 1e300),
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.constantFrom("10.0.0.1", "x", 1), { minLength: 1025, maxLength: 1100 }),
  fc.constant(JSON.parse('{"__proto__": {"polluted": true}}')),
);

// --- valid building blocks (so that accepted inputs reach the planners often) ---

const octet = fc.integer({ min: 0, max: 255 });
export const ipv4 = fc.tuple(fc.integer({ min: 1, max: 223 }), octet, octet, fc.integer({ min: 1, max: 254 })).map((p) => p.join("."));
const hex = (n: number) => n.toString(16).padStart(2, "0");
/** An IPv6 address in any of its spellings (upper case, leading zeros, compressed or not): check records it canonical. */
export const ipv6 = fc
  .tuple(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 7, maxLength: 7 }), fc.constantFrom("lower", "upper", "padded", "compressed"))
  .map(([rest, style]) => {
    const groups = [0xfd00, ...rest].map((g) => g.toString(16));
    if (style === "compressed") return `${groups.slice(0, 2).join(":")}::${groups.at(-1)}`;
    const text = (style === "padded" ? groups.map((g) => g.padStart(4, "0")) : groups).join(":");
    return style === "upper" ? text.toUpperCase() : text;
  });
/** A VIP's family: its own address and each backend's, mostly of one family (a mixed VIP is one check must refuse). */
const sameFamily = <V extends { address: string; backends: { address: string }[] }>(vip: V, family: 4 | 6 | "mixed", addresses: string[]): V =>
  family === 4
    ? vip
    : {
        ...vip,
        address: addresses[0],
        backends: vip.backends.map((b, i) => ({ ...b, address: family === 6 || i % 2 === 1 ? addresses[(i + 1) % addresses.length] : b.address })),
      };
const family = fc.constantFrom<4 | 6 | "mixed">(4, 4, 4, 4, 4, 4, 6, 6, 6, "mixed");
const ipv6s = fc.array(ipv6, { minLength: 4, maxLength: 4 });
export const mac = fc.tuple(fc.integer({ min: 0, max: 127 }), fc.array(octet, { minLength: 5, maxLength: 5 }), fc.boolean()).map(([first, rest, upper]) => {
  const text = [hex((first << 1) & 0xfe), ...rest.map(hex)].join(":");
  return upper ? text.toUpperCase() : text;
});
const lowerName = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/);
const bridgeName = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,14}$/);
const portName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/);
const l4Port = fc.integer({ min: 1, max: 65535 });

/** A private key and passphrase the failures must never echo. */
export const SECRET_KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABD0FUZZSECRET\n-----END OPENSSH PRIVATE KEY-----\n";
export const SECRET_PASSPHRASE = "fuzz-passphrase-Zq8Xv3";

const connection = fc.record(
  {
    host: fc.oneof(ipv4, fc.stringMatching(/^[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5})?$/)),
    port: l4Port,
    user: fc.stringMatching(/^[a-z_][a-z0-9_-]{0,12}$/),
    hostKey: fc.constant("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAetyAmvoSVFtDMYSfCKth7WDDnRIZSe672y/GwQiADl"),
    privateKey: fc.constant(SECRET_KEY),
    passphrase: fc.constant(SECRET_PASSPHRASE),
  },
  { requiredKeys: ["host", "user", "hostKey", "privateKey"] },
);
const ovsHost = fc.record({ connection, ovsRundir: fc.constantFrom("/var/run/openvswitch", "/run/ovslb-lab/hosts/gw1/run") }, { requiredKeys: ["connection"] });

const ovsBridge = fc.record(
  {
    host: ovsHost,
    name: bridgeName,
    datapathType: fc.constantFrom("netdev", "system"),
    failMode: fc.constantFrom("secure", "standalone"),
    hwaddr: mac,
    // eslint-disable-next-line no-control-regex -- NUL is one of the characters these values must not hold
    externalIds: fc.dictionary(fc.stringMatching(/^[A-Za-z0-9_.:-]{1,20}$/), fc.stringMatching(/^[^\n\r\x00]{0,30}$/), { maxKeys: 4 }),
  },
  { requiredKeys: ["host", "name"] },
);

const dsrBackend = fc.record({ address: ipv4, port: l4Port, mac, bridgePort: portName });
const dsr = fc
  .record(
    {
      name: lowerName,
      host: ovsHost,
      bridge: bridgeName,
      mode: fc.constantFrom("mac", "gre", "ipip"),
      zone: fc.integer({ min: 1, max: 65535 }),
      vips: fc.array(
        fc
          .tuple(
            fc.record(
              { address: ipv4, port: l4Port, protocol: fc.constantFrom("tcp", "udp", "sctp"), backends: fc.array(dsrBackend, { minLength: 1, maxLength: 3 }) },
              { requiredKeys: ["address", "port", "backends"] },
            ),
            family,
            ipv6s,
          )
          .map(([vip, f, v6]) => sameFamily(vip, f, v6)),
        { maxLength: 3 },
      ),
      gre: fc.record(
        {
          port: portName,
          // Mostly one family (an IPv6 underlay's sources, or IPv4 ones), sometimes mixed: check refuses that.
          allowedSources: fc.array(
            fc.oneof({ arbitrary: ipv4, weight: 3 }, fc.constantFrom("172.16.0.0/16", "10.0.0.0/8", "0.0.0.0/0", "fd00:16::/32"), ipv6),
            {
              minLength: 1,
              maxLength: 3,
            },
          ),
          key: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
          bfd: fc.record({
            peers: fc.array(fc.record({ address: fc.oneof({ arbitrary: ipv4, weight: 3 }, ipv6), key: fc.integer({ min: 0, max: 2 ** 32 - 1 }) }), {
              minLength: 1,
              maxLength: 2,
            }),
          }),
          secondChance: fc.record({ peers: fc.array(ipv4, { minLength: 1, maxLength: 3 }) }),
        },
        { requiredKeys: ["allowedSources"] },
      ),
    },
    { requiredKeys: ["name", "host", "bridge", "vips"] },
  )
  .map((i) => (i.mode === "gre" || !i.gre ? i : { ...i, mode: "gre" as const }));

const dnat = fc
  .record({
    name: lowerName,
    hypervisorNames: fc.uniqueArray(lowerName, { minLength: 1, maxLength: 3 }),
    gateways: fc.uniqueArray(
      fc.record({
        name: lowerName,
        host: ovsHost,
        bridge: bridgeName,
        segmentPort: portName,
        mac,
        tunnelAddress: fc.oneof({ arbitrary: ipv4, weight: 3 }, ipv6),
      }),
      {
        minLength: 1,
        maxLength: 2,
        selector: (g) => g.name,
      },
    ),
    delivery: fc.constantFrom("mac", "gre"),
    selectionMethod: fc.constantFrom("hash", "dp_hash"),
    selectionFields: fc.uniqueArray(fc.constantFrom("ip_src", "ip_dst", "tp_src", "tp_dst"), { minLength: 1, maxLength: 4 }),
    secondChance: fc.option(fc.record({ slots: fc.constantFrom(1024, 2048) }, { requiredKeys: [] }), { nil: undefined }),
    vips: fc.array(
      fc
        .tuple(
          fc.record({
            address: ipv4,
            port: l4Port,
            protocol: fc.constantFrom("tcp", "udp", "sctp"),
            backends: fc.array(
              fc.record(
                { address: ipv4, port: l4Port, mac, hypervisor: fc.nat(), weight: fc.integer({ min: 1, max: 4 }) },
                { requiredKeys: ["address", "port", "mac", "hypervisor"] },
              ),
              { maxLength: 3 },
            ),
          }),
          family,
          ipv6s,
        )
        .map(([vip, f, v6]) => sameFamily(vip, f, v6)),
      { minLength: 1, maxLength: 3 },
    ),
  })
  .map(({ hypervisorNames, vips, secondChance, ...rest }) => ({
    ...rest,
    ...(secondChance ? { secondChance } : {}),
    hypervisors: hypervisorNames.map((name, i) => ({ name, tunnelAddress: `172.16.9.${i + 1}` })),
    vips: vips.map((v) => ({ ...v, backends: v.backends.map((b) => ({ ...b, hypervisor: hypervisorNames[b.hypervisor % hypervisorNames.length] })) })),
  }));

const device = fc.record({ host: ovsHost, deviceId: lowerName, uplinkBridge: bridgeName });

const amphora = fc.record(
  {
    name: lowerName,
    mac,
    role: fc.constantFrom("active", "active", "standby", "failed"),
    slot: fc.integer({ min: 1, max: 64 }),
    watchPort: fc.integer({ min: 1, max: 65279 }),
  },
  { requiredKeys: ["name", "mac", "role"] },
);
const attachment = fc
  .record(
    {
      host: ovsHost,
      deviceId: lowerName,
      uplinkBridge: bridgeName,
      attachmentId: lowerName,
      vip: ipv4,
      vlan: fc.integer({ min: 1, max: 4094 }),
      frontendMac: mac,
      affinity: fc.constantFrom("5-tuple", "source-ip"),
      returnPath: fc.constantFrom("direct", "hairpin"),
      gatewayMac: mac,
      amphorae: fc.uniqueArray(amphora, { minLength: 1, maxLength: 4, selector: (a) => a.name }),
      loadBalancerId: lowerName,
      nextHop: ipv4,
    },
    { requiredKeys: ["host", "deviceId", "uplinkBridge", "attachmentId", "vip", "amphorae"] },
  )
  .map((a) => {
    // Standbys carry no slot: keep the generator mostly inside the rules so accepted inputs are common.
    const amphorae = a.amphorae.map((x) => (x.role === "standby" ? (({ slot: _s, ...rest }) => rest)(x) : x));
    return { ...a, amphorae, ...(a.returnPath === "hairpin" ? {} : { gatewayMac: undefined }) };
  })
  .map((a) => JSON.parse(JSON.stringify(a)));

const ovsdbSocket = fc.record({
  connection,
  socket: fc.constantFrom("/run/ovn/ovnnb_db.sock", "/var/run/ovn/ovnsb_db.sock", "/run/ovslb-lab/hosts/central/run/ovnnb_db.sock"),
});
const logicalPort = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,20}$/);
const healthCheck = fc
  .record({
    loadBalancer: lowerName,
    northbound: ovsdbSocket,
    southbound: fc.option(ovsdbSocket, { freq: 4, nil: undefined }),
    sourceIp: fc.option(ipv4, { freq: 6, nil: undefined }),
    sourceIpv6: fc.option(ipv6, { freq: 2, nil: undefined }),
    families: fc.array(family, { minLength: 3, maxLength: 3 }),
    addresses6: ipv6s,
    hypervisorNames: fc.uniqueArray(lowerName, { minLength: 1, maxLength: 3 }),
    vips: fc.uniqueArray(
      fc.record({
        address: ipv4,
        port: l4Port,
        protocol: fc.constantFrom("tcp", "udp", "sctp"),
        backends: fc.uniqueArray(fc.record({ address: ipv4, port: l4Port, logicalPort, hypervisor: fc.option(fc.nat(), { nil: undefined }) }), {
          maxLength: 3,
          selector: (b) => `${b.address}:${b.port}`,
        }),
      }),
      { minLength: 1, maxLength: 3, selector: (v) => `${v.protocol}:${v.address}:${v.port}` },
    ),
    probe: fc.option(
      fc.record(
        {
          interval: fc.integer({ min: 1, max: 3600 }),
          timeout: fc.integer({ min: 1, max: 3600 }),
          successCount: fc.integer({ min: 1, max: 100 }),
          failureCount: fc.integer({ min: 1, max: 100 }),
        },
        { requiredKeys: [] },
      ),
      { nil: undefined },
    ),
    enforce: fc.boolean(),
    gateways: fc.option(
      fc.uniqueArray(fc.record({ name: lowerName, host: ovsHost, bridge: bridgeName }), { minLength: 1, maxLength: 2, selector: (g) => g.name }),
      { nil: undefined },
    ),
  })
  .map(({ hypervisorNames, vips, families, addresses6, ...rest }) => ({
    ...rest,
    // enforce needs southbound, and with gateways every backend names its hypervisor: mostly inside the rules, so accepted inputs are common.
    enforce: rest.enforce && rest.southbound !== undefined,
    vips: vips
      .map((vip, i) => sameFamily(vip, families[i], addresses6))
      .map((v) => ({
        ...v,
        backends: v.backends.map((b) => ({
          ...b,
          hypervisor: b.hypervisor === undefined && !rest.gateways ? undefined : hypervisorNames[(b.hypervisor ?? 0) % hypervisorNames.length],
        })),
      })),
  }))
  .map((h) => JSON.parse(JSON.stringify(h)) as Record<string, unknown>);

const BASES: Record<Kind, fc.Arbitrary<Record<string, unknown>>> = {
  OvsBridge: ovsBridge,
  DsrHypervisorFlows: dsr,
  DeferredNatLoadBalancer: dnat,
  DistributorDevice: device,
  DistributorAttachment: attachment as fc.Arbitrary<Record<string, unknown>>,
  HealthCheck: healthCheck,
};

/** Every path in a JSON value (objects and arrays too), as lists of keys. */
function paths(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) v.slice(0, 8).forEach((x, i) => paths(x, [...at, i], out));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  return out;
}

type Mutation = { pick: number; how: "replace" | "delete" | "add"; key: string; value: unknown };

const mutation: fc.Arbitrary<Mutation> = fc.record({
  pick: fc.nat(),
  how: fc.constantFrom("replace", "replace", "replace", "delete", "add"),
  key: fc.oneof(fc.constantFrom(...PROTO_KEYS), fc.string({ maxLength: 8 })),
  value: hostileValue,
});

/** Sets an own property, even `__proto__` (as JSON.parse of engine data would). */
function setOwn(target: Record<string | number, unknown>, key: string | number, value: unknown) {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy that keeps own `__proto__` keys and NaN (what engine data can hold), so no two places share one object. */
function copy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(copy);
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) setOwn(out, k, copy(x));
  return out;
}

function mutate(base: Record<string, unknown>, mutations: readonly Mutation[]): Record<string, unknown> {
  const root = copy(base) as Record<string, unknown>;
  for (const m of mutations) {
    const all = paths(root);
    const path = all[m.pick % all.length];
    if (m.how === "add") {
      let target: unknown = root;
      for (const k of path) target = (target as Record<string | number, unknown>)[k];
      if (target && typeof target === "object" && !Array.isArray(target)) setOwn(target as Record<string, unknown>, m.key, copy(m.value));
      continue;
    }
    if (path.length === 0) continue;
    let parent: unknown = root;
    for (const k of path.slice(0, -1)) parent = (parent as Record<string | number, unknown>)[k];
    const last = path[path.length - 1];
    if (m.how === "delete") {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete (parent as Record<string, unknown>)[last as string];
    } else setOwn(parent as Record<string | number, unknown>, last, copy(m.value));
  }
  return root;
}

/** Inputs of a kind: about a third as generated (mostly valid), the rest with 1-3 hostile mutations. */
export function inputsOf(kind: Kind): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(BASES[kind], fc.array(mutation, { maxLength: 3 })).map(([base, ms]) => mutate(base, ms));
}

// --- what an accepted input puts on a bridge (pure; no host) ---

export interface Rendered {
  /** The planned modifications (all adds: the bridge is empty) and their bundle lines. */
  mods: Modification[];
  lines: string[];
}

const EMPTY = (ports: Map<string, number>): ObservedBridge => ({ ports, flows: [], groups: [] });

/** The bundle an accepted input sends to an empty bridge, planned as the handlers plan it. Kinds without flows render nothing. */
export function renderAccepted(kind: Kind, inputs: Record<string, unknown>): Rendered {
  let mods: Modification[] = [];
  switch (kind) {
    case "DsrHypervisorFlows": {
      const d = dsrDefaults(inputs as unknown as DsrHypervisorFlowsInputs);
      const id = dsrId(d);
      const ports = new Map<string, number>();
      for (const v of d.vips) for (const b of v.backends) if (!ports.has(b.bridgePort)) ports.set(b.bridgePort, ports.size + 1);
      if (d.gre?.port && !ports.has(d.gre.port)) ports.set(d.gre.port, 60001);
      for (const b of bfdPorts(id, d)) if (!ports.has(b.name)) ports.set(b.name, 61000 + ports.size);
      const observed = EMPTY(ports);
      mods = planBridge("fuzz", planIntent(id, d, undefined, observed).intent, observed);
      break;
    }
    case "DeferredNatLoadBalancer": {
      const d = dnatDefaults(inputs as unknown as DeferredNatLoadBalancerInputs);
      const slots = d.secondChance ? planAllSlots(d, undefined) : undefined;
      const ids = assignIds(d, { groupIds: {}, bucketIds: {} }, new Set());
      const tunnelOfports = new Map(d.hypervisors.map((h, i) => [h.name, 100 + i]));
      const gw = d.gateways[0];
      mods = planGateway(
        "fuzz",
        d,
        ids,
        { segmentOfport: 1, mac: gw.mac, tunnelOfports, bfdOfports: new Map(d.hypervisors.map((h, i) => [h.name, 200 + i])) },
        EMPTY(new Map()),
        slots?.tables,
      );
      break;
    }
    case "DistributorAttachment": {
      const d = attachmentDefaults(inputs as unknown as DistributorAttachmentInputs);
      const { slots } = assignSlots(d.amphorae);
      const ids = planIds(
        d,
        slots.map((s) => s.slot),
        undefined,
      );
      mods = planBridge("fuzz", attachmentIntent(d, ids, slots), EMPTY(new Map()));
      break;
    }
    default:
      break;
  }
  return { mods, lines: renderBundle(mods) };
}

export const flowsOf = (mods: readonly Modification[]): Flow[] => mods.flatMap((m) => (m.op === "add-flow" ? [m.flow] : []));
export const groupsOf = (mods: readonly Modification[]): Group[] => mods.flatMap((m) => (m.op === "add-group" ? [m.group] : []));

/** Whether a property path's steps (`gateways[0].host.connection.host`) name a property the schema declares. */
export function schemaHasPath(schema: object, steps: readonly string[]): boolean {
  type Node = { $ref?: string; properties?: Record<string, Node>; items?: Node; additionalProperties?: boolean | Node; definitions?: Record<string, Node> };
  const resolve = (node: Node, doc: Node): [Node, Node] => {
    while (node.$ref) {
      const [file, pointer] = node.$ref.split("#");
      const target = (file === "common.json" ? common : file === "" ? doc : undefined) as Node | undefined;
      if (!target) return [{}, doc];
      let n: unknown = target;
      for (const step of pointer.split("/").filter(Boolean)) n = (n as Record<string, unknown>)[step];
      node = n as Node;
      doc = target;
    }
    return [node, doc];
  };
  let doc = schema as Node;
  let node = doc;
  for (const step of steps) {
    [node, doc] = resolve(node, doc);
    if (/^\d+$/.test(step) && node.items) node = node.items;
    else if (node.properties && Object.prototype.hasOwnProperty.call(node.properties, step)) node = node.properties[step];
    else if (typeof node.additionalProperties === "object") node = node.additionalProperties;
    else return false;
  }
  return true;
}

/** The steps of a property path: `a.b[0]["x.y"]` -> a, b, 0, x.y. */
export function propertySteps(property: string): string[] {
  const steps: string[] = [];
  const re = /\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]|\.?([^.[\]]+)/gy;
  let m: RegExpExecArray | null;
  while ((m = re.exec(property))) steps.push(m[1] !== undefined ? JSON.parse(`"${m[1]}"`) : (m[2] ?? m[3]));
  if (re.lastIndex !== 0 && re.lastIndex !== property.length) throw new Error(`not a property path: ${property}`);
  return steps;
}
