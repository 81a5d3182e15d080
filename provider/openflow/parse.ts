import { StringDecoder } from "node:string_decoder";
import { PROTOCOLS, renderAction, renderMatchValue } from "./render";
import { type Action, type BucketEntry, CT_STATE_FLAGS, type DumpedFlow, type GroupEntry, type GroupType, type Match, TCP_FLAGS } from "./types";

/**
 * Parsers for `ovs-ofctl -O OpenFlow15 --no-names dump-flows` and
 * `dump-groups` output (OVS 3.1), into the typed model render.ts renders.
 * This module is the only place that reads dump text. Every parsed match
 * field and action is rendered back and compared with what OVS printed: what
 * does not round-trip exactly is kept as text (`otherMatch`, actions of type
 * "other"), so a parsed flow always compares exactly with a desired one.
 */

/** Dump output that is not in the expected shape; `line` is the offending line. */
export class OpenFlowParseError extends Error {
  /** The host and bridge the dump came from, once the transport knows them ("root@172.30.0.11:22: bridge unix:..."). */
  where?: string;

  constructor(
    readonly line: string,
    readonly reason: string,
  ) {
    super(`cannot parse OVS dump line ${JSON.stringify(line)}: ${reason}`);
    this.name = "OpenFlowParseError";
  }

  /** The same error, saying which host and bridge printed the line. */
  at(where: string): this {
    this.where = where;
    this.message = `${where}: cannot parse OVS dump line ${JSON.stringify(this.line)}: ${this.reason}`;
    return this;
  }
}

/** Splits at commas outside parentheses: `ct(commit,zone=1),output:1` is two actions. */
export function splitTopLevel(text: string): string[] {
  // Jumps from comma to comma (a group line holds up to 1,000 buckets); a stray ")" takes the character walk below.
  const parts: string[] = [];
  let start = 0;
  let at = 0;
  // The next "(" and ")" at or after `at`, searched again only once passed (each search may scan to the end).
  let open = text.indexOf("(");
  let close = text.indexOf(")");
  for (;;) {
    const comma = text.indexOf(",", at);
    if (open !== -1 && open < at) open = text.indexOf("(", at);
    if (close !== -1 && close < at) close = text.indexOf(")", at);
    if (close !== -1 && (comma === -1 || close < comma) && (open === -1 || close < open)) return splitByWalk(text, parts, start, at);
    if (open !== -1 && (comma === -1 || open < comma)) {
      let depth = 1;
      let i = open + 1;
      for (; i < text.length && depth > 0; i++) {
        const c = text.charCodeAt(i);
        if (c === 40) depth++;
        else if (c === 41) depth--;
      }
      if (depth > 0) return splitByWalk(text, parts, start, at);
      at = i;
      continue;
    }
    if (comma === -1) break;
    if (comma > start) parts.push(text.slice(start, comma));
    start = at = comma + 1;
  }
  if (start < text.length) parts.push(text.slice(start));
  return parts;
}

/** The character walk, from `from` at depth 0 (parts before `start` already cut). */
function splitByWalk(text: string, parts: string[], start: number, from: number): string[] {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.filter((part) => part !== "");
}

/** Reply headers (`OFPST_FLOW reply (OF1.5) (xid=0x2):`, one per multipart reply) and blank lines. */
const isEntry = (line: string) => line.trim() !== "" && !line.startsWith("OFPST_");

function entryLines(dump: string): string[] {
  return dump.split("\n").filter(isEntry);
}

/**
 * Dump text arriving in chunks (bytes from an SSH channel), cut into lines
 * as they complete: only the unfinished last line is kept between chunks,
 * so a dump of any size is parsed as it arrives and never held whole.
 */
export class DumpLineSplitter {
  private readonly decoder = new StringDecoder("utf8");
  private rest = "";

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Buffer | string): void {
    const text = this.rest + (typeof chunk === "string" ? chunk : this.decoder.write(chunk));
    let start = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
      this.onLine(text.slice(start, nl));
      start = nl + 1;
    }
    this.rest = text.slice(start);
  }

  end(): void {
    const last = this.rest + this.decoder.end();
    this.rest = "";
    if (last !== "") this.onLine(last);
  }
}

/** A parser fed a dump chunk by chunk: each entry goes to the callback as soon as its line is complete. */
export interface DumpStreamParser {
  push(chunk: Buffer | string): void;
  /** The last line, once the dump has ended. */
  end(): void;
}

function integer(line: string, name: string, text: string | undefined): number {
  if (text === undefined || !/^(0x[0-9a-f]+|[0-9]+)$/.test(text)) throw new OpenFlowParseError(line, `${name} is ${JSON.stringify(text)}`);
  return Number(text);
}

function bigInteger(line: string, name: string, text: string | undefined): bigint {
  if (text === undefined || !/^(0x[0-9a-f]+|[0-9]+)$/.test(text)) throw new OpenFlowParseError(line, `${name} is ${JSON.stringify(text)}`);
  return BigInt(text);
}

function keyValue(token: string, separator: "=" | ":"): [string, string | undefined] {
  const at = token.indexOf(separator);
  return at < 0 ? [token, undefined] : [token.slice(0, at), token.slice(at + 1)];
}

const INT = /^(0x[0-9a-f]+|[0-9]+)$/;
const MATCH_NUMBERS = new Set(["in_port", "tp_src", "tp_dst", "icmp_type", "icmp_code", "arp_op", "ct_zone", "ct_mark", "tun_id", "reg12", "reg13"]);

function matchValue(name: string, text: string): unknown {
  if (MATCH_NUMBERS.has(name)) return INT.test(text) ? Number(text) : undefined;
  if (name === "ct_state") return flagSet(text, CT_STATE_FLAGS);
  if (name === "tcp_flags") return flagSet(text, TCP_FLAGS);
  return text;
}

/** `+est+trk` or `+syn-ack` as flag -> on; undefined when a flag is not one of `order`. */
function flagSet(text: string, order: readonly string[]): Record<string, boolean> | undefined {
  if (!/^([+-][a-z]+)+$/.test(text)) return undefined;
  const state: Record<string, boolean> = {};
  for (const [, sign, flag] of text.matchAll(/([+-])([a-z]+)/g)) {
    if (!order.includes(flag)) return undefined;
    state[flag] = sign === "+";
  }
  return state;
}

/** A dumped match: the fields ovslb writes, typed; the rest as printed (`reg0=0x1`, `tcp6`). */
export function parseMatch(tokens: readonly string[]): { match: Match; otherMatch: string[] } {
  const match: Record<string, unknown> = {};
  const otherMatch: string[] = [];
  for (const token of tokens) {
    const [name, text] = keyValue(token, "=");
    if (text === undefined) {
      if ((PROTOCOLS as readonly string[]).includes(name) && match.protocol === undefined) match.protocol = name;
      else otherMatch.push(token);
      continue;
    }
    const value = matchValue(name, text);
    if (value !== undefined && renderMatchValue(name, value) === text) match[name] = value;
    else otherMatch.push(token);
  }
  return { match: match, otherMatch };
}

/** The arguments of `ct(...)` as an action, if they are ones ovslb writes. */
function ctAction(args: readonly string[]): Action | undefined {
  const ct: Extract<Action, { type: "ct" }> = { type: "ct" };
  for (const arg of args) {
    const [name, value] = keyValue(arg, "=");
    let m: RegExpExecArray | null;
    if (arg === "commit") ct.commit = true;
    else if (name === "table" && value && INT.test(value)) ct.table = Number(value);
    else if (name === "zone" && value && INT.test(value)) ct.zone = Number(value);
    else if (arg === "nat") ct.nat = { kind: "existing" };
    else if ((m = /^nat\((src|dst)=(?:([0-9.]+)|\[([0-9a-f:.]+)\]|([0-9a-f:.]+))(?::([0-9]+))?\)$/.exec(arg))) {
      // IPv4 (`10.0.0.5:80`), IPv6 with a port (`[2001:db8::5]:80`) or without (`2001:db8::5`).
      const ip = m[2] ?? m[3] ?? m[4];
      const port = m[4] === undefined ? m[5] : undefined;
      ct.nat = { kind: m[1] as "src" | "dst", ip, ...(port === undefined ? {} : { port: Number(port) }) };
    } else if ((m = /^exec\(set_field:(0x[0-9a-f]+)->ct_mark\)$/.exec(arg))) ct.mark = Number(m[1]);
    else return undefined;
  }
  return ct;
}

const SET_FIELD_NUMBERS = new Set([
  "arp_op",
  "tcp_src",
  "tcp_dst",
  "udp_src",
  "udp_dst",
  "tun_id",
  "reg12",
  "reg13",
  "icmpv6_type",
  "nd_reserved",
  "nd_options_type",
]);

function actionCandidate(text: string): Action | undefined {
  let m: RegExpExecArray | null;
  // The most common in a dump first (every bucket has set_fields); the patterns exclude one another.
  if (text.startsWith("set_field:") && (m = /^set_field:(.+)->(\w+)$/.exec(text))) {
    const value = SET_FIELD_NUMBERS.has(m[2]) ? (INT.test(m[1]) ? Number(m[1]) : m[1]) : m[1];
    return { type: "set_field", field: m[2], value } as Action;
  }
  if (text === "IN_PORT") return { type: "in_port" };
  if (text === "drop") return { type: "drop" };
  if ((m = /^output:([0-9]+)$/.exec(text))) return { type: "output", port: Number(m[1]) };
  if ((m = /^group:([0-9]+)$/.exec(text))) return { type: "group", groupId: Number(m[1]) };
  if ((m = /^resubmit\(,([0-9]+)\)$/.exec(text))) return { type: "resubmit", table: Number(m[1]) };
  if ((m = /^move:(\w+)\[\]->(\w+)\[\]$/.exec(text))) return { type: "move", src: m[1], dst: m[2] } as Action;
  if ((m = /^move:(\w+)\[([0-9]+)\.\.([0-9]+)\]->(\w+)\[\]$/.exec(text))) {
    return { type: "move", src: m[1], dst: m[4], srcBits: [Number(m[2]), Number(m[3])] } as Action;
  }
  if ((m = /^multipath\(([\w+]+),([0-9]+),modulo_n,([0-9]+),0,(\w+)\[0\.\.([0-9]+)\]\)$/.exec(text))) {
    return { type: "multipath", fields: m[1], basis: Number(m[2]), links: Number(m[3]), dst: m[4], bits: Number(m[5]) + 1 } as Action;
  }
  if ((m = /^ct\((.*)\)$/.exec(text))) return ctAction(splitTopLevel(m[1]));
  return undefined;
}

/** `set_field:MAC->eth_src` (or eth_dst) as OVS prints it: what every bucket holds, read without the round trip (it renders back to itself). */
const SET_MAC = /^set_field:([0-9a-f]{2}(?::[0-9a-f]{2}){5})->(eth_src|eth_dst)$/;

/** One action as OVS printed it, typed when it is one ovslb writes and renders back to exactly this text. */
export function parseAction(text: string): Action {
  const mac = SET_MAC.exec(text);
  if (mac) return { type: "set_field", field: mac[2], value: mac[1] } as Action;
  return parseActionText(text);
}

function parseActionText(text: string): Action {
  const candidate = actionCandidate(text);
  if (candidate) {
    try {
      if (renderAction(candidate) === text) return candidate;
    } catch {
      /* not in ovslb's grammar: kept as text */
    }
  }
  return { type: "other", text };
}

/**
 * One flow line:
 * ` cookie=0xabc, duration=1.2s, table=0, n_packets=0, n_bytes=0, idle_age=1, priority=100,tcp,tp_dst=80 actions=group:10`.
 * The counters part is `, `-separated; the match follows the last `, `
 * (and is empty, with the default priority, when `actions=` follows it directly).
 */
function parseFlow(line: string): DumpedFlow {
  const text = line.trim();
  const at = text.indexOf(" actions=");
  if (at < 0) throw new OpenFlowParseError(line, "no actions");
  const head = text.slice(0, at);
  const split = head.endsWith(",") ? head.length - 1 : head.lastIndexOf(", ");
  if (split < 0) throw new OpenFlowParseError(line, "no counters (dumped with --no-stats?)");
  const stats = new Map(
    head
      .slice(0, split)
      .split(/[,\s]+/)
      .map((token) => keyValue(token, "=")),
  );
  const matchText = head.slice(split + 1).trim();

  let priority = 32768; // OFP_DEFAULT_PRIORITY, which OVS does not print
  const tokens: string[] = [];
  for (const token of matchText ? matchText.split(",") : []) {
    const [name, value] = keyValue(token, "=");
    if (name === "priority") priority = integer(line, "priority", value);
    else tokens.push(token);
  }
  const { match, otherMatch } = parseMatch(tokens);
  return {
    cookie: bigInteger(line, "cookie", stats.get("cookie")),
    table: integer(line, "table", stats.get("table")),
    priority,
    match,
    otherMatch,
    actions: splitTopLevel(text.slice(at + " actions=".length)).map(parseAction),
    nPackets: bigInteger(line, "n_packets", stats.get("n_packets")),
    nBytes: bigInteger(line, "n_bytes", stats.get("n_bytes")),
  };
}

/** Parses dump-flows output: one entry per flow, in the order OVS printed them. */
export function parseFlows(dump: string): DumpedFlow[] {
  return entryLines(dump).map(parseFlow);
}

/** parseFlows, streamed: each flow to `onFlow` in the order OVS printed them. */
export function flowStreamParser(onFlow: (flow: DumpedFlow) => void): DumpStreamParser {
  return new DumpLineSplitter((line) => {
    if (isEntry(line)) onFlow(parseFlow(line));
  });
}

const GROUP_TYPES: readonly GroupType[] = ["select", "all", "indirect", "ff"];

/** A bucket while its `bucket_id:N`, `weight:N`, `watch_port:N`, `actions=...` tokens are read. */
interface BucketDraft {
  bucketId?: number;
  weight?: number;
  watchPort?: number;
  watchGroup?: number;
  actions: string[];
}

/**
 * One group line:
 * ` group_id=10,type=select,selection_method=hash,fields(ip_src,tcp_src),bucket=bucket_id:1,weight:100,watch_port:1,actions=output:1,bucket=...`.
 * A single hash field prints as `fields=ip_src`. Weights equal to the type's
 * default (1 in select groups, 0 elsewhere) are not printed.
 */
/**
 * The actions of one dump, by text: a dump repeats the same few (every bucket
 * of a gateway sets the gateway's MAC), so each is parsed once and shared
 * (parsed actions are never modified). Each is parsed from its own copy of
 * the text, so what the result keeps does not hold the dump's text alive (a
 * substring would keep the whole line, or chunk, it was cut from). Bounded:
 * emptied when full.
 */
class ActionCache {
  private readonly byText = new Map<string, Action>();

  parse(text: string): Action {
    let action = this.byText.get(text);
    if (action === undefined) {
      if (this.byText.size >= MAX_CACHED_ACTIONS) this.byText.clear();
      // " " + text is a new string; slicing it flattens that copy alone.
      const own = (" " + text).slice(1);
      this.byText.set(own, (action = parseAction(own)));
    }
    return action;
  }
}
const MAX_CACHED_ACTIONS = 1 << 17;

function parseGroup(line: string, actions: ActionCache): GroupEntry {
  let groupId: number | undefined;
  let type: GroupType | undefined;
  let selectionMethod: string | undefined;
  let selectionMethodParam: bigint | undefined;
  let fields: string[] = [];
  const drafts: BucketDraft[] = [];
  let bucket: BucketDraft | undefined;
  let inActions = false;

  for (const token of splitTopLevel(line.trim())) {
    const starts = token.startsWith("bucket=");
    if (starts) {
      drafts.push((bucket = { actions: [] }));
      inActions = false;
    }
    if (!bucket) {
      const [name, value] = keyValue(token, "=");
      if (token.startsWith("fields(") && token.endsWith(")")) fields = splitTopLevel(token.slice("fields(".length, -1));
      else if (name === "fields" && value !== undefined) fields = [value];
      else if (name === "group_id") groupId = integer(line, "group_id", value);
      else if (name === "type" && (GROUP_TYPES as readonly string[]).includes(value ?? "")) type = value as GroupType;
      else if (name === "selection_method") selectionMethod = value;
      else if (name === "selection_method_param") selectionMethodParam = bigInteger(line, name, value);
      else throw new OpenFlowParseError(line, `unexpected ${JSON.stringify(token)}`);
      continue;
    }
    const param = starts ? token.slice("bucket=".length) : token;
    if (inActions) {
      bucket.actions.push(param);
      continue;
    }
    if (param.startsWith("actions=")) {
      inActions = true;
      for (const a of splitTopLevel(param.slice("actions=".length))) bucket.actions.push(a);
      continue;
    }
    const [name, value] = keyValue(param, ":");
    if (name === "bucket_id") bucket.bucketId = integer(line, name, value);
    else if (name === "weight") bucket.weight = integer(line, name, value);
    else if (name === "watch_port") bucket.watchPort = integer(line, name, value);
    else if (name === "watch_group") bucket.watchGroup = integer(line, name, value);
    else throw new OpenFlowParseError(line, `unexpected bucket parameter ${JSON.stringify(param)}`);
  }

  if (groupId === undefined) throw new OpenFlowParseError(line, "no group_id");
  if (type === undefined) throw new OpenFlowParseError(line, "no type");
  const defaultWeight = type === "select" ? 1 : 0;
  const buckets: BucketEntry[] = [];
  for (const draft of drafts) {
    if (draft.bucketId === undefined) throw new OpenFlowParseError(line, "a bucket without bucket_id (not dumped with OpenFlow 1.5?)");
    // Built field by field, optional ones only when printed (a dump holds up to a million buckets).
    const entry: { -readonly [K in keyof BucketEntry]: BucketEntry[K] } = { bucketId: draft.bucketId, weight: draft.weight ?? defaultWeight, actions: [] };
    if (draft.watchPort !== undefined) entry.watchPort = draft.watchPort;
    if (draft.watchGroup !== undefined) entry.watchGroup = draft.watchGroup;
    entry.actions = draft.actions.map((a) => actions.parse(a));
    buckets.push(entry);
  }
  const group: { -readonly [K in keyof GroupEntry]: GroupEntry[K] } = { groupId, type, fields, buckets };
  if (selectionMethod !== undefined) group.selectionMethod = selectionMethod;
  if (selectionMethodParam !== undefined) group.selectionMethodParam = selectionMethodParam;
  return group;
}

/** A hex dump line: what ovs-ofctl prints for a reply it could not decode. */
const HEX_DUMP = /^[0-9a-f]{8} {2}[0-9a-f]{2} /;

// Seen on OVS 3.1 when a group is too large for one OpenFlow message (over ~1,000 buckets).
const undecodable = (line: string) =>
  new OpenFlowParseError(
    line,
    "dump-groups printed a reply OVS could not decode (a group too large for one OpenFlow message?); the bridge's groups cannot be read",
  );

/** Parses dump-groups output: one entry per group, in the order OVS printed them. */
export function parseGroups(dump: string): GroupEntry[] {
  const lines = entryLines(dump);
  const hex = lines.find((line) => HEX_DUMP.test(line));
  if (hex !== undefined) throw undecodable(hex);
  const actions = new ActionCache();
  return lines.map((line) => parseGroup(line, actions));
}

/**
 * parseGroups, streamed: each group to `onGroup` as its line completes. A
 * hex dump line fails the parse when it arrives (the groups before it were
 * already handed on: a caller discards them with the error).
 */
export function groupStreamParser(onGroup: (group: GroupEntry) => void): DumpStreamParser {
  const actions = new ActionCache();
  return new DumpLineSplitter((line) => {
    if (!isEntry(line)) return;
    if (HEX_DUMP.test(line)) throw undecodable(line);
    onGroup(parseGroup(line, actions));
  });
}

/** What `ovs-ofctl dump-aggregate` reports for the flows a filter selects. */
export interface FlowAggregate {
  packets: bigint;
  bytes: bigint;
  flows: number;
}

/** Parses dump-aggregate output ("OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=352 byte_count=27048 flow_count=1"). */
export function parseAggregate(output: string): FlowAggregate {
  const line = output.split("\n").find((l) => l.includes("flow_count=")) ?? output.trim();
  const m = /\bpacket_count=(\d+) byte_count=(\d+) flow_count=(\d+)\b/.exec(line);
  if (!m) throw new OpenFlowParseError(line, "not an aggregate reply (packet_count=N byte_count=N flow_count=N)");
  return { packets: BigInt(m[1]), bytes: BigInt(m[2]), flows: Number(m[3]) };
}

/** One group's counters (`dump-group-stats`): the group's, then each bucket's in the order the group lists its buckets. */
export interface GroupStats {
  groupId: number;
  packets: bigint;
  bytes: bigint;
  /** By position, not bucket id: OVS prints `bucketN:` in the group's bucket order (dump-groups gives the ids). */
  buckets: ReadonlyArray<{ packets: bigint; bytes: bigint }>;
}

/**
 * One dump-group-stats line:
 * ` group_id=1,duration=0.021s,ref_count=0,packet_count=0,byte_count=0,bucket0:packet_count=0,byte_count=0,...`.
 */
function parseGroupStatsLine(line: string): GroupStats {
  const head = /^\s*group_id=(\d+),.*?\bpacket_count=(\d+),byte_count=(\d+)/.exec(line);
  if (!head) throw new OpenFlowParseError(line, "not a group stats entry (group_id=N,...,packet_count=N,byte_count=N)");
  const buckets: Array<{ packets: bigint; bytes: bigint }> = [];
  for (const m of line.matchAll(/\bbucket(\d+):packet_count=(\d+),byte_count=(\d+)/g)) {
    if (Number(m[1]) !== buckets.length) throw new OpenFlowParseError(line, `bucket${m[1]} out of order`);
    buckets.push({ packets: BigInt(m[2]), bytes: BigInt(m[3]) });
  }
  return { groupId: Number(head[1]), packets: BigInt(head[2]), bytes: BigInt(head[3]), buckets };
}

/** parseGroupStats, streamed: each group's counters to `onGroup` as its line completes. */
export function groupStatsStreamParser(onGroup: (stats: GroupStats) => void): DumpStreamParser {
  return new DumpLineSplitter((line) => {
    if (isEntry(line)) onGroup(parseGroupStatsLine(line));
  });
}

/** Parses dump-group-stats output: one entry per group. */
export function parseGroupStats(dump: string): GroupStats[] {
  return entryLines(dump).map(parseGroupStatsLine);
}
