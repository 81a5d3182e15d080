import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive, sshdCommand, sshdConfig, vswitchdCommand } from "../lab/lab";
import { type HostRoot, inHostArgv, mountRoot } from "../lab/root";
import type { LabInventory } from "../lab/topology";
import type { OvsHost } from "../../provider/model/inputs.generated";
import type { SshConnection } from "../../provider/transport/ssh";
import { waitUntil } from "./wait";

/**
 * A host of a test's own for fault tests: its own network namespace (a veth
 * to this machine, 172.31.N.0/30), its own sshd, ovsdb-server and userspace
 * ovs-vswitchd, and a bridge with one internal port. A test can kill, stop
 * or restart any of its daemons without touching the lab's shared hosts.
 * The sshd presents gw1's host key (pinned as the lab pins it).
 *
 * With `root` (a root such as tools/distro-root.sh builds), its
 * daemons, its sshd and every command run in it are that root's, chrooted
 * (test/lab/root.ts): another Open vSwitch than this machine's.
 */
export class FaultHost {
  readonly namespace: string;
  readonly address: string;
  readonly dir: string;
  readonly rundir: string;
  readonly bridge = "br-flt";
  /** The one user its sshd lets in. */
  protected readonly sshUser: string = "root";
  readonly segmentPort = "fseg0";
  private readonly veth: string;

  constructor(
    private readonly inv: LabInventory,
    /** Short and unique among concurrent tests: names the namespace and the veth. */
    readonly tag: string,
    /** N in 172.31.N.0/30: unique among concurrent tests. */
    readonly subnet: number,
    private readonly opts: { root?: string } = {},
  ) {
    this.namespace = `ovslb-flt-${tag}`;
    this.address = `172.31.${subnet}.2`;
    this.veth = `flt${tag}`.slice(0, 15);
    this.dir = join(inv.labDir, "faults", tag);
    this.rundir = join(this.dir, "run");
  }

  get connection(): SshConnection {
    return { host: this.address, port: 22, user: "root", hostKey: this.inv.hosts.gw1.hostKey, privateKeyPath: this.inv.clientKeyPath };
  }

  get ovsHost(): OvsHost {
    return { connection: this.connection, ovsRundir: this.rundir };
  }

  /** The Debian root its daemons run from, if not this machine's. */
  get root(): string | undefined {
    return this.opts.root;
  }

  private get holderPidFile(): string {
    return join(this.dir, "mounts.pid");
  }

  private get hostRoot(): HostRoot | undefined {
    return this.opts.root ? { path: this.opts.root, holderPidFile: this.holderPidFile } : undefined;
  }

  private ns(argv: string[], input?: string): string {
    const [cmd, ...args] = inHostArgv(this.namespace, this.hostRoot, argv);
    return execFileSync(cmd, args, {
      encoding: "utf8",
      input,
      maxBuffer: 256 * 1024 * 1024,
      env: { ...process.env, OVS_RUNDIR: this.rundir, OVS_DBDIR: this.rundir, OVS_LOGDIR: this.rundir },
    });
  }

  /** ovs-vsctl/ovs-appctl/ovs-ofctl against this host's daemons, run locally in its namespace. */
  vsctl(...args: string[]): string {
    return this.ns(["ovs-vsctl", `--db=unix:${this.rundir}/db.sock`, "--timeout=10", ...args]);
  }
  appctl(...args: string[]): string {
    return this.ns(["ovs-appctl", ...args]);
  }
  ofctl(...args: string[]): string {
    return this.ns(["ovs-ofctl", "-O", "OpenFlow15", ...args]);
  }

  /** Every flow and group of the bridge (no counters): equal dumps mean an unchanged dataplane. */
  dataplane(): string {
    return `${this.ofctl("--no-stats", "--sort", "dump-flows", this.bridge)}${this.ofctl("dump-groups", this.bridge)}`;
  }

  async up(): Promise<this> {
    this.down();
    mkdirSync(this.rundir, { recursive: true });
    execFileSync("ip", ["netns", "add", this.namespace]);
    if (this.hostRoot) mountRoot(this.namespace, this.hostRoot, this.inv.labDir);
    execFileSync("ip", ["link", "add", this.veth, "type", "veth", "peer", "name", "mgmt0", "netns", this.namespace]);
    execFileSync("ip", ["addr", "add", `172.31.${this.subnet}.1/30`, "dev", this.veth]);
    execFileSync("ip", ["link", "set", this.veth, "up"]);
    this.ns(["ip", "addr", "add", `${this.address}/30`, "dev", "mgmt0"]);
    this.ns(["ip", "link", "set", "mgmt0", "up"]);
    this.ns(["ip", "link", "set", "lo", "up"]);
    // The schema of the Open vSwitch that serves it.
    this.ns(["ovsdb-tool", "create", join(this.rundir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema"]);
    this.startOvsdb();
    this.vsctl("--no-wait", "init");
    this.startVswitchd();
    this.vsctl(
      "add-br",
      this.bridge,
      "--",
      "set",
      "bridge",
      this.bridge,
      "datapath_type=netdev",
      "--",
      "add-port",
      this.bridge,
      this.segmentPort,
      "--",
      "set",
      "interface",
      this.segmentPort,
      "type=internal",
    );
    this.startSshd();
    return this;
  }

  /** `ovs-vswitchd --version`'s version: this machine's, or its root's. */
  ovsVersion(): string {
    return /\(Open vSwitch\) (\S+)/.exec(this.ns(["ovs-vswitchd", "--version"]))![1];
  }

  startOvsdb(): void {
    this.ns([
      "ovsdb-server",
      join(this.rundir, "conf.db"),
      `--remote=punix:${this.rundir}/db.sock`,
      `--pidfile=${this.rundir}/ovsdb-server.pid`,
      "--detach",
      "-vconsole:err",
      `--log-file=${this.rundir}/ovsdb-server.log`,
    ]);
  }

  startVswitchd(): void {
    this.ns(vswitchdCommand(this.rundir));
  }

  /** Its own copy of the lab's authorized_keys (the lab client's key), which authorize() rewrites. */
  get authorizedKeysFile(): string {
    return join(this.dir, "authorized_keys");
  }

  /** The public keys that may log in from now on (sshd reads the file at every login). */
  authorize(publicKeys: string[]): void {
    writeFileSync(this.authorizedKeysFile, `${publicKeys.join("\n")}\n`);
  }

  /** sshd_config lines after the lab's own (e.g. hardening a test checks for: `DisableForwarding yes`). */
  protected sshdExtra(): string[] {
    return [];
  }

  startSshd(): void {
    if (!existsSync(this.authorizedKeysFile)) this.authorize([this.inv.clientPublicKey]);
    const config = sshdConfig({
      address: this.address,
      hostKey: join(this.inv.labDir, "hosts", "gw1", "ssh_host_ed25519_key"),
      pidFile: join(this.dir, "sshd.pid"),
      authorizedKeys: this.authorizedKeysFile,
      user: this.sshUser,
    });
    writeFileSync(join(this.dir, "sshd_config"), [config, ...this.sshdExtra()].join("\n"));
    // A root's own sshd; its root's ~/.bashrc is Debian's default, which sshdCommand need not hide.
    if (this.opts.root) this.ns(["/usr/sbin/sshd", "-f", join(this.dir, "sshd_config"), "-E", join(this.dir, "sshd.log")]);
    else this.ns(sshdCommand(join(this.dir, "sshd_config"), join(this.dir, "sshd.log")));
  }

  pid(daemon: "sshd" | "ovs-vswitchd" | "ovsdb-server"): number {
    const file = daemon === "sshd" ? join(this.dir, "sshd.pid") : join(this.rundir, `${daemon}.pid`);
    return Number(readFileSync(file, "utf8").trim());
  }

  /** Processes whose command line starts with `prefix` (e.g. "sshd: root", "ovs-ofctl") inside this host's namespace. */
  processes(prefix: string): number[] {
    const inode = readlinkSafe(`/run/netns/${this.namespace}`, true);
    return readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          if (readlinkSafe(`/proc/${p}/ns/net`) !== inode) return false;
          return readFileSync(`/proc/${p}/cmdline`, "utf8").replace(/\0/g, " ").startsWith(prefix);
        } catch {
          return false;
        }
      })
      .map(Number);
  }

  /** Kills a daemon (SIGKILL: a crash) and waits until it is gone. */
  /** SIGKILL: a crash. sshd goes whole, its listener and every session it serves, as when its host goes down. */
  async kill(daemon: "sshd" | "ovs-vswitchd" | "ovsdb-server"): Promise<void> {
    const pids = [this.pid(daemon), ...(daemon === "sshd" ? [...this.processes("sshd: "), ...this.processes("sshd-session: ")] : [])];
    for (const pid of pids) {
      signal(pid, "SIGCONT");
      signal(pid, "SIGKILL");
    }
    await waitUntil(() => !pids.some(isAlive), { what: `${daemon} (${pids.join(", ")}) to exit` });
  }

  /**
   * Limits what reaches the host over its management link to `mbit` Mbit/s
   * (tbf on the root side of its veth), so a test that acts while a large
   * stream arrives sees the stream take long enough to act on; the test's
   * own process, which also sends the stream, gets its turns.
   */
  shapeManagement(mbit: number | undefined): void {
    if (mbit === undefined) execFileSync("tc", ["qdisc", "del", "dev", this.veth, "root"]);
    else execFileSync("tc", ["qdisc", "replace", "dev", this.veth, "root", "tbf", "rate", `${mbit}mbit`, "burst", "32kbit", "latency", "2s"]);
  }

  /** Stops everything and removes the namespace; safe to call for a host that is not (or only partly) up. */
  down(): void {
    for (const file of [join(this.dir, "sshd.pid"), join(this.rundir, "ovs-vswitchd.pid"), join(this.rundir, "ovsdb-server.pid"), this.holderPidFile]) {
      if (!existsSync(file)) continue;
      const pid = Number(readFileSync(file, "utf8").trim());
      if (pid > 0) {
        signal(pid, "SIGCONT");
        signal(pid, "SIGKILL");
      }
    }
    // The sshd's sessions and any ovs-ofctl. Nothing else: a login shell's own startup (e.g. a
    // pyenv rehash holding its lock in root's home) killed midway would leave that lock for every later login.
    if (existsSync(`/run/netns/${this.namespace}`)) {
      // OpenSSH 9.8 and later serve each session in sshd-session.
      for (const pid of [...this.processes("sshd: "), ...this.processes("sshd-session: "), ...this.processes("ovs-ofctl")]) {
        signal(pid, "SIGCONT");
        signal(pid, "SIGKILL");
      }
      execFileSync("ip", ["netns", "del", this.namespace]);
    }
    try {
      execFileSync("ip", ["link", "del", this.veth], { stdio: "ignore" });
    } catch {
      /* went with the namespace */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function readlinkSafe(path: string, stat = false): string {
  if (stat) return `net:[${execFileSync("stat", ["-L", "-c", "%i", path], { encoding: "utf8" }).trim()}]`;
  return require("node:fs").readlinkSync(path);
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

/** The sockets this Node process holds open (an fd leak check: the count before and after must match). */
export function openSockets(): number {
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return require("node:fs").readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:");
    } catch {
      return false;
    }
  }).length;
}
