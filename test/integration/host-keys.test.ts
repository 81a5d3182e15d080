import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { handle } from "../../provider/handlers";
import { SshSession } from "../../provider/transport/ssh";
import { isAlive, sshdCommand } from "../lab/lab";
import type { LabInventory } from "../lab/topology";
import { inNamespace, labSsh, loadInventory, sshTo } from "../support/lab";

/**
 * Host keys through the provider (issue 13; the transport's own cases are in
 * ssh.test.ts and known-hosts.test.ts): a mismatched pin, a host that
 * knownHosts does not name, and a downgrade (a server at the pinned address
 * and port that offers only a weaker key type than the pinned ed25519 one:
 * a second sshd of this test's own, in a lab host's namespace) are all
 * refused before anything on the host changes, with an error naming the host
 * and why.
 */

const BRIDGE = "br-hostkeys";
const PORT = 2222;
let inv: LabInventory;
let dir: string;
let pidFile: string;

beforeAll(() => {
  inv = loadInventory();
  dir = mkdtempSync(join(tmpdir(), "ovslb-hostkeys-"));
  pidFile = join(dir, "sshd.pid");
  for (const type of ["ed25519", "rsa", "ecdsa"]) {
    execFileSync("ssh-keygen", ["-q", "-t", type, "-N", "", "-C", "", "-f", join(dir, `host_${type}`)]);
  }
});

/** The sshd and every session it serves (its descendants): a connection open to the old server ends with it. */
function stopSshd() {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").trim());
  const parents = new Map<number, number>();
  for (const p of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      parents.set(Number(p), Number(readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")[1]));
    } catch {
      /* exited */
    }
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  for (const p of tree) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  for (const p of tree) for (let i = 0; i < 100 && isAlive(p); i++) execFileSync("sleep", ["0.05"]);
  rmSync(pidFile, { force: true });
}

afterAll(async () => {
  stopSshd();
  const s = await labSsh(inv, "hv1");
  await s.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]).finally(() => s.close());
  rmSync(dir, { recursive: true, force: true });
});

/** This test's own sshd at hv1's address, port 2222, presenting only the given host key types. */
function startSshd(types: string[]) {
  stopSshd();
  const h = inv.hosts.hv1;
  const config = [
    `ListenAddress ${h.address}`,
    `Port ${PORT}`,
    ...types.map((t) => `HostKey ${join(dir, `host_${t}`)}`),
    `PidFile ${pidFile}`,
    `AuthorizedKeysFile ${join(inv.labDir, "authorized_keys")}`,
    "AllowUsers root",
    "PermitRootLogin prohibit-password",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "StrictModes no",
    "AllowStreamLocalForwarding yes",
    "",
  ].join("\n");
  writeFileSync(join(dir, "sshd_config"), config);
  inNamespace(h.namespace, sshdCommand(join(dir, "sshd_config"), join(dir, "sshd.log")));
  for (let i = 0; i < 100 && !existsSync(pidFile); i++) execFileSync("sleep", ["0.05"]);
}

const publicKey = (type: string) =>
  readFileSync(join(dir, `host_${type}.pub`), "utf8")
    .trim()
    .split(" ")
    .slice(0, 2)
    .join(" ");

/** OvsBridge inputs for hv1 with this connection. */
const bridgeOn = (connection: object) => ({ host: { connection, ovsRundir: inv.hosts.hv1.ovsRundir! }, name: BRIDGE });

async function bridges(): Promise<string> {
  const s = await labSsh(inv, "hv1");
  try {
    return (await s.run(["ovs-vsctl", "list-br"])).stdout;
  } finally {
    s.close();
  }
}

describe("host keys through the provider", () => {
  it("a pin that does not match the host's key is refused, naming the host and why", async () => {
    const h = inv.hosts.hv1;
    const conn = sshTo(inv, "hv1", { hostKey: inv.hosts.hv2.hostKey });
    await expect(handle("OvsBridge", "create", [bridgeOn(conn)])).rejects.toThrow(
      `root@${h.address}:22: host key verification failed: the key the host presented is not the pinned or known key; refusing to connect`,
    );
    // The same through knownHosts: the host's name with another host's key.
    const knownHosts = `${h.address} ${inv.hosts.hv2.hostKey}\n`;
    await expect(handle("OvsBridge", "create", [bridgeOn(sshTo(inv, "hv1", { hostKey: undefined, knownHosts }))])).rejects.toThrow(
      /host key verification failed/,
    );
    expect(await bridges()).not.toContain(BRIDGE);
  });

  it("a host that knownHosts does not name is refused before connecting, naming the host", async () => {
    const h = inv.hosts.hv1;
    // Every lab host but hv1, and hv1's key under another port.
    const knownHosts =
      readFileSync(inv.knownHostsPath, "utf8")
        .split("\n")
        .filter((l) => !l.startsWith(`${h.address} `))
        .join("\n") + `\n[${h.address}]:2200 ${h.hostKey}\n`;
    await expect(handle("OvsBridge", "create", [bridgeOn(sshTo(inv, "hv1", { hostKey: undefined, knownHosts }))])).rejects.toThrow(
      `root@${h.address}:22: no host key to verify against: give hostKey or a knownHosts line for this host`,
    );
    expect(await bridges()).not.toContain(BRIDGE);
  });

  it("a server at the pinned address and port offering only a weaker key type than the pinned ed25519 one is refused", async () => {
    const h = inv.hosts.hv1;
    const knownHosts = `[${h.address}]:${PORT} ${publicKey("ed25519")}\n`;
    const conn = { ...sshTo(inv, "hv1", { hostKey: undefined, knownHosts }), port: PORT };
    // The pin is right: with its ed25519 key the server is accepted (so the refusals below are the key type's doing).
    startSshd(["ed25519", "rsa"]);
    const ok = await SshSession.connect(conn);
    expect((await ok.run(["true"])).exitCode).toBe(0);
    ok.close();
    for (const weaker of ["rsa", "ecdsa"]) {
      startSshd([weaker]);
      await expect(handle("OvsBridge", "create", [bridgeOn(conn)]), weaker).rejects.toThrow(
        new RegExp(
          `^ovs-bridge/\\S+: no host was changed: root@${h.address.replace(/\./g, "\\.")}:${PORT}: host key verification failed: the host offers no key of the pinned or known types \\(ssh-ed25519\\)`,
        ),
      );
      // Pinned by hostKey rather than knownHosts: the same.
      await expect(SshSession.connect({ ...conn, knownHosts: undefined, hostKey: publicKey("ed25519") })).rejects.toThrow(
        /offers no key of the pinned or known types/,
      );
    }
    expect(await bridges()).not.toContain(BRIDGE);
  });
});
