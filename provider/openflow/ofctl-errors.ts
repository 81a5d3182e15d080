/**
 * What an `ovs-ofctl` failure says, read from its output (OVS 3.1). Pure:
 * the bridge transport runs the command and builds its error from this.
 */

/**
 * OpenFlow error names as OVS prints them (OFPGMFC_BUCKET_EXISTS,
 * OFPBFC_MSG_FAILED, OFPFMFC_..., OFPBAC_...), or what went wrong before
 * OpenFlow: ovs-ofctl refused the input, could not connect, or failed otherwise.
 */
export type OpenFlowErrorCode = `OFP${string}` | "OFCTL_PARSE" | "OFCTL_CONNECT" | "OFCTL_FAILED";

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

export interface OfctlFailure {
  /** The cause: for a failed bundle, the failing message's error rather than OFPBFC_MSG_FAILED. */
  code: OpenFlowErrorCode;
  detail: string;
  /** Every OpenFlow error OVS reported, in order. */
  codes?: readonly OpenFlowErrorCode[];
  /** The bundle line (0-based) OVS pointed at, if it did. */
  index?: number;
}

/** Reads a failed ovs-ofctl run that was fed `lineCount` bundle lines. */
export function readOfctlFailure(stderrText: string, stdout: string, exitCode: number, lineCount: number): OfctlFailure {
  const stderr = stderrText.trim();
  const reported = reportedErrors(stderr);
  if (reported.length > 0) {
    const cause = reported.find((e) => e.code !== "OFPBFC_MSG_FAILED") ?? reported[0];
    const rolledBack = reported.some((e) => e.code === "OFPBFC_MSG_FAILED") ? "bundle not applied; " : "";
    return {
      code: cause.code,
      detail: `${rolledBack}OVS: ${cause.about}`,
      codes: reported.map((e) => e.code),
      index: failingIndex(reported, cause, lineCount),
    };
  }
  // ovs-ofctl refusing a line of the file: `ovs-ofctl: -:2: unknown action frobnicate`.
  const parse = /^ovs-ofctl: -:(\d+): (.*)$/m.exec(stderr);
  if (parse) {
    const index = Number(parse[1]) - 1;
    const code = /\((OFP\w+)\)/.exec(parse[2])?.[1] as `OFP${string}` | undefined;
    return { code: code ?? "OFCTL_PARSE", detail: parse[2], ...(index < lineCount ? { index } : {}) };
  }
  if (/connecting to|failed to connect|version negotiation failed/.test(stderr)) return { code: "OFCTL_CONNECT", detail: stderr };
  return { code: "OFCTL_FAILED", detail: `ovs-ofctl exited ${exitCode}: ${stderr || stdout.trim()}` };
}
