import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { isIPv6 } from "node:net";
import { join } from "node:path";
import { L3DSR_RUN_SUBDIR, isAlive, readPid } from "./lab";
import type { LabInventory, LabL3dsr } from "./topology";

/**
 * Drives the lab's external L3DSR load balancer (namespace ovslb-l3dsr, no
 * OVS): makes it encapsulate one VIP in GRE toward one host's underlay
 * address, as a classic L3DSR balancer in front of the hypervisors would.
 *
 * This kernel has no GRE (no `gre`/`gretap`/`ipip` link types), so the
 * encapsulation is Linux `gretap` done in user space: per VIP, a tap device
 * (`l3gXXXXXXXX`, the VIP in hex) with a /32 route for the VIP into it and a
 * permanent neighbour entry for the VIP on it. The kernel forwards the
 * client's packets to the tap as Ethernet frames (TTL decremented, dl_src the
 * tap's MAC, dl_dst the neighbour's MAC); a small perl program (perl-base)
 * reads each frame and sends it on a raw IP socket, protocol 47, behind a
 * GRE header (protocol 0x6558, Transparent Ethernet Bridging; with a key when
 * one is given), from the chosen underlay address to the host's. On the wire
 * that is exactly what `ip link add type gretap local L remote R [key K]`
 * sends. Only the request direction exists: replies must not come back here.
 *
 * The encapsulator's tap goes away with its process, taking the route and
 * the neighbour entry with it. Pid files and logs live in
 * LAB_DIR/l3dsr/; `npm run lab -- down` ends any a test left behind.
 */

/** Reads frames from a tap, sends each in GRE. argv: TAP LOCAL REMOTE [KEY]. */
const ENCAPSULATOR = String.raw`
use strict; use warnings; use Socket;
my ($name, $local, $remote, $key) = @ARGV;
sysopen(my $tap, "/dev/net/tun", 2) or die "open /dev/net/tun: $!\n";
# TUNSETIFF, struct ifreq { char name[16]; short flags = IFF_TAP | IFF_NO_PI; }
ioctl($tap, 0x400454ca, pack("Z16 s x22", $name, 0x1002)) or die "TUNSETIFF $name: $!\n";
socket(my $raw, AF_INET, SOCK_RAW, 47) or die "raw socket: $!\n";
bind($raw, sockaddr_in(0, inet_aton($local))) or die "bind $local: $!\n";
my $to = sockaddr_in(0, inet_aton($remote));
my $hdr = (defined $key && $key ne "") ? pack("nnN", 0x2000, 0x6558, $key) : pack("nn", 0, 0x6558);
for (;;) {
  my $n = sysread($tap, my $frame, 65536);
  die "read $name: $!\n" unless defined $n;
  last if $n == 0;
  defined(send($raw, $hdr . $frame, 0, $to)) or warn "send: $!\n";
}
`;

export interface L3dsrTunnelOptions {
  /** The VIP to encapsulate. The client reaches it through the l3dsr only if it is in l3dsr.vipRange. */
  vip: string;
  /** The lab host (a hypervisor, usually) whose underlay address is the outer destination. */
  hypervisor: string;
  /** A GRE key (32 bits). Without one the GRE header has no key field. */
  key?: number;
  /**
   * The outer source: "allowed" (default) is l3dsr.underlay.address,
   * "disallowed" its second address l3dsr.underlay.disallowedAddress.
   */
  source?: "allowed" | "disallowed";
  /** The inner frame's destination MAC (the VIP's neighbour entry). Default: the host's segment MAC. */
  innerMac?: string;
}

export interface L3dsrTunnel {
  vip: string;
  /** The tap device in the l3dsr namespace. */
  device: string;
  /** Outer source and destination addresses. */
  local: string;
  remote: string;
  key?: number;
  innerMac: string;
  /** The encapsulator's pid. */
  pid: number;
  /** Frames the kernel handed to the encapsulator (the tap's TX). */
  sent(): { packets: number; bytes: number };
  /** Ends the encapsulator; its device, route and neighbour entry go with it. */
  close(): void;
}

export interface L3dsrCounters {
  /** The l3dsr's segment leg (l3dsr.segment.port). */
  segment: { rx: { packets: number; bytes: number }; tx: { packets: number; bytes: number } };
  /** IP datagrams its kernel forwarded (/proc/net/snmp Ip ForwDatagrams). */
  forwarded: number;
  /** IPv6 datagrams its kernel forwarded (/proc/net/snmp6 Ip6OutForwDatagrams). */
  forwarded6: number;
  /** IP datagrams its kernel received (Ip InReceives). */
  received: number;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

function l3dsrOf(inv: LabInventory): LabL3dsr {
  if (!inv.l3dsr) {
    throw new Error('this lab has no l3dsr namespace (its inventory predates it): run "npm run lab -- down && npm run lab -- up"');
  }
  return inv.l3dsr;
}

function ip(ns: string, argv: string[]): string {
  try {
    return execFileSync("ip", ["-n", ns, ...argv], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`l3dsr: ip -n ${ns} ${argv.join(" ")}: ${err.stderr?.trim() || err.message}`);
  }
}

const inNs = (ns: string, argv: string[]) => execFileSync("ip", ["netns", "exec", ns, ...argv], { stdio: ["ignore", "pipe", "pipe"] });

const deviceExists = (ns: string, device: string) => {
  try {
    execFileSync("ip", ["-n", ns, "link", "show", "dev", device], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
};

/**
 * The tap device that carries `vip`, under IFNAMSIZ: "l3g" and 8 hex digits,
 * an IPv4 VIP's 32 bits or the first 32 bits of a SHA-256 of an IPv6 one.
 */
export function l3dsrDevice(vip: string): string {
  if (IPV4.test(vip)) {
    return `l3g${vip
      .split(".")
      .map((o) => Number(o).toString(16).padStart(2, "0"))
      .join("")}`;
  }
  if (isIPv6(vip)) return `l3g${createHash("sha256").update(vip).digest("hex").slice(0, 8)}`;
  throw new Error(`l3dsr: not an IP address: ${vip}`);
}

const runDir = (inv: LabInventory) => join(inv.labDir, L3DSR_RUN_SUBDIR);
const pidFileOf = (inv: LabInventory, device: string) => join(runDir(inv), `${device}.pid`);

const sleep = (s: string) => execFileSync("sleep", [s]);

function waitFor(what: string, cond: () => boolean, timeoutMs: number, log?: string) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) {
      const tail = log && existsSync(log) ? `: ${readFileSync(log, "utf8").trim().split("\n").slice(-3).join(" | ")}` : "";
      throw new Error(`l3dsr: ${what} within ${timeoutMs} ms${tail}`);
    }
    sleep("0.02");
  }
}

/**
 * Makes the l3dsr namespace encapsulate `vip` toward `hypervisor`'s underlay
 * address. Replaces any encapsulation of the same VIP. Synchronous; returns
 * once the route is in place (a packet for the VIP is tunnelled from then on).
 */
export function encapsulateVip(inv: LabInventory, opts: L3dsrTunnelOptions): L3dsrTunnel {
  const l3 = l3dsrOf(inv);
  const device = l3dsrDevice(opts.vip);
  const target = inv.hosts[opts.hypervisor];
  if (!target?.underlay) throw new Error(`l3dsr: lab host ${opts.hypervisor} has no underlay address`);
  if (opts.key !== undefined && !(Number.isInteger(opts.key) && opts.key >= 0 && opts.key <= 0xffffffff)) {
    throw new Error(`l3dsr: a GRE key is a 32-bit unsigned integer, not ${opts.key}`);
  }
  const innerMac = (opts.innerMac ?? target.segment?.mac ?? "02:00:00:00:00:01").toLowerCase();
  if (!MAC.test(innerMac)) throw new Error(`l3dsr: not a MAC: ${innerMac}`);
  const source = opts.source ?? "allowed";
  const local = source === "disallowed" ? l3.underlay.disallowedAddress : l3.underlay.address;
  const remote = target.underlay.address;

  removeVip(inv, opts.vip);
  mkdirSync(runDir(inv), { recursive: true });
  const pidFile = pidFileOf(inv, device);
  const logPath = join(runDir(inv), `${device}.log`);
  const log = openSync(logPath, "w");
  const argv = ["netns", "exec", l3.namespace, "perl", "-e", ENCAPSULATOR, device, local, remote];
  if (opts.key !== undefined) argv.push(String(opts.key));
  // `ip netns exec` execs perl in place: the child's pid is the encapsulator's.
  const child = spawn("ip", argv, { detached: true, stdio: ["ignore", log, log] });
  closeSync(log);
  const pid = child.pid;
  if (pid === undefined) throw new Error("l3dsr: could not start the encapsulator");
  child.unref();
  writeFileSync(pidFile, `${pid}\n`);
  try {
    waitFor(`the encapsulator made ${device}`, () => deviceExists(l3.namespace, device) || !isAlive(pid), 3000, logPath);
    if (!isAlive(pid)) throw new Error(`l3dsr: the encapsulator for ${opts.vip} exited: ${readFileSync(logPath, "utf8").trim()}`);
    const v6 = isIPv6(opts.vip);
    // IPv6 on the tap for an IPv6 VIP, with no address of its own: it sends nothing the encapsulator would tunnel.
    if (v6) inNs(l3.namespace, ["sysctl", "-q", "-w", `net.ipv6.conf.${device}.addr_gen_mode=1`, `net.ipv6.conf.${device}.disable_ipv6=0`]);
    ip(l3.namespace, ["link", "set", device, "up"]);
    ip(l3.namespace, ["neigh", "replace", opts.vip, "lladdr", innerMac, "dev", device, "nud", "permanent"]);
    ip(l3.namespace, ["route", "replace", `${opts.vip}/${v6 ? 128 : 32}`, "dev", device]);
  } catch (e) {
    removeVip(inv, opts.vip);
    throw e;
  }
  return {
    vip: opts.vip,
    device,
    local,
    remote,
    key: opts.key,
    innerMac,
    pid,
    sent: () => linkStats(l3.namespace, device).tx,
    close: () => removeVip(inv, opts.vip),
  };
}

/**
 * Ends the encapsulation of `vip` (its encapsulator, device, route and
 * neighbour entry), whoever started it. Idempotent: for afterAll.
 */
export function removeVip(inv: LabInventory, vip: string): void {
  const l3 = l3dsrOf(inv);
  const device = l3dsrDevice(vip);
  const pidFile = pidFileOf(inv, device);
  const pid = readPid(pidFile);
  if (pid !== undefined && isAlive(pid)) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      /* gone */
    }
    waitFor(`encapsulator ${pid} ended`, () => !isAlive(pid), 3000);
  }
  rmSync(pidFile, { force: true });
  const logPath = join(runDir(inv), `${device}.log`);
  if (existsSync(logPath) && readFileSync(logPath, "utf8").trim() === "") rmSync(logPath, { force: true });
  // The tap goes with its process; the route and neighbour entry go with the tap.
  waitFor(`${device} is gone`, () => !deviceExists(l3.namespace, device), 3000);
}

function linkStats(ns: string, device: string) {
  const [link] = JSON.parse(ip(ns, ["-s", "-j", "link", "show", "dev", device])) as Array<{
    stats64: { rx: { packets: number; bytes: number }; tx: { packets: number; bytes: number } };
  }>;
  const { rx, tx } = link.stats64;
  return { rx: { packets: rx.packets, bytes: rx.bytes }, tx: { packets: tx.packets, bytes: tx.bytes } };
}

/** The l3dsr's counters: its segment leg, and what its kernel received and forwarded. */
export function l3dsrCounters(inv: LabInventory): L3dsrCounters {
  const l3 = l3dsrOf(inv);
  const snmp = execFileSync("ip", ["netns", "exec", l3.namespace, "cat", "/proc/net/snmp"], { encoding: "utf8" })
    .split("\n")
    .filter((l) => l.startsWith("Ip:"));
  const names = snmp[0].split(/\s+/);
  const values = snmp[1].split(/\s+/).map(Number);
  const field = (n: string) => values[names.indexOf(n)];
  const snmp6 = execFileSync("ip", ["netns", "exec", l3.namespace, "cat", "/proc/net/snmp6"], { encoding: "utf8" });
  const forwarded6 = Number(/^Ip6OutForwDatagrams\s+(\d+)$/m.exec(snmp6)?.[1] ?? NaN);
  return { segment: linkStats(l3.namespace, l3.segment.port), forwarded: field("ForwDatagrams"), forwarded6, received: field("InReceives") };
}
