import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { DoctorCheck } from "../../provider/doctor/checks";
import { asLists, handle } from "../../provider/handlers";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import { repoRoot } from "../lab/stack-config";
import type { LabInventory } from "../lab/topology";
import { ARCHIVES, cacheDir, debian12Units, debian13Units, ubuntu2204Units, ubuntu2404Units, verifiedRelease, type DistroUnits } from "../support/distro-units";
import { loadInventory } from "../support/lab";
import { SystemdHost } from "../support/systemd-host";

/**
 * docs/hosts.md, for real: the drop-ins of docs/hosts/ merged by a real
 * systemd (252, this machine's, PID 1 of a namespace of its own: see
 * test/support/systemd-host.ts) with the ovsdb-server.service and
 * ovs-vswitchd.service Debian 12, Debian 13 and Ubuntu 24.04 ship (Ubuntu's
 * from noble's newest openvswitch-switch, its archive's signatures checked:
 * test/support/distro-units.ts), which start the real daemons through ovs-ctl; Debian's ssh.service with Debian's default
 * sshd_config and the page's sshd drop-in. After a start and after each kind
 * of restart the run directory is root:ovslb-ovs 2770 and every socket
 * srwxrwx--- root:ovslb-ovs; without the drop-ins it is root:root 0755 and
 * the sockets 0750, which the login user cannot use. On each host, set up as
 * the page says (the group, the user, the pinned key read as the page says),
 * `ovslb doctor` is all green and an OvsBridge and a DsrHypervisorFlows are
 * applied, read and deleted as that user.
 */

const USER = "ovslb";
const GROUP = "ovslb-ovs";
const BIN = join(repoRoot(), "bin", "ovslb.js");
const RUNDIR = "/var/run/openvswitch";
const doc = (file: string) => readFileSync(join(repoRoot(), "docs", "hosts", file), "utf8");
const DROP_INS = { "ovsdb-server.conf": "ovsdb-server.service", "ovs-vswitchd.conf": "ovs-vswitchd.service" };

const run = (argv: string[]) => execFileSync(argv[0], argv.slice(1), { encoding: "utf8" });
const exists = (db: "passwd" | "group", name: string) => spawnSync("getent", [db, name]).status === 0;

function removeAccounts() {
  if (exists("passwd", USER)) run(["userdel", USER]);
  if (exists("group", GROUP)) run(["groupdel", GROUP]);
}

let inv: LabInventory;

beforeAll(() => {
  inv = loadInventory();
  removeAccounts();
  // As docs/hosts.md says (the home is made inside each host, on its own /home).
  run(["groupadd", "--system", GROUP]);
  run(["useradd", "--system", "--shell", "/bin/sh", "--home-dir", `/home/${USER}`, "--no-create-home", "--groups", GROUP, USER]);
  run(["usermod", "--password", "*", USER]);
});

afterAll(() => {
  closeIdleSshConnections();
  removeAccounts();
});

const hostFor = (tag: string, subnet: number, units: DistroUnits, dropIns: boolean) =>
  new SystemdHost(inv, tag, subnet, {
    units: units.dir,
    dropIns: dropIns ? DROP_INS : {},
    sshd: { "ovslb.conf": doc("sshd-ovslb.conf") },
    user: USER,
    authorizedKeys: `${inv.clientPublicKey}\n`,
  });

/** `stat` of the run directory and of each socket in it, inside the host: "mode user:group name". */
function runDirModes(h: SystemdHost): string[] {
  const out = h.exec(["sh", "-c", 'cd "$1" && stat -c "%a %U:%G %n" . *.sock *.ctl', "sh", RUNDIR]);
  return out.trim().split("\n").sort();
}

function expectGroupOwned(h: SystemdHost): void {
  const modes = runDirModes(h);
  expect(modes).toContain(`2770 root:${GROUP} .`);
  const sockets = modes.filter((m) => !m.endsWith(" ."));
  // db.sock, ovsdb-server's and ovs-vswitchd's control sockets at least.
  expect(sockets.length).toBeGreaterThanOrEqual(3);
  for (const s of sockets) expect(s).toMatch(new RegExp(`^770 root:${GROUP} `));
}

/** The daemons' pids, from their pid files. */
const daemonPids = (h: SystemdHost) =>
  h
    .exec(["cat", `${RUNDIR}/ovsdb-server.pid`, `${RUNDIR}/ovs-vswitchd.pid`])
    .trim()
    .split("\n");

interface Doctor {
  status: number | null;
  checks: DoctorCheck[];
  stderr: string;
}

function doctor(h: SystemdHost, hostKey: string, bridge?: string): Doctor {
  const args = [
    "doctor",
    "--json",
    "--host",
    `${USER}@${h.address}`,
    "--host-key",
    hostKey,
    "--key",
    inv.clientKeyPath,
    ...(bridge ? ["--bridge", bridge] : []),
  ];
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 90_000 });
  let checks: DoctorCheck[] = [];
  try {
    checks = (JSON.parse(r.stdout) as { checks: DoctorCheck[] }).checks;
  } catch {
    /* the assertions say what came */
  }
  return { status: r.status, checks, stderr: r.stderr };
}

async function checked(kind: string, inputs: Record<string, unknown>) {
  const r = (await handle(kind, "check", [{}, inputs])) as { inputs: Record<string, unknown>; failures: unknown[] };
  expect(r.failures).toEqual([]);
  return asLists(kind, r.inputs);
}

/** Tag, units, and the subnets of the hosts with and without the drop-ins. */
const distributions: [string, () => DistroUnits, number, number][] = [
  ["d12", debian12Units, 241, 243],
  ["d13", debian13Units, 242, 244],
  ["u2404", ubuntu2404Units, 251, 252],
];

describe.each(distributions)("docs/hosts.md on %s's units", (tag, units, subnet) => {
  let host: SystemdHost;
  let hostKey: string;

  beforeAll(async () => {
    host = hostFor(tag, subnet, units(), true);
    await host.up();
    // The page's way to read the key to pin, on the host.
    hostKey = host.exec(["cut", "-d", " ", "-f1,2", "/etc/ssh/ssh_host_ed25519_key.pub"]).trim();
  });

  afterAll(() => {
    closeIdleSshConnections();
    host?.down();
  });

  it("systemd merges the drop-ins with the distribution's units", () => {
    const show = (unit: string, props: string[]) =>
      host
        .systemctl("show", unit, ...props.map((p) => `--property=${p}`))
        .trim()
        .split("\n")
        .sort();
    expect(show("ovsdb-server.service", ["RuntimeDirectory", "RuntimeDirectoryMode", "RuntimeDirectoryPreserve", "Group", "UMask"])).toEqual(
      [`Group=${GROUP}`, "RuntimeDirectory=openvswitch", "RuntimeDirectoryMode=2770", "RuntimeDirectoryPreserve=yes", "UMask=0007"].sort(),
    );
    expect(show("ovs-vswitchd.service", ["UMask"])).toEqual(["UMask=0007"]);
    for (const unit of ["ovsdb-server.service", "ovs-vswitchd.service"]) expect(host.systemctl("show", unit, "--property=DropInPaths")).toMatch(/ovslb\.conf/);
    // The daemons run with that umask (and ovsdb-server with the group), as systemd.exec(5) says.
    const [dbPid, vsPid] = daemonPids(host);
    const status = (pid: string) => host.exec(["cat", `/proc/${pid}/status`]);
    const gid = run(["getent", "group", GROUP]).split(":")[2];
    expect(status(dbPid)).toMatch(/^Umask:\t0007$/m);
    expect(status(dbPid)).toMatch(new RegExp(`^Gid:\\t${gid}\\t`, "m"));
    expect(status(vsPid)).toMatch(/^Umask:\t0007$/m);
  });

  it("after a start the run directory is the group's (setgid, 2770) and every socket srwxrwx--- root:ovslb-ovs", () => {
    expectGroupOwned(host);
  });

  it("and after restarting ovsdb-server, ovs-vswitchd alone, and stopping and starting both", async () => {
    const steps: [string, () => void][] = [
      ["restart ovsdb-server", () => host.systemctl("restart", "ovsdb-server.service")],
      ["restart ovs-vswitchd", () => host.systemctl("restart", "ovs-vswitchd.service")],
      [
        "stop both, start both",
        () => (host.systemctl("stop", "ovs-vswitchd.service", "ovsdb-server.service"), host.systemctl("start", "ovs-vswitchd.service")),
      ],
    ];
    for (const [what, step] of steps) {
      const before = daemonPids(host);
      step();
      await host.waitActive(["ovsdb-server.service", "ovs-vswitchd.service"]);
      const after = daemonPids(host);
      expect(after, what).not.toEqual(before);
      expectGroupOwned(host);
    }
  });

  it("sshd (Debian's default sshd_config with the page's drop-in) allows the ovslb user stream-local channels and nothing else, and changes no other user", () => {
    const effective = (user: string) =>
      Object.fromEntries(
        host
          .exec(["sshd", "-T", "-C", `user=${user},host=client,addr=172.31.${subnet}.1`])
          .trim()
          .split("\n")
          .map((l) => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)]),
      );
    expect(effective(USER)).toMatchObject({
      authenticationmethods: "publickey",
      passwordauthentication: "no",
      kbdinteractiveauthentication: "no",
      disableforwarding: "no",
      allowstreamlocalforwarding: "local",
      allowtcpforwarding: "local",
      allowagentforwarding: "no",
      x11forwarding: "no",
      permittunnel: "no",
      permittty: "no",
      permituserrc: "no",
    });
    // Debian's own defaults for everyone else.
    expect(effective("root")).toMatchObject({ allowstreamlocalforwarding: "yes", allowtcpforwarding: "yes", x11forwarding: "yes" });
  });

  it("ovslb doctor, as the ovslb user with the key read as the page says: every check green", async () => {
    // A bridge and a VM port, as an administrator (or an OvsBridge resource) makes them.
    host.exec(["ovs-vsctl", "--timeout=10", "add-br", "br-hosts", "--", "set", "bridge", "br-hosts", "datapath_type=netdev"]);
    host.exec(["ovs-vsctl", "--timeout=10", "add-port", "br-hosts", "vm0", "--", "set", "interface", "vm0", "type=internal"]);
    const d = doctor(host, hostKey, "br-hosts");
    expect(d.stderr).toBe("");
    expect(d.checks.filter((c) => c.status !== "ok" && c.status !== "skip")).toEqual([]);
    for (const check of ["host key", "login", "ovsdb channel", "socket ovs-vswitchd", "socket br-hosts.mgmt", "bridge br-hosts", "conntrack"]) {
      expect(d.checks.find((c) => c.check === check)?.status, check).toBe("ok");
    }
    expect(d.status).toBe(0);
  });

  it("an apply as the ovslb user: OvsBridge and DsrHypervisorFlows created, read and deleted", async () => {
    const ovsHost = { connection: { host: host.address, user: USER, hostKey, privateKeyPath: inv.clientKeyPath, connectTimeoutMs: 5000 } };
    const bridge = await checked("OvsBridge", { host: ovsHost, name: "br-apply", externalIds: { via: "hosts" } });
    const br = (await handle("OvsBridge", "create", [bridge])) as { id: string; outs: Record<string, any> };
    expect(host.exec(["ovs-vsctl", "--timeout=10", "list-br"])).toContain("br-apply");
    // Its management socket, made after the start, is the group's too (setgid directory, umask 0007).
    expect(host.exec(["stat", "-c", "%a %U:%G", `${RUNDIR}/br-apply.mgmt`]).trim()).toBe(`770 root:${GROUP}`);
    const flows = await checked("DsrHypervisorFlows", {
      name: "hosts",
      host: ovsHost,
      bridge: "br-hosts",
      vips: [{ address: "10.0.0.150", port: 80, backends: [{ address: "10.0.0.151", port: 8080, mac: "02:00:0a:00:00:97", bridgePort: "vm0" }] }],
    });
    const created = (await handle("DsrHypervisorFlows", "create", [flows])) as { id: string; outs: Record<string, any> };
    expect(created.outs.lastApply.messages).toBeGreaterThan(0);
    expect(host.exec(["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-hosts"])).toContain("nw_dst=10.0.0.150");
    const read = (await handle("DsrHypervisorFlows", "read", [created.id, created.outs])) as { id: string; props: Record<string, any> };
    expect(read.id).toBe(created.id);
    await handle("DsrHypervisorFlows", "delete", [created.id, read.props]);
    expect(host.exec(["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-hosts"])).not.toContain("nw_dst=10.0.0.150");
    await handle("OvsBridge", "delete", [br.id, br.outs]);
    expect(host.exec(["ovs-vsctl", "--timeout=10", "list-br"])).not.toContain("br-apply");
  });
});

describe.each(distributions)("%s's units without the drop-ins", (tag, units, _subnet, subnet) => {
  let host: SystemdHost;

  beforeAll(async () => {
    host = hostFor(`${tag}x`, subnet, units(), false);
    await host.up();
  });

  afterAll(() => {
    closeIdleSshConnections();
    host?.down();
  });

  it("leave the run directory root:root 0755 and the sockets 0750: the ovslb user cannot use them, and doctor says so", () => {
    const modes = runDirModes(host);
    expect(modes).toContain("755 root:root .");
    for (const s of modes.filter((m) => !m.endsWith(" ."))) expect(s).toMatch(/^750 root:root /);
    const hostKey = host.exec(["cut", "-d", " ", "-f1,2", "/etc/ssh/ssh_host_ed25519_key.pub"]).trim();
    const d = doctor(host, hostKey);
    expect(d.status).toBe(1);
    const channel = d.checks.find((c) => c.check === "ovsdb channel");
    expect(channel?.status).toBe("FAIL");
    expect(channel?.detail).toMatch(new RegExp(`${USER} \\(groups: [^)]*${GROUP}[^)]*\\) may not write ${RUNDIR}/db\\.sock \\(root:root 750\\)`));
  });
});

describe("Ubuntu's archive", () => {
  it("an InRelease whose signed text was changed, or another suite's, is refused", () => {
    ubuntu2404Units();
    const archive = ARCHIVES.ubuntu2404;
    const file = join(cacheDir(archive), "noble-updates.InRelease");
    expect(readdirSync(cacheDir(archive)), `${file} cached with the package`).toContain("noble-updates.InRelease");
    const signed = readFileSync(file, "utf8");
    expect(verifiedRelease(Buffer.from(signed), archive, "noble-updates")).toMatch(/^Suite: noble-updates$/m);
    // One digit of the first SHA256 line changed: the signature no longer covers the text.
    const line = /^SHA256:\n ([0-9a-f])/m.exec(signed)!;
    const at = line.index + line[0].length - 1;
    const tampered = signed.slice(0, at) + (line[1] === "0" ? "1" : "0") + signed.slice(at + 1);
    expect(() => verifiedRelease(Buffer.from(tampered), archive, "noble-updates")).toThrow(
      /noble-updates InRelease does not verify against .*ubuntu-archive-keyring\.gpg/,
    );
    expect(() => verifiedRelease(Buffer.from(signed), archive, "noble-security")).toThrow(/is signed but names suite noble-updates .*not noble-security/);
  });

  it("Ubuntu 22.04's units differ from 24.04's only in After= and OOMScoreAdjust, none of which the drop-ins touch", () => {
    const [jammy, noble] = [ubuntu2204Units(), ubuntu2404Units()];
    const lines = (u: DistroUnits, unit: string) => readFileSync(join(u.dir, unit), "utf8").split("\n");
    const only = (a: string[], b: string[]) => a.filter((l) => !b.includes(l));
    const diff = (unit: string) => ({ noble: only(lines(noble, unit), lines(jammy, unit)), jammy: only(lines(jammy, unit), lines(noble, unit)) });
    expect(diff("ovsdb-server.service")).toEqual({
      noble: ["After=systemd-journald.socket network-pre.target dpdk.service local-fs.target", "OOMScoreAdjust=-900"],
      jammy: ["After=syslog.target network-pre.target dpdk.service local-fs.target"],
    });
    expect(diff("ovs-vswitchd.service")).toEqual({ noble: ["OOMScoreAdjust=-900"], jammy: [] });
  });
});
