import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn } from "node:child_process";
import type { CommandResult, CommandRunner, RunOptions } from "../../provider/transport/exec";
import { OpenFlowBridge } from "../../provider/transport/openflow-bridge";
import { SshSession } from "../../provider/transport/ssh";
import { bridgeSocket } from "../../provider/transport/ovs-host";
import { ProviderDriver } from "../support/deferred-nat";
import { FaultHost } from "../support/fault-host";
import { faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";

/**
 * SSH cut mid-apply, on a host of this test's own (its own sshd and OVS in
 * its own namespace: nothing shared is touched). The sshd session serving the
 * provider's connection is killed while the bundle streams: the bridge holds
 * all of the bundle or none of it, the error names the host, and the next
 * update converges.
 */

let host: FaultHost;
const VIPS = 150;
const BACKENDS = 50;
const inputs = () => faultLoadBalancer("flt-cut", [host], [10, 71], VIPS, BACKENDS);
type Props = Record<string, any>;

beforeAll(async () => {
  host = await new FaultHost(loadInventory(), "cut", 201).up();
  // The bundle (about 1 MB) then streams for about half a second: the cuts at 30 KB and 400 KB find it still arriving.
  host.shapeManagement(16);
});
afterAll(() => host?.down());

/** Groups and VIP flows of the bridge (the NORMAL flow aside). */
function counts(): { groups: number; flows: number } {
  const groups = host
    .ofctl("dump-groups", host.bridge)
    .split("\n")
    .filter((l) => l.includes("group_id=")).length;
  const flows = host
    .ofctl("--no-stats", "dump-flows", host.bridge)
    .split("\n")
    .filter((l) => l.includes("cookie=") && !l.includes("actions=NORMAL")).length;
  return { groups, flows };
}

/**
 * Runs create while a watcher process in the host's namespace (not this
 * process's timers, which the provider's own work in this process can
 * delay past a short window) cuts the connection: kills its sshd sessions
 * once the bundle's staging `cat` has read `when` bytes, or, for "ofctl",
 * once the bundle is staged whole and its ovs-ofctl runs (ovs-vswitchd is
 * stopped as the staging ends, so that ovs-ofctl waits for it, and goes on
 * after the cut).
 */
async function createCutWhen(lb: ProviderDriver, when: number | "ofctl"): Promise<Error & { id?: string; properties?: Props }> {
  const script = [
    'vswitchd=$1 want=$2 net="--ns $1 --nslist net"',
    'until cat=$(pgrep $net -x cat | head -n 1) && [ -n "$cat" ]; do :; done',
    'if [ "$want" = ofctl ]; then',
    '  while [ -e "/proc/$cat" ]; do :; done',
    '  kill -STOP "$vswitchd"',
    '  until pgrep $net -f "^ovs-ofctl .* bundle " >/dev/null; do :; done',
    "else",
    '  until [ "$(sed -n "s/^rchar: //p" "/proc/$cat/io" 2>/dev/null || echo 0)" -ge "$want" ] || [ ! -e "/proc/$cat" ]; do :; done',
    "fi",
    'pkill $net -KILL -f "^sshd: root"',
    'kill -CONT "$vswitchd"',
  ].join("\n");
  const watcher = spawn("sh", ["-c", script, "sh", String(host.pid("ovs-vswitchd")), String(when)], { stdio: "ignore" });
  try {
    await lb.create(inputs());
    throw new Error("create succeeded: the session was not cut");
  } catch (e) {
    return e as Error;
  } finally {
    watcher.kill();
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
  }
}

describe("SSH cut mid-apply", () => {
  it("a bundle that reaches the host cut at a line boundary is refused whole: nothing applied", async () => {
    const ssh = await SshSession.connect(host.connection);
    try {
      // The stream as a dropped connection leaves it: whole lines, the tail missing.
      const cutting: CommandRunner = {
        hostName: ssh.hostName,
        run: (argv: readonly string[], opts: RunOptions = {}): Promise<CommandResult> =>
          ssh.run(argv, { ...opts, stdin: opts.stdin?.split("\n").slice(0, 2).join("\n").concat("\n") }),
      };
      const before = host.dataplane();
      const bridge = new OpenFlowBridge(cutting, bridgeSocket(host.ovsHost, host.bridge));
      const mods = [1, 2, 3].map((i) => ({
        op: "add-flow" as const,
        flow: { cookie: 0xf1n, table: 0, priority: 100, match: { protocol: "ip", nw_dst: `10.99.0.${i}` }, actions: [{ type: "drop" as const }] },
      }));
      await expect(bridge.applyBundle(mods as never)).rejects.toThrow(
        /root@172\.31\.201\.2:22: bridge .*bundle not applied: bundle arrived incomplete \(\d+ of \d+ bytes\)/,
      );
      expect(host.dataplane()).toEqual(before);
    } finally {
      ssh.close();
    }
  });

  for (const [what, when] of [
    ["early in the stream", 30_000],
    ["late in the stream", 400_000],
    ["once ovs-ofctl has it all", "ofctl"],
  ] as const) {
    it(`cut ${what}: the host holds all of the bundle or none, the error names it, and update converges`, async () => {
      const lb = new ProviderDriver("DeferredNatLoadBalancer");
      await lb.purge(inputs());
      expect(counts()).toEqual({ groups: 0, flows: 0 });
      const err = await createCutWhen(lb, when);
      expect(err.message).toMatch(/root@172\.31\.201\.2:22 \(g1\): may or may not have been changed: .*connection lost/);
      // The host may still be applying the bundle it had whole when the connection went: let it finish, then look.
      await waitUntil(() => host.processes("sh -c").length === 0 && host.processes("ovs-ofctl").length === 0, { what: "the host's bundle to finish" });
      const after = counts();
      expect([JSON.stringify({ groups: 0, flows: 0 }), JSON.stringify({ groups: VIPS, flows: VIPS })]).toContain(JSON.stringify(after));
      // The outcome is unknown, so the error carries the resource's id and what is true (the engine records them).
      expect(err.id).toBe("deferred-nat/flt-cut");
      expect(err.properties!.lastApply).toEqual({});
      expect(err.properties!.drift[0]).toMatch(/may or may not have been changed/);
      expect(Object.keys(err.properties!.groupIds)).toHaveLength(VIPS);
      lb.id = err.id!;
      lb.outputs = err.properties!;
      await lb.update(inputs());
      expect(counts()).toEqual({ groups: VIPS, flows: VIPS });
      expect((await lb.read()).props.drift).toEqual([]);
      await lb.delete();
      expect(counts()).toEqual({ groups: 0, flows: 0 });
    });
  }
});
