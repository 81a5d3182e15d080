import { CommandResult, CommandRunner } from "./exec";
import { parseFlows, parseGroups } from "../openflow/parse";
import { MAX_GROUP_ID, MAX_TABLE, OpenFlowValueError, checkUint, renderBundle, renderCookieMatch } from "../openflow/render";
import { DumpedFlow, GroupEntry, Modification } from "../openflow/types";

/**
 * OpenFlow error names as OVS prints them (OFPGMFC_BUCKET_EXISTS,
 * OFPBFC_MSG_FAILED, OFPFMFC_..., OFPBAC_...), or what went wrong before
 * OpenFlow: ovs-ofctl refused the input, could not connect, or failed otherwise.
 */
export type OpenFlowErrorCode = `OFP${string}` | "OFCTL_PARSE" | "OFCTL_CONNECT" | "OFCTL_FAILED";

/** A bundle line OVS pointed at: index into the lines sent, and its text. */
export interface FailingLine {
  index: number;
  text: string;
}

export class OpenFlowError extends Error {
  constructor(
    /** The cause: for a failed bundle, the failing message's error rather than OFPBFC_MSG_FAILED. */
    readonly code: OpenFlowErrorCode,
    readonly hostName: string,
    readonly bridge: string,
    detail: string,
    /** Every OpenFlow error OVS reported, in order. */
    readonly codes: readonly OpenFlowErrorCode[] = [code],
    readonly line?: FailingLine,
  ) {
    const where = line ? ` at bundle line ${line.index + 1} (${line.text})` : "";
    super(`${hostName}: bridge ${bridge}: ${code}${where}: ${detail}`);
    this.name = "OpenFlowError";
  }
}

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
}

const BRIDGE_ADDRESS = /^unix:\/[A-Za-z0-9_./-]+$/;
const OFCTL = ["ovs-ofctl", "-O", "OpenFlow15"] as const;

/** One `Error CODE for: MESSAGE` report from ovs-ofctl, with the message's xid. */
interface ReportedError {
  code: `OFP${string}`;
  about: string;
  xid?: number;
}

/** `Error X for: ...` is followed by the failing message, on the same line (flow mods) or indented below (group mods). */
function reportedErrors(stderr: string): ReportedError[] {
  const errors: ReportedError[] = [];
  for (const line of stderr.split("\n")) {
    const head = /^Error (OFP\w+) for: (.*)$/.exec(line);
    const last = errors.at(-1);
    if (head) {
      const xid = /\(xid=(0x[0-9a-f]+)\)/.exec(head[2]);
      errors.push({ code: head[1] as `OFP${string}`, about: head[2], ...(xid ? { xid: Number(xid[1]) } : {}) });
    } else if (last && line.startsWith(" ")) {
      last.about += ` ${line.trim()}`;
    }
  }
  return errors;
}

/**
 * The bundle line an OVS error is about. ovs-ofctl numbers the bundled
 * messages first, with consecutive xids, then sends open, barrier and commit;
 * so the commit's xid, which OFPBFC_MSG_FAILED reports, locates them (OVS 3.1).
 */
function failingIndex(errors: readonly ReportedError[], cause: ReportedError, count: number): number | undefined {
  const commit = errors.find((e) => e.code === "OFPBFC_MSG_FAILED")?.xid;
  if (commit === undefined || cause.xid === undefined) return undefined;
  const index = cause.xid - (commit - count - 2);
  return index >= 0 && index < count ? index : undefined;
}

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
   * BR -`, file on stdin): either every line takes effect or none does.
   * Values are validated before anything is sent; nothing is sent for no mods.
   */
  async applyBundle(mods: readonly Modification[]): Promise<BundleSent> {
    const lines = renderBundle(mods);
    if (lines.length === 0) return { lines, bytes: 0, messages: 0 };
    const file = `${lines.join("\n")}\n`;
    await this.ofctl(["bundle", this.address, "-"], file, lines);
    return { lines, bytes: Buffer.byteLength(file), messages: lines.length };
  }

  /** Flows with counters; with a filter, only those whose cookie matches cookie/mask (and table). */
  async dumpFlows(filter?: FlowFilter): Promise<DumpedFlow[]> {
    const args = ["--no-names", "dump-flows", this.address];
    if (filter) {
      const spec = filter.table === undefined ? [] : [`table=${checkUint("filter.table", filter.table, MAX_TABLE)}`];
      spec.push(renderCookieMatch(filter.cookie, filter.mask, "filter.cookie"));
      args.push(spec.join(","));
    }
    return parseFlows(await this.ofctl(args));
  }

  async dumpGroups(): Promise<GroupEntry[]> {
    return parseGroups(await this.ofctl(["--no-names", "dump-groups", this.address]));
  }

  /** The group, or undefined if the bridge has none with this id. */
  async dumpGroup(groupId: number): Promise<GroupEntry | undefined> {
    const id = checkUint("groupId", groupId, MAX_GROUP_ID);
    return parseGroups(await this.ofctl(["--no-names", "dump-groups", this.address, `${id}`]))[0];
  }

  private async ofctl(args: readonly string[], stdin?: string, lines: readonly string[] = []): Promise<string> {
    const result = await this.runner.run([...OFCTL, ...args], stdin === undefined ? {} : { stdin });
    if (result.exitCode !== 0) throw this.failure(result, lines);
    return result.stdout;
  }

  private failure(result: CommandResult, lines: readonly string[]): OpenFlowError {
    const stderr = result.stderr.trim();
    const error = (code: OpenFlowErrorCode, detail: string, codes?: readonly OpenFlowErrorCode[], index?: number) =>
      new OpenFlowError(code, this.runner.hostName, this.address, detail, codes, index === undefined ? undefined : { index, text: lines[index] });

    const reported = reportedErrors(stderr);
    if (reported.length > 0) {
      const cause = reported.find((e) => e.code !== "OFPBFC_MSG_FAILED") ?? reported[0];
      const rolledBack = reported.some((e) => e.code === "OFPBFC_MSG_FAILED") ? "bundle not applied; " : "";
      return error(cause.code, `${rolledBack}OVS: ${cause.about}`, reported.map((e) => e.code), failingIndex(reported, cause, lines.length));
    }
    // ovs-ofctl refusing a line of the file: `ovs-ofctl: -:2: unknown action frobnicate`.
    const parse = /^ovs-ofctl: -:(\d+): (.*)$/m.exec(stderr);
    if (parse) {
      const index = Number(parse[1]) - 1;
      const code = /\((OFP\w+)\)/.exec(parse[2])?.[1] as `OFP${string}` | undefined;
      return error(code ?? "OFCTL_PARSE", parse[2], undefined, index < lines.length ? index : undefined);
    }
    if (/connecting to|failed to connect|version negotiation failed/.test(stderr)) return error("OFCTL_CONNECT", stderr);
    return error("OFCTL_FAILED", `ovs-ofctl exited ${result.exitCode}: ${stderr || result.stdout.trim()}`);
  }
}
