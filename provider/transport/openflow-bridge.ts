import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { readOfctlFailure, type OpenFlowErrorCode } from "../openflow/ofctl-errors";
import { type CommandResult, type CommandRunner } from "./exec";
import { SshConnectionLostError, SshError } from "./ssh";
import {
  OpenFlowParseError,
  flowStreamParser,
  groupStatsStreamParser,
  groupStreamParser,
  parseAggregate,
  type DumpStreamParser,
  type FlowAggregate,
  type GroupStats,
} from "../openflow/parse";
import { MAX_GROUP_ID, MAX_TABLE, OpenFlowValueError, checkUint, renderBundle, renderCookieMatch, renderMatch } from "../openflow/render";
import { type DumpedFlow, type GroupEntry, type Match, type Modification } from "../openflow/types";
import { parsePortsDesc, type PortDesc } from "../openflow/ports";

/** A bundle line OVS pointed at: index into the lines sent, and its text. */
export interface FailingLine {
  index: number;
  text: string;
}

/**
 * What an OpenFlowError says of the change it carried: "refused" when
 * ovs-ofctl ran to its end and it or OVS refused (a bundle is then not
 * applied at all); "unknown" when ovs-ofctl was killed or lost before it
 * could tell (no exit status): a bundle may or may not have been applied.
 */
export type OpenFlowErrorKind = "refused" | "unknown";

export class OpenFlowError extends Error {
  /** Whether the change it carried is known not to have been applied. */
  readonly kind: OpenFlowErrorKind;

  constructor(
    /** The cause: for a failed bundle, the failing message's error rather than OFPBFC_MSG_FAILED. */
    readonly code: OpenFlowErrorCode,
    readonly hostName: string,
    readonly bridge: string,
    detail: string,
    /** Every OpenFlow error OVS reported, in order. */
    readonly codes: readonly OpenFlowErrorCode[] = [code],
    readonly line?: FailingLine,
    kind: OpenFlowErrorKind = "refused",
  ) {
    const where = line ? ` at bundle line ${line.index + 1} (${line.text})` : "";
    super(`${hostName}: bridge ${bridge}: ${code}${where}: ${detail}`);
    this.name = "OpenFlowError";
    this.kind = kind;
  }
}

export type { OpenFlowErrorCode };

/** What one applyBundle sent, so callers and tests can show an apply was incremental. */
export interface BundleSent {
  lines: readonly string[];
  /** Size of the bundle file fed to ovs-ofctl. */
  bytes: number;
  /** Flow and group mods in the bundle (ovs-ofctl adds its open, barrier and commit controls). */
  messages: number;
}

export interface FlowFilter {
  cookie: bigint;
  mask: bigint;
  table?: number;
  /** Only flows whose match has at least these fields with these values (OVS's non-strict match): one flow and any that would clash with it. */
  match?: Match;
}

/**
 * ovs-ofctl commits whatever bundle file it reads, so a stream cut at a line
 * boundary (the connection dropped mid-send) would commit a prefix. The host
 * keeps the file until it has every byte the provider sent ($1), and only
 * then hands it to ovs-ofctl ("$@" after the count: its fixed argv). No
 * value reaches this script as shell text: the count and argv are arguments.
 */
const INCOMPLETE = 97;
const WHOLE_BUNDLE = [
  "f=$(mktemp) || exit 1",
  "trap 'rm -f \"$f\"' EXIT",
  "n=$1; shift",
  'cat >"$f"',
  'got=$(wc -c <"$f")',
  `[ "$got" -eq "$n" ] || { echo "bundle arrived incomplete ($got of $n bytes)" >&2; exit ${INCOMPLETE}; }`,
  '"$@" - <"$f"',
].join("\n");

/**
 * The bundle staged, then committed on a word. The host keeps the file as
 * WHOLE_BUNDLE does and feeds it to an ovs-ofctl that starts at once (so it
 * connects and parses while the other hosts stage theirs), followed by the
 * start of one more line that is not valid on its own: a strict delete of a
 * flow with a cookie no one has (`$2`, random per bundle), whose `nw_dst=`
 * lacks its value. Then it says "staged" and waits. On the line "commit" it
 * adds the value: the line becomes a valid no-op, its input ends, and
 * ovs-ofctl sends the bundle. On anything else (the input closed, the
 * connection or the shell gone) ovs-ofctl reads the unfinished line and
 * refuses the file, sending nothing. So what is left on the host once the
 * word comes is a send, not a start. `head -c` reads no byte past the bundle
 * (it asks for no more than it still needs), so the commit line stays for
 * `read`.
 */
const STAGED_LINE = "staged\n";
const NOT_COMMITTED = "bundle staged but not committed: its input ended without the commit line";
const STAGED_BUNDLE = [
  "f=$(mktemp) || exit 1",
  "trap 'rm -f \"$f\"' EXIT",
  "n=$1 cookie=$2; shift 2",
  'head -c "$n" >"$f"',
  'got=$(wc -c <"$f")',
  `[ "$got" -eq "$n" ] || { echo "bundle arrived incomplete ($got of $n bytes)" >&2; exit ${INCOMPLETE}; }`,
  "exec 3>&1",
  "{",
  '  cat "$f"',
  "  printf 'flow delete_strict cookie=%s/-1,table=0,priority=0,ip,nw_dst=' \"$cookie\"",
  "  echo staged >&3",
  "  IFS= read -r go || go=",
  `  if [ "$go" = commit ]; then echo 0.0.0.0/32; else echo "${NOT_COMMITTED}" >&2; fi`,
  '} | "$@" - 3>&-',
].join("\n");

/** A bundle in place on its host, not yet applied: commit it, or abort it (nothing of it is applied). */
export interface StagedBundle {
  /** Has the host apply the staged bundle; settles as applyBundle does. */
  commit(): Promise<BundleSent>;
  /** Withdraws the staged bundle: the host drops it unapplied. */
  abort(): Promise<void>;
}

/** A FlowFilter as ovs-ofctl's flow argument (none for no filter). */
function filterArgs(filter: FlowFilter | undefined): string[] {
  if (!filter) return [];
  const spec = filter.table === undefined ? [] : [`table=${checkUint("filter.table", filter.table, MAX_TABLE)}`];
  if (filter.match) spec.push(renderMatch(filter.match, "filter.match"));
  spec.push(renderCookieMatch(filter.cookie, filter.mask, "filter.cookie"));
  return [spec.join(",")];
}

const BRIDGE_ADDRESS = /^unix:\/[A-Za-z0-9_./-]+$/;
const OFCTL = ["ovs-ofctl", "-O", "OpenFlow15"] as const;

/** An OpenFlow bridge on one host, addressed by its management socket (`unix:/var/run/openvswitch/br0.mgmt`). */
export class OpenFlowBridge {
  constructor(
    readonly runner: CommandRunner,
    readonly address: string,
  ) {
    if (typeof address !== "string" || !BRIDGE_ADDRESS.test(address)) {
      throw new OpenFlowValueError("bridge address", `${JSON.stringify(address)} is not unix: followed by an absolute path of [A-Za-z0-9_./-]`);
    }
  }

  /**
   * Sends all modifications as one atomic, ordered bundle (`ovs-ofctl bundle
   * BR -`, file on stdin, staged whole on the host first: WHOLE_BUNDLE):
   * either every line takes effect or none does.
   * Values are validated before anything is sent; nothing is sent for no mods.
   */
  async applyBundle(mods: readonly Modification[]): Promise<BundleSent> {
    const lines = renderBundle(mods);
    if (lines.length === 0) return { lines, bytes: 0, messages: 0 };
    const file = `${lines.join("\n")}\n`;
    const bytes = Buffer.byteLength(file);
    let result: CommandResult;
    try {
      result = await this.runner.run(["sh", "-c", WHOLE_BUNDLE, "ovslb-bundle", String(bytes), ...this.ofctlArgv(), "bundle", this.address], { stdin: file });
    } catch (e) {
      throw this.lostDuringApply(e);
    }
    if (result.exitCode === INCOMPLETE) {
      throw new OpenFlowError("OFCTL_FAILED", this.runner.hostName, this.address, `bundle not applied: ${result.stderr.trim()}`);
    }
    if (result.exitCode !== 0) throw this.failure(result, lines);
    return { lines, bytes, messages: lines.length };
  }

  /**
   * The first half of applyBundle: the bundle is sent and kept whole on the
   * host (STAGED_BUNDLE), and nothing of it applies until `commit()`. A
   * failure before that (the connection lost, the stream incomplete) is a
   * refusal: the host applied nothing.
   */
  async stageBundle(mods: readonly Modification[]): Promise<StagedBundle> {
    const lines = renderBundle(mods);
    const nothing: BundleSent = { lines, bytes: 0, messages: 0 };
    if (lines.length === 0) return { commit: () => Promise.resolve(nothing), abort: () => Promise.resolve() };
    const file = `${lines.join("\n")}\n`;
    const bytes = Buffer.byteLength(file);
    const input = new PassThrough();
    let stdout = "";
    let staged: () => void = () => undefined;
    const isStaged = new Promise<"staged">((resolve) => (staged = () => resolve("staged")));
    const cookie = `0x${randomBytes(8).toString("hex")}`;
    const run = this.runner.run(["sh", "-c", STAGED_BUNDLE, "ovslb-bundle", String(bytes), cookie, ...this.ofctlArgv(), "bundle", this.address], {
      stdinFrom: input,
      onStdout: (chunk) => {
        stdout += chunk.toString("utf8");
        if (stdout.startsWith(STAGED_LINE)) staged();
      },
    });
    // The run's outcome is read by commit or abort; until then a failure must not go unhandled.
    run.catch(() => undefined);
    input.write(file);
    // Whatever ends the run before "staged" (the stream incomplete, the connection lost, a timeout), ovs-ofctl never ran.
    const first = await Promise.race([isStaged, run]).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
    if (first !== "staged") {
      input.destroy();
      const why =
        first instanceof SshConnectionLostError
          ? "connection lost before the bundle was staged whole"
          : first instanceof Error
            ? first.message
            : first.stderr.trim() || `exit ${first.exitCode}`;
      throw new OpenFlowError("OFCTL_FAILED", this.runner.hostName, this.address, `bundle not applied (failed while staged): ${why}`);
    }
    let settled = false;
    return {
      commit: async () => {
        if (settled) throw new Error(`${this.runner.hostName}: bridge ${this.address}: staged bundle committed or aborted already`);
        settled = true;
        input.end("commit\n");
        let result: CommandResult;
        try {
          result = await run;
        } catch (e) {
          throw this.lostDuringApply(e);
        }
        if (result.stderr.includes(NOT_COMMITTED)) {
          throw new OpenFlowError("OFCTL_FAILED", this.runner.hostName, this.address, `bundle not applied: ${NOT_COMMITTED}`);
        }
        if (result.exitCode !== 0) throw this.failure({ ...result, stdout: stdout.slice(STAGED_LINE.length) }, lines, lines.length + 1);
        return { lines, bytes, messages: lines.length };
      },
      abort: async () => {
        if (settled) return;
        settled = true;
        input.end();
        await run.catch(() => undefined);
      },
    };
  }

  /** A lost connection while ovs-ofctl may be running: the bundle is then applied whole or not at all, which is unknown. */
  private lostDuringApply(e: unknown): unknown {
    if (!(e instanceof SshConnectionLostError)) return e;
    return new SshError(
      this.runner.hostName,
      `bridge ${this.address}: connection lost while the bundle was sent or applied; OVS applies a bundle whole or not at all, and which of the two is unknown until the next read`,
    );
  }

  /**
   * Flows with counters; with a filter, only those whose cookie matches
   * cookie/mask (and table, and match). Parsed as the dump arrives (never
   * held whole); `onFlow` gets each one instead of the result array.
   */
  async dumpFlows(filter?: FlowFilter, onFlow?: (flow: DumpedFlow) => void): Promise<DumpedFlow[]> {
    const args = ["--no-names", "dump-flows", this.address, ...filterArgs(filter)];
    const flows: DumpedFlow[] = [];
    await this.ofctlStream(args, flowStreamParser(onFlow ?? ((f) => flows.push(f))));
    return flows;
  }

  /**
   * How many flows the filter selects (`dump-aggregate`, one short reply
   * whatever the bridge holds): what tells cheaply that a bridge lost flows.
   */
  async aggregate(filter?: FlowFilter): Promise<FlowAggregate> {
    return parseAggregate(await this.ofctl(["dump-aggregate", this.address, ...filterArgs(filter)]));
  }

  /** Every group, parsed as the dump arrives (never held whole); `onGroup` gets each one instead of the result array. */
  async dumpGroups(onGroup?: (group: GroupEntry) => void): Promise<GroupEntry[]> {
    const groups: GroupEntry[] = [];
    await this.ofctlStream(["--no-names", "dump-groups", this.address], groupStreamParser(onGroup ?? ((g) => groups.push(g))));
    return groups;
  }

  /** Every group's counters, each bucket's by position (`dump-group-stats`), parsed as the dump arrives. */
  async dumpGroupStats(): Promise<GroupStats[]> {
    const stats: GroupStats[] = [];
    await this.ofctlStream(
      ["dump-group-stats", this.address],
      groupStatsStreamParser((g) => stats.push(g)),
    );
    return stats;
  }

  /** Sends one packet (hex, as packets.ts builds it) out of a port of the bridge. */
  async packetOut(hex: string, port: number): Promise<void> {
    if (!/^[0-9a-f]+$/.test(hex)) throw new OpenFlowValueError("packet", "is not hex");
    await this.ofctl(["packet-out", this.address, `in_port=controller,packet=${hex},actions=output:${checkUint("port", port, 0xfeff, 1)}`]);
  }

  /** Whether the bridge answers OpenFlow 1.5 (`show`): false when it cannot be reached or negotiates no 1.5. */
  async speaksOpenFlow15(): Promise<boolean> {
    return (await this.runner.run([...this.ofctlArgv(), "show", this.address])).exitCode === 0;
  }

  /** Every OpenFlow port with its LIVE state (what watch_port follows). */
  async dumpPortsDesc(): Promise<PortDesc[]> {
    return parsePortsDesc(await this.ofctl(["dump-ports-desc", this.address]));
  }

  /** The group, or undefined if the bridge has none with this id. */
  async dumpGroup(groupId: number): Promise<GroupEntry | undefined> {
    const id = checkUint("groupId", groupId, MAX_GROUP_ID);
    const groups: GroupEntry[] = [];
    await this.ofctlStream(
      ["--no-names", "dump-groups", this.address, `${id}`],
      groupStreamParser((g) => groups.push(g)),
    );
    return groups[0];
  }

  /** ovs-ofctl with its output fed to `parser` as it arrives. */
  private async ofctlStream(args: readonly string[], parser: DumpStreamParser): Promise<void> {
    try {
      const result = await this.runner.run([...this.ofctlArgv(), ...args], { onStdout: (chunk) => parser.push(chunk) });
      if (result.exitCode !== 0) throw this.failure(result, []);
      // A runner that does not stream (a test's, a wrapper's) hands the output back whole: parsed all the same.
      if (result.stdout !== "") parser.push(result.stdout);
      parser.end();
    } catch (e) {
      // A line that does not parse names the host and bridge that printed it.
      throw e instanceof OpenFlowParseError && e.where === undefined ? e.at(`${this.runner.hostName}: bridge ${this.address}`) : e;
    }
  }

  /**
   * ovs-ofctl, bounded by the connection's command timeout (--timeout, in
   * whole seconds, just after it): one blocked on a hung ovs-vswitchd exits
   * by itself, even once the provider has given up and gone.
   */
  private ofctlArgv(): string[] {
    const ms = this.runner.commandTimeoutMs;
    return ms === undefined ? [...OFCTL] : [...OFCTL, `--timeout=${Math.ceil(ms / 1000)}`];
  }

  private async ofctl(args: readonly string[], stdin?: string, lines: readonly string[] = []): Promise<string> {
    const result = await this.runner.run([...this.ofctlArgv(), ...args], stdin === undefined ? {} : { stdin });
    if (result.exitCode !== 0) throw this.failure(result, lines);
    return result.stdout;
  }

  /** `sent`: the messages ovs-ofctl bundled (a staged bundle's closing no-op too), which OVS's xids count. */
  private failure(result: CommandResult, lines: readonly string[], sent = lines.length): OpenFlowError {
    const f = readOfctlFailure(result.stderr, result.stdout, result.exitCode, sent);
    const line = f.index === undefined || f.index >= lines.length ? undefined : { index: f.index, text: lines[f.index] };
    // No exit status: ovs-ofctl was killed (a timeout, a lost session) before it could say what OVS did.
    return new OpenFlowError(f.code, this.runner.hostName, this.address, f.detail, f.codes, line, result.exitCode === -1 ? "unknown" : "refused");
  }
}
