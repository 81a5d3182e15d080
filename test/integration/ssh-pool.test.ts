import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSIONS_PER_CONNECTION, SSH_IDLE_MS, SshSession, closeIdleSshConnections } from "../../provider/transport/ssh";
import { FaultHost } from "../support/fault-host";
import { loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";

/**
 * The process's shared SSH connections, against a host of this test's own
 * (its sshd's log counts every login; no other test logs in there): one
 * login for the sessions of many operations, a bounded number of sessions
 * per connection, no reuse of a connection that failed, and logout when idle.
 */

let host: FaultHost;
const logins = () => (readFileSync(join(host.dir, "sshd.log"), "utf8").match(/Accepted publickey/g) ?? []).length;
const ran = async (s: SshSession) => (await s.run(["true"])).exitCode;

beforeAll(async () => {
  host = await new FaultHost(loadInventory(), "pool", 212).up();
});
afterAll(() => {
  closeIdleSshConnections();
  host?.down();
});

describe("shared SSH connections", () => {
  it("sessions one after another, and side by side up to the bound, share one login; one more logs in again", async () => {
    closeIdleSshConnections();
    const before = logins();
    for (let i = 0; i < 3; i++) {
      const s = await SshSession.connect(host.connection);
      expect(await ran(s)).toBe(0);
      s.close();
    }
    expect(logins() - before).toBe(1);
    const together = await Promise.all(Array.from({ length: SESSIONS_PER_CONNECTION }, () => SshSession.connect(host.connection)));
    expect(await Promise.all(together.map(ran))).toEqual(together.map(() => 0));
    expect(logins() - before).toBe(1);
    const extra = await SshSession.connect(host.connection);
    expect(logins() - before).toBe(2);
    for (const s of [...together, extra]) s.close();
  });

  it("another login of the same host (another user's key, another pin) never shares the connection", async () => {
    closeIdleSshConnections();
    const before = logins();
    const a = await SshSession.connect(host.connection);
    const b = await SshSession.connect({ ...host.connection, connectTimeoutMs: 9_000 });
    expect(logins() - before).toBe(2);
    a.close();
    b.close();
  });

  it("a connection given up on (a command past its timeout) is never handed out again", async () => {
    closeIdleSshConnections();
    const before = logins();
    const hung = await SshSession.connect({ ...host.connection, commandTimeoutMs: 300 });
    await expect(hung.run(["sleep", "5"])).rejects.toThrow(/timed out after 300 ms/);
    hung.close();
    const next = await SshSession.connect({ ...host.connection, commandTimeoutMs: 300 });
    expect(await ran(next)).toBe(0);
    expect(logins() - before).toBe(2);
    next.close();
  });

  it("a connection the host drops (its sshd sessions killed) is not reused: the next session logs in again", async () => {
    closeIdleSshConnections();
    const s = await SshSession.connect(host.connection);
    expect(await ran(s)).toBe(0);
    s.close();
    const before = logins();
    for (const pid of host.processes("sshd: root")) process.kill(pid, "SIGKILL");
    await waitUntil(() => host.processes("sshd: root").length === 0, { what: "the host's sshd sessions to end" });
    // The client learns of the drop when the socket closes: a session taken before that fails on the dead
    // connection, which then goes; either way exactly one new login carries what follows.
    const again = await SshSession.connect(host.connection);
    await again.run(["true"]).catch(() => undefined);
    again.close();
    const after = await SshSession.connect(host.connection);
    expect(await ran(after)).toBe(0);
    after.close();
    expect(logins() - before).toBe(1);
  });

  it(`an idle connection logs out after ${SSH_IDLE_MS} ms, and closeIdleSshConnections logs out at once`, async () => {
    closeIdleSshConnections();
    const s = await SshSession.connect(host.connection);
    s.close();
    const before = logins();
    await new Promise((r) => setTimeout(r, SSH_IDLE_MS + 500));
    const t = await SshSession.connect(host.connection);
    expect(logins() - before).toBe(1);
    t.close();
    closeIdleSshConnections();
    const u = await SshSession.connect(host.connection);
    expect(logins() - before).toBe(2);
    u.close();
  });
});
