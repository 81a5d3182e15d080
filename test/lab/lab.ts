import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, chmodSync, openSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import {
  BACKEND_PORT,
  CLIENT,
  GATEWAY_VIP_RANGE,
  GATEWAY_VIP_RANGE6,
  SEGMENT6_CIDR,
  ipv6Twin,
  HOSTS,
  type HostPlan,
  L3DSR,
  type LabHost,
  type LabInventory,
  DEFAULT_LAB_DIR,
  MGMT_BRIDGE,
  MGMT_CIDR,
  MGMT_GATEWAY,
  rootLinkOf,
  ROUTER_NS,
  SEGMENT_BRIDGE,
  SEGMENT_CIDR,
  TENANT_CLIENT,
  EDGE_ROUTER,
  FAR_CLIENT,
  mgmtAddressOf,
  namespaceOf,
  segmentAddressOf,
  segmentMacOf,
  underlayAddressOf,
  underlayAddress6Of,
  underlayRouterOf,
  underlayRouter6Of,
  UNDERLAY6_CIDR,
  LAB_ROOT,
} from "./topology";
import { type HostRoot, inHostArgv, mountRoot } from "./root";

/**
 * Brings the lab up and down on this machine: one network namespace per
 * emulated host, each with its own ovsdb-server, ovs-vswitchd (userspace
 * datapath) and sshd, this machine's or (lab "c") a Debian root's.
 * Everything made is recorded in state.json as it is made, so `down`
 * removes exactly that and nothing else.
 */

export { DEFAULT_LAB_DIR } from "./topology";
/** Plain JS beside this file's source (test/lab), whether run from source or from dist/. */
const BACKEND_SERVER = [join(__dirname, "backend-server.js"), join(__dirname, "..", "..", "..", "test", "lab", "backend-server.js")].find((p) =>
  existsSync(p),
)!;
const SSH_USER = "root";
const REQUIRED_PACKAGES: Record<string, string> = {
  "ovs-vswitchd": "openvswitch-switch",
  "ovn-northd": "ovn-central",
  sshd: "openssh-server",
  "ssh-keygen": "openssh-client",
  ethtool: "ethtool",
  ip: "iproute2",
  ping: "iputils-ping",
  // The L3DSR namespace's GRE encapsulator (test/lab/l3dsr.ts): this kernel has no GRE.
  perl: "perl-base",
};

/** Where test/lab/l3dsr.ts keeps its encapsulators' pid files and logs, under the lab directory. */
export const L3DSR_RUN_SUBDIR = "l3dsr";
/** Where test/lab/ovn-chassis.ts records what it adds to the lab (its own state.json: pid files, namespaces), under the lab directory. */
export const OVN_RUN_SUBDIR = "ovn";

/** Which of the lab's networks a host joins: all of them, or the management network only (ExtraHosts). */
type HostNetworks = "lab" | "management";

interface LabState {
  namespaces: string[];
  /** Links in the root namespace. */
  rootLinks: string[];
  pidFiles: string[];
}

function run(argv: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}): string {
  try {
    return execFileSync(argv[0], argv.slice(1), {
      encoding: "utf8",
      input: opts.input,
      env: opts.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`lab: ${argv.join(" ")}: ${err.stderr?.trim() || err.message}`);
  }
}

const inNs = (ns: string, argv: string[]) => run(["ip", "netns", "exec", ns, ...argv]);

/**
 * A namespace or root link of this lab's name that `down` did not know of
 * (a run killed before it recorded it, or a lab directory lost while its
 * namespaces stayed): removed before it is made again, so `up` never fails
 * on what an earlier run left behind.
 */
function removeLeftover(kind: "netns" | "link", name: string) {
  const path = kind === "netns" ? `/run/netns/${name}` : `/sys/class/net/${name}`;
  if (!existsSync(path)) return;
  console.log(`lab: removing ${kind === "netns" ? "namespace" : "link"} ${name}, left by an earlier run`);
  run(kind === "netns" ? ["ip", "netns", "del", name] : ["ip", "link", "del", name]);
}

function which(cmd: string): boolean {
  try {
    execFileSync("sh", ["-c", 'command -v "$1"', "sh", cmd], { stdio: "ignore" });
    return true;
  } catch {
    return existsSync(`/usr/sbin/${cmd}`);
  }
}

/**
 * The sshd_config of a lab host (and of a test's own hosts): key
 * authentication only, for one user, with stream-local forwarding (OVSDB's
 * db.sock) and enough sessions for concurrent channels.
 */
export function sshdConfig(o: { address: string; hostKey: string; pidFile: string; authorizedKeys: string; user: string }): string {
  return [
    `ListenAddress ${o.address}`,
    "Port 22",
    `HostKey ${o.hostKey}`,
    `PidFile ${o.pidFile}`,
    `AuthorizedKeysFile ${o.authorizedKeys}`,
    `AllowUsers ${o.user}`,
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "StrictModes no",
    "AllowStreamLocalForwarding yes",
    "MaxSessions 64",
    "PermitUserEnvironment no",
    "",
  ].join("\n");
}

/**
 * How a host's sshd is started (the lab's, and every test's own). Its login shell reads no ~/.bashrc: every
 * SSH command runs through the user's shell, and a machine's own root
 * .bashrc (here `pyenv init`, ~0.4 s per command) is nothing an OVS host
 * of the lab would run. sshd runs in a private mount namespace with
 * /dev/null bound over the file; the file itself is untouched.
 */
export function sshdCommand(configPath: string, logPath: string): string[] {
  const bashrc = join(homedir(), ".bashrc");
  if (!existsSync(bashrc)) return ["/usr/sbin/sshd", "-f", configPath, "-E", logPath];
  return [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount --bind /dev/null "$1" && exec "$2" -f "$3" -E "$4"',
    "sh",
    bashrc,
    "/usr/sbin/sshd",
    configPath,
    logPath,
  ];
}

export class Lab {
  readonly dir: string;
  protected state: LabState = { namespaces: [], rootLinks: [], pidFiles: [] };
  /** Each host's root, by namespace, when its daemons run from a Debian root (LAB_ROOT). */
  private readonly roots = new Map<string, HostRoot>();

  constructor(dir = process.env.OVSLB_LAB_DIR ?? DEFAULT_LAB_DIR) {
    this.dir = resolve(dir);
  }

  get inventoryPath() {
    return join(this.dir, "inventory.json");
  }
  protected get statePath() {
    return join(this.dir, "state.json");
  }

  private loadState(): LabState {
    if (existsSync(this.statePath)) this.state = JSON.parse(readFileSync(this.statePath, "utf8"));
    return this.state;
  }

  protected record(kind: keyof LabState, item: string) {
    if (!this.state[kind].includes(item)) this.state[kind].push(item);
    writeFileSync(this.statePath, JSON.stringify(this.state, null, 2));
  }

  /** Installs missing Debian packages (needs root and the Debian registry). */
  ensurePackages(): void {
    const missing = [
      ...new Set(
        Object.entries(REQUIRED_PACKAGES)
          .filter(([cmd]) => !which(cmd))
          .map(([, p]) => p),
      ),
    ];
    if (missing.length === 0) return;
    if (process.getuid?.() !== 0) throw new Error(`lab: missing packages ${missing.join(", ")}; install them as root`);
    console.log(`lab: installing ${missing.join(" ")}`);
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit" });
    execFileSync("apt-get", ["install", "-y", "-qq", ...missing], {
      stdio: "inherit",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
  }

  /** Healthy when every recorded daemon runs and every host answers on its SSH port. */
  status(): { up: boolean; problems: string[] } {
    const problems: string[] = [];
    if (!existsSync(this.inventoryPath)) return { up: false, problems: ["no inventory"] };
    this.loadState();
    for (const pidFile of this.state.pidFiles) {
      if (!pidAlive(pidFile)) problems.push(`not running: ${pidFile}`);
    }
    for (const ns of this.state.namespaces) {
      if (!existsSync(`/run/netns/${ns}`)) problems.push(`missing namespace ${ns}`);
    }
    const builtFrom = (JSON.parse(readFileSync(this.inventoryPath, "utf8")) as LabInventory).software?.root;
    if (builtFrom !== LAB_ROOT) problems.push(`its hosts run from ${builtFrom ?? "this machine"}, not ${LAB_ROOT ?? "this machine"}`);
    return { up: problems.length === 0, problems };
  }

  /** Idempotent: a healthy lab is left as it is; anything partial is torn down and rebuilt. */
  up(): LabInventory {
    if (this.status().up) return JSON.parse(readFileSync(this.inventoryPath, "utf8"));
    this.down();
    this.ensurePackages();
    const started = process.hrtime.bigint();
    mkdirSync(this.dir, { recursive: true, mode: 0o755 });
    this.state = { namespaces: [], rootLinks: [], pidFiles: [] };
    writeFileSync(this.statePath, JSON.stringify(this.state));
    mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });

    const clientKeyPath = join(this.dir, "client_ed25519");
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ovslb-lab-client", "-f", clientKeyPath]);
    const clientPublicKey = readFileSync(`${clientKeyPath}.pub`, "utf8").trim();
    writeFileSync(join(this.dir, "authorized_keys"), `${clientPublicKey}\n`, { mode: 0o644 });

    this.makeRootBridge(MGMT_BRIDGE, `${MGMT_GATEWAY}/24`);
    this.makeRootBridge(SEGMENT_BRIDGE);
    this.makeNamespace(ROUTER_NS);
    inNs(ROUTER_NS, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    inNs(ROUTER_NS, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
    // Tests cut a host's underlay with `ip link set u-HOST down`: Linux drops a link's IPv6 addresses when it goes down unless told to keep them.
    for (const scope of ["all", "default"]) inNs(ROUTER_NS, ["sysctl", "-q", "-w", `net.ipv6.conf.${scope}.keep_addr_on_down=1`]);

    const hosts: Record<string, LabHost> = {};
    for (const plan of HOSTS) hosts[plan.name] = this.makeHost(plan);
    this.makeClient(hosts);
    this.makeTenantClient(hosts);
    this.makeL3dsr(hosts);
    this.makeEdgeRouter();
    this.makeFarClient();
    const backends = HOSTS.flatMap((h) => h.vms).map((vm) => this.makeVm(vm));
    // One ping across each network warms the ARP caches of OVS and the kernels.
    for (const h of HOSTS.filter((p) => p.role !== "ovn-central")) {
      inNs(CLIENT.namespace, ["ping", "-c1", "-W2", segmentAddressOf(h)]);
    }
    for (const vm of backends) inNs(CLIENT.namespace, ["ping", "-c1", "-W2", vm.address]);

    const knownHostsPath = join(this.dir, "known_hosts");
    writeFileSync(
      knownHostsPath,
      Object.values(hosts)
        .map((h) => `${h.address} ${h.hostKey}`)
        .join("\n") + "\n",
    );
    const inventory: LabInventory = {
      version: 1,
      labDir: this.dir,
      upSeconds: Number(process.hrtime.bigint() - started) / 1e9,
      software: this.software(hosts),
      clientKeyPath,
      clientPublicKey,
      knownHostsPath,
      mgmtCidr: MGMT_CIDR,
      segmentCidr: SEGMENT_CIDR,
      gatewayVipRange: GATEWAY_VIP_RANGE,
      segment6Cidr: SEGMENT6_CIDR,
      gatewayVipRange6: GATEWAY_VIP_RANGE6,
      backendPort: BACKEND_PORT,
      client: CLIENT,
      tenantClient: TENANT_CLIENT,
      edgeRouter: EDGE_ROUTER,
      farClient: { ...FAR_CLIENT, router: { ...FAR_CLIENT.router } },
      l3dsr: {
        namespace: L3DSR.namespace,
        segment: { ...L3DSR.segment },
        underlay: { ...L3DSR.underlay },
        vipRange: L3DSR.vipRange,
        vipRange6: L3DSR.vipRange6,
      },
      hosts,
      backends,
    };
    writeFileSync(this.inventoryPath, JSON.stringify(inventory, null, 2));
    return inventory;
  }

  /** Removes what `up` recorded: processes by PID, root links, then namespaces. */
  down(): void {
    if (!existsSync(this.statePath)) {
      rmSync(this.dir, { recursive: true, force: true });
      return;
    }
    this.loadState();
    // The L3DSR encapsulators tests started (test/lab/l3dsr.ts) are not in the state: they come and go.
    const encapDir = join(this.dir, L3DSR_RUN_SUBDIR);
    const encapPidFiles = existsSync(encapDir)
      ? readdirSync(encapDir)
          .filter((f) => f.endsWith(".pid"))
          .map((f) => join(encapDir, f))
      : [];
    // The OVN chassis layer (test/lab/ovn-chassis.ts), when it was added, records its own processes and namespaces.
    const ovnStatePath = join(this.dir, OVN_RUN_SUBDIR, "state.json");
    const ovn: Pick<LabState, "pidFiles" | "namespaces"> = existsSync(ovnStatePath)
      ? JSON.parse(readFileSync(ovnStatePath, "utf8"))
      : { pidFiles: [], namespaces: [] };
    const pids = [...this.state.pidFiles, ...encapPidFiles, ...ovn.pidFiles].map(readPid).filter((p): p is number => p !== undefined);
    for (const pid of pids) signal(pid, "SIGTERM");
    waitGone(pids, 5000);
    for (const pid of pids) signal(pid, "SIGKILL");
    // Root links first: namespace deletion is asynchronous and would race them.
    for (const link of this.state.rootLinks) {
      if (existsSync(`/sys/class/net/${link}`)) run(["ip", "link", "del", link]);
    }
    for (const ns of [...ovn.namespaces, ...[...this.state.namespaces].reverse()]) {
      if (existsSync(`/run/netns/${ns}`)) run(["ip", "netns", "del", ns]);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private makeRootBridge(name: string, address?: string) {
    this.record("rootLinks", name);
    removeLeftover("link", name);
    run(["ip", "link", "add", name, "type", "bridge"]);
    if (address) run(["ip", "addr", "add", address, "dev", name]);
    run(["ip", "link", "set", name, "up"]);
  }

  private makeNamespace(ns: string) {
    this.record("namespaces", ns);
    removeLeftover("netns", ns);
    run(["ip", "netns", "add", ns]);
    inNs(ns, ["ip", "link", "set", "lo", "up"]);
  }

  /** A veth from a root-namespace bridge into ns (named inner there). */
  private plugIntoRootBridge(bridge: string, outer: string, ns: string, inner: string) {
    this.record("rootLinks", outer);
    removeLeftover("link", outer);
    run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns]);
    run(["ip", "link", "set", outer, "master", bridge, "up"]);
  }

  /**
   * One host: namespace, management leg, daemons, sshd. "lab" hosts also get
   * their underlay and segment legs; "management" hosts (ExtraHosts) only the
   * management leg, with br-seg holding an internal port seg0.
   */
  protected makeHost(plan: HostPlan, networks: HostNetworks = "lab"): LabHost {
    const ns = namespaceOf(plan.name);
    const hostDir = join(this.dir, "hosts", plan.name);
    const rundir = join(hostDir, "run");
    mkdirSync(rundir, { recursive: true });
    this.makeNamespace(ns);
    inNs(ns, ["sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1"]);
    if (LAB_ROOT) {
      const root = { path: LAB_ROOT, holderPidFile: join(hostDir, "mounts.pid") };
      this.record("pidFiles", root.holderPidFile);
      mountRoot(ns, root, this.dir);
      this.roots.set(ns, root);
    }
    const address = mgmtAddressOf(plan);
    this.plugIntoRootBridge(MGMT_BRIDGE, rootLinkOf("m", plan.name), ns, "mgmt0");
    inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", "mgmt0"]);
    inNs(ns, ["ip", "link", "set", "mgmt0", "up"]);

    const host: LabHost = {
      name: plan.name,
      role: plan.role,
      namespace: ns,
      address,
      sshPort: 22,
      user: SSH_USER,
      hostKey: "",
      root: this.roots.get(ns),
    };
    if (plan.role === "ovn-central") {
      host.ovn = this.startOvnCentral(ns, address, rundir);
    } else {
      Object.assign(host, this.startOvs(plan, ns, rundir, networks));
    }
    host.hostKey = this.startSshd(plan, ns, address, hostDir);
    return host;
  }

  private daemonEnv(rundir: string): NodeJS.ProcessEnv {
    return { ...process.env, OVS_RUNDIR: rundir, OVS_DBDIR: rundir, OVS_LOGDIR: rundir, OVN_RUNDIR: rundir };
  }

  /** Runs a host's own program (its Open vSwitch, OVN or sshd): in its namespace, from its root when it has one. */
  private onHost(ns: string, argv: string[], rundir?: string): string {
    return run(inHostArgv(ns, this.roots.get(ns), argv), rundir ? { env: this.daemonEnv(rundir) } : {});
  }

  /** What the hosts run: read from the first OVS host and the OVN central host. */
  private software(hosts: Record<string, LabHost>): NonNullable<LabInventory["software"]> {
    const all = Object.values(hosts);
    const ovsHost = all.find((h) => h.ovsRundir)!;
    const ovnHost = all.find((h) => h.ovn)!;
    const version = (ns: string, argv: string[]) => / (\d+\.\d+\.\d+)/.exec(this.onHost(ns, argv).split("\n")[0])?.[1] ?? "unknown";
    return {
      ovs: version(ovsHost.namespace, ["ovs-vswitchd", "--version"]),
      ovn: version(ovnHost.namespace, ["ovn-northd", "--version"]),
      ...(LAB_ROOT ? { root: LAB_ROOT } : {}),
    };
  }

  private startOvs(plan: HostPlan, ns: string, rundir: string, networks: HostNetworks): Partial<LabHost> {
    const dbSock = join(rundir, "db.sock");
    const nsRun = (argv: string[]) => this.onHost(ns, argv, rundir);
    const db = join(rundir, "conf.db");
    // The schema of the Open vSwitch that serves it.
    nsRun(["ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"]);
    this.record("pidFiles", join(rundir, "ovsdb-server.pid"));
    nsRun([
      "ovsdb-server",
      db,
      `--remote=punix:${dbSock}`,
      "--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
      `--pidfile=${join(rundir, "ovsdb-server.pid")}`,
      "--detach",
      "-vconsole:err",
      `--log-file=${join(rundir, "ovsdb-server.log")}`,
    ]);
    nsRun(["ovs-vsctl", "--no-wait", "init"]);
    // As a distribution's start-up does (ovs-ctl's set_system_ids): the root row names the Open vSwitch that runs, so
    // ovslb reads its version from the database. The hosts tests build themselves (fault hosts, sandboxes) leave it
    // empty, as a hand-started ovs-vswitchd does, and cover the other way: asking ovs-vswitchd.
    const ovsVersion = /Open vSwitch\) (\S+)/.exec(nsRun(["ovs-vswitchd", "--version"]))?.[1];
    if (ovsVersion) nsRun(["ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", `ovs_version=${ovsVersion}`]);
    this.record("pidFiles", join(rundir, "ovs-vswitchd.pid"));
    nsRun(vswitchdCommand(rundir));
    if (networks === "management") {
      // No leg on the lab's networks: the bridge and its port exist for OpenFlow only.
      nsRun([
        "ovs-vsctl",
        "--may-exist",
        "add-br",
        "br-seg",
        "--",
        "set",
        "bridge",
        "br-seg",
        "datapath_type=netdev",
        "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15",
        `other_config:hwaddr=${segmentMacOf(plan)}`,
        "--",
        "--may-exist",
        "add-port",
        "br-seg",
        "seg0",
        "--",
        "set",
        "interface",
        "seg0",
        "type=internal",
      ]);
      return { ovsRundir: rundir, dbSock };
    }

    // Underlay: a routed /24 per host, with the address on br-phy (userspace tunnelling).
    const ulRouterSide = `u-${plan.name}`;
    run(["ip", "link", "add", "ul0", "netns", ns, "type", "veth", "peer", "name", ulRouterSide, "netns", ROUTER_NS]);
    inNs(ROUTER_NS, ["ip", "link", "set", ulRouterSide, "mtu", "1600", "up"]);
    inNs(ROUTER_NS, ["ip", "addr", "add", `${underlayRouterOf(plan)}/24`, "dev", ulRouterSide]);
    inNs(ns, ["ip", "link", "set", "ul0", "mtu", "1600", "up"]);
    nsRun([
      "ovs-vsctl",
      "--may-exist",
      "add-br",
      "br-phy",
      "--",
      "set",
      "bridge",
      "br-phy",
      "datapath_type=netdev",
      `other_config:hwaddr=${macForUnderlay(plan)}`,
      "--",
      "--may-exist",
      "add-port",
      "br-phy",
      "ul0",
    ]);
    inNs(ns, ["ip", "addr", "add", `${underlayAddressOf(plan)}/24`, "dev", "br-phy"]);
    inNs(ns, ["ip", "link", "set", "br-phy", "mtu", "1600", "up"]);
    inNs(ns, ["ip", "route", "add", "172.16.0.0/16", "via", underlayRouterOf(plan), "dev", "br-phy"]);
    // Dual stack: an IPv6 leg beside it (no duplicate address detection: the addresses are the lab's own, usable at once).
    inNs(ROUTER_NS, ["ip", "-6", "addr", "add", `${underlayRouter6Of(plan)}/64`, "dev", ulRouterSide, "nodad"]);
    inNs(ns, ["ip", "-6", "addr", "add", `${underlayAddress6Of(plan)}/64`, "dev", "br-phy", "nodad"]);
    inNs(ns, ["ip", "-6", "route", "add", UNDERLAY6_CIDR, "via", underlayRouter6Of(plan), "dev", "br-phy"]);

    // Segment: br-seg with the segment veth and the host's own segment address.
    this.plugIntoRootBridge(SEGMENT_BRIDGE, rootLinkOf("s", plan.name), ns, "seg0");
    inNs(ns, ["ip", "link", "set", "seg0", "up"]);
    nsRun([
      "ovs-vsctl",
      "--may-exist",
      "add-br",
      "br-seg",
      "--",
      "set",
      "bridge",
      "br-seg",
      "datapath_type=netdev",
      "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15",
      `other_config:hwaddr=${segmentMacOf(plan)}`,
      "--",
      "--may-exist",
      "add-port",
      "br-seg",
      "seg0",
    ]);
    inNs(ns, ["ip", "addr", "add", `${segmentAddressOf(plan)}/24`, "dev", "br-seg"]);
    inNs(ns, ["ip", "-6", "addr", "add", `${ipv6Twin(segmentAddressOf(plan))}/64`, "dev", "br-seg", "nodad"]);
    inNs(ns, ["ip", "link", "set", "br-seg", "up"]);
    return {
      ovsRundir: rundir,
      dbSock,
      segment: { bridge: "br-seg", port: "seg0", address: segmentAddressOf(plan), mac: segmentMacOf(plan) },
      underlay: {
        bridge: "br-phy",
        port: "ul0",
        address: underlayAddressOf(plan),
        router: underlayRouterOf(plan),
        address6: underlayAddress6Of(plan),
        router6: underlayRouter6Of(plan),
      },
    };
  }

  private startOvnCentral(ns: string, address: string, rundir: string): NonNullable<LabHost["ovn"]> {
    const nsRun = (argv: string[]) => this.onHost(ns, argv, rundir);
    const socks: Record<string, string> = {};
    for (const [db, schema, port] of [
      ["nb", "ovn-nb", 6641],
      ["sb", "ovn-sb", 6642],
    ] as const) {
      const file = join(rundir, `ovn${db}_db.db`);
      const sock = join(rundir, `ovn${db}_db.sock`);
      const pid = join(rundir, `ovn${db}_db.pid`);
      nsRun(["ovsdb-tool", "create", file, `/usr/share/ovn/${schema}.ovsschema`]);
      this.record("pidFiles", pid);
      nsRun([
        "ovsdb-server",
        file,
        `--remote=punix:${sock}`,
        `--remote=ptcp:${port}:${address}`,
        `--pidfile=${pid}`,
        "--detach",
        "-vconsole:err",
        `--log-file=${join(rundir, `ovn${db}_db.log`)}`,
      ]);
      socks[db] = sock;
    }
    nsRun(["ovn-nbctl", `--db=unix:${socks.nb}`, "--no-wait", "init"]);
    this.record("pidFiles", join(rundir, "ovn-northd.pid"));
    nsRun([
      "ovn-northd",
      `--ovnnb-db=unix:${socks.nb}`,
      `--ovnsb-db=unix:${socks.sb}`,
      `--pidfile=${join(rundir, "ovn-northd.pid")}`,
      "--detach",
      "-vconsole:err",
      `--log-file=${join(rundir, "ovn-northd.log")}`,
    ]);
    return {
      nbSock: socks.nb,
      sbSock: socks.sb,
      nbTcp: `tcp:${address}:6641`,
      sbTcp: `tcp:${address}:6642`,
      rundir,
    };
  }

  /** sshd on the host's management address: key auth only, the lab's user only, its own host key. Returns the public host key. */
  private startSshd(plan: HostPlan, ns: string, address: string, hostDir: string): string {
    const hostKey = join(hostDir, "ssh_host_ed25519_key");
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", `ovslb-lab-${plan.name}`, "-f", hostKey]);
    chmodSync(hostKey, 0o600);
    const pidFile = join(hostDir, "sshd.pid");
    // No SetEnv: a command finds the host's daemons only through the run
    // directory it names itself (the inventory's ovsRundir / ovn.rundir), as
    // the provider must on a real host, so one that forgets it fails here too.
    const config = sshdConfig({ address, hostKey, pidFile, authorizedKeys: join(this.dir, "authorized_keys"), user: SSH_USER });
    const configPath = join(hostDir, "sshd_config");
    writeFileSync(configPath, config);
    this.record("pidFiles", pidFile);
    // A root's own sshd: its login shell's ~/.bashrc is the root's (Debian's default), which sshdCommand need not hide.
    if (this.roots.has(ns)) this.onHost(ns, ["/usr/sbin/sshd", "-f", configPath, "-E", join(hostDir, "sshd.log")]);
    else inNs(ns, sshdCommand(configPath, join(hostDir, "sshd.log")));
    const pub = readFileSync(`${hostKey}.pub`, "utf8").trim().split(" ");
    return `${pub[0]} ${pub[1]}`;
  }

  private makeClient(hosts: Record<string, LabHost>) {
    const ns = CLIENT.namespace;
    this.makeNamespace(ns);
    this.plugIntoRootBridge(SEGMENT_BRIDGE, rootLinkOf("s", "client"), ns, "eth0");
    this.configureGuestNic(ns, CLIENT.address, CLIENT.mac);
    // The gateway VIP range is reached through both gateways; hash on L4 so
    // connections spread over them.
    inNs(ns, ["sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"]);
    const gateways = Object.values(hosts).filter((h) => h.role === "gateway");
    inNs(ns, ["ip", "route", "add", GATEWAY_VIP_RANGE, ...gateways.flatMap((g) => ["nexthop", "via", g.segment!.address, "dev", "eth0"])]);
    inNs(ns, ["ip", "-6", "route", "add", GATEWAY_VIP_RANGE6, ...gateways.flatMap((g) => ["nexthop", "via", ipv6Twin(g.segment!.address), "dev", "eth0"])]);
  }

  /**
   * The external L3DSR load balancer: a plain namespace, no OVS. A segment
   * leg (the client's next hop for L3DSR.vipRange, pinned in the client's
   * neighbour table so no ARP refresh ever leaves it) and an underlay leg
   * routed by the router namespace, with a second, disallowed address.
   * Nothing but forwarded traffic may move its counters: IPv6 is on only on
   * the segment leg, with no link-local address (no router solicitation,
   * no duplicate address detection) and the client's entry for it pinned,
   * so it sends nothing of its own. It forwards both families;
   * test/lab/l3dsr.ts adds the per-VIP encapsulation.
   */
  private makeL3dsr(hosts: Record<string, LabHost>) {
    const { namespace: ns, segment, underlay } = L3DSR;
    this.makeNamespace(ns);
    inNs(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.ip_forward=1"]);
    this.plugIntoRootBridge(SEGMENT_BRIDGE, rootLinkOf("s", "l3dsr"), ns, segment.port);
    inNs(ns, ["ip", "link", "set", segment.port, "address", segment.mac]);
    inNs(ns, ["ip", "addr", "add", `${segment.address}/24`, "dev", segment.port]);
    inNs(ns, [
      "sysctl",
      "-q",
      "-w",
      `net.ipv6.conf.${segment.port}.addr_gen_mode=1`,
      `net.ipv6.conf.${segment.port}.accept_ra=0`,
      `net.ipv6.conf.${segment.port}.router_solicitations=0`,
      `net.ipv6.conf.${segment.port}.disable_ipv6=0`,
      "net.ipv6.conf.all.forwarding=1",
    ]);
    inNs(ns, ["ip", "-6", "addr", "add", `${segment.address6}/64`, "dev", segment.port, "nodad"]);
    inNs(ns, ["ip", "link", "set", segment.port, "up"]);
    inNs(ns, ["ethtool", "-K", segment.port, "tx", "off"]);

    const routerSide = "u-l3dsr";
    run(["ip", "link", "add", underlay.port, "netns", ns, "type", "veth", "peer", "name", routerSide, "netns", ROUTER_NS]);
    inNs(ROUTER_NS, ["ip", "link", "set", routerSide, "mtu", String(underlay.mtu), "up"]);
    inNs(ROUTER_NS, ["ip", "addr", "add", `${underlay.router}/24`, "dev", routerSide]);
    inNs(ns, ["ip", "link", "set", underlay.port, "mtu", String(underlay.mtu), "up"]);
    inNs(ns, ["ip", "addr", "add", `${underlay.address}/24`, "dev", underlay.port]);
    inNs(ns, ["ip", "addr", "add", `${underlay.disallowedAddress}/24`, "dev", underlay.port]);
    inNs(ns, ["ethtool", "-K", underlay.port, "tx", "off"]);
    inNs(ns, ["ip", "route", "add", "172.16.0.0/16", "via", underlay.router, "dev", underlay.port]);

    inNs(CLIENT.namespace, ["ip", "neigh", "replace", segment.address, "lladdr", segment.mac, "dev", "eth0", "nud", "permanent"]);
    inNs(CLIENT.namespace, ["ip", "route", "add", L3DSR.vipRange, "via", segment.address, "dev", "eth0"]);
    inNs(CLIENT.namespace, ["ip", "-6", "neigh", "replace", segment.address6, "lladdr", segment.mac, "dev", "eth0", "nud", "permanent"]);
    inNs(CLIENT.namespace, ["ip", "-6", "route", "add", L3DSR.vipRange6, "via", segment.address6, "dev", "eth0"]);
    // Warm the router's and each hypervisor's neighbour entries on the underlay path.
    for (const h of Object.values(hosts).filter((x) => x.role === "hypervisor" && x.underlay)) {
      inNs(ns, ["ping", "-c1", "-W2", h.underlay!.address]);
    }
  }

  /**
   * The upstream router: forwards on its one segment leg (router on a stick,
   * so no ICMP redirects), ECMP hashed on L4, a next hop skipped once its
   * neighbour entry has failed, and neighbour timers that fail a silent next
   * hop within about half a second. Tests add their routes.
   */
  private makeEdgeRouter() {
    const { namespace: ns, port, address, address6, mac } = EDGE_ROUTER;
    this.makeNamespace(ns);
    this.plugIntoRootBridge(SEGMENT_BRIDGE, rootLinkOf("s", "edge"), ns, port);
    inNs(ns, ["ip", "link", "set", port, "address", mac]);
    inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", port]);
    inNs(ns, ["ip", "-6", "addr", "add", `${address6}/64`, "dev", port, "nodad"]);
    inNs(ns, ["ip", "link", "set", port, "up"]);
    inNs(ns, ["ethtool", "-K", port, "tx", "off"]);
    inNs(ns, [
      "sysctl",
      "-q",
      "-w",
      "net.ipv4.ip_forward=1",
      "net.ipv6.conf.all.forwarding=1",
      "net.ipv4.conf.all.send_redirects=0",
      `net.ipv4.conf.${port}.send_redirects=0`,
      "net.ipv4.fib_multipath_use_neigh=1",
      "net.ipv4.fib_multipath_hash_policy=1",
      `net.ipv4.neigh.${port}.base_reachable_time_ms=200`,
      `net.ipv4.neigh.${port}.delay_first_probe_time=0`,
      `net.ipv4.neigh.${port}.retrans_time_ms=100`,
      `net.ipv4.neigh.${port}.ucast_solicit=2`,
      // IPv6: the same timers and L4 hashing; Linux skips a failed IPv6 next hop only while not forwarding, so tests that need it track next hops (test/support/edge-router.ts).
      "net.ipv6.fib_multipath_hash_policy=1",
      `net.ipv6.neigh.${port}.base_reachable_time_ms=200`,
      `net.ipv6.neigh.${port}.delay_first_probe_time=0`,
      `net.ipv6.neigh.${port}.retrans_time_ms=100`,
      `net.ipv6.neigh.${port}.ucast_solicit=2`,
    ]);
    inNs(CLIENT.namespace, ["sysctl", "-q", "-w", "net.ipv4.conf.all.accept_redirects=0", "net.ipv4.conf.eth0.accept_redirects=0"]);
  }

  /** The far client, behind the edge router across a link whose router end has the smaller MTU (FAR_CLIENT). */
  private makeFarClient() {
    const { namespace: ns, port, address, address6, mac, router } = FAR_CLIENT;
    const edge = EDGE_ROUTER.namespace;
    this.makeNamespace(ns);
    run(["ip", "link", "add", router.port, "netns", edge, "type", "veth", "peer", "name", port, "netns", ns]);
    inNs(edge, ["ip", "link", "set", router.port, "mtu", String(router.mtu), "up"]);
    inNs(edge, ["ip", "addr", "add", `${router.address}/24`, "dev", router.port]);
    inNs(edge, ["ip", "-6", "addr", "add", `${router.address6}/64`, "dev", router.port, "nodad"]);
    inNs(edge, ["ethtool", "-K", router.port, "tx", "off"]);
    inNs(ns, ["ip", "link", "set", port, "address", mac]);
    inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", port]);
    inNs(ns, ["ip", "-6", "addr", "add", `${address6}/64`, "dev", port, "nodad"]);
    inNs(ns, ["ip", "link", "set", port, "up"]);
    inNs(ns, ["ethtool", "-K", port, "tx", "off"]);
    inNs(ns, ["ip", "route", "add", "default", "via", router.address, "dev", port]);
    inNs(ns, ["ip", "-6", "route", "add", "default", "via", router.address6, "dev", port]);
  }

  /**
   * The second tenant's client: its NIC is an access port of VLAN `vlan` on
   * the distributor's br-seg (OVS tags it; this kernel has no 8021q), so
   * untagged segment traffic never reaches it.
   */
  private makeTenantClient(hosts: Record<string, LabHost>) {
    const { namespace: ns, address, mac, vlan } = TENANT_CLIENT;
    const dist = hosts.dist1;
    this.makeNamespace(ns);
    run(["ip", "link", "add", "client2", "netns", dist.namespace, "type", "veth", "peer", "name", "eth0", "netns", ns]);
    inNs(dist.namespace, ["ip", "link", "set", "client2", "up"]);
    this.onHost(dist.namespace, ["ovs-vsctl", "--may-exist", "add-port", "br-seg", "client2", `tag=${vlan}`], dist.ovsRundir);
    this.configureGuestNic(ns, address, mac);
  }

  private makeVm(vm: HostPlan["vms"][number]) {
    const ns = namespaceOf(vm.name);
    const hvNs = namespaceOf(vm.hypervisor);
    this.makeNamespace(ns);
    run(["ip", "link", "add", vm.port, "netns", hvNs, "type", "veth", "peer", "name", "eth0", "netns", ns]);
    inNs(hvNs, ["ip", "link", "set", vm.port, "up"]);
    const rundir = join(this.dir, "hosts", vm.hypervisor, "run");
    this.onHost(hvNs, ["ovs-vsctl", "--may-exist", "add-port", "br-seg", vm.port], rundir);
    this.configureGuestNic(ns, vm.address, vm.mac);
    inNs(ns, ["ip", "route", "add", FAR_CLIENT.network, "via", EDGE_ROUTER.address, "dev", "eth0"]);
    inNs(ns, ["ip", "-6", "route", "add", FAR_CLIENT.network6, "via", EDGE_ROUTER.address6, "dev", "eth0"]);
    this.startBackendServer(vm.name, ns);
    return { name: vm.name, namespace: ns, hypervisor: vm.hypervisor, port: vm.port, address: vm.address, mac: vm.mac };
  }

  /** A guest NIC: fixed MAC and address, and no tx checksum offload (TCP into the userspace datapath needs it off). */
  private configureGuestNic(ns: string, address: string, mac: string) {
    inNs(ns, ["ip", "link", "set", "eth0", "address", mac]);
    inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", "eth0"]);
    // No duplicate address detection: the lab owns the prefix, and a tentative address would not answer for a second.
    inNs(ns, ["ip", "-6", "addr", "add", `${ipv6Twin(address)}/64`, "dev", "eth0", "nodad"]);
    inNs(ns, ["ip", "link", "set", "eth0", "up"]);
    inNs(ns, ["ethtool", "-K", "eth0", "tx", "off"]);
  }

  /** The backend's TCP server (backend-server.js), detached, with a pid file. */
  private startBackendServer(name: string, ns: string) {
    const pidFile = join(this.dir, `${name}.server.pid`);
    const log = openSync(join(this.dir, `${name}.server.log`), "a");
    this.record("pidFiles", pidFile);
    const child = spawn("ip", ["netns", "exec", ns, process.execPath, BACKEND_SERVER, name, String(BACKEND_PORT)], {
      detached: true,
      stdio: ["ignore", log, log],
    });
    writeFileSync(pidFile, `${child.pid}\n`);
    child.unref();
  }
}

function macForUnderlay(plan: HostPlan): string {
  return `02:00:ac:10:${plan.index.toString(16).padStart(2, "0")}:02`;
}

/**
 * More OVS hosts beside the running lab, for a benchmark that needs more
 * than the lab's topology has (e.g. 16 gateways): each is built as the lab
 * builds its hosts (its own namespace, ovsdb-server, ovs-vswitchd and sshd,
 * taking the lab's client key), but on the management network only, so the
 * lab's segment and underlay never see them. They are recorded in their own
 * directory's state.json, never the lab's: `remove` takes away exactly them
 * (and whatever an interrupted earlier run left there), never the lab.
 */
export class ExtraHosts extends Lab {
  constructor(
    dir: string,
    private readonly inventory: LabInventory,
  ) {
    super(dir);
  }

  /** Management addresses of the hosts start() made in this process. */
  private started: string[] = [];

  override up(): LabInventory {
    throw new Error("ExtraHosts: start() adds hosts beside a lab; the lab itself is brought up with `npm run lab -- up`");
  }

  /** Builds the hosts, one after another; management addresses must not be the lab's. */
  start(plans: readonly HostPlan[]): Record<string, LabHost> {
    const taken = new Set([MGMT_GATEWAY, ...Object.values(this.inventory.hosts).map((h) => h.address)]);
    for (const p of plans) {
      if (taken.has(mgmtAddressOf(p))) throw new Error(`lab: extra host ${p.name}: management address ${mgmtAddressOf(p)} is taken`);
      if (this.inventory.hosts[p.name]) throw new Error(`lab: extra host ${p.name}: the lab has a host of that name`);
    }
    if (!existsSync(`/sys/class/net/${MGMT_BRIDGE}`)) throw new Error(`lab: no ${MGMT_BRIDGE}: is the lab up?`);
    this.remove();
    mkdirSync(this.dir, { recursive: true, mode: 0o755 });
    this.state = { namespaces: [], rootLinks: [], pidFiles: [] };
    writeFileSync(this.statePath, JSON.stringify(this.state));
    writeFileSync(join(this.dir, "authorized_keys"), `${this.inventory.clientPublicKey}\n`, { mode: 0o644 });
    mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
    // An earlier host of the same address left its MAC in the root namespace's neighbour table: connects would go there until it expires.
    for (const p of plans) run(["ip", "neigh", "flush", "to", mgmtAddressOf(p), "dev", MGMT_BRIDGE]);
    this.started = plans.map(mgmtAddressOf);
    return Object.fromEntries(plans.map((p) => [p.name, this.makeHost(p, "management")]));
  }

  /** Stops and removes every host start() made (by pid, link and namespace recorded in this directory). */
  remove(): void {
    this.down();
    // Their neighbour entries go too (an interrupted run's are flushed by the next start).
    for (const address of this.started.splice(0)) {
      if (existsSync(`/sys/class/net/${MGMT_BRIDGE}`)) run(["ip", "neigh", "flush", "to", address, "dev", MGMT_BRIDGE]);
    }
  }
}

/** The pid a pid file holds, if it holds one. */
export function readPid(pidFile: string): number | undefined {
  try {
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a process runs. A zombie waiting to be reaped counts as gone, but
 * only once every thread has exited: a multi-threaded daemon's main thread
 * shows as a zombie while its other threads, and its open files and locks
 * (ovs-vswitchd's pidfile lock among them), are still being torn down, and a
 * new daemon started then aborts as "already running".
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tasks.some((tid) => {
    try {
      return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8"));
    } catch {
      return false; // exited since the listing
    }
  });
}

function pidAlive(pidFile: string): boolean {
  const pid = readPid(pidFile);
  return pid !== undefined && isAlive(pid);
}

function signal(pid: number, sig: NodeJS.Signals) {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

function waitGone(pids: number[], timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (pids.some(isAlive) && Date.now() < deadline) {
    execFileSync("sleep", ["0.05"]);
  }
}

/** How the lab starts a host's ovs-vswitchd (in its namespace, with its run directory as OVS_RUNDIR/DBDIR/LOGDIR): tests restart one the same way. */
export function vswitchdCommand(rundir: string): string[] {
  return [
    "ovs-vswitchd",
    `unix:${join(rundir, "db.sock")}`,
    "--disable-system",
    `--pidfile=${join(rundir, "ovs-vswitchd.pid")}`,
    "--detach",
    "-vconsole:err",
    `--log-file=${join(rundir, "ovs-vswitchd.log")}`,
  ];
}
