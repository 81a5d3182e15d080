import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import { ProviderDriver } from "../support/deferred-nat";
import { FaultHost, openSockets } from "../support/fault-host";
import { faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";

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

describe("hung hosts", () => {
  it("sshd stopped: connecting is abandoned after connectTimeoutMs, naming the host, and leaks no socket", async () => {
    const before = leftovers();
    stop(host.pid("sshd"));
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const started = Date.now();
    await expect(lb.create(inputs({ connectTimeoutMs: 1_500 }))).rejects.toThrow(/root@172\.31\.207\.2:22: connect failed: Timed out while waiting for handshake/);
    expect(Date.now() - started).toBeLessThan(10_000);
    await waitUntil(() => openSockets() <= before.sockets, { what: "this process's sockets to be back to their count", timeoutMs: 3_000 });
  });

  it("ovs-vswitchd stopped: a command is abandoned after commandTimeoutMs; the ovs-ofctl it ran exits by its own --timeout and the connection is closed", async () => {
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.purge(inputs({}));
    const before = leftovers();
    expect(before.ofctl).toBe(0);
    stop(host.pid("ovs-vswitchd"));
    const started = Date.now();
    await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(/root@172\.31\.207\.2:22: ovs-ofctl timed out after 1500 ms \(commandTimeoutMs\); abandoned/);
    expect(Date.now() - started).toBeLessThan(10_000);
    // While ovs-vswitchd is still stopped: nothing of the abandoned operation remains.
    await waitUntil(() => {
      const now = leftovers();
      return now.ofctl === 0 && now.sessions === before.sessions && now.sockets <= before.sockets;
    }, { what: "no ovs-ofctl, sshd session or socket left", timeoutMs: 5_000 });
  });

  it("ovsdb-server stopped: an OVSDB request is abandoned after commandTimeoutMs, naming the host, and the connection closed", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const before = leftovers();
    stop(host.pid("ovsdb-server"));
    await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(/root@172\.31\.207\.2:22: Open_vSwitch: .*timed out after 1500 ms/);
    await waitUntil(() => {
      const now = leftovers();
      return now.sessions === before.sessions && now.sockets <= before.sockets;
    }, { what: "no sshd session or socket left", timeoutMs: 5_000 });
  });

  it("the connection's sshd session stopped mid-operation: abandoned after commandTimeoutMs, the connection dropped, nothing left once it runs again", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    const before = leftovers();
    // Once the provider's commands run, the sessions serving its connection stop answering.
    const watch = setInterval(() => {
      if (host.processes("ovs-ofctl").length === 0) return;
      clearInterval(watch);
      host.processes("sshd: root").forEach(stop);
    }, 1);
    try {
      await expect(lb.create(inputs({ commandTimeoutMs: 1_500 }))).rejects.toThrow(/root@172\.31\.207\.2:22: .*timed out after 1500 ms \(commandTimeoutMs\); abandoned/);
    } finally {
      clearInterval(watch);
    }
    expect(openSockets()).toBeLessThanOrEqual(before.sockets);
    for (const pid of stopped.splice(0)) process.kill(pid, "SIGCONT");
    // Running again, the session finds its connection gone and ends; its commands end by their own --timeout.
    await waitUntil(() => {
      const now = leftovers();
      return now.sessions === before.sessions && now.ofctl === 0;
    }, { what: "the stopped session and its commands to end", timeoutMs: 5_000 });
    await lb.purge(inputs({}));
  });

  it("once ovs-vswitchd runs again, create succeeds", async () => {
    process.kill(host.pid("ovs-vswitchd"), "SIGCONT");
    const lb = new ProviderDriver("DeferredNatLoadBalancer");
    await lb.create(inputs({ commandTimeoutMs: 5_000 }));
    expect(lb.outputs.lastApply.g1.operations).toEqual({ "add-group": 2, "add-flow": 2 });
    await lb.delete();
  });
});
