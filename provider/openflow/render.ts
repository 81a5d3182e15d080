import { canonicalPrefix, ipFamily } from "./address";
import {
  type Action,
  type Bucket,
  CT_STATE_FLAGS,
  type CtNat,
  type Flow,
  type FlowEntry,
  type Group,
  type GroupEntry,
  HASH_FIELDS,
  type HashField,
  type Match,
  type Modification,
  type MoveField,
  type Protocol,
  type SelectBucket,
  TCP_FLAGS,
} from "./types";

/**
 * Validation and rendering of modifications to `ovs-ofctl bundle` lines
 * (ovs-ofctl(8), "OpenFlow Switch Bundle Command", Flow and Group Syntax).
 * Every value is checked against its own grammar here: OVS's parser is lax
 * (it reads 10.0.0.300 as 10.0.0.44 and silently drops match fields whose
 * prerequisites are missing), and a stray `,` or newline would change what a
 * line means.
 */

/** A value refused before it could reach OVS; `field` says where it was found. */
export class OpenFlowValueError extends Error {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = "OpenFlowValueError";
  }
}

/** OFPG_MAX and the largest bucket id OpenFlow 1.5 leaves unreserved. */
export const MAX_GROUP_ID = 0xffffff00;
export const MAX_BUCKET_ID = 0xffffff00;
/** OFPP_MAX - 1: the largest physical port number. */
export const MAX_PORT = 0xfeff;
export const MAX_TABLE = 254;
const UINT8 = 0xff;
const UINT16 = 0xffff;
const UINT32 = 0xffffffff;
const UINT64 = (1n << 64n) - 1n;

function show(value: unknown): string {
  let text: string;
  if (typeof value === "bigint") text = `${value}n`;
  else text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function refuse(field: string, value: unknown, expected: string): never {
  throw new OpenFlowValueError(field, `${show(value)} is not ${expected}`);
}

function join(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

/** Checks an integer against its range; exported for the transports' own arguments. */
export function checkUint(field: string, value: unknown, max: number, min = 0): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    refuse(field, value, `an integer in [${min}, ${max}]`);
  }
  return value;
}

function uint64(field: string, value: unknown): bigint {
  if (typeof value !== "bigint" || value < 0n || value > UINT64) refuse(field, value, "a 64-bit unsigned bigint");
  return value;
}

function hex64(value: bigint): string {
  return `0x${value.toString(16)}`;
}

/** The `cookie=value/mask` filter of flow mods and dumps. */
export function renderCookieMatch(cookie: bigint, mask: bigint, field = "cookie"): string {
  const value = uint64(field, cookie);
  const bits = uint64(join(field, "mask"), mask);
  return `cookie=${hex64(value)}/${bits === UINT64 ? "-1" : hex64(bits)}`;
}

function oneOf(field: string, value: unknown, allowed: readonly string[]): string {
  if (typeof value !== "string" || !allowed.includes(value)) refuse(field, value, `one of ${allowed.join(", ")}`);
  return value;
}

function mac(field: string, value: unknown): string {
  if (typeof value !== "string" || !/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/.test(value)) {
    refuse(field, value, "a MAC address (xx:xx:xx:xx:xx:xx)");
  }
  return value.toLowerCase();
}

function ipv4(field: string, value: unknown): string {
  if (typeof value !== "string" || ipFamily(value) !== 4) refuse(field, value, "an IPv4 address");
  return value;
}

/** An IPv6 address, rendered as OVS prints it (RFC 5952, address.ts). */
function ipv6(field: string, value: unknown): string {
  const canonical = typeof value === "string" ? canonicalPrefix(value, 6) : undefined;
  if (!canonical || !("text" in canonical) || canonical.text.includes("/")) refuse(field, value, "an IPv6 address (not scoped, not IPv4-mapped)");
  return canonical.text;
}

/** An address or a prefix with no host bits set; /32 renders bare, as OVS prints it. */
function ipv4Prefix(field: string, value: unknown): string {
  const canonical = typeof value === "string" ? canonicalPrefix(value, 4) : undefined;
  if (!canonical || !("text" in canonical)) refuse(field, value, "an IPv4 address or prefix (a.b.c.d/len, host bits zero)");
  return canonical.text;
}

/** An IPv6 address or prefix with no host bits set, as OVS prints it (canonical; /128 bare). */
function ipv6Prefix(field: string, value: unknown): string {
  const canonical = typeof value === "string" ? canonicalPrefix(value, 6) : undefined;
  if (!canonical || !("text" in canonical)) refuse(field, value, "an IPv6 address or prefix (addr/len, host bits zero, not scoped or IPv4-mapped)");
  return canonical.text;
}

const IPV4_PROTOCOLS: readonly Protocol[] = ["ip", "tcp", "udp", "sctp", "icmp"];
const IPV6_PROTOCOLS: readonly Protocol[] = ["ipv6", "tcp6", "udp6", "sctp6", "icmp6"];
const IP_PROTOCOLS: readonly Protocol[] = [...IPV4_PROTOCOLS, ...IPV6_PROTOCOLS];
const L4_PROTOCOLS: readonly Protocol[] = ["tcp", "udp", "sctp", "tcp6", "udp6", "sctp6"];
const ALL_PROTOCOLS: readonly Protocol[] = ["ip", "arp", "tcp", "udp", "sctp", "icmp", ...IPV6_PROTOCOLS];

type MatchKey = Exclude<keyof Match, "protocol">;

/**
 * Match fields in the order they render, each with its grammar and the
 * protocols it needs: OVS would silently drop a field without them, turning
 * `nw_dst=10.0.0.1` into a match on every packet.
 */
const MATCH_FIELDS: ReadonlyArray<{ name: MatchKey; render: (field: string, value: unknown) => string; needs?: readonly Protocol[] }> = [
  { name: "in_port", render: (f, v) => `${checkUint(f, v, MAX_PORT, 1)}` },
  { name: "dl_src", render: mac },
  { name: "dl_dst", render: mac },
  { name: "tun_src", render: ipv4Prefix },
  { name: "tun_dst", render: ipv4Prefix },
  // An IPv6 underlay's tunnel ends (ip6gre ports).
  { name: "tun_ipv6_src", render: ipv6Prefix },
  { name: "tun_ipv6_dst", render: ipv6Prefix },
  { name: "tun_id", render: (f, v) => hexOrZero(checkUint(f, v, UINT32)) },
  { name: "ct_state", render: ctState },
  { name: "ct_zone", render: (f, v) => `${checkUint(f, v, UINT16)}` },
  { name: "ct_mark", render: (f, v) => `0x${checkUint(f, v, UINT32).toString(16)}` },
  { name: "reg12", render: (f, v) => hexOrZero(checkUint(f, v, UINT32)) },
  { name: "reg13", render: (f, v) => hexOrZero(checkUint(f, v, UINT32)) },
  { name: "nw_src", render: ipv4Prefix, needs: IPV4_PROTOCOLS },
  { name: "nw_dst", render: ipv4Prefix, needs: IPV4_PROTOCOLS },
  { name: "ipv6_src", render: ipv6Prefix, needs: IPV6_PROTOCOLS },
  { name: "ipv6_dst", render: ipv6Prefix, needs: IPV6_PROTOCOLS },
  { name: "tp_src", render: (f, v) => `${checkUint(f, v, UINT16)}`, needs: L4_PROTOCOLS },
  { name: "tp_dst", render: (f, v) => `${checkUint(f, v, UINT16)}`, needs: L4_PROTOCOLS },
  { name: "nw_frag", render: (f, v) => oneOf(f, v, ["no", "yes", "first", "later", "not_later"]), needs: IP_PROTOCOLS },
  { name: "icmp_type", render: (f, v) => `${checkUint(f, v, UINT8)}`, needs: ["icmp", "icmp6"] },
  { name: "icmp_code", render: (f, v) => `${checkUint(f, v, UINT8)}`, needs: ["icmp", "icmp6"] },
  { name: "nd_target", render: ipv6, needs: ["icmp6"] },
  { name: "tcp_flags", render: tcpFlags, needs: ["tcp", "tcp6"] },
  { name: "arp_op", render: (f, v) => `${checkUint(f, v, UINT16)}`, needs: ["arp"] },
  { name: "arp_spa", render: ipv4Prefix, needs: ["arp"] },
  { name: "arp_tpa", render: ipv4Prefix, needs: ["arp"] },
  { name: "arp_sha", render: mac, needs: ["arp"] },
  { name: "arp_tha", render: mac, needs: ["arp"] },
];
const MATCH_KEYS = new Set<string>(["protocol", ...MATCH_FIELDS.map((f) => f.name)]);

/** The protocol keywords ovslb writes. */
export const PROTOCOLS = ALL_PROTOCOLS;

/**
 * One match field's value as OVS prints it, or undefined when ovslb does not
 * write that field or the value is not in its grammar (the parser's
 * round-trip check).
 */
export function renderMatchValue(name: string, value: unknown): string | undefined {
  const field = MATCH_FIELDS.find((f) => f.name === name);
  if (!field) return undefined;
  try {
    return field.render(name, value);
  } catch (e) {
    if (e instanceof OpenFlowValueError) return undefined;
    throw e;
  }
}

/** OVS prints 0 bare and other register and key values in hex. */
const hexOrZero = (n: number) => (n === 0 ? "0" : `0x${n.toString(16)}`);

function tcpFlags(field: string, value: unknown): string {
  return flagSet(field, value, TCP_FLAGS, "TCP flags");
}

function ctState(field: string, value: unknown): string {
  return flagSet(field, value, CT_STATE_FLAGS, "conntrack state flags");
}

function flagSet(field: string, value: unknown, order: readonly string[], what: string): string {
  if (typeof value !== "object" || value === null) refuse(field, value, `a set of ${what}`);
  const flags = value as Record<string, unknown>;
  for (const [flag, on] of Object.entries(flags)) {
    if (!order.includes(flag)) refuse(join(field, flag), flag, `one of ${order.join(", ")}`);
    if (on !== undefined && typeof on !== "boolean") refuse(join(field, flag), on, "a boolean");
  }
  const text = order
    .filter((flag) => flags[flag] !== undefined)
    .map((flag) => `${flags[flag] ? "+" : "-"}${flag}`)
    .join("");
  if (!text) refuse(field, value, `a non-empty set of ${what}`);
  return text;
}

/** The match as ordered (name, text) pairs; `protocol` first. */
function matchPairs(match: Match, path: string): Array<[string, string]> {
  if (typeof match !== "object" || match === null) refuse(path, match, "a match");
  for (const key of Object.keys(match)) {
    if (!MATCH_KEYS.has(key)) throw new OpenFlowValueError(join(path, key), "is not a match field ovslb writes");
  }
  const pairs: Array<[string, string]> = [];
  const protocol = match.protocol;
  if (protocol !== undefined) {
    if (!ALL_PROTOCOLS.includes(protocol)) refuse(join(path, "protocol"), protocol, `one of ${ALL_PROTOCOLS.join(", ")}`);
    pairs.push(["protocol", protocol]);
  }
  for (const { name, render, needs } of MATCH_FIELDS) {
    const value = match[name];
    if (value === undefined) continue;
    const field = join(path, name);
    if (needs && (protocol === undefined || !needs.includes(protocol))) {
      throw new OpenFlowValueError(field, `needs protocol ${needs.join(" or ")} (OVS would ignore the field)`);
    }
    pairs.push([name, render(field, value)]);
  }
  return pairs;
}

function pairsText(pairs: Array<[string, string]>): string[] {
  return pairs.map(([name, value]) => (name === "protocol" ? value : `${name}=${value}`));
}

/** The match in flow syntax (`tcp,nw_dst=10.0.0.100,tp_dst=80`), validated. */
export function renderMatch(match: Match, path = "match"): string {
  return pairsText(matchPairs(match, path)).join(",");
}

const MOVE_WIDTHS: Readonly<Record<MoveField, number>> = {
  NXM_OF_ETH_SRC: 48,
  NXM_OF_ETH_DST: 48,
  NXM_NX_ARP_SHA: 48,
  NXM_NX_ARP_THA: 48,
  NXM_OF_ARP_SPA: 32,
  NXM_OF_ARP_TPA: 32,
  NXM_OF_IP_SRC: 32,
  NXM_OF_IP_DST: 32,
  NXM_NX_IPV6_SRC: 128,
  NXM_NX_IPV6_DST: 128,
  NXM_NX_TUN_ID: 64,
  NXM_NX_TUN_IPV4_DST: 32,
};

const decimal16 = (field: string, value: unknown) => `${checkUint(field, value, UINT16)}`;

const SET_FIELDS: Readonly<Record<string, (field: string, value: unknown) => string>> = {
  eth_src: mac,
  eth_dst: mac,
  arp_sha: mac,
  arp_tha: mac,
  nd_tll: mac,
  ip_src: ipv4,
  ip_dst: ipv4,
  arp_spa: ipv4,
  arp_tpa: ipv4,
  tun_src: ipv4,
  tun_dst: ipv4,
  ipv6_src: ipv6,
  ipv6_dst: ipv6,
  tun_ipv6_src: ipv6,
  tun_ipv6_dst: ipv6,
  arp_op: decimal16,
  tcp_src: decimal16,
  tcp_dst: decimal16,
  udp_src: decimal16,
  udp_dst: decimal16,
  tun_id: (f, v) => hexOrZero(checkUint(f, v, UINT32)),
  reg12: (f, v) => hexOrZero(checkUint(f, v, UINT32)),
  reg13: (f, v) => hexOrZero(checkUint(f, v, UINT32)),
  icmpv6_type: (f, v) => `${checkUint(f, v, UINT8)}`,
  // OVS prints nd_reserved in decimal (set_field:1610612736->nd_reserved).
  nd_reserved: (f, v) => `${checkUint(f, v, UINT32)}`,
  nd_options_type: (f, v) => `${checkUint(f, v, UINT8)}`,
};

function moveField(field: string, value: unknown): MoveField {
  if (typeof value !== "string" || !Object.hasOwn(MOVE_WIDTHS, value)) {
    refuse(field, value, `one of ${Object.keys(MOVE_WIDTHS).join(", ")}`);
  }
  return value as MoveField;
}

function ctNat(field: string, nat: CtNat): string {
  if (typeof nat !== "object" || nat === null) refuse(field, nat, "a ct nat");
  if (nat.kind === "existing") return "nat";
  if (nat.kind !== "src" && nat.kind !== "dst") refuse(join(field, "kind"), (nat as { kind: unknown }).kind, "existing, src or dst");
  const v6 = typeof nat.ip === "string" && nat.ip.includes(":");
  const ip = v6 ? ipv6(join(field, "ip"), nat.ip) : ipv4(join(field, "ip"), nat.ip);
  const port = nat.port === undefined ? "" : `:${checkUint(join(field, "port"), nat.port, UINT16, 1)}`;
  // An IPv6 address with a port is bracketed, as OVS prints it (`nat(dst=[2001:db8::5]:8080)`).
  return `nat(${nat.kind}=${v6 && port ? `[${ip}]` : ip}${port})`;
}

/** Renders one action exactly as OVS prints it back, so desired and dumped flows compare equal. */
export function renderAction(action: Action, path = "action"): string {
  if (typeof action !== "object" || action === null) refuse(path, action, "an action");
  switch (action.type) {
    case "output":
      return `output:${checkUint(join(path, "port"), action.port, MAX_PORT, 1)}`;
    case "in_port":
      return "IN_PORT";
    case "set_field": {
      const render = Object.hasOwn(SET_FIELDS, action.field) ? SET_FIELDS[action.field] : undefined;
      if (!render) refuse(join(path, "field"), action.field, `one of ${Object.keys(SET_FIELDS).join(", ")}`);
      return `set_field:${render(join(path, "value"), action.value)}->${action.field}`;
    }
    case "move": {
      const src = moveField(join(path, "src"), action.src);
      const dst = moveField(join(path, "dst"), action.dst);
      if (action.srcBits === undefined) {
        if (MOVE_WIDTHS[src] !== MOVE_WIDTHS[dst]) throw new OpenFlowValueError(path, `${src} and ${dst} differ in width`);
        return `move:${src}[]->${dst}[]`;
      }
      const [start, end] = action.srcBits;
      checkUint(join(path, "srcBits[0]"), start, MOVE_WIDTHS[src] - 1);
      checkUint(join(path, "srcBits[1]"), end, MOVE_WIDTHS[src] - 1, start);
      if (end - start + 1 !== MOVE_WIDTHS[dst]) throw new OpenFlowValueError(join(path, "srcBits"), `${end - start + 1} bits do not fill ${dst}`);
      return `move:${src}[${start}..${end}]->${dst}[]`;
    }
    case "multipath": {
      const fields = ["eth_src", "symmetric_l4", "symmetric_l3l4", "symmetric_l3l4+udp", "nw_src", "nw_dst", "symmetric_l3"];
      if (!fields.includes(action.fields)) refuse(join(path, "fields"), action.fields, `one of ${fields.join(", ")}`);
      const bits = checkUint(join(path, "bits"), action.bits, 16, 1);
      const links = checkUint(join(path, "links"), action.links, 2 ** bits, 1);
      if ((action.dst as string) !== "NXM_NX_REG12") refuse(join(path, "dst"), action.dst, "NXM_NX_REG12");
      return `multipath(${action.fields},${checkUint(join(path, "basis"), action.basis, UINT16)},modulo_n,${links},0,${action.dst}[0..${bits - 1}])`;
    }
    case "ct": {
      // OVS prints ct's arguments in this order whatever order they were given in.
      const args: string[] = [];
      if (action.commit !== undefined && typeof action.commit !== "boolean") refuse(join(path, "commit"), action.commit, "a boolean");
      if (action.commit) args.push("commit");
      if (action.table !== undefined) args.push(`table=${checkUint(join(path, "table"), action.table, MAX_TABLE)}`);
      if (action.zone !== undefined) args.push(`zone=${checkUint(join(path, "zone"), action.zone, UINT16)}`);
      if (action.nat !== undefined) args.push(ctNat(join(path, "nat"), action.nat));
      if (action.mark !== undefined) {
        if (!action.commit) throw new OpenFlowValueError(join(path, "mark"), "can only be set with commit");
        args.push(`exec(set_field:0x${checkUint(join(path, "mark"), action.mark, UINT32).toString(16)}->ct_mark)`);
      }
      return `ct(${args.join(",")})`;
    }
    case "group":
      return `group:${checkUint(join(path, "groupId"), action.groupId, MAX_GROUP_ID)}`;
    case "resubmit":
      return `resubmit(,${checkUint(join(path, "table"), action.table, MAX_TABLE)})`;
    case "drop":
      return "drop";
    default:
      return refuse(join(path, "type"), (action as { type: unknown }).type, "an action ovslb writes");
  }
}

function renderActions(actions: readonly Action[], path: string): string[] {
  if (!Array.isArray(actions) || actions.length === 0) refuse(path, actions, "a non-empty list of actions (use drop)");
  const texts = actions.map((action: Action, i) => renderAction(action, `${path}[${i}]`));
  if (texts.length > 1 && texts.includes("drop")) throw new OpenFlowValueError(path, "drop must be the only action");
  return texts;
}

/** The validated text form of a flow: what dump-flows prints for it. */
export function toFlowEntry(flow: Flow, path = "flow"): FlowEntry {
  return {
    cookie: uint64(join(path, "cookie"), flow.cookie),
    table: checkUint(join(path, "table"), flow.table, MAX_TABLE),
    priority: checkUint(join(path, "priority"), flow.priority, UINT16),
    match: Object.fromEntries(matchPairs(flow.match, join(path, "match"))),
    actions: renderActions(flow.actions, join(path, "actions")),
  };
}

/** `table=T,priority=P,cookie=...,MATCH`: what identifies a flow in strict mods. */
function flowSpec(path: string, table: number, priority: number, cookie: string, match: Match): string {
  return [
    `table=${checkUint(join(path, "table"), table, MAX_TABLE)}`,
    `priority=${checkUint(join(path, "priority"), priority, UINT16)}`,
    cookie,
    ...pairsText(matchPairs(match, join(path, "match"))),
  ].join(",");
}

function bucketText(bucket: Bucket & { weight?: number }, select: boolean, path: string): string {
  if (typeof bucket !== "object" || bucket === null) refuse(path, bucket, "a bucket");
  const parts = [`bucket_id:${checkUint(join(path, "bucketId"), bucket.bucketId, MAX_BUCKET_ID)}`];
  if (select) parts.push(`weight:${checkUint(join(path, "weight"), bucket.weight, UINT16)}`);
  else if (bucket.weight !== undefined) throw new OpenFlowValueError(join(path, "weight"), "only select buckets have a weight");
  if (bucket.watchPort !== undefined) parts.push(`watch_port:${checkUint(join(path, "watchPort"), bucket.watchPort, MAX_PORT, 1)}`);
  if (bucket.watchGroup !== undefined) parts.push(`watch_group:${checkUint(join(path, "watchGroup"), bucket.watchGroup, MAX_GROUP_ID)}`);
  parts.push(`actions=${renderActions(bucket.actions, join(path, "actions")).join(",")}`);
  return `bucket=${parts.join(",")}`;
}

function bucketsText(buckets: readonly (Bucket & { weight?: number })[], select: boolean, path: string): string[] {
  if (!Array.isArray(buckets)) refuse(path, buckets, "a list of buckets");
  const seen = new Set<number>();
  return buckets.map((bucket: Bucket & { weight?: number }, i) => {
    const text = bucketText(bucket, select, `${path}[${i}]`);
    if (seen.has(bucket.bucketId)) throw new OpenFlowValueError(`${path}[${i}].bucketId`, `${bucket.bucketId} is used twice`);
    seen.add(bucket.bucketId);
    return text;
  });
}

function hashFields(fields: readonly HashField[], path: string): HashField[] {
  if (!Array.isArray(fields) || fields.length === 0) refuse(path, fields, "a non-empty list of hash fields");
  for (const [i, field] of (fields as readonly HashField[]).entries()) {
    if (!(HASH_FIELDS as readonly string[]).includes(field)) refuse(`${path}[${i}]`, field, `one of ${HASH_FIELDS.join(", ")}`);
  }
  if (new Set(fields).size !== fields.length) refuse(path, fields, "a list without repeats");
  // OVS prints hash fields in its own order: render them in it.
  return HASH_FIELDS.filter((field) => fields.includes(field));
}

/** A group's text once rendered: a plan validates each group (toGroupEntry) and the bundle renders it again (100,000 buckets at scale). Groups are never modified in place. */
const renderedGroups = new WeakMap<Group, string>();

function groupText(group: Group, path: string): string {
  if (typeof group !== "object" || group === null) refuse(path, group, "a group");
  const known = renderedGroups.get(group);
  if (known !== undefined) return known;
  const text = groupTextOf(group, path);
  renderedGroups.set(group, text);
  return text;
}

function groupTextOf(group: Group, path: string): string {
  const parts = [`group_id=${checkUint(join(path, "groupId"), group.groupId, MAX_GROUP_ID)}`, `type=${group.type}`];
  switch (group.type) {
    case "select":
      if (group.selectionMethod !== "hash") refuse(join(path, "selectionMethod"), group.selectionMethod, "hash (dp_hash remaps most flows)");
      parts.push("selection_method=hash", `fields(${hashFields(group.fields, join(path, "fields")).join(",")})`);
      parts.push(...bucketsText(group.buckets, true, join(path, "buckets")));
      break;
    case "indirect":
    case "all":
    case "ff":
      parts.push(...bucketsText(group.buckets, false, join(path, "buckets")));
      if (group.type === "indirect" && group.buckets.length > 1) refuse(join(path, "buckets"), group.buckets.length, "at most 1 bucket");
      if (group.type === "ff") {
        group.buckets.forEach((bucket, i) => {
          if (bucket.watchPort === undefined && bucket.watchGroup === undefined) {
            throw new OpenFlowValueError(`${path}.buckets[${i}].watchPort`, "or watchGroup is required in ff groups");
          }
        });
      }
      break;
    default:
      refuse(join(path, "type"), (group as { type: unknown }).type, "select, all, indirect or ff");
  }
  return parts.join(",");
}

/** A group validated and normalized as dump-groups prints it (hash fields in OVS order, default weights filled in). */
export function toGroupEntry(group: Group, path = "group"): GroupEntry {
  groupText(group, path);
  const select = group.type === "select";
  return {
    groupId: group.groupId,
    type: group.type,
    ...(select ? { selectionMethod: "hash", fields: hashFields(group.fields, join(path, "fields")) } : { fields: [] }),
    buckets: group.buckets.map((bucket) => ({
      bucketId: bucket.bucketId,
      weight: select ? (bucket as SelectBucket).weight : 0,
      ...(bucket.watchPort === undefined ? {} : { watchPort: bucket.watchPort }),
      ...(bucket.watchGroup === undefined ? {} : { watchGroup: bucket.watchGroup }),
      actions: bucket.actions, // validated by groupText, under the same path
    })),
  };
}

/** One line of a bundle file. `path` prefixes the field named in refusals. */
export function renderModification(mod: Modification, path = ""): string {
  if (typeof mod !== "object" || mod === null) refuse(path || "modification", mod, "a modification");
  switch (mod.op) {
    case "add-flow":
    case "modify-flow": {
      const { flow } = mod;
      const at = join(path, "flow");
      // A modify carries the cookie as a filter (cookie/-1), so it only touches a flow ovslb owns.
      const cookie =
        mod.op === "add-flow" ? `cookie=${hex64(uint64(join(at, "cookie"), flow.cookie))}` : renderCookieMatch(flow.cookie, UINT64, join(at, "cookie"));
      const spec = flowSpec(at, flow.table, flow.priority, cookie, flow.match);
      const actions = renderActions(flow.actions, join(at, "actions")).join(",");
      return `flow ${mod.op === "add-flow" ? "add" : "modify_strict"} ${spec},actions=${actions}`;
    }
    case "delete-flow": {
      const cookie = renderCookieMatch(mod.cookie, UINT64, join(path, "cookie"));
      return `flow delete_strict ${flowSpec(path, mod.table, mod.priority, cookie, mod.match)}`;
    }
    case "delete-flows": {
      const parts = mod.table === undefined ? [] : [`table=${checkUint(join(path, "table"), mod.table, MAX_TABLE)}`];
      parts.push(renderCookieMatch(mod.cookie, mod.mask, join(path, "cookie")));
      return `flow delete ${parts.join(",")}`;
    }
    case "add-group":
      return `group add ${groupText(mod.group, join(path, "group"))}`;
    case "modify-group":
      return `group modify ${groupText(mod.group, join(path, "group"))}`;
    case "delete-group":
      return `group delete group_id=${checkUint(join(path, "groupId"), mod.groupId, MAX_GROUP_ID)}`;
    case "insert-buckets": {
      const at = mod.commandBucketId;
      const position = at === "first" || at === "last" ? at : checkUint(join(path, "commandBucketId"), at, MAX_BUCKET_ID);
      if (!Array.isArray(mod.buckets) || mod.buckets.length === 0) refuse(join(path, "buckets"), mod.buckets, "a non-empty list of buckets");
      const buckets = bucketsText(mod.buckets, true, join(path, "buckets"));
      return `group insert_bucket group_id=${checkUint(join(path, "groupId"), mod.groupId, MAX_GROUP_ID)},command_bucket_id=${position},${buckets.join(",")}`;
    }
    case "remove-buckets": {
      const at = mod.commandBucketId;
      const which = at === "all" ? at : checkUint(join(path, "commandBucketId"), at, MAX_BUCKET_ID);
      return `group remove_bucket group_id=${checkUint(join(path, "groupId"), mod.groupId, MAX_GROUP_ID)},command_bucket_id=${which}`;
    }
    default:
      return refuse(join(path, "op"), (mod as { op: unknown }).op, "a modification ovslb sends");
  }
}

/** The lines of one bundle file, in order; refusals name `modifications[i]...`. */
export function renderBundle(mods: readonly Modification[]): string[] {
  return mods.map((mod, i) => renderModification(mod, `modifications[${i}]`));
}
