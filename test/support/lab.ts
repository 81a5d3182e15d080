import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { DEFAULT_LAB_DIR, isAlive, vswitchdCommand } from "../lab/lab";
import { inHostArgv } from "../lab/root";
import { waitUntil } from "./wait";
import type { LabHost, LabInventory } from "../lab/topology";
import { SshSession, type SshConnection } from "../../provider/transport/ssh";

/** The lab's inventory, as written by `npm run lab -- up` (the global setup brings it up). */
export function loadInventory(): LabInventory {
  const path = join(process.env.OVSLB_LAB_DIR ?? DEFAULT_LAB_DIR, "inventory.json");
  if (!existsSync(path)) throw new Error(`no lab inventory at ${path}: run "npm run lab -- up" as root`);
  return JSON.parse(readFileSync(path, "utf8"));
}

/** An SSH connection to a lab host, with its host key pinned. */
export function sshTo(inv: LabInventory, host: string | LabHost, extra: Partial<SshConnection> = {}): SshConnection {
  const h = typeof host === "string" ? inv.hosts[host] : host;
  if (!h) throw new Error(`no lab host ${JSON.stringify(host)}`);
  return { host: h.address, port: h.sshPort, user: h.user, hostKey: h.hostKey, privateKeyPath: inv.clientKeyPath, ...extra };
}

/**
 * The environment a lab host's own tools need to find its daemons:
 * OVS_RUNDIR (db.sock, BRIDGE.mgmt, ovs-vswitchd's control socket) on an
 * OVS host, OVN_RUNDIR (the NB and SB sockets) on OVN central. The lab's
 * sshd sets none, as a real host's does not.
 */
export function runDirEnv(h: LabHost): string[] {
  if (h.ovsRundir) return [`OVS_RUNDIR=${h.ovsRundir}`];
  if (h.ovn) return [`OVN_RUNDIR=${h.ovn.rundir}`];
  return [];
}

/**
 * An SSH session to a lab host for a test's own commands (ovs-vsctl,
 * ovs-ofctl BRIDGE, ovs-appctl, ovn-nbctl, traces): each runs under `env`
 * with the host's run directory. The provider opens its own sessions from
 * sshTo() connections, which carry no environment, so provider code that
 * forgets the run directory still fails.
 */
export async function labSsh(inv: LabInventory, host: string | LabHost): Promise<SshSession> {
  const h = typeof host === "string" ? inv.hosts[host] : host;
  if (!h) throw new Error(`no lab host ${JSON.stringify(host)}`);
  const session = await SshSession.connect(sshTo(inv, h));
  const env = runDirEnv(h);
  const run = session.run.bind(session);
  session.run = (argv, opts) => run(["env", ...env, ...argv], opts);
  return session;
}

/** Runs argv inside a lab namespace (VMs and the client are not managed hosts: no SSH there). */
export function inNamespace(ns: string, argv: string[], input?: string): string {
  return execFileSync("ip", ["netns", "exec", ns, ...argv], { encoding: "utf8", input });
}

/** Kills a lab host's ovs-vswitchd (SIGKILL: a crash, nothing cleaned up) and starts it again as the lab does; its OpenFlow flows are gone, OVSDB is kept. */
export async function restartVswitchd(host: LabHost): Promise<void> {
  const rundir = host.ovsRundir!;
  const pid = Number(readFileSync(join(rundir, "ovs-vswitchd.pid"), "utf8").trim());
  process.kill(pid, "SIGKILL");
  // Gone means every thread gone: until then it holds the pidfile's lock and a new ovs-vswitchd aborts.
  await waitUntil(() => !isAlive(pid), { what: `ovs-vswitchd ${pid} on ${host.name} gone after SIGKILL`, timeoutMs: 10_000, intervalMs: 10 });
  const [cmd, ...args] = inHostArgv(host.namespace, host.root, vswitchdCommand(rundir));
  execFileSync(cmd, args, {
    env: { ...process.env, OVS_RUNDIR: rundir, OVS_DBDIR: rundir, OVS_LOGDIR: rundir },
  });
}

/**
 * An amphora's VIP on its loopback (or off again): it serves the VIP but
 * must not answer ARP for it, which the distributor does.
 */
export function amphoraVip(b: { namespace: string }, vip: string, on: boolean): void {
  // IPv6 needs no sysctl: Linux answers a neighbour solicitation only for an address of the interface it came in on, never lo's.
  const v6 = vip.includes(":");
  const prefix = `${vip}/${v6 ? 128 : 32}`;
  if (on) {
    if (!v6)
      for (const [k, v] of [
        ["arp_ignore", "1"],
        ["arp_announce", "2"],
      ])
        inNamespace(b.namespace, ["sysctl", "-q", "-w", `net.ipv4.conf.all.${k}=${v}`]);
    inNamespace(b.namespace, ["ip", "addr", "replace", prefix, "dev", "lo"]);
  } else {
    inNamespace(b.namespace, ["ip", "addr", "flush", "dev", "lo", "to", prefix]);
    if (!v6) for (const k of ["arp_ignore", "arp_announce"]) inNamespace(b.namespace, ["sysctl", "-q", "-w", `net.ipv4.conf.all.${k}=0`]);
  }
}

/** Spawns a long-running process inside a lab namespace. */
export function spawnInNamespace(ns: string, argv: string[]): ChildProcess {
  const child = spawn("ip", ["netns", "exec", ns, ...argv], { stdio: ["pipe", "pipe", "pipe"] });
  // Writing to a client that has exited fails its next read instead of crashing the test run.
  child.stdin.on("error", () => undefined);
  return child;
}

/**
 * An exclusive lock on a share of the lab (e.g. the distributor), across test
 * runs started from different checkouts or sessions at the same time. It is
 * flock(1) on a file in the lab's directory, held by a child process that
 * ends when its input closes, so a holder that dies (a killed test run)
 * releases it at once. Resolves with the release.
 */
export async function lockLab(name: string, timeoutMs = 300_000): Promise<() => void> {
  const unlock = await takeLabLock(name, timeoutMs);
  if (!unlock) throw new Error(`lab lock ${name}: not taken`);
  return unlock;
}

/** lockLab's lock, or (timeoutMs 0) undefined at once when another holds it. */
async function takeLabLock(name: string, timeoutMs: number): Promise<(() => void) | undefined> {
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`lab lock name ${JSON.stringify(name)} is not [a-z0-9-]+`);
  const path = join(process.env.OVSLB_LAB_DIR ?? DEFAULT_LAB_DIR, `${name}.lock`);
  const wait = timeoutMs > 0 ? ["-w", String(Math.ceil(timeoutMs / 1000))] : ["-n"];
  const holder = spawn("flock", ["-x", ...wait, path, "sh", "-c", "echo locked; exec cat >/dev/null"], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  holder.stdin.on("error", () => undefined);
  let stderr = "";
  holder.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const taken = await new Promise<boolean>((resolve, reject) => {
    holder.stdout.once("data", () => resolve(true));
    holder.once("close", (code) => {
      // flock -n exits 1 when the lock is held elsewhere.
      if (timeoutMs === 0 && code === 1) resolve(false);
      else reject(new Error(`lab lock ${name}: not taken within ${timeoutMs} ms (flock exited ${code}) ${stderr.trim()}`));
    });
    holder.once("error", reject);
  });
  if (!taken) return undefined;
  // The holder must not keep this process alive, nor outlive it.
  holder.unref();
  for (const stream of [holder.stdin, holder.stdout, holder.stderr]) (stream as unknown as { unref?: () => void }).unref?.();
  return () => void holder.stdin.end();
}

/**
 * Several of lockLab's locks at once. It never holds one while it waits for
 * another: it waits for one, tries the rest without waiting, and when one is
 * held elsewhere lets all go and waits for that one first. Holding one while
 * waiting would keep that share from every other lane for as long as the
 * other share stays busy.
 */
export async function lockLabAll(names: readonly string[], timeoutMs = 600_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  let first = names[0];
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`lab locks ${names.join(", ")}: not all taken within ${timeoutMs} ms`);
    const held = [await lockLab(first, left)];
    let busy: string | undefined;
    for (const name of names.filter((n) => n !== first)) {
      const unlock = await takeLabLock(name, 0);
      if (!unlock) {
        busy = name;
        break;
      }
      held.push(unlock);
    }
    if (!busy) return () => held.forEach((u) => u());
    held.forEach((u) => u());
    first = busy;
  }
}
