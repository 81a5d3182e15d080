import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type StackConfig } from "../lab/stack-config";
import type { LabInventory } from "../lab/topology";
import { asLists, handle } from "../../provider/handlers";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import { FaultHost } from "../support/fault-host";
import { cliJson, doctor, DOCTOR_BIN, row, type Doctor } from "../support/doctor";
import { loadInventory } from "../support/lab";

/**
 * `ovslb doctor` (issue 19) as a user runs it: the package's bin, the stack
 * config piped in the form `pulumi config --json --show-secrets` prints.
 * (doctor-lab.test.ts runs it on the healthy lab.) On hosts of this test's own, each with one fault (sshd refusing forwarding, sockets the
 * login user cannot use, a bridge without OpenFlow 1.5, a 1500-byte
 * underlay under gre, a host key not pinned or not the pinned one, a key
 * whose authorized_keys line says `restrict`), it names
 * the fault and its fix and exits 1. No secret of the config is ever
 * printed.
 */

const USER = "ovslb-dr";

/** sshd as hardened hosts have it: no forwarding of any kind. */
class NoForwardingHost extends FaultHost {
  protected override sshdExtra(): string[] {
    return ["DisableForwarding yes"];
  }
}

/** An sshd that lets in only an unprivileged user, who is in no OVS group. */
class UnprivilegedHost extends FaultHost {
  protected override readonly sshUser = USER;
  // The lab's own authorized_keys: the user reads it itself.
  override get authorizedKeysFile(): string {
    return join(loadInventory().labDir, "authorized_keys");
  }
}

let inv: LabInventory;
let scratch: string;
let noForwarding: NoForwardingHost;
let unprivileged: UnprivilegedHost;
let oldOpenFlow: FaultHost;
let smallUnderlay: FaultHost;
let restrictedKey: FaultHost;

const run = (argv: string[]) => execFileSync(argv[0], argv.slice(1), { encoding: "utf8" });
const userExists = () => spawnSync("id", [USER]).status === 0;

const faultConfig = (hosts: Record<string, unknown>, extra: StackConfig = {}): StackConfig => ({
  "ovslb:ssh": { user: "root", privateKeyPath: inv.clientKeyPath, connectTimeoutMs: 5000 },
  "ovslb:hosts": hosts,
  ...extra,
});

const hostOf = (h: FaultHost, extra: Record<string, unknown> = {}) => ({
  connection: { host: h.address, hostKey: inv.hosts.gw1.hostKey, ...extra },
  ovsRundir: h.rundir,
});

beforeAll(async () => {
  inv = loadInventory();
  scratch = mkdtempSync(join(tmpdir(), "ovslb-doctor-"));
  if (userExists()) run(["userdel", USER]);
  run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", USER]);
  // No password, but not locked: sshd refuses a locked account even for key logins.
  run(["usermod", "--password", "*", USER]);
  [noForwarding, unprivileged, oldOpenFlow, smallUnderlay, restrictedKey] = await Promise.all([
    new NoForwardingHost(inv, "drfwd", 231).up(),
    new UnprivilegedHost(inv, "drperm", 232).up(),
    new FaultHost(inv, "drof", 233).up(),
    new FaultHost(inv, "drmtu", 234).up(),
    new FaultHost(inv, "drkey", 235).up(),
  ]);
  // The key's line restricted as hardening guides write it (sshd(8), AUTHORIZED_KEYS FILE FORMAT); sshd reads it at each login.
  restrictedKey.authorize([`restrict ${inv.clientPublicKey}`]);
  // The user may enter the run directory, but its sockets are root's alone (no group, as OVS makes them under umask 022).
  chmodSync(unprivileged.dir, 0o755);
  chmodSync(unprivileged.rundir, 0o755);
  oldOpenFlow.vsctl("set", "bridge", oldOpenFlow.bridge, "protocols=OpenFlow10,OpenFlow13");
});

afterAll(() => {
  closeIdleSshConnections();
  for (const h of [noForwarding, unprivileged, oldOpenFlow, smallUnderlay, restrictedKey]) h?.down();
  if (userExists()) run(["userdel", USER]);
  rmSync(scratch, { recursive: true, force: true });
});

describe("ovslb doctor on faulty hosts: each fault named with its fix, exit 1", () => {
  let d: Doctor;

  beforeAll(() => {
    const config = faultConfig(
      {
        "no-forwarding": hostOf(noForwarding),
        "no-access": { ...hostOf(unprivileged, { user: USER }) },
        "old-openflow": hostOf(oldOpenFlow),
        "small-underlay": hostOf(smallUnderlay),
        "not-pinned": { connection: { host: oldOpenFlow.address }, ovsRundir: oldOpenFlow.rundir },
        "other-key": hostOf(oldOpenFlow, { hostKey: inv.hosts.gw2.hostKey }),
        "restricted-key": hostOf(restrictedKey),
      },
      // The program's own config: small-underlay delivers by gre from its management address (mgmt0, MTU 1500).
      { "doctor-test:hypervisors": [{ name: "small-underlay", tunnelAddress: smallUnderlay.address }] },
    );
    d = doctor(cliJson(config));
  });

  it("exits 1, and every faulty host has its FAIL", () => {
    expect(d.stderr).toBe("");
    expect(d.status).toBe(1);
    const failing = new Set(d.checks.filter((c) => c.status === "FAIL").map((c) => c.host));
    expect([...failing].sort()).toEqual(["no-access", "no-forwarding", "not-pinned", "old-openflow", "other-key", "restricted-key", "small-underlay"]);
  });

  it("sshd with DisableForwarding: the channel is refused by sshd's configuration, not by permissions", () => {
    const r = row(d, "no-forwarding", "ovsdb channel")!;
    expect(r.status).toBe("FAIL");
    expect(r.detail).toContain(`sshd refuses the stream-local channel to ${noForwarding.rundir}/db.sock, which the login user may use`);
    expect(r.detail).toContain("not the socket's permissions");
    expect(r.detail).toContain("TCP forwarding is refused too: DisableForwarding yes");
    expect(r.fix).toContain("`AllowStreamLocalForwarding local`, `AllowTcpForwarding local` and `DisableForwarding no`");
    expect(r.detail).not.toMatch(/no permission|may not write/);
    // ovs-vswitchd's socket is refused the same way; its version still comes, by ovs-appctl on the host.
    expect(row(d, "no-forwarding", "socket ovs-vswitchd")?.detail).toMatch(/^sshd refuses the stream-local channel/);
    expect(row(d, "no-forwarding", "ovs version")?.status).toBe("ok");
    expect(row(d, "no-forwarding", "login")?.status).toBe("ok");
  });

  it("a key whose authorized_keys line says restrict: the key's line named, with the fix, not sshd_config and not permissions", () => {
    for (const check of ["ovsdb channel", "socket ovs-vswitchd"]) {
      const r = row(d, "restricted-key", check)!;
      expect(r.status, check).toBe("FAIL");
      expect(r.detail).toMatch(
        /^sshd refuses the stream-local channel to \S+, which the login user may use \(root:root 7\d0\): the key's line in authorized_keys forbids forwarding/,
      );
      // sshd reported the key's options: under restrict, none.
      expect(r.detail).toContain('(restrict or no-port-forwarding; sshd says "key options:"), not the socket\'s permissions');
      expect(r.fix).toBe(
        "on the key's line in ~root/.ssh/authorized_keys write restrict,port-forwarding instead of restrict, or drop no-port-forwarding (sshd(8), AUTHORIZED_KEYS FILE FORMAT; docs/hosts.md)",
      );
    }
    expect(row(d, "restricted-key", "login")?.status).toBe("ok");
    // restrict leaves commands: the version still comes, through ovs-appctl; the bridges need the OVSDB channel.
    expect(row(d, "restricted-key", "ovs version")?.status).toBe("ok");
    expect(row(d, "restricted-key", "bridges")?.status).toBe("skip");
  });

  it("sockets the login user may not write: names the user, its groups, the socket's owner and mode, and the group fix", () => {
    const r = row(d, "no-access", "ovsdb channel")!;
    expect(r.status).toBe("FAIL");
    expect(r.detail).toMatch(
      new RegExp(
        `^cannot open ${unprivileged.rundir}/db.sock: ${USER} \\(groups: ${USER}\\) may not write ${unprivileged.rundir}/db.sock \\(root:root 7[0-5]0\\)$`,
      ),
    );
    expect(r.fix).toContain("add the login user to the group that owns the OVS run directory");
    expect(r.detail).not.toContain("sshd refuses");
    expect(row(d, "no-access", "socket ovs-vswitchd")?.status).toBe("FAIL");
    expect(row(d, "no-access", "login")?.detail).toBe(`logged in as ${USER}`);
  });

  it("a bridge without OpenFlow 1.5: names its protocols and the ovs-vsctl that adds it", () => {
    const r = row(d, "old-openflow", `bridge ${oldOpenFlow.bridge}`)!;
    expect(r.status).toBe("FAIL");
    expect(r.detail).toBe(
      "exists, but does not speak OpenFlow 1.5 (protocols: OpenFlow10,OpenFlow13): ovslb speaks only OpenFlow 1.5 (bundles, select groups, insert_bucket)",
    );
    expect(r.fix).toBe(`ovs-vsctl set bridge ${oldOpenFlow.bridge} protocols=OpenFlow10,OpenFlow13,OpenFlow15`);
    expect(row(d, "old-openflow", `socket ${oldOpenFlow.bridge}.mgmt`)?.status).toBe("ok");
    expect(d.checks.filter((c) => c.host === "old-openflow" && c.status === "FAIL")).toHaveLength(1);
  });

  it("a 1500-byte underlay under gre delivery: below 1500 + 42, with the fix", () => {
    const r = row(d, "small-underlay", "underlay mtu")!;
    expect(r.status).toBe("FAIL");
    expect(r.detail).toContain(
      `mgmt0 (${smallUnderlay.address}) has MTU 1500, below 1542 = the segment's 1500 + 42 of GRE (outer IPv4 20, GRE with key 8, inner Ethernet 14)`,
    );
    expect(r.fix).toContain("raise the underlay MTU to 1542 or more (`ip link set mgmt0 mtu 1542`");
    expect(r.fix).toContain("lower the segment's MTU (or the backends' MSS) to 1458");
    expect(d.checks.filter((c) => c.host === "small-underlay" && c.status === "FAIL")).toHaveLength(1);
  });

  it("a host key not pinned: prints the key's fingerprint and the line to pin; a key not the pinned one is refused; nothing after is tried", () => {
    const presented = inv.hosts.gw1.hostKey.split(" ").slice(0, 2).join(" ");
    const fp = execFileSync("ssh-keygen", ["-lf", "-"], { input: `${presented}\n`, encoding: "utf8" }).split(" ")[1];
    const unpinned = row(d, "not-pinned", "host key")!;
    expect(unpinned.status).toBe("FAIL");
    expect(unpinned.detail).toBe(`no host key is pinned for ${oldOpenFlow.address}; it presents ssh-ed25519 ${fp}`);
    expect(unpinned.fix).toContain(`pulumi config set --path 'ovslb:hosts.not-pinned.connection.hostKey' '${presented}'`);
    expect(unpinned.fix).toContain(`(known_hosts line: ${oldOpenFlow.address} ${presented})`);
    const other = row(d, "other-key", "host key")!;
    expect(other.status).toBe("FAIL");
    expect(other.detail).toContain(`the host presents ssh-ed25519 ${fp}, not the pinned key`);
    for (const h of ["not-pinned", "other-key"]) expect(row(d, h, "login")?.status).toBe("skip");
  });
});

describe("the provider on a host whose key's line forbids forwarding", () => {
  it("an apply fails naming the key's authorized_keys line, not socket permissions; with port-forwarding added after restrict it applies", async () => {
    const inputs = asLists(
      "OvsBridge",
      ((await handle("OvsBridge", "check", [{}, { host: restrictedKey.ovsHost, name: "br-rk" }])) as { inputs: Record<string, unknown> }).inputs,
    );
    for (const options of ["restrict", "no-port-forwarding"]) {
      restrictedKey.authorize([`${options} ${inv.clientPublicKey}`]);
      closeIdleSshConnections();
      const failed = await handle("OvsBridge", "create", [inputs]).then(
        () => undefined,
        (e: Error) => e.message,
      );
      expect(failed, options).toMatch(
        new RegExp(
          `^ovs-bridge/\\S+: no host was changed: root@${restrictedKey.address.replace(/\./g, "\\.")}:22: cannot open ${restrictedKey.rundir}/db\\.sock: `,
        ),
      );
      expect(failed).toContain(
        "sshd refuses channels for this login's key: its authorized_keys line forbids forwarding (restrict or no-port-forwarding; sshd says",
      );
      expect(failed).toContain("on that line write restrict,port-forwarding or drop no-port-forwarding (docs/hosts.md)");
      expect(failed).not.toMatch(/permission on it|write access/);
      expect(restrictedKey.vsctl("list-br")).not.toContain("br-rk");
    }
    // The fix as the message gives it.
    restrictedKey.authorize([`restrict,port-forwarding ${inv.clientPublicKey}`]);
    closeIdleSshConnections();
    const created = (await handle("OvsBridge", "create", [inputs])) as { id: string; outs: Record<string, unknown> };
    expect(restrictedKey.vsctl("list-br")).toContain("br-rk");
    await handle("OvsBridge", "delete", [created.id, created.outs]);
    restrictedKey.authorize([`restrict ${inv.clientPublicKey}`]);
  });
});

describe("ovslb doctor never prints a secret", () => {
  it("a private key given inline and a passphrase stay out of the table and the JSON", () => {
    const keyText = readFileSync(inv.clientKeyPath, "utf8");
    const encrypted = join(scratch, "encrypted_ed25519");
    const passphrase = "doctor-passphrase-s3cret";
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", passphrase, "-C", "", "-f", encrypted]);
    const encryptedText = readFileSync(encrypted, "utf8");
    const config = faultConfig(
      {
        inline: hostOf(oldOpenFlow),
        // The wrong passphrase for a key the host does not know either: the login fails, and says why without it.
        encrypted: hostOf(smallUnderlay, { privateKey: encryptedText, passphrase: "wrong-passphrase-s3cret" }),
      },
      {},
    );
    (config["ovslb:ssh"] as Record<string, unknown>) = { user: "root", privateKey: keyText, passphrase, connectTimeoutMs: 5000 };
    const secrets = [passphrase, "wrong-passphrase-s3cret", ...[keyText, encryptedText].flatMap((k) => k.split("\n").filter((l) => l.length > 20))];
    for (const json of [true, false]) {
      const r = spawnSync(process.execPath, [DOCTOR_BIN, "doctor", ...(json ? ["--json"] : [])], { input: cliJson(config), encoding: "utf8", timeout: 60_000 });
      const out = `${r.stdout}${r.stderr}`;
      expect(out).toMatch(/inline\s+login|"check": "login"/);
      for (const s of secrets) expect(out).not.toContain(s);
    }
    const d = doctor(cliJson(config));
    expect(row(d, "inline", "login")?.status).toBe("ok");
    expect(row(d, "encrypted", "login")?.status).toBe("FAIL");
  });

  it("a secret the CLI was not asked to show (no --show-secrets) is named, not guessed", () => {
    const r = doctor(JSON.stringify({ "ovslb:ssh": { secret: true }, "ovslb:hosts": { value: "{}", objectValue: {}, secret: false } }));
    expect(r.status).toBe(1);
    expect(r.checks[0]).toMatchObject({ host: "(stack)", check: "config", status: "FAIL", detail: "ovslb:ssh is a secret and the JSON holds no value for it" });
    expect(r.checks[0].fix).toContain("pulumi config --json --show-secrets");
  });
});
