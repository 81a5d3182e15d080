import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import { ProviderDriver } from "../support/deferred-nat";
import { FaultHost, openSockets } from "../support/fault-host";
import { faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";
import { SshSession } from "../../provider/transport/ssh";

/**
 * Hung hosts, on a host of this test's own: its sshd or ovs-vswitchd
 * stopped (SIGSTOP). The operation is abandoned after the connection's
 * configured timeout with an error naming the host, and nothing is left
 * behind: no socket of this process, no sshd session or ovs-ofctl on the host.
 */

let host: FaultHost;
const stopped: number[] = [];
const inputs = (timeouts: { connectTimeoutMs?: number; commandTimeoutMs?: number }) => {
  const lb = faultLoadBalancer("flt-hung", [host], [10, 72], 2, 4);
  lb.gateways[0].host.connection = { ...lb.gateways[0].host.connection, ...timeouts };
  return lb;
};

beforeAll(async () => {
  host = await new FaultHost(loadInventory(), "hung", 207).up();
});
afterEach(() => {
  for (const pid of stopped.splice(0)) process.kill(pid, "SIGCONT");
});
afterAll(() => host?.down());

function stop(pid: number): void {
  stopped.push(pid);
  process.kill(pid, "SIGSTOP");
}

/** What a leak would leave: sockets of this process, and session processes and ovs-ofctl on the host. */
const leftovers = () => ({ sockets: openSockets(), sessions: host.processes("sshd: root").length, ofctl: host.processes("ovs-ofctl").length });

/**
 * Waits until nothing of earlier operations is left on the host (a session
 * of a connection just closed may take a moment to exit) and this process
 * holds no more sockets than `sockets`; fails naming what is left.
 */
function nothingLeft(what: string, sockets = Number.POSITIVE_INFINITY) {
  return waitUntil(
    () => {
      const now = leftovers();
      if (now.sessions === 0 && now.ofctl === 0 && now.sockets <= sockets) return now;
      throw new Error(JSON.stringify(now));
    },
    { what, timeoutMs: 6_000 },
  );
}

describe("hung hosts", () => {
  it("sshd stopped: connecting is abandoned after connectTimeoutMs, naming the host, and leaks no socket", async () => {
    const before = await nothingLeft("the host to be idle");
    stop(host.pid("sshd"));
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const started = Date.now();
    await expect(lb.create(inputs({ connectTimeoutMs: 1_500 }))).rejects.toThrow(
      /root@172\.31\.207\.2:22: connect failed: Timed out while waiting for handshake/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    await waitUntil(() => openSockets() <= before.sockets, { what: "this process's sockets to be back to their count", timeoutMs: 3_000 });
  });

  it("ovs-vswitchd stopped: a command is abandoned after commandTimeoutMs; the ovs-ofctl it ran exits by its own --timeout and the connection is closed", async () => {
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.purge(inputs({}));
    const before = await nothingLeft("the host to be idle");
    stop(host.pid("ovs-vswitchd"));
    const started = Date.now();
    await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(
      /root@172\.31\.207\.2:22: ovs-ofctl timed out after 1500 ms \(commandTimeoutMs\); abandoned/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    // While ovs-vswitchd is still stopped: nothing of the abandoned operation remains.
    await nothingLeft("no ovs-ofctl, sshd session or socket left", before.sockets);
  });

  it("ovsdb-server stopped: an OVSDB request (the first: the resource's lock) is abandoned after commandTimeoutMs, naming the host, and the connection closed", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const before = await nothingLeft("the host to be idle");
    stop(host.pid("ovsdb-server"));
    await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(
      /root@172\.31\.207\.2:22: ovsdb lock \(ovslb_[0-9a-f]{24}\): no reply: timed out after 1500 ms/,
    );
    await nothingLeft("no sshd session or socket left", before.sockets);
  });

  it("the connection's sshd session stopped mid-operation: abandoned after commandTimeoutMs, the connection dropped, nothing left once it runs again", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const before = await nothingLeft("the host to be idle");
    // Once the provider's commands run, the sessions serving its connection stop answering. ovs-vswitchd is
    // held meanwhile so that its first ovs-ofctl waits to be seen, however slow this machine; it runs on once
    // the sessions are stopped, so only they hold the operation.
    const vswitchd = host.pid("ovs-vswitchd");
    process.kill(vswitchd, "SIGSTOP");
    const watch = setInterval(() => {
      if (host.processes("ovs-ofctl").length === 0) return;
      clearInterval(watch);
      host.processes("sshd: root").forEach(stop);
      process.kill(vswitchd, "SIGCONT");
    }, 1);
    try {
      await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(
        /root@172\.31\.207\.2:22: .*timed out after 1500 ms \(commandTimeoutMs\); abandoned/,
      );
    } finally {
      clearInterval(watch);
      process.kill(vswitchd, "SIGCONT");
    }
    expect(openSockets()).toBeLessThanOrEqual(before.sockets);
    for (const pid of stopped.splice(0)) process.kill(pid, "SIGCONT");
    // Running again, the session finds its connection gone and ends; its commands end by their own --timeout.
    await nothingLeft("the stopped session and its commands to end");
    await lb.purge(inputs({}));
  });

  it("the session stopped once logged in, before a channel opens: a command, and a socket channel, are abandoned after commandTimeoutMs", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const before = await nothingLeft("the host to be idle");
    for (const open of [(s: SshSession) => s.run(["ovs-vsctl", "--version"]), (s: SshSession) => s.openUnixStream(`${host.rundir}/db.sock`)]) {
      const session = await SshSession.connect({ ...host.connection, commandTimeoutMs: 1_000 });
      await waitUntil(() => host.processes("sshd: root").length > 0, { what: "the connection's session on the host" });
      host.processes("sshd: root").forEach(stop);
      const started = Date.now();
      await expect(open(session)).rejects.toThrow(/root@172\.31\.207\.2:22: .*timed out after 1000 ms \(commandTimeoutMs\); abandoned/);
      expect(Date.now() - started).toBeLessThan(5_000);
      for (const pid of stopped.splice(0)) process.kill(pid, "SIGCONT");
      await nothingLeft("the abandoned connection's session to end", before.sockets);
    }
  });

  it("once ovs-vswitchd runs again, create succeeds", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.create(inputs({ commandTimeoutMs: 5_000 }));
    expect(lb.outputs.lastApply.g1.operations).toEqual({ "add-group": 2, "add-flow": 2 });
    await lb.delete();
  });
});
