import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { DEFAULT_LAB_DIR } from "../lab/lab";
import type { LabHost, LabInventory } from "../lab/topology";
import type { SshConnection } from "../../provider/transport/ssh";

/** The lab's inventory, as written by `npm run lab -- up` (the global setup brings it up). */
export function loadInventory(): LabInventory {
  const path = join(process.env.OVSLB_LAB_DIR ?? DEFAULT_LAB_DIR, "inventory.json");
  if (!existsSync(path)) throw new Error(`no lab inventory at ${path}: run "npm run lab -- up" as root`);
  return JSON.parse(readFileSync(path, "utf8"));
}

/** An SSH connection to a lab host, with its host key pinned. */
export function sshTo(inv: LabInventory, host: string | LabHost, extra: Partial<SshConnection> = {}): SshConnection {
  const h = typeof host === "string" ? inv.hosts[host] : host;
  if (!h) throw new Error(`no lab host ${String(host)}`);
  return { host: h.address, port: h.sshPort, user: h.user, hostKey: h.hostKey, privateKeyPath: inv.clientKeyPath, ...extra };
}

/** Runs argv inside a lab namespace (VMs and the client are not managed hosts: no SSH there). */
export function inNamespace(ns: string, argv: string[], input?: string): string {
  return execFileSync("ip", ["netns", "exec", ns, ...argv], { encoding: "utf8", input });
}

/** Spawns a long-running process inside a lab namespace. */
export function spawnInNamespace(ns: string, argv: string[]): ChildProcess {
  return spawn("ip", ["netns", "exec", ns, ...argv], { stdio: ["pipe", "pipe", "pipe"] });
}
