import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
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

/** Bytes the running `ovs-ofctl bundle` (or its staging) has read from stdin so far, or undefined when none runs. */
function bundleBytesRead(): number | undefined {
  for (const pid of [...host.processes("sh -c"), ...host.processes("cat")]) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("ovslb-bundle") && !readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("cat")) continue;
      return Number(/rchar: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, "utf8"))![1]);
    } catch {
      /* exited */
    }
  }
  return undefined;
}

/** Runs create; kills the connection's sshd session processes once `when` says so ("ofctl": once the bundle's ovs-ofctl runs). */
async function createCutWhen(
  lb: ProviderDriver,
  when: ((read: number | undefined) => boolean) | "ofctl",
): Promise<Error & { id?: string; properties?: Props }> {
  let cut = false;
  const watch =
    when === "ofctl"
      ? cutOnceOfctlRuns()
      : setInterval(() => {
          if (cut || !when(bundleBytesRead())) return;
          cut = true;
          for (const pid of host.processes("sshd: root")) process.kill(pid, "SIGKILL");
        }, 1);
  try {
    await lb.create(inputs());
    throw new Error("create succeeded: the session was not cut");
  } catch (e) {
    return e as Error;
  } finally {
    if (watch instanceof ChildProcess) watch.kill();
    else clearInterval(watch);
  }
}

/**
 * The cut once ovs-ofctl has the whole bundle, made by a watcher process in
 * the host's namespace rather than this process's timers (ovs-ofctl can
 * finish between two of their turns): as soon as the bundle's ovs-ofctl
 * runs it stops ovs-vswitchd, so ovs-ofctl waits on it, kills the sshd
 * sessions, and lets ovs-vswitchd go on.
 */
function cutOnceOfctlRuns(): ChildProcess {
  const vswitchd = String(host.pid("ovs-vswitchd"));
  const script = [
    'until pgrep --ns "$1" --nslist net -f "^ovs-ofctl .* bundle " >/dev/null; do :; done',
    'kill -STOP "$1"',
    'pkill --ns "$1" --nslist net -KILL -f "^sshd: root"',
    'kill -CONT "$1"',
  ].join("; ");
  return spawn("sh", ["-c", script, "sh", vswitchd], { stdio: "ignore" });
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
    ["early in the stream", (n: number | undefined) => n !== undefined && n > 30_000],
    ["late in the stream", (n: number | undefined) => n !== undefined && n > 400_000],
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
