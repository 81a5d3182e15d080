import { describe, it, expect } from "vitest";
import { commitReplies } from "../../bench/scale-fanout";
import { openFlowWrites } from "../../bench/peer-command";

/**
 * The parsers behind issue 13's fan-out and peer figures, on text as
 * ovs-vswitchd and strace write it: a commit missed or a message miscounted
 * would change the numbers silently.
 */

describe("scale-fanout: commit instants from ovs-vswitchd's vconn log", () => {
  const log = [
    "2026-12-01T13:11:50.063118Z|00084|vconn|DBG|unix#3: received: OFPT_BUNDLE_CONTROL (OF1.5) (xid=0xa):",
    " bundle_id=0 type=COMMIT_REQUEST flags=atomic ordered",
    "2026-12-01T13:11:50.063470Z|00085|vconn|DBG|unix#3: sent (Success): OFPT_BUNDLE_CONTROL (OF1.5) (xid=0xa):",
    " bundle_id=0 type=COMMIT_REPLY flags=0",
    "2026-12-01T13:11:50.064000Z|00086|vconn|DBG|unix#3: sent (Success): OFPT_BUNDLE_CONTROL (OF1.5) (xid=0xb):",
    " bundle_id=0 type=OPEN_REPLY flags=0",
    "2026-12-01T13:11:50.101250Z|00090|vconn|DBG|unix#4: sent (Success): OFPT_BUNDLE_CONTROL (OF1.5) (xid=0x9):",
    " bundle_id=0 type=COMMIT_REPLY flags=0",
    "",
  ].join("\n");

  it("takes each COMMIT_REPLY sent, to the microsecond, and nothing else", () => {
    const t = commitReplies(log);
    expect(t).toHaveLength(2);
    expect(t[1] - t[0]).toBeCloseTo(37.78, 2);
    expect(t[0]).toBeCloseTo(Date.parse("2026-12-01T13:11:50Z") + 63.47, 2);
  });

  it("finds none in a log without commits", () => {
    expect(commitReplies(log.replace(/COMMIT_REPLY/g, "CLOSE_REPLY"))).toEqual([]);
  });
});

describe("peer-command: OpenFlow messages from strace's sendto lines", () => {
  const hdr = (type: number, length: number) => [6, type, length >> 8, length & 0xff, 0, 0, 0, 1].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
  const send = (pid: number | undefined, fd: number, type: number, length: number, written: number) =>
    `${pid === undefined ? "" : `[pid ${pid}] `}sendto(${fd}, "${hdr(type, length)}"..., ${written}, 0, NULL, 0) = ${written}`;

  it("counts one message per header, joins a message written in pieces, and keeps the command's own stderr", () => {
    const out = [
      send(101, 3, 0, 16, 16), // hello
      send(101, 3, 34, 3000, 2048), // a bundle message in two writes
      `[pid 101] sendto(3, "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07"..., 952, 0, NULL, 0) = 952`,
      send(102, 3, 0, 16, 16), // another ovs-ofctl: its own socket
      send(undefined, 2, 0, 16, 16), // stderr is no socket
      "ovs-ofctl: warning of its own",
      "[pid 101] +++ exited with 0 +++",
    ].join("\n");
    const w = openFlowWrites(out);
    expect(w.messages).toBe(3);
    expect(w.bytes).toBe(16 + 2048 + 952 + 16);
    expect(w.kept).toEqual(["ovs-ofctl: warning of its own"]);
  });
});
