import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";

/**
 * Hosts whose daemons run from another distribution's root than this
 * machine's (the roots tools/distro-root.sh builds: Debian 13's Open vSwitch
 * 3.5 and OVN 25.03, Ubuntu 24.04's 3.3 and 24.03): its ovsdb-server, ovs-vswitchd, OVN daemons, sshd and every
 * command a login runs are that root's, chrooted. /proc, /sys and /dev are
 * mounted in it, tmpfs on /run and /tmp, and the lab's directory at its own
 * path (so run directories, keys and configs have one path inside and out),
 * all in a mount namespace of the host's own that a holder process keeps:
 * the cached root itself never sees a mount or a write.
 */

/** The releases tools/distro-root.sh builds a root of: Debian 13 and Ubuntu 24.04 LTS. */
export const RELEASES = ["trixie", "noble"] as const;
export type Release = (typeof RELEASES)[number];

/** Where tools/distro-root.sh builds a release's root (OVSLB_CACHE_DIR overrides /var/cache/ovslb). */
export function distroRoot(release: Release): string {
  return join(process.env.OVSLB_CACHE_DIR ?? "/var/cache/ovslb", "roots", release);
}

/** A host's root: the Debian root and the holder of the mount namespace it is mounted in. */
export interface HostRoot {
  path: string;
  holderPidFile: string;
}

/**
 * Starts the holder of a host's mounts in its network namespace and waits
 * until its mounts are made (its pid file appears, written last). The
 * holder is `sleep infinity`, started detached: killing it (after the
 * daemons that run in its mount namespace) ends the mounts.
 */
export function mountRoot(namespace: string, root: HostRoot, labDir: string, timeoutMs = 10_000): void {
  if (!existsSync(join(root.path, "usr", "sbin", "ovs-vswitchd")))
    throw new Error(`${root.path} has no Open vSwitch: build it with tools/distro-root.sh ${basename(root.path)}`);
  const child = spawn(
    "ip",
    ["netns", "exec", namespace, "unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT_ROOT, "sh", root.path, labDir, root.holderPidFile],
    { detached: true, stdio: "ignore" },
  );
  child.unref();
  const deadline = Date.now() + timeoutMs;
  while (!(existsSync(root.holderPidFile) && readFileSync(root.holderPidFile, "utf8").endsWith("\n"))) {
    if (Date.now() > deadline) throw new Error(`the mounts of ${root.path} in ${namespace} were not made within ${timeoutMs} ms`);
    execFileSync("sleep", ["0.02"]);
  }
}

/** argv as run in a host's namespace: chrooted into its root when it has one. */
export function inHostArgv(namespace: string, root: HostRoot | undefined, argv: string[]): string[] {
  if (!root) return ["ip", "netns", "exec", namespace, ...argv];
  const holder = readFileSync(root.holderPidFile, "utf8").trim();
  return ["nsenter", "-t", holder, "-m", "-n", "--", "chroot", root.path, ...argv];
}

/**
 * The mounts of a host's root, in the mount namespace its holder (this
 * shell, then `sleep`) keeps: $1 the root, $2 the lab's directory, $3 the
 * holder's pid file, written last.
 */
const MOUNT_ROOT = `set -e
mount -t proc proc "$1/proc"
mount --rbind /sys "$1/sys"
mount --rbind /dev "$1/dev"
mount -t tmpfs -o mode=0755 tmpfs "$1/run"
mount -t tmpfs -o mode=1777 tmpfs "$1/tmp"
mkdir -p "$1/run/sshd" "$1$2"
mount --bind "$2" "$1$2"
echo $$ > "$3.new" && mv "$3.new" "$3"
exec sleep infinity`;
