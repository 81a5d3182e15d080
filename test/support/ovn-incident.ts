import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { isAlive, readPid, vswitchdCommand } from "../lab/lab";
import { inHostArgv } from "../lab/root";
import { ROUTER_NS, rootLinkOf, type LabInventory } from "../lab/topology";
import { ovnTwin6, type OvnChassis, type OvnInventory, type OvnVm } from "../lab/ovn-chassis";
import { inNamespace } from "./lab";
import { waitUntil } from "./wait";

/**
 * A chassis of the lab's OVN layer (test/lab/ovn-chassis.ts) dying abruptly,
 * and brought back: the stale-monitor incident's tests.
 */

/**
 * An OVN VM's NIC down (its backend stops answering, its chassis alive), or up again with the default route of each
 * family, which the kernel removed with the link.
 */
export function setVmNic(ovn: Pick<OvnInventory, "internalPort">, vm: Pick<OvnVm, "namespace">, up: boolean): void {
  inNamespace(vm.namespace, ["ip", "link", "set", "eth0", up ? "up" : "down"]);
  if (!up) return;
  inNamespace(vm.namespace, ["ip", "route", "replace", "default", "via", ovn.internalPort.address, "dev", "eth0"]);
  inNamespace(vm.namespace, ["ip", "-6", "route", "replace", "default", "via", ovnTwin6(ovn.internalPort.address), "dev", "eth0"]);
}

/** The Service_Monitor rows of these logical ports: [port, ip, status] each, sorted. */
function monitorRows(chassis: OvnChassis, ports: readonly string[]): [string, string, string][] {
  return chassis
    .sbctl("--format=csv", "--data=bare", "--no-headings", "--columns=logical_port,ip,status", "list", "service_monitor")
    .split("\n")
    .map((l) => l.split(",") as [string, string, string])
    .filter(([port]) => ports.includes(port))
    .sort();
}

/** Each Service_Monitor of these logical ports, by "port address" (one per family a port's backend has), and its status. */
export function monitorStatusByAddress(chassis: OvnChassis, ports: readonly string[]): Record<string, string> {
  return Object.fromEntries(monitorRows(chassis, ports).map(([port, ip, status]) => [`${port} ${ip}`, status]));
}

/** Each logical port's Service_Monitor status (of the ports given; ports with one family's backends). */
export function monitorStatus(chassis: OvnChassis, ports: readonly string[]): Record<string, string> {
  return Object.fromEntries(monitorRows(chassis, ports).map(([port, , status]) => [port, status]));
}

/**
 * The backends of northd's new-connection flow for a VIP (IPv4 or IPv6) on a router (lr_in_dnat), sorted, as northd writes
 * them ("10.10.0.11:8080", "[fd00:1010::11]:8080"); undefined while there is none.
 */
export function routerLbBackends(chassis: OvnChassis, router: string, vip: string, port: number): string[] | undefined {
  const match = `${vip.includes(":") ? "ip6" : "ip4"}.dst == ${vip} && tcp && tcp.dst == ${port})`;
  const lines = chassis
    .sbctl("lflow-list", router)
    .split("\n")
    .filter((l) => l.includes("lr_in_dnat") && l.includes("ct.new") && l.includes(match));
  if (lines.length !== 1) return undefined;
  return /ct_lb(?:_mark)?\(backends=([^;)]*)/.exec(lines[0])?.[1].split(",").sort();
}

/** A host's links: its management and segment legs (root namespace) and its underlay (router namespace). */
export function setHostLinks(host: string, up: boolean) {
  const state = up ? "up" : "down";
  for (const network of ["m", "s"] as const) execFileSync("ip", ["link", "set", rootLinkOf(network, host), state]);
  inNamespace(ROUTER_NS, ["ip", "link", "set", `u-${host}`, state]);
}

async function kill(pidFile: string, what: string) {
  const pid = readPid(pidFile);
  if (pid === undefined || !isAlive(pid)) throw new Error(`${what} is not running (${pidFile})`);
  process.kill(pid, "SIGKILL");
  await waitUntil(() => !isAlive(pid), { what: `${what} (${pid}) gone after SIGKILL`, timeoutMs: 10_000, intervalMs: 10 });
}

/** The chassis dies abruptly: its ovn-controller and ovs-vswitchd SIGKILLed, its links cut. Returns when all three are done. */
export async function killChassis(inv: LabInventory, chassis: OvnChassis, host: string): Promise<void> {
  await kill(chassis.controllerPidFile(host), `${host}'s ovn-controller`);
  await kill(join(inv.hosts[host].ovsRundir!, "ovs-vswitchd.pid"), `${host}'s ovs-vswitchd`);
  setHostLinks(host, false);
}

/** The chassis back: links up, ovs-vswitchd started as the lab starts it, ovn-controller as ovnUp() does; then the layer healthy again. */
export async function reviveChassis(inv: LabInventory, chassis: OvnChassis, host: string): Promise<void> {
  const h = inv.hosts[host];
  setHostLinks(host, true);
  const rundir = h.ovsRundir!;
  if (!isAlive(readPid(join(rundir, "ovs-vswitchd.pid")) ?? 0)) {
    const [cmd, ...args] = inHostArgv(h.namespace, h.root, vswitchdCommand(rundir));
    execFileSync(cmd, args, { env: { ...process.env, OVS_RUNDIR: rundir, OVS_DBDIR: rundir, OVS_LOGDIR: rundir } });
  }
  if (!isAlive(readPid(chassis.controllerPidFile(host)) ?? 0)) chassis.startController(host);
  await waitUntil(() => chassis.status().up, { what: `the OVN layer up again with ${host} back`, timeoutMs: 30_000 });
}

/**
 * OVN's own load balancer with OVN's own health check, attached to the gateway router: `name` (replaced if it exists)
 * with `vip`:80 to each backend at `port`, each backend's ip_port_mappings from `sourceIp`, and the health check with
 * `options` (none: ovn-controller's defaults). Returns the health check's uuid.
 */
export function routerLbWithHealthCheck(
  chassis: OvnChassis,
  o: {
    router: string;
    name: string;
    vip: string;
    port: number;
    backends: readonly { name: string; address: string }[];
    sourceIp: string;
    options?: Record<string, string | number>;
  },
): string {
  const host = (address: string) => (address.includes(":") ? `[${address}]` : address);
  chassis.nbctl("--if-exists", "lb-del", o.name);
  chassis.nbctl(
    "lb-add",
    o.name,
    `${host(o.vip)}:80`,
    o.backends.map((b) => `${host(b.address)}:${o.port}`).join(","),
    "tcp",
    "--",
    "set",
    "load_balancer",
    o.name,
    ...o.backends.map((b) => `ip_port_mappings:"${host(b.address)}"="${b.name}:${host(o.sourceIp)}"`),
    "--",
    "--id=@hc",
    "create",
    "load_balancer_health_check",
    `vip="${host(o.vip)}:80"`,
    ...Object.entries(o.options ?? {}).map(([k, v]) => `options:${k}=${v}`),
    "--",
    "add",
    "load_balancer",
    o.name,
    "health_check",
    "@hc",
    "--",
    "lr-lb-add",
    o.router,
    o.name,
  );
  return chassis.nbctl("get", "load_balancer", o.name, "health_check").replace(/[[\]]/g, "").trim();
}
