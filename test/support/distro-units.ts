import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * The ovsdb-server and ovs-vswitchd unit files a distribution ships, for
 * docs/hosts.md's tests. Debian 12's are this machine's (openvswitch-switch
 * 3.1.0). The others come from the distribution's openvswitch-switch package
 * (amd64, main), fetched once into /var/cache/ovslb/NAME (OVSLB_CACHE_DIR
 * overrides /var/cache/ovslb) and unpacked with dpkg-deb -x; a second run
 * uses the copy and no network. Each suite's InRelease is checked with gpgv
 * against the archive's keyring, the Packages.xz against the SHA256 that
 * verified file gives, and the .deb against its Packages entry's SHA256;
 * anything that does not verify is refused. Among several suites (a release
 * and its updates) the newest version wins.
 */

export interface DistroUnits {
  /** e.g. "Debian 13 (openvswitch-switch 3.5.0-1+b1)". */
  name: string;
  /** The directory holding ovsdb-server.service and ovs-vswitchd.service. */
  dir: string;
}

export interface Archive {
  /** e.g. "Ubuntu 24.04". */
  label: string;
  /** Its directory under the cache. */
  cacheName: string;
  mirror: string;
  suites: string[];
  /** The keyring its InRelease files are signed with, and the package that ships it. */
  keyring: string;
  keyringPackage: string;
}

const PACKAGE = "openvswitch-switch";
const UBUNTU_MIRROR = process.env.OVSLB_UBUNTU_MIRROR ?? "http://archive.ubuntu.com/ubuntu";
const UBUNTU_KEYRING = {
  keyring: "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
  keyringPackage: "ubuntu-keyring; Debian 12 has it in bookworm-backports, which tools/distro-root.sh noble sets up",
};

export const ARCHIVES = {
  debian13: {
    label: "Debian 13",
    cacheName: "debian-trixie",
    mirror: "https://deb.debian.org/debian",
    suites: ["trixie"],
    keyring: "/usr/share/keyrings/debian-archive-keyring.gpg",
    keyringPackage: "debian-archive-keyring",
  },
  ubuntu2404: {
    label: "Ubuntu 24.04",
    cacheName: "ubuntu-noble",
    mirror: UBUNTU_MIRROR,
    suites: ["noble", "noble-updates", "noble-security"],
    ...UBUNTU_KEYRING,
  },
  ubuntu2204: {
    label: "Ubuntu 22.04",
    cacheName: "ubuntu-jammy",
    mirror: UBUNTU_MIRROR,
    suites: ["jammy", "jammy-updates", "jammy-security"],
    ...UBUNTU_KEYRING,
  },
} satisfies Record<string, Archive>;

export const cacheDir = (archive: Archive) => join(process.env.OVSLB_CACHE_DIR ?? "/var/cache/ovslb", archive.cacheName);

export function debian12Units(): DistroUnits {
  const version = execFileSync("dpkg-query", ["-W", "-f=${Version}", PACKAGE], { encoding: "utf8" }).trim();
  return { name: `Debian 12 (${PACKAGE} ${version})`, dir: "/lib/systemd/system" };
}

export const debian13Units = () => archiveUnits(ARCHIVES.debian13);
export const ubuntu2404Units = () => archiveUnits(ARCHIVES.ubuntu2404);
export const ubuntu2204Units = () => archiveUnits(ARCHIVES.ubuntu2204);

/** The archive's openvswitch-switch, unpacked (fetched and verified first if no copy is cached). */
export function archiveUnits(archive: Archive): DistroUnits {
  const cache = cacheDir(archive);
  mkdirSync(cache, { recursive: true });
  let deb = readdirSync(cache).find((f) => new RegExp(`^${PACKAGE}_.+_amd64\\.deb$`).test(f));
  if (!deb) deb = download(archive, cache);
  const root = join(cache, deb.replace(/\.deb$/, ""));
  let dir = unitDir(root);
  if (!dir) {
    const partial = `${root}.partial`;
    rmSync(partial, { recursive: true, force: true });
    execFileSync("dpkg-deb", ["-x", join(cache, deb), partial]);
    rmSync(root, { recursive: true, force: true });
    renameSync(partial, root);
    dir = unitDir(root);
    if (!dir) throw new Error(`${join(cache, deb)} has no ovsdb-server.service under lib/systemd/system or usr/lib/systemd/system`);
  }
  return { name: `${archive.label} (${PACKAGE} ${deb.split("_")[1]})`, dir };
}

// Older packages put units in /lib, newer ones (merged /usr) in /usr/lib.
function unitDir(root: string): string | undefined {
  return ["lib", "usr/lib"].map((d) => join(root, d, "systemd", "system")).find((d) => existsSync(join(d, "ovsdb-server.service")));
}

function fetchBytes(url: string): Buffer {
  const r = spawnSync("curl", ["-fsS", "--max-time", "300", url], { maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`fetching ${url} failed (curl exit ${r.status ?? r.signal}): ${r.stderr.toString().trim()}`);
  return r.stdout;
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

/**
 * The Release text an InRelease file signs, once gpgv has checked it against
 * the keyring: at least one good signature, none bad, and the suite the
 * caller asked for (so another suite's file is refused too).
 */
export function verifiedRelease(signed: Buffer, archive: Archive, suite: string): string {
  const what = `${archive.label}'s ${suite} InRelease`;
  if (!existsSync(archive.keyring)) throw new Error(`${what}: no ${archive.keyring} to check it with (install ${archive.keyringPackage})`);
  const dir = mkdtempSync(join(tmpdir(), "ovslb-release-"));
  try {
    writeFileSync(join(dir, "InRelease"), signed);
    const r = spawnSync("gpgv", ["--keyring", archive.keyring, "--status-fd", "1", "--output", join(dir, "Release"), join(dir, "InRelease")], {
      encoding: "utf8",
    });
    if (r.error) throw new Error(`${what}: running gpgv failed: ${r.error.message}`);
    const good = /^\[GNUPG:\] VALIDSIG /m.test(r.stdout);
    const bad = /^\[GNUPG:\] (BADSIG|ERRSIG|EXPSIG|EXPKEYSIG|REVKEYSIG) /m.test(r.stdout);
    if (r.status !== 0 || !good || bad) throw new Error(`${what} does not verify against ${archive.keyring} (gpgv exit ${r.status}): ${r.stderr.trim()}`);
    const release = readFileSync(join(dir, "Release"), "utf8");
    const field = (name: string) => new RegExp(`^${name}: (\\S+)$`, "m").exec(release)?.[1];
    if (field("Suite") !== suite && field("Codename") !== suite) {
      throw new Error(`${what} is signed but names suite ${field("Suite")} (codename ${field("Codename")}), not ${suite}`);
    }
    return release;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The SHA256 a Release file gives for one of its index files. */
export function releaseSha256(release: string, path: string): string | undefined {
  const section = /^SHA256:\n((?:[ \t].*(?:\n|$))*)/m.exec(release)?.[1] ?? "";
  for (const line of section.split("\n")) {
    const [hash, , p] = line.trim().split(/\s+/);
    if (p === path && /^[0-9a-f]{64}$/.test(hash)) return hash;
  }
  return undefined;
}

interface Candidate {
  suite: string;
  version: string;
  filename: string;
  sha256: string;
}

/** The package's entry in one suite's main amd64 index, each file checked on the way; undefined if the suite has none. */
function candidate(archive: Archive, cache: string, suite: string): Candidate | undefined {
  const signed = fetchBytes(`${archive.mirror}/dists/${suite}/InRelease`);
  const release = verifiedRelease(signed, archive, suite);
  const index = "main/binary-amd64/Packages.xz";
  const want = releaseSha256(release, index);
  if (!want) throw new Error(`${archive.label}'s ${suite} InRelease gives no SHA256 for ${index}`);
  // By hash when the archive offers it: the file cannot change under us between the two requests.
  const byHash = /^Acquire-By-Hash: yes$/m.test(release);
  const url = `${archive.mirror}/dists/${suite}/${byHash ? `main/binary-amd64/by-hash/SHA256/${want}` : index}`;
  const xz = fetchBytes(url);
  if (sha256(xz) !== want) throw new Error(`${url}: SHA256 ${sha256(xz)}, ${suite}'s verified InRelease says ${want}`);
  writeFileSync(join(cache, `${suite}.InRelease`), signed);
  const packages = execFileSync("xz", ["-dc"], { input: xz, encoding: "utf8", maxBuffer: 1 << 30 });
  const stanza = packages.split("\n\n").find((s) => s.startsWith(`Package: ${PACKAGE}\n`));
  if (!stanza) return undefined;
  const field = (name: string) => new RegExp(`^${name}: (\\S+)$`, "m").exec(stanza)?.[1];
  const [version, filename, hash] = [field("Version"), field("Filename"), field("SHA256")];
  if (!version || !filename || !hash || !/^[0-9a-f]{64}$/.test(hash))
    throw new Error(`${archive.label}'s ${suite} Packages: ${PACKAGE}'s entry lacks Version, Filename or SHA256`);
  return { suite, version, filename, sha256: hash };
}

const newer = (a: string, b: string) => spawnSync("dpkg", ["--compare-versions", a, "gt", b]).status === 0;

function download(archive: Archive, cache: string): string {
  let best: Candidate | undefined;
  for (const suite of archive.suites) {
    const c = candidate(archive, cache, suite);
    if (c && (!best || newer(c.version, best.version))) best = c;
  }
  if (!best) throw new Error(`${archive.label}: no ${PACKAGE} in ${archive.suites.join(", ")} (main, amd64)`);
  const name = best.filename.split("/").pop()!;
  const url = `${archive.mirror}/${best.filename}`;
  const deb = fetchBytes(url);
  if (sha256(deb) !== best.sha256) throw new Error(`${url}: SHA256 ${sha256(deb)}, ${best.suite}'s verified Packages index says ${best.sha256}`);
  const partial = join(cache, `${name}.partial`);
  writeFileSync(partial, deb);
  renameSync(partial, join(cache, name));
  return name;
}
