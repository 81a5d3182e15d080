import { describe, it, expect, beforeAll, onTestFinished } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HostKeyMismatchError, SshSession, withSessions, quoteArgv } from "../../provider/transport/ssh";
import { MGMT_UNUSED, type LabInventory } from "../lab/topology";
import { loadInventory, runDirEnv, sshTo } from "../support/lab";

let inv: LabInventory;
beforeAll(() => {
  inv = loadInventory();
});

describe("SSH transport against the lab", () => {
  it("runs argv on the host with every element as one literal word", async () => {
    const s = await SshSession.connect(sshTo(inv, "gw1"));
    try {
      const words = ["$(touch /tmp/ovslb-pwned)", "a b", "it's", "`id`", "x;reboot", "10.0.0.1,actions=drop", "*", ""];
      const r = await s.run(["printf", "%s\\n", ...words]);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe(words.map((w) => `${w}\n`).join(""));
      const probe = await s.run(["test", "-e", "/tmp/ovslb-pwned"]);
      expect(probe.exitCode).toBe(1);
    } finally {
      s.close();
    }
  });

  it("feeds stdin and reports exit codes and stderr", async () => {
    const s = await SshSession.connect(sshTo(inv, "gw1"));
    try {
      const big = "line\n".repeat(50_000);
      const r = await s.run(["wc", "-l"], { stdin: big });
      expect(r.stdout.trim()).toBe("50000");
      const bad = await s.run(["ovs-ofctl", "dump-flows", "no-such-bridge"]);
      expect(bad.exitCode).not.toBe(0);
      expect(bad.stderr).toMatch(/no-such-bridge/);
    } finally {
      s.close();
    }
  });

  it("reuses one connection for many commands and reaches the host's OVS only through the run directory it names", async () => {
    const s = await SshSession.connect(sshTo(inv, "hv1"));
    try {
      const outs = await Promise.all(Array.from({ length: 10 }, () => s.run(["env", ...runDirEnv(inv.hosts.hv1), "ovs-vsctl", "br-exists", "br-seg"])));
      expect(outs.every((o) => o.exitCode === 0)).toBe(true);
      // sshd sets no environment: a command that does not name the run directory finds no daemon.
      const plain = await s.run(["ovs-vsctl", "br-exists", "br-seg"]);
      expect(plain.exitCode).not.toBe(0);
      const sshdConnections = await s.run(["sh", "-c", "ss -tn state established '( sport = :22 )' | tail -n +2 | wc -l"]);
      expect(Number(sshdConnections.stdout.trim())).toBe(1);
    } finally {
      s.close();
    }
  });

  it("refuses a wrong host key, naming the host", async () => {
    const other = inv.hosts.gw2.hostKey;
    const conn = sshTo(inv, "gw1", { hostKey: other });
    const err = await SshSession.connect(conn).catch((e) => e);
    expect(err).toBeInstanceOf(HostKeyMismatchError);
    expect(err.message).toContain(`root@${inv.hosts.gw1.address}:22`);
    expect(err.message).toMatch(/host key verification failed/);
  });

  it("verifies against known_hosts lines, plain and hashed, and refuses a host absent from them", async () => {
    const knownHosts = readFileSync(inv.knownHostsPath, "utf8");
    const ok = await SshSession.connect(sshTo(inv, "hv2", { hostKey: undefined, knownHosts }));
    ok.close();

    const dir = mkdtempSync(join(tmpdir(), "ovslb-kh-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const hashedPath = join(dir, "known_hosts");
    execFileSync("cp", [inv.knownHostsPath, hashedPath]);
    execFileSync("ssh-keygen", ["-H", "-f", hashedPath], { stdio: "ignore" });
    const hashed = readFileSync(hashedPath, "utf8");
    expect(hashed).toMatch(/^\|1\|/m);
    const ok2 = await SshSession.connect(sshTo(inv, "hv3", { hostKey: undefined, knownHosts: hashed }));
    ok2.close();

    // A known_hosts with only gw2's line has nothing for gw1.
    const onlyGw2 = `${inv.hosts.gw2.address} ${inv.hosts.gw2.hostKey}\n`;
    await expect(SshSession.connect(sshTo(inv, "gw1", { hostKey: undefined, knownHosts: onlyGw2 }))).rejects.toThrow(/no host key to verify against/);
    // gw1's address with gw2's key: presented key does not match.
    const wrong = `${inv.hosts.gw1.address} ${inv.hosts.gw2.hostKey}\n`;
    await expect(SshSession.connect(sshTo(inv, "gw1", { hostKey: undefined, knownHosts: wrong }))).rejects.toBeInstanceOf(HostKeyMismatchError);
  });

  it("uses a passphrase-protected key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ovslb-key-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const key = join(dir, "id");
    // Re-encrypt a copy of the lab client key with a passphrase (same public key, so sshd accepts it).
    execFileSync("cp", [inv.clientKeyPath, key]);
    execFileSync("ssh-keygen", ["-p", "-q", "-f", key, "-N", "s3cret-pass", "-P", ""]);
    const s = await SshSession.connect(sshTo(inv, "gw2", { privateKeyPath: undefined, privateKey: readFileSync(key, "utf8"), passphrase: "s3cret-pass" }));
    s.close();
    const err = await SshSession.connect(sshTo(inv, "gw2", { privateKeyPath: undefined, privateKey: readFileSync(key, "utf8") })).catch((e) => e);
    expect(err.message).toMatch(new RegExp(`gw2|${inv.hosts.gw2.address.replaceAll(".", "\\.")}`));
    expect(err.message).not.toContain("BEGIN OPENSSH");
  });

  it("reaches a host through a jump host, verifying both keys", async () => {
    const jumpHost = sshTo(inv, "gw1");
    const s = await SshSession.connect(sshTo(inv, "hv3", { jumpHost }));
    try {
      const r = await s.run(["env", ...runDirEnv(inv.hosts.hv3), "ovs-vsctl", "get", "bridge", "br-seg", "other_config:hwaddr"]);
      expect(r.stdout.trim()).toBe(`"${inv.hosts.hv3.segment!.mac}"`);
    } finally {
      s.close();
    }
    const badJump = sshTo(inv, "gw1", { hostKey: inv.hosts.hv1.hostKey });
    await expect(SshSession.connect(sshTo(inv, "hv3", { jumpHost: badJump }))).rejects.toBeInstanceOf(HostKeyMismatchError);
  });

  it("times out a command and a connect", async () => {
    const s = await SshSession.connect(sshTo(inv, "gw1"));
    try {
      await expect(s.run(["sleep", "5"], { timeoutMs: 300 })).rejects.toThrow(/sleep timed out after 300 ms/);
    } finally {
      s.close();
    }
    // An address on the management network that nothing answers.
    const started = Date.now();
    await expect(SshSession.connect({ ...sshTo(inv, "gw1"), host: MGMT_UNUSED, connectTimeoutMs: 500 })).rejects.toThrow(
      new RegExp(`${MGMT_UNUSED.replaceAll(".", "\\.")}:22: connect failed`),
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("opens a stream-local channel to the host's db.sock", async () => {
    const s = await SshSession.connect(sshTo(inv, "hv1"));
    try {
      const stream = await s.openUnixStream(inv.hosts.hv1.dbSock!);
      const reply = await new Promise<string>((resolve) => {
        let buf = "";
        stream.on("data", (d: Buffer) => {
          buf += d.toString();
          if (buf.includes("}")) resolve(buf);
        });
        stream.write(JSON.stringify({ id: 1, method: "list_dbs", params: [] }));
      });
      expect(JSON.parse(reply).result).toContain("Open_vSwitch");
      stream.destroy();
    } finally {
      s.close();
    }
  });

  it("works on many hosts with bounded parallelism and closes every session", async () => {
    const hosts = ["gw1", "gw2", "hv1", "hv2", "hv3", "dist1"];
    let running = 0;
    let peak = 0;
    const names = await withSessions(
      hosts.map((h) => sshTo(inv, h)),
      async (s) => {
        peak = Math.max(peak, ++running);
        const r = await s.run(["cat", "/proc/sys/kernel/hostname"]);
        await new Promise((r) => setTimeout(r, 100));
        running--;
        return r.exitCode;
      },
      2,
    );
    expect(names).toEqual(hosts.map(() => 0));
    expect(peak).toBe(2);
  });

  it("quotes argv so that the remote shell sees literal words", () => {
    expect(quoteArgv(["a", "it's", "$(x)"])).toBe(`'a' 'it'\\''s' '$(x)'`);
    expect(() => quoteArgv(["a\0b"])).toThrow(/NUL/);
  });
});
