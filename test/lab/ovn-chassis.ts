import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OVN_RUN_SUBDIR, isAlive, readPid } from "./lab";
import { inHostArgv } from "./root";
import { BACKEND_PORT, LAB_PREFIX, type LabHost, type LabInventory, namespaceOf } from "./topology";

/**
 * OVN chassis in the lab, as an add-on to a lab that is up (`npm run lab --
 * ovn-up|ovn-down|ovn-status`, or ovnUp() from a test's beforeAll): an
 * ovn-controller on each gateway and hypervisor, with its own integration
 * bridge br-int on the userspace datapath and Geneve over the host's
 * underlay address (br-phy), connected to the central's southbound over TCP
 * on the management network. On top of it a small OVN topology:
 *
 *   ovn client (10.11.0.2) --- lab-ext (localnet "ext" on gw1's br-ext)
 *     --- lab-lr (gateway router on gw1: 10.11.0.1, 10.10.0.1)
 *     --- lab-ls (10.10.0.0/24) --- VMs hv1-ovn1/2 (10.10.0.11/12, bound on hv1), hv2-ovn1/2 (10.10.0.21/22, on hv2)
 *
 * Dual stack: each IPv4 address a.b.c.d has its IPv6 twin fd00:ab::d
 * (ovnTwin6: lab-ls fd00:1010::/64, lab-ext fd00:1011::/64).
 *
 * The OVN VMs are namespaces of their own on their hypervisor's br-int
 * (external_ids:iface-id = their logical port), each running the lab's
 * backend server on port 8080; the lab's br-seg VMs are not touched. The
 * OVN client is a namespace with one leg, on gw1's br-ext: the VIPs a test
 * gives the router are reached from it (its default route is the router).
 *
 * Everything made is recorded in the lab directory's ovn/state.json as it is
 * made (namespaces and pid files), so ovn-down, and the lab's own `down`,
 * remove it. ovnUp() is idempotent: a healthy layer is left as it is,
 * anything partial is torn down and built again.
 */

/** The hosts that run an ovn-controller: the gateways and the hypervisors. */
export const OVN_CHASSIS = ["gw1", "gw2", "hv1", "hv2", "hv3"] as const;
/** The chassis of the gateway router, where the external network is bridged in. */
export const OVN_GATEWAY_CHASSIS = "gw1";
/** The physical network name of the external logical switch's localnet port (ovn-bridge-mappings on the gateway chassis). */
const PHYSNET = "ext";
const EXT_BRIDGE = "br-ext";

/** An OVN address's IPv6 twin: 10.10.0.11 -> fd00:1010::11 (the /24's first two octets name the /64). */
export const ovnTwin6 = (address: string) => {
  const [a, b, , d] = address.split(".");
  return `fd00:${a}${b}::${d}`;
};

export const OVN_TOPOLOGY = {
  router: "lab-lr",
  switch: "lab-ls",
  external: "lab-ext",
  /** The router's port on lab-ls, the VMs' default gateway. */
  internalPort: { name: "lab-lr-ls", address: "10.10.0.1", mac: "02:00:0a:0a:00:01", cidr: "10.10.0.0/24" },
  /** The router's port on lab-ext, the OVN client's default gateway. */
  externalPort: { name: "lab-lr-ext", address: "10.11.0.1", mac: "02:00:0a:0b:00:01", cidr: "10.11.0.0/24" },
  client: { namespace: `${LAB_PREFIX}ovnclient`, address: "10.11.0.2", mac: "02:00:0a:0b:00:02", gatewayPort: "ovnc0" },
} as const;

/** The OVN VMs: two on hv1, two on hv2. */
const OVN_VMS_PER_HYPERVISOR: Record<string, number> = { hv1: 2, hv2: 2 };

export interface OvnVm {
  /** Its name, and its logical switch port's (iface-id). */
  name: string;
  namespace: string;
  hypervisor: string;
  /** Its port on the hypervisor's br-int. */
  port: string;
  address: string;
  /** Its IPv6 address (ovnTwin6 of address). */
  address6: string;
  mac: string;
}

/** What ovnUp() made (ovn/inventory.json in the lab directory). */
export interface OvnInventory {
  chassis: { name: string; encapIp: string }[];
  sbRemote: string;
  router: string;
  switch: string;
  external: string;
  gatewayChassis: string;
  internalPort: (typeof OVN_TOPOLOGY)["internalPort"];
  externalPort: (typeof OVN_TOPOLOGY)["externalPort"];
  client: { namespace: string; address: string; address6: string; mac: string };
  vms: OvnVm[];
  backendPort: number;
  /** Seconds the last build took (0 when ovnUp() found the layer up). */
  upSeconds: number;
}

interface OvnState {
  namespaces: string[];
  pidFiles: string[];
}

function run(argv: string[], env?: NodeJS.ProcessEnv): string {
  try {
    return execFileSync(argv[0], argv.slice(1), { encoding: "utf8", env: env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`ovn chassis: ${argv.join(" ")}: ${err.stderr?.trim() || err.message}`);
  }
}

const inNs = (ns: string, argv: string[]) => run(["ip", "netns", "exec", ns, ...argv]);

function sleep(seconds: number) {
  execFileSync("sleep", [String(seconds)]);
}

/** Polls a synchronous condition (this runs in the CLI and in beforeAll, both fine to block). */
function waitFor<T>(what: string, condition: () => T | undefined | false, timeoutMs = 30_000): T {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = condition();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e instanceof Error ? e.message : e;
    }
    if (Date.now() > deadline) throw new Error(`ovn chassis: waited ${timeoutMs} ms for ${what}; last saw ${JSON.stringify(last)}`);
    sleep(0.05);
  }
}

const macOf = (address: string) =>
  `02:00:${address
    .split(".")
    .map((o) => Number(o).toString(16).padStart(2, "0"))
    .join(":")}`;

export function ovnVms(): OvnVm[] {
  return Object.entries(OVN_VMS_PER_HYPERVISOR).flatMap(([hv, count]) =>
    Array.from({ length: count }, (_, i) => {
      const name = `${hv}-ovn${i + 1}`;
      const address = `10.10.0.${Number(hv.slice(2)) * 10 + i + 1}`;
      return { name, namespace: namespaceOf(name), hypervisor: hv, port: `ovn${i + 1}`, address, address6: ovnTwin6(address), mac: macOf(address) };
    }),
  );
}

/** Plain JS beside this file's source (test/lab), whether run from source or from dist/. */
const BACKEND_SERVER = [join(__dirname, "backend-server.js"), join(__dirname, "..", "..", "..", "test", "lab", "backend-server.js")].find((p) =>
  existsSync(p),
)!;

export class OvnChassis {
  private readonly dir: string;
  private state: OvnState = { namespaces: [], pidFiles: [] };

  constructor(private readonly inv: LabInventory) {
    this.dir = join(inv.labDir, OVN_RUN_SUBDIR);
  }

  get inventoryPath() {
    return join(this.dir, "inventory.json");
  }
  private get statePath() {
    return join(this.dir, "state.json");
  }

  private record(kind: keyof OvnState, item: string) {
    if (!this.state[kind].includes(item)) this.state[kind].push(item);
    writeFileSync(this.statePath, JSON.stringify(this.state, null, 2));
  }

  /** A command on a lab host (its namespace, its root), with its run directory in the environment. */
  private onHost(h: LabHost, argv: string[]): string {
    const rundir = h.ovsRundir ?? h.ovn!.rundir;
    return run(inHostArgv(h.namespace, h.root, argv), { ...process.env, OVS_RUNDIR: rundir, OVS_DBDIR: rundir, OVS_LOGDIR: rundir, OVN_RUNDIR: rundir });
  }

  private host(name: string): LabHost {
    const h = this.inv.hosts[name];
    if (!h) throw new Error(`ovn chassis: the lab has no host ${name}`);
    return h;
  }

  /** A command on a lab host by name (ovs-vsctl, ovs-ofctl, ovs-appctl, ovn-appctl), with its run directory in the environment. */
  onLabHost(name: string, argv: string[]): string {
    return this.onHost(this.host(name), argv);
  }

  nbctl(...args: string[]): string {
    const c = this.host("central");
    return this.onHost(c, ["ovn-nbctl", `--db=unix:${c.ovn!.nbSock}`, ...args]).trim();
  }

  sbctl(...args: string[]): string {
    const c = this.host("central");
    return this.onHost(c, ["ovn-sbctl", `--db=unix:${c.ovn!.sbSock}`, ...args]).trim();
  }

  private get sbRemote() {
    return this.host("central").ovn!.sbTcp;
  }

  /** Healthy when every recorded process runs, every namespace exists, every chassis is registered and every VM's port is up. */
  status(): { up: boolean; problems: string[] } {
    if (!existsSync(this.inventoryPath) || !existsSync(this.statePath)) return { up: false, problems: ["not built"] };
    this.state = JSON.parse(readFileSync(this.statePath, "utf8"));
    const problems: string[] = [];
    for (const p of this.state.pidFiles) {
      const pid = readPid(p);
      if (pid === undefined || !isAlive(pid)) problems.push(`not running: ${p}`);
    }
    for (const ns of this.state.namespaces) if (!existsSync(`/run/netns/${ns}`)) problems.push(`missing namespace ${ns}`);
    if (problems.length > 0) return { up: false, problems };
    const built = JSON.parse(readFileSync(this.inventoryPath, "utf8")) as Partial<OvnInventory>;
    if (built.client?.address6 === undefined) return { up: false, problems: ["built before the layer was dual-stack"] };
    try {
      const chassis = new Set(this.sbctl("--bare", "--columns=name", "list", "chassis").split(/\s+/));
      for (const c of OVN_CHASSIS) if (!chassis.has(c)) problems.push(`chassis ${c} not in the southbound`);
      for (const vm of ovnVms()) if (this.nbctl("get", "logical_switch_port", vm.name, "up") !== "true") problems.push(`port ${vm.name} not up`);
    } catch (e) {
      problems.push((e as Error).message);
    }
    return { up: problems.length === 0, problems };
  }

  /** Builds the layer, unless it is up already (then returns its inventory with upSeconds 0). */
  up(): OvnInventory {
    if (this.status().up) return { ...(JSON.parse(readFileSync(this.inventoryPath, "utf8")) as OvnInventory), upSeconds: 0 };
    this.down();
    const started = process.hrtime.bigint();
    for (const name of OVN_CHASSIS) {
      const h = this.host(name);
      const controller = h.root ? join(h.root.path, "usr", "bin", "ovn-controller") : "/usr/bin/ovn-controller";
      if (!existsSync(controller)) throw new Error(`ovn chassis: no ovn-controller at ${controller} (Debian's ovn-host package)`);
    }
    mkdirSync(this.dir, { recursive: true });
    this.state = { namespaces: [], pidFiles: [] };
    writeFileSync(this.statePath, JSON.stringify(this.state));
    const vms = ovnVms();
    this.makeNorthbound(vms);
    for (const name of OVN_CHASSIS) this.startChassis(this.host(name));
    for (const vm of vms) this.makeVm(vm);
    this.makeClient();
    // Every chassis registered, every VM's port bound and up (its chassis wrote it).
    waitFor("every chassis in the southbound", () => {
      const have = new Set(this.sbctl("--bare", "--columns=name", "list", "chassis").split(/\s+/));
      return OVN_CHASSIS.every((c) => have.has(c));
    });
    for (const vm of vms) waitFor(`logical port ${vm.name} up`, () => this.nbctl("get", "logical_switch_port", vm.name, "up") === "true");
    // The whole path works (and ARP is warm): the client reaches every VM through the router, over Geneve.
    for (const address of vms.flatMap((vm) => [vm.address, vm.address6])) {
      waitFor(`${address} answering ping from the OVN client`, () => {
        inNs(OVN_TOPOLOGY.client.namespace, ["ping", "-c1", "-W1", address]);
        return true;
      });
    }
    const inventory: OvnInventory = {
      chassis: OVN_CHASSIS.map((name) => ({ name, encapIp: this.host(name).underlay!.address })),
      sbRemote: this.sbRemote,
      router: OVN_TOPOLOGY.router,
      switch: OVN_TOPOLOGY.switch,
      external: OVN_TOPOLOGY.external,
      gatewayChassis: OVN_GATEWAY_CHASSIS,
      internalPort: OVN_TOPOLOGY.internalPort,
      externalPort: OVN_TOPOLOGY.externalPort,
      client: {
        namespace: OVN_TOPOLOGY.client.namespace,
        address: OVN_TOPOLOGY.client.address,
        address6: ovnTwin6(OVN_TOPOLOGY.client.address),
        mac: OVN_TOPOLOGY.client.mac,
      },
      vms,
      backendPort: BACKEND_PORT,
      upSeconds: Number(process.hrtime.bigint() - started) / 1e9,
    };
    writeFileSync(this.inventoryPath, JSON.stringify(inventory, null, 2));
    return inventory;
  }

  /** The logical topology: router on the gateway chassis, its two switches, the VMs' ports. */
  private makeNorthbound(vms: OvnVm[]) {
    const t = OVN_TOPOLOGY;
    const args = ["--", "lr-add", t.router, "--", "set", "logical_router", t.router, `options:chassis=${OVN_GATEWAY_CHASSIS}`];
    for (const [sw, port] of [
      [t.switch, t.internalPort],
      [t.external, t.externalPort],
    ] as const) {
      const peer = `${sw}-lr`;
      args.push("--", "ls-add", sw, "--", "lrp-add", t.router, port.name, port.mac, `${port.address}/24`, `${ovnTwin6(port.address)}/64`);
      args.push("--", "lsp-add", sw, peer, "--", "lsp-set-type", peer, "router", "--", "lsp-set-addresses", peer, "router");
      args.push("--", "lsp-set-options", peer, `router-port=${port.name}`);
    }
    const localnet = `${t.external}-localnet`;
    args.push("--", "lsp-add", t.external, localnet, "--", "lsp-set-type", localnet, "localnet", "--", "lsp-set-addresses", localnet, "unknown");
    args.push("--", "lsp-set-options", localnet, `network_name=${PHYSNET}`);
    for (const vm of vms) args.push("--", "lsp-add", t.switch, vm.name, "--", "lsp-set-addresses", vm.name, `${vm.mac} ${vm.address} ${vm.address6}`);
    this.nbctl(...args);
  }

  /** A chassis: br-int (netdev), the Open_vSwitch external_ids ovn-controller reads, and ovn-controller itself. */
  private startChassis(h: LabHost) {
    const ids = [
      `external_ids:system-id=${h.name}`,
      `external_ids:hostname=${h.name}`,
      `external_ids:ovn-remote=${this.sbRemote}`,
      "external_ids:ovn-encap-type=geneve",
      `external_ids:ovn-encap-ip=${h.underlay!.address}`,
      "external_ids:ovn-bridge=br-int",
      "external_ids:ovn-bridge-datapath-type=netdev",
    ];
    const argv = ["ovs-vsctl", "--may-exist", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev", "fail_mode=secure"];
    argv.push("other_config:disable-in-band=true", "--", "set", "open_vswitch", ".", ...ids);
    if (h.name === OVN_GATEWAY_CHASSIS) {
      argv.push(`external_ids:ovn-bridge-mappings=${PHYSNET}:${EXT_BRIDGE}`);
      argv.push("--", "--may-exist", "add-br", EXT_BRIDGE, "--", "set", "bridge", EXT_BRIDGE, "datapath_type=netdev");
    }
    this.onHost(h, argv);
    this.record("pidFiles", this.controllerPidFile(h.name));
    this.startController(h.name);
  }

  /** Where a chassis's ovn-controller writes its pid. */
  controllerPidFile(name: string): string {
    return join(this.host(name).ovsRundir!, "ovn-controller.pid");
  }

  /** Starts a chassis's ovn-controller (again, after a test killed it), as ovnUp() does. */
  startController(name: string) {
    const h = this.host(name);
    const rundir = h.ovsRundir!;
    const pidFile = this.controllerPidFile(name);
    this.onHost(h, [
      "ovn-controller",
      `unix:${join(rundir, "db.sock")}`,
      `--pidfile=${pidFile}`,
      "--detach",
      "-vconsole:err",
      `--log-file=${join(rundir, "ovn-controller.log")}`,
    ]);
  }

  private makeNamespace(ns: string) {
    this.record("namespaces", ns);
    if (existsSync(`/run/netns/${ns}`)) run(["ip", "netns", "del", ns]);
    run(["ip", "netns", "add", ns]);
    inNs(ns, ["ip", "link", "set", "lo", "up"]);
  }

  /**
   * A guest NIC: fixed MAC, its address and IPv6 twin (no duplicate address detection: the lab owns the prefixes), a default
   * route of each family, no tx checksum offload (TCP into the userspace datapath needs it off).
   */
  private guestNic(ns: string, address: string, mac: string, gateway: string) {
    // keep_addr_on_down: a test that takes the NIC down and up again finds its IPv6 address as it does its IPv4 one.
    inNs(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.eth0.accept_ra=0", "net.ipv6.conf.eth0.disable_ipv6=0", "net.ipv6.conf.eth0.keep_addr_on_down=1"]);
    inNs(ns, ["ip", "link", "set", "eth0", "address", mac]);
    inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", "eth0"]);
    inNs(ns, ["ip", "-6", "addr", "add", `${ovnTwin6(address)}/64`, "dev", "eth0", "nodad"]);
    inNs(ns, ["ip", "link", "set", "eth0", "up"]);
    inNs(ns, ["ethtool", "-K", "eth0", "tx", "off"]);
    inNs(ns, ["ip", "route", "add", "default", "via", gateway, "dev", "eth0"]);
    inNs(ns, ["ip", "-6", "route", "add", "default", "via", ovnTwin6(gateway), "dev", "eth0"]);
  }

  private makeVm(vm: OvnVm) {
    const hv = this.host(vm.hypervisor);
    this.makeNamespace(vm.namespace);
    run(["ip", "link", "add", vm.port, "netns", hv.namespace, "type", "veth", "peer", "name", "eth0", "netns", vm.namespace]);
    inNs(hv.namespace, ["ip", "link", "set", vm.port, "up"]);
    this.onHost(hv, ["ovs-vsctl", "--may-exist", "add-port", "br-int", vm.port, "--", "set", "interface", vm.port, `external_ids:iface-id=${vm.name}`]);
    this.guestNic(vm.namespace, vm.address, vm.mac, OVN_TOPOLOGY.internalPort.address);
    const pidFile = join(this.dir, `${vm.name}.server.pid`);
    const log = openSync(join(this.dir, `${vm.name}.server.log`), "a");
    this.record("pidFiles", pidFile);
    const child = spawn("ip", ["netns", "exec", vm.namespace, process.execPath, BACKEND_SERVER, vm.name, String(BACKEND_PORT)], {
      detached: true,
      stdio: ["ignore", log, log],
    });
    writeFileSync(pidFile, `${child.pid}\n`);
    child.unref();
  }

  /** The OVN client: one leg, on the gateway chassis's br-ext (the localnet's bridge). */
  private makeClient() {
    const c = OVN_TOPOLOGY.client;
    const gw = this.host(OVN_GATEWAY_CHASSIS);
    this.makeNamespace(c.namespace);
    run(["ip", "link", "add", c.gatewayPort, "netns", gw.namespace, "type", "veth", "peer", "name", "eth0", "netns", c.namespace]);
    inNs(gw.namespace, ["ip", "link", "set", c.gatewayPort, "up"]);
    this.onHost(gw, ["ovs-vsctl", "--may-exist", "add-port", EXT_BRIDGE, c.gatewayPort]);
    this.guestNic(c.namespace, c.address, c.mac, OVN_TOPOLOGY.externalPort.address);
  }

  /**
   * Removes the layer: its processes (by pid), namespaces, the chassis'
   * bridges and external_ids, their southbound rows and the northbound
   * topology. Idempotent; what the lab's hosts had before is left as it was.
   */
  down(): void {
    if (existsSync(this.statePath)) this.state = JSON.parse(readFileSync(this.statePath, "utf8"));
    const pids = this.state.pidFiles.map(readPid).filter((p): p is number => p !== undefined);
    for (const pid of pids) signal(pid, "SIGTERM");
    const deadline = Date.now() + 5000;
    while (pids.some(isAlive) && Date.now() < deadline) sleep(0.05);
    for (const pid of pids) signal(pid, "SIGKILL");
    // The links the layer plugged into the hosts (the VMs' and the client's veths) go first, by name: a veth whose far end is
    // in a deleted namespace goes only when the kernel gets to clean that namespace up, after `ip netns del` has returned,
    // and an ovn-up right after would find the name taken.
    const plugged = [...ovnVms().map((vm) => [vm.hypervisor, vm.port]), [OVN_GATEWAY_CHASSIS, OVN_TOPOLOGY.client.gatewayPort]];
    for (const [host, link] of plugged) {
      const ns = this.inv.hosts[host]?.namespace;
      if (ns && existsSync(`/run/netns/${ns}`)) spawnSync("ip", ["-n", ns, "link", "del", link], { stdio: "ignore" });
    }
    for (const ns of this.state.namespaces) if (existsSync(`/run/netns/${ns}`)) run(["ip", "netns", "del", ns]);
    for (const name of OVN_CHASSIS) {
      const h = this.inv.hosts[name];
      if (!h || !existsSync(`/run/netns/${h.namespace}`)) continue;
      // The connections OVN tracked (its gateway router's load balancers, SNAT) share the host's one userspace datapath with
      // every other bridge: flush OVN's zones (ovn-controller records them in br-int's ct-zone-* external_ids), or they outlive
      // the layer in the gateways' conntrack, where other tests expect none.
      const zones = this.onHost(h, ["ovs-vsctl", "--if-exists", "get", "bridge", "br-int", "external_ids"]).matchAll(/"?ct-zone-[^=]+"?="?(\d+)"?/g);
      for (const zone of new Set([...zones].map((m) => m[1]))) this.onHost(h, ["ovs-appctl", "dpctl/flush-conntrack", `zone=${zone}`]);
      this.onHost(h, [
        "ovs-vsctl",
        "--if-exists",
        "del-br",
        "br-int",
        "--",
        "--if-exists",
        "del-br",
        EXT_BRIDGE,
        "--",
        "remove",
        "open_vswitch",
        ".",
        "external_ids",
        "system-id",
        "hostname",
        "ovn-remote",
        "ovn-encap-type",
        "ovn-encap-ip",
        "ovn-bridge",
        "ovn-bridge-datapath-type",
        "ovn-bridge-mappings",
      ]);
    }
    if (existsSync(`/run/netns/${this.host("central").namespace}`)) {
      const t = OVN_TOPOLOGY;
      this.nbctl("--if-exists", "lr-del", t.router, "--", "--if-exists", "ls-del", t.switch, "--", "--if-exists", "ls-del", t.external);
      for (const c of OVN_CHASSIS) this.sbctl("--if-exists", "chassis-del", c);
    }
    rmSync(this.dir, { recursive: true, force: true });
    this.state = { namespaces: [], pidFiles: [] };
  }
}

function signal(pid: number, sig: NodeJS.Signals) {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}
