import { execFileSync, spawn } from "node:child_process";
import { closeSync, copyFileSync, openSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LabInventory } from "../lab/topology";
import { waitUntil } from "./wait";

/**
 * A host whose Open vSwitch and sshd a real systemd starts, from the unit
 * files a distribution ships (docs/hosts.md is tested on it). systemd 252
 * (this machine's) runs as PID 1 of its own PID, mount, cgroup and UTS
 * namespaces, in a network namespace of the host's own (a veth to this
 * machine, 172.31.N.0/30), with only these units on its unit path
 * (SYSTEMD_UNIT_PATH, systemd(1), a directory of its own bound over
 * /etc/systemd/system): the distribution's ovsdb-server.service
 * and ovs-vswitchd.service (whose ExecStart is this machine's ovs-ctl),
 * Debian's ssh.service, and, when asked, the drop-ins of docs/hosts/. /run,
 * /etc/openvswitch, /var/lib/openvswitch, /var/log/openvswitch and /home are
 * tmpfs of its own and /etc/ssh is a directory of its own (Debian's default
 * sshd_config, the sshd drop-in, a fresh host key), so nothing of this
 * machine's is touched. Its cgroups live under ovslb-TAG in the name=systemd
 * and unified hierarchies, which it sees as its root.
 */
export class SystemdHost {
  readonly namespace: string;
  readonly address: string;
  readonly dir: string;
  private readonly veth: string;
  private readonly cgroup: string;
  /** systemd's pid, in this machine's PID namespace. */
  pid = 0;

  constructor(
    private readonly inv: LabInventory,
    /** Short and unique among concurrent tests. */
    readonly tag: string,
    /** N in 172.31.N.0/30. */
    readonly subnet: number,
    private readonly o: {
      /** The directory holding the distribution's ovsdb-server.service and ovs-vswitchd.service. */
      units: string;
      /** The drop-ins to add (file name in docs/hosts/ -> unit), none for the distribution's units alone. */
      dropIns: Record<string, string>;
      /** sshd_config.d files (name -> text). */
      sshd: Record<string, string>;
      /** The login user and the authorized_keys text of its home. */
      user: string;
      authorizedKeys: string;
    },
  ) {
    this.namespace = `ovslb-sd-${tag}`;
    this.cgroup = `ovslb-sd-${tag}`;
    this.address = `172.31.${subnet}.2`;
    this.veth = `sd${tag}`.slice(0, 15);
    this.dir = join(inv.labDir, "systemd-hosts", tag);
  }

  /** Runs argv inside the host (its mount, PID and network namespaces), as root. */
  exec(argv: string[]): string {
    return execFileSync("nsenter", ["-t", String(this.pid), "-m", "-p", "-n", "-u", "-C", ...argv], { encoding: "utf8" });
  }

  systemctl(...args: string[]): string {
    return this.exec(["systemctl", "--no-pager", ...args]);
  }

  async up(): Promise<this> {
    this.down();
    const units = join(this.dir, "units");
    const etcSsh = join(this.dir, "etc-ssh");
    mkdirSync(units, { recursive: true });
    mkdirSync(join(etcSsh, "sshd_config.d"), { recursive: true });
    for (const unit of ["ovsdb-server.service", "ovs-vswitchd.service"]) copyFileSync(join(this.o.units, unit), join(units, unit));
    copyFileSync("/lib/systemd/system/ssh.service", join(units, "ssh.service"));
    for (const [file, unit] of Object.entries(this.o.dropIns)) {
      mkdirSync(join(units, `${unit}.d`), { recursive: true });
      copyFileSync(join(__dirname, "..", "..", "docs", "hosts", file), join(units, `${unit}.d`, "ovslb.conf"));
    }
    writeFileSync(join(units, "ovslb-host.target"), "[Unit]\nDescription=an ovslb test host\nWants=ovsdb-server.service ovs-vswitchd.service ssh.service\n");
    // Debian's default sshd_config (openssh-server's /usr/share/openssh/sshd_config), as a fresh install has it.
    copyFileSync("/usr/share/openssh/sshd_config", join(etcSsh, "sshd_config"));
    if (existsSync("/etc/ssh/moduli")) copyFileSync("/etc/ssh/moduli", join(etcSsh, "moduli"));
    for (const [name, text] of Object.entries(this.o.sshd)) writeFileSync(join(etcSsh, "sshd_config.d", name), text);
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `ovslb-${this.tag}`, "-f", join(etcSsh, "ssh_host_ed25519_key")]);

    execFileSync("ip", ["netns", "add", this.namespace]);
    execFileSync("ip", ["link", "add", this.veth, "type", "veth", "peer", "name", "mgmt0", "netns", this.namespace]);
    execFileSync("ip", ["addr", "add", `172.31.${this.subnet}.1/30`, "dev", this.veth]);
    execFileSync("ip", ["link", "set", this.veth, "up"]);
    const ns = (argv: string[]) => execFileSync("ip", ["netns", "exec", this.namespace, ...argv]);
    ns(["ip", "addr", "add", `${this.address}/30`, "dev", "mgmt0"]);
    ns(["ip", "link", "set", "mgmt0", "up"]);
    ns(["ip", "link", "set", "lo", "up"]);

    const console = join(this.dir, "console.log");
    const log = openSync(join(this.dir, "boot.log"), "a");
    const child = spawn("sh", ["-c", BOOT, "ovslb-systemd-host", this.cgroup, this.namespace, units, etcSsh, console], {
      detached: true,
      stdio: ["ignore", log, log],
    });
    child.unref();
    closeSync(log);
    await waitUntil(() => this.systemdPid(), {
      what: `systemd of ${this.tag} to start (${join(this.dir, "boot.log")})`,
      timeoutMs: 30_000,
    });
    this.pid = this.systemdPid()!;
    // The login user's home (StrictModes: the user's own, not group- or world-writable).
    const home = `/home/${this.o.user}`;
    this.exec(["install", "-d", "-m", "0700", "-o", this.o.user, "-g", this.o.user, home, `${home}/.ssh`]);
    this.execIn(["sh", "-c", 'cat > "$1" && chown "$2:" "$1" && chmod 600 "$1"', "sh", `${home}/.ssh/authorized_keys`, this.o.user], this.o.authorizedKeys);
    await this.waitActive(["ovsdb-server.service", "ovs-vswitchd.service", "ssh.service"]);
    return this;
  }

  /** exec with standard input. */
  private execIn(argv: string[], input: string): string {
    return execFileSync("nsenter", ["-t", String(this.pid), "-m", "-p", "-n", "-u", "-C", ...argv], { encoding: "utf8", input });
  }

  async waitActive(units: string[]): Promise<void> {
    await waitUntil(
      () => {
        try {
          return this.exec(["systemctl", "is-active", ...units])
            .trim()
            .split("\n")
            .every((s) => s === "active");
        } catch {
          // is-active exits non-zero while a unit is not active yet.
          return false;
        }
      },
      { what: `${units.join(", ")} active on ${this.tag}`, timeoutMs: 60_000 },
    );
  }

  private systemdPid(): number | undefined {
    const procs = join("/sys/fs/cgroup/systemd", this.cgroup, "init.scope", "cgroup.procs");
    if (!existsSync(procs)) return undefined;
    const pid = Number(readFileSync(procs, "utf8").trim().split("\n")[0]);
    return pid > 0 ? pid : undefined;
  }

  /** Ends its systemd (and with it its PID namespace: every process of the host), removes its namespace, cgroups and files. */
  down(): void {
    const pid = this.pid || this.systemdPid();
    if (pid) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
      const deadline = Date.now() + 10_000;
      while (existsSync(`/proc/${pid}`) && Date.now() < deadline) execFileSync("sleep", ["0.05"]);
    }
    this.pid = 0;
    for (const h of ["systemd", "unified"]) removeCgroup(join("/sys/fs/cgroup", h, this.cgroup));
    if (existsSync(`/run/netns/${this.namespace}`)) execFileSync("ip", ["netns", "del", this.namespace]);
    try {
      execFileSync("ip", ["link", "del", this.veth], { stdio: "ignore" });
    } catch {
      /* went with the namespace */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Removes a cgroup and its children, deepest first (each must be empty of processes by then). */
function removeCgroup(path: string): void {
  if (!existsSync(path)) return;
  for (const entry of readdirSync(path, { withFileTypes: true })) if (entry.isDirectory()) removeCgroup(join(path, entry.name));
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      rmdirSync(path);
      return;
    } catch (e) {
      // The kernel frees a cgroup a moment after its last process is reaped.
      if (Date.now() > deadline) throw e;
      execFileSync("sleep", ["0.05"]);
    }
  }
}

/**
 * Boots the host's systemd. Fixed text; its arguments are $1 the cgroup, $2
 * the network namespace, $3 the unit directory, $4 the /etc/ssh directory,
 * $5 the file bound over /dev/console (systemd's log).
 */
const BOOT = `set -e
for h in systemd unified; do mkdir -p "/sys/fs/cgroup/$h/$1"; echo $$ > "/sys/fs/cgroup/$h/$1/cgroup.procs"; done
touch "$5"
exec ip netns exec "$2" unshare --cgroup --pid --fork --mount --uts --propagation private sh -c '
set -e
mount -t proc proc /proc
mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup
mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
mount --bind "$1" /etc/systemd/system
mount --bind "$2" /etc/ssh
mount --bind "$3" /dev/console
for d in /run /etc/openvswitch /var/lib/openvswitch /var/log/openvswitch /home; do mkdir -p "$d"; mount -t tmpfs -o mode=0755 tmpfs "$d"; done
export SYSTEMD_UNIT_PATH=/etc/systemd/system container=ovslb
exec /lib/systemd/systemd --system --unit=ovslb-host.target --log-target=console --show-status=no
' sh "$3" "$4" "$5"`;
