import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";

/**
 * The ovsdb-server and ovs-vswitchd unit files a distribution ships, for
 * docs/hosts.md's tests. Debian 12's are this machine's (openvswitch-switch
 * 3.1.0). Debian 13's come from trixie's openvswitch-switch package on
 * deb.debian.org: its file name and SHA256 from the suite's Packages index,
 * downloaded once into /var/cache/ovslb/debian-trixie (OVSLB_CACHE_DIR
 * overrides /var/cache/ovslb) and unpacked with dpkg-deb -x.
 */

const MIRROR = "https://deb.debian.org/debian";
const cacheDir = () => join(process.env.OVSLB_CACHE_DIR ?? "/var/cache/ovslb", "debian-trixie");

export interface DistroUnits {
  /** e.g. "Debian 13 (openvswitch-switch 3.5.0-1+b1)". */
  name: string;
  /** The directory holding ovsdb-server.service and ovs-vswitchd.service. */
  dir: string;
}

export function debian12Units(): DistroUnits {
  const version = execFileSync("dpkg-query", ["-W", "-f=${Version}", "openvswitch-switch"], { encoding: "utf8" }).trim();
  return { name: `Debian 12 (openvswitch-switch ${version})`, dir: "/lib/systemd/system" };
}

/** trixie's openvswitch-switch, unpacked (fetched first if no copy is cached). */
export function debian13Units(): DistroUnits {
  const cache = cacheDir();
  mkdirSync(cache, { recursive: true });
  let deb = readdirSync(cache).find((f) => /^openvswitch-switch_.+_amd64\.deb$/.test(f));
  if (!deb) deb = download(cache);
  const root = join(cache, deb.replace(/\.deb$/, ""));
  if (!existsSync(join(root, "usr", "lib", "systemd", "system", "ovsdb-server.service"))) {
    rmSync(root, { recursive: true, force: true });
    execFileSync("dpkg-deb", ["-x", join(cache, deb), root]);
  }
  return { name: `Debian 13 (openvswitch-switch ${deb.split("_")[1]})`, dir: join(root, "usr", "lib", "systemd", "system") };
}

function download(cache: string): string {
  const index = execFileSync("sh", ["-c", 'curl -fsS --max-time 120 "$1" | xz -dc', "sh", `${MIRROR}/dists/trixie/main/binary-amd64/Packages.xz`], {
    encoding: "utf8",
    maxBuffer: 512 * 1024 * 1024,
  });
  const stanza = index.split("\n\n").find((s) => s.startsWith("Package: openvswitch-switch\n"));
  const filename = stanza && /^Filename: (\S+)$/m.exec(stanza)?.[1];
  const sha256 = stanza && /^SHA256: ([0-9a-f]{64})$/m.exec(stanza)?.[1];
  if (!filename || !sha256) throw new Error("trixie's Packages index names no openvswitch-switch");
  const name = filename.split("/").pop()!;
  const partial = join(cache, `${name}.partial`);
  execFileSync("curl", ["-fsS", "--max-time", "300", "-o", partial, `${MIRROR}/${filename}`]);
  const got = createHash("sha256").update(readFileSync(partial)).digest("hex");
  if (got !== sha256) {
    rmSync(partial, { force: true });
    throw new Error(`${name}: SHA256 ${got}, the Packages index says ${sha256}`);
  }
  renameSync(partial, join(cache, name));
  return name;
}
