import { createHash } from "node:crypto";
import { blobKeyType, knownHostsToken } from "../transport/known-hosts";
import { issuesOn, parseVersion, KNOWN_ISSUES } from "../model/ovs-versions";
import { greOverhead, overheadParts, type UnderlayFacts } from "../transport/underlay";

/**
 * `ovslb doctor`'s checks as data: one row per host and check, with what
 * was found and, for a failure, the fix. Pure: every function here turns
 * what the I/O (provider/doctor/probe.ts) found into a row, so each verdict
 * and its wording is unit-tested without a host.
 */

/** ok: fine; FAIL: ovslb will fail there (doctor exits non-zero); warn: works, with a risk named; skip: not checked (what it needs failed first, or nothing to check). */
export type CheckStatus = "ok" | "FAIL" | "warn" | "skip";

export interface DoctorCheck {
  /** The host's name in ovslb:hosts (or `user@address` of --host; `(stack)` for the config as a whole). */
  host: string;
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it: every FAIL and warn has one. */
  fix?: string;
}

export const ok = (host: string, check: string, detail: string): DoctorCheck => ({ host, check, status: "ok", detail });
export const fail = (host: string, check: string, detail: string, fix: string): DoctorCheck => ({ host, check, status: "FAIL", detail, fix });
export const warn = (host: string, check: string, detail: string, fix: string): DoctorCheck => ({ host, check, status: "warn", detail, fix });
export const skip = (host: string, check: string, detail: string): DoctorCheck => ({ host, check, status: "skip", detail });

/** The oldest Open vSwitch ovslb supports (README, Install). */
export const MIN_OVS = "3.1.0";
/** Share of a conntrack limit at which a zone (or the table) is reported as nearly full. */
export const NEARLY_FULL = 0.9;

// ---------------------------------------------------------------- host keys

/** `SHA256:...` as `ssh-keygen -lf` prints it. */
export const fingerprint = (blob: Buffer) => `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;

/** `ssh-ed25519 AAAA...`, the value of hostKey. */
export const publicKeyText = (blob: Buffer) => `${blobKeyType(blob)} ${blob.toString("base64")}`;

export interface HostKeyFacts {
  host: string;
  address: string;
  port: number;
  /** Where the pin goes: `ovslb:hosts.gw1` or `--host`. */
  configKey: string;
  /** The pinned key's (or the known_hosts keys') fingerprints; empty: nothing pinned. */
  pinned: string[];
  /** The key the host presented when offered the pinned types (undefined: it offers none of them, or nothing pinned). */
  presentedPinnedType?: Buffer;
  /** Whether that key is the pinned one. */
  matches: boolean;
  /** The key it presents of any type (ed25519 first), to print the line to pin; undefined when even that failed. */
  anyKey?: Buffer;
  /** Why no key could be read, when none could. */
  error?: string;
}

function pinFix(f: HostKeyFacts, key: Buffer | undefined): string {
  if (!key) return "check that sshd runs there and has a host key of a type ovslb supports (ed25519, ecdsa, rsa)";
  const text = publicKeyText(key);
  const where = f.configKey === "--host" ? `--host-key '${text}'` : `pulumi config set --path '${f.configKey}.connection.hostKey' '${text}'`;
  return `compare ${fingerprint(key)} with \`ssh-keygen -lf /etc/ssh/ssh_host_${keyFileType(blobKeyType(key))}_key.pub\` on the host's console, then pin it: ${where} (known_hosts line: ${knownHostsToken(f.address, f.port)} ${text})`;
}

const keyFileType = (type: string) => (type === "ssh-ed25519" ? "ed25519" : type.startsWith("ecdsa") ? "ecdsa" : "rsa");

export function hostKeyCheck(f: HostKeyFacts): DoctorCheck {
  const check = "host key";
  if (f.pinned.length === 0) {
    if (!f.anyKey) return fail(f.host, check, `no host key is pinned, and none could be read: ${f.error ?? "unknown"}`, pinFix(f, undefined));
    return fail(
      f.host,
      check,
      `no host key is pinned for ${knownHostsToken(f.address, f.port)}; it presents ${blobKeyType(f.anyKey)} ${fingerprint(f.anyKey)}`,
      pinFix(f, f.anyKey),
    );
  }
  if (f.presentedPinnedType && f.matches)
    return ok(f.host, check, `${blobKeyType(f.presentedPinnedType)} ${fingerprint(f.presentedPinnedType)} is the pinned key`);
  if (f.presentedPinnedType) {
    return fail(
      f.host,
      check,
      `the host presents ${blobKeyType(f.presentedPinnedType)} ${fingerprint(f.presentedPinnedType)}, not the pinned key (${f.pinned.join(", ")}): ovslb refuses to connect`,
      `if the host's key changed on purpose (a reinstall), ${pinFix(f, f.presentedPinnedType)}; otherwise do not connect: something else answers at that address`,
    );
  }
  const offers = f.anyKey ? `; it offers ${blobKeyType(f.anyKey)} ${fingerprint(f.anyKey)}` : f.error ? ` (${f.error})` : "";
  return fail(
    f.host,
    check,
    `the host offers no key of the pinned type${offers}: ovslb refuses to connect (another host, or a downgrade)`,
    pinFix(f, f.anyKey),
  );
}

// ---------------------------------------------------------------- reach and login

export function reachableCheck(host: string, target: string, r: { banner?: string; error?: string; via?: string }): DoctorCheck {
  const via = r.via ? ` through jump host ${r.via}` : "";
  if (r.banner !== undefined) {
    if (!r.banner.startsWith("SSH-"))
      return fail(
        host,
        "reachable",
        `${target}${via} answers, but not as an SSH server (${JSON.stringify(r.banner.slice(0, 40))})`,
        "give the port sshd listens on",
      );
    return ok(host, "reachable", `${target}${via}: ${r.banner}`);
  }
  const e = r.error ?? "no answer";
  let fix = "check the address and port, the route to it, and any firewall between";
  if (/ECONNREFUSED|Connection refused/i.test(e)) fix = "nothing listens there: start sshd, or give the port it listens on";
  else if (/ENOTFOUND|EAI_AGAIN/.test(e)) fix = "the name does not resolve: give an address or a name DNS knows";
  else if (/timed out|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH/i.test(e))
    fix = "no answer: check the route to the host and any firewall between (TCP to the SSH port)";
  return fail(host, "reachable", `${target}${via}: ${e}`, fix);
}

/** Why a login failed, in words, and its fix; the message is ssh2's or the transport's (neither ever holds key material). */
export function loginCheck(host: string, user: string | undefined, error?: string): DoctorCheck {
  if (error === undefined) return ok(host, "login", `logged in as ${user}`);
  if (/All configured authentication methods failed/.test(error)) {
    return fail(
      host,
      "login",
      `the host did not accept the key for ${user}`,
      `add the key's public half to ~${user}/.ssh/authorized_keys on the host (and check AllowUsers/AllowGroups in sshd_config), or set the key ovslb:ssh gives`,
    );
  }
  if (/Encrypted private (OpenSSH )?key detected, but no passphrase given|passphrase/i.test(error)) {
    return fail(
      host,
      "login",
      "the private key is encrypted and no passphrase (or the wrong one) is set",
      "set it as a secret: pulumi config set --secret --path ovslb:ssh.passphrase ... (or use an agent)",
    );
  }
  if (/Cannot parse privateKey|does not contain a \(valid\) private key|Unsupported key format/i.test(error)) {
    return fail(
      host,
      "login",
      "the private key cannot be used (not a private key ssh2 can read)",
      "give an OpenSSH or PEM private key (ssh-keygen -t ed25519), as a secret in ovslb:ssh.privateKey or by privateKeyPath",
    );
  }
  if (/ENOENT|EACCES/.test(error))
    return fail(
      host,
      "login",
      `the private key file cannot be read: ${error.replace(/^.*?(ENOENT|EACCES)/, "$1")}`,
      "give a privateKeyPath this process can read",
    );
  return fail(host, "login", error, "see sshd's log on the host (journalctl -u ssh) for why it refused the login");
}

// ---------------------------------------------------------------- sockets

/** What a command run as the login user found of a socket. */
export interface SocketFacts {
  path: string;
  /** `-S`: there and a socket. */
  exists: boolean;
  /** `-w`: the login user may write (connect to) it. */
  writable: boolean;
  /** `-x` on its directory: the login user may reach it. */
  dirSearchable: boolean;
  /** `-d` on its directory (false only when the login user can tell it is missing). */
  dirExists?: boolean;
  /** `stat -c '%U:%G %a'` of the socket, when readable. */
  mode?: string;
  user?: string;
  /** The login user's groups (`id -Gn`). */
  groups?: string;
}

const LEAST_PRIVILEGE =
  "add the login user to the group that owns the OVS run directory and keep the daemons' sockets group-writable (README, Least privilege: the group, UMask=0007 and a setgid run directory)";

/** Why the login user cannot use a socket, from what it sees of it (undefined: it can). */
export function socketProblem(f: SocketFacts): { detail: string; fix: string } | undefined {
  if (f.dirExists === false) {
    return {
      detail: `${dirOf(f.path)} does not exist: no Open vSwitch runs with that run directory`,
      fix: "install and start Open vSwitch, or give the run directory its daemons use as ovsRundir (`pulumi config set --path 'ovslb:hosts.NAME.ovsRundir' DIR`)",
    };
  }
  if (!f.dirSearchable) return { detail: `${f.user ?? "the login user"} cannot enter ${dirOf(f.path)} (no search permission)`, fix: LEAST_PRIVILEGE };
  if (!f.exists) {
    return {
      detail: `${f.path} does not exist`,
      fix: "start the daemon, or give the run directory it uses as ovsRundir (`pulumi config set --path 'ovslb:hosts.NAME.ovsRundir' /var/run/openvswitch`)",
    };
  }
  if (!f.writable) {
    return {
      detail: `${f.user ?? "the login user"} (groups: ${f.groups ?? "?"}) may not write ${f.path}${f.mode ? ` (${f.mode})` : ""}`,
      fix: LEAST_PRIVILEGE,
    };
  }
  return undefined;
}

const dirOf = (path: string) => path.slice(0, path.lastIndexOf("/")) || "/";

export type TcpForwarding = "works" | "refused" | "unknown";

/** What is known of a stream-local channel that failed: the error, the socket as the login user sees it, whether sshd forwards TCP, and the key options sshd reported at login. */
export interface ChannelFacts {
  error?: string;
  socket?: SocketFacts;
  tcpForwarding?: TcpForwarding;
  /** `port-forwarding`, `pty`, ... as sshd reports them for the login's key (undefined: it did not say). */
  keyOptions?: readonly string[];
}

/** Why a stream-local channel to a socket failed, from what the login user sees of the socket; sshd's refusal named as such, not as permissions. */
export function streamLocalFailure(r: ChannelFacts & { error: string }, path: string): { detail: string; fix: string } {
  const problem = r.socket && socketProblem(r.socket);
  if (problem) return { detail: `cannot open ${path}: ${problem.detail}`, fix: problem.fix };
  if (r.socket && /open failed|prohibited/i.test(r.error) && r.keyOptions && !r.keyOptions.includes("port-forwarding")) {
    return {
      detail: `sshd refuses the stream-local channel to ${path}, which the login user may use (${r.socket.mode ?? "writable"}): the key's line in authorized_keys forbids forwarding (restrict or no-port-forwarding; sshd says "key options:${r.keyOptions.map((o) => ` ${o}`).join("")}"), not the socket's permissions`,
      fix: "on the key's line in ~LOGIN/.ssh/authorized_keys write restrict,port-forwarding instead of restrict, or drop no-port-forwarding (sshd(8), AUTHORIZED_KEYS FILE FORMAT; docs/hosts.md)".replace(
        "LOGIN",
        r.socket.user ?? "LOGIN",
      ),
    };
  }
  if (r.socket && /open failed|prohibited/i.test(r.error)) {
    const tcp =
      r.tcpForwarding === "refused"
        ? " TCP forwarding is refused too: DisableForwarding yes, or restrict / no-port-forwarding on the key's authorized_keys line."
        : r.tcpForwarding === "works"
          ? " TCP forwarding works: AllowStreamLocalForwarding no (or remote) in sshd_config."
          : "";
    return {
      detail: `sshd refuses the stream-local channel to ${path}, which the login user may use (${r.socket.mode ?? "writable"}): sshd's configuration forbids forwarding to unix sockets, not the socket's permissions.${tcp}`,
      fix: `allow it for the login user: in sshd_config \`Match User ${r.socket.user ?? "LOGIN"}\` with \`AllowStreamLocalForwarding local\`, \`AllowTcpForwarding local\` and \`DisableForwarding no\` (then reload sshd; docs/hosts.md); on the key's authorized_keys line drop no-port-forwarding, or add port-forwarding after restrict`,
    };
  }
  return { detail: `cannot open ${path}: ${r.error}`, fix: "check that the daemon runs and serves that socket (ovsRundir)" };
}

/** The stream-local channel to db.sock, which every resource's OVSDB work goes through. */
export function ovsdbChannelCheck(host: string, path: string, r: ChannelFacts): DoctorCheck {
  const check = "ovsdb channel";
  if (r.error === undefined) return ok(host, check, `stream-local channel to ${path} opens; OVSDB answers`);
  const f = streamLocalFailure({ ...r, error: r.error }, path);
  return fail(host, check, f.detail, f.fix);
}

/** ovs-vswitchd's control socket, which versions, traces and conntrack reads use (over a stream-local channel and ovs-appctl). */
export function vswitchdSocketCheck(host: string, path: string, r: ChannelFacts): DoctorCheck {
  const check = "socket ovs-vswitchd";
  if (r.error === undefined) return ok(host, check, `${path} answers`);
  const f = streamLocalFailure({ ...r, error: r.error }, path);
  return fail(host, check, f.detail, f.fix);
}

// ---------------------------------------------------------------- OVS

export function versionCheck(host: string, version: string | undefined, dpHash: boolean, error?: string): DoctorCheck {
  const check = "ovs version";
  if (version === undefined)
    return fail(
      host,
      check,
      `cannot read ovs-vswitchd's version: ${error ?? "no version in its answer"}`,
      "check that ovs-vswitchd runs and answers `ovs-appctl version`",
    );
  const v = parseVersion(version);
  if (!v)
    return warn(
      host,
      check,
      `Open vSwitch ${version}: not a version ovslb can read, so its known defects are unknown`,
      "run a released Open vSwitch (3.1 or later)",
    );
  if (v[0] < 3 || (v[0] === 3 && v[1] < 1)) {
    return fail(
      host,
      check,
      `Open vSwitch ${version} is older than ${MIN_OVS}, the oldest ovslb supports`,
      "upgrade Open vSwitch to 3.1 or later (3.3 LTS or newer has the fixes below)",
    );
  }
  const issues = issuesOn(version);
  const dp = issues.find((i) => i.id === "dp-hash-buckets");
  if (dpHash && dp) {
    return fail(
      host,
      check,
      `Open vSwitch ${version}: ${dp.what}; dp_hash selection is in use, and ovslb refuses to change a dp_hash group's buckets here`,
      `upgrade to a release with the fix (${dp.fixedIn.join(", ")}), or use selectionMethod hash`,
    );
  }
  const notes = issues.map((i) => `${i.id} (${noteFor(i.id, dpHash)}; fixed in ${i.fixedIn.join(", ")})`);
  return ok(
    host,
    check,
    notes.length === 0
      ? `Open vSwitch ${version}: none of the known defects (${KNOWN_ISSUES.map((i) => i.id).join(", ")})`
      : `Open vSwitch ${version}; known defects: ${notes.join(", ")}`,
  );
}

const noteFor = (id: string, dpHash: boolean) =>
  id === "dp-hash-buckets" ? `ovslb refuses dp_hash bucket changes here${dpHash ? "" : "; selectionMethod hash is unaffected"}` : "reported, not refused";

export interface BridgeFacts {
  name: string;
  /** Whether OVSDB has a Bridge row of that name. */
  exists: boolean;
  datapathType?: string;
  /** Bridge.protocols; empty: OVS's default. */
  protocols?: string[];
  /** Whether `ovs-ofctl -O OpenFlow15 show` answered. */
  speaksOpenFlow15?: boolean;
  /** What the login user sees of BRIDGE.mgmt, when ovs-ofctl could not talk to it. */
  socket?: SocketFacts;
}

/** A bridge's rows: its management socket (as the login user sees it) and whether it exists and speaks OpenFlow 1.5; the datapath row is datapathCheck's. */
export function bridgeChecks(host: string, b: BridgeFacts, known: readonly string[] = []): DoctorCheck[] {
  const check = `bridge ${b.name}`;
  const socket = `socket ${b.name}.mgmt`;
  if (!b.exists) {
    return [
      fail(
        host,
        check,
        `no bridge ${b.name} on this host (it has: ${known.join(", ") || "none"})`,
        `create it (an OvsBridge resource, or \`ovs-vsctl add-br ${b.name}\`), or name a bridge the host has`,
      ),
    ];
  }
  const protocols = b.protocols?.length ? b.protocols.join(",") : "OVS default";
  if (b.speaksOpenFlow15)
    return [ok(host, socket, "ovs-ofctl reaches it as the login user"), ok(host, check, `exists; speaks OpenFlow 1.5 (protocols: ${protocols})`)];
  const problem = b.socket && socketProblem(b.socket);
  if (problem) return [fail(host, socket, problem.detail, problem.fix), skip(host, check, `exists; OpenFlow not checked: needs ${b.name}.mgmt`)];
  const reachable = ok(host, socket, `${b.socket?.path ?? `${b.name}.mgmt`}: the login user may use it`);
  if (b.protocols && b.protocols.length > 0 && !b.protocols.includes("OpenFlow15")) {
    return [
      reachable,
      fail(
        host,
        check,
        `exists, but does not speak OpenFlow 1.5 (protocols: ${protocols}): ovslb speaks only OpenFlow 1.5 (bundles, select groups, insert_bucket)`,
        `ovs-vsctl set bridge ${b.name} protocols=${[...b.protocols, "OpenFlow15"].join(",")}`,
      ),
    ];
  }
  return [
    reachable,
    fail(
      host,
      check,
      `exists, but \`ovs-ofctl -O OpenFlow15 show\` gets no answer from it (protocols: ${protocols})`,
      "check ovs-vswitchd's log for the bridge",
    ),
  ];
}

/** What each datapath type rules out for ovslb. */
export function datapathCheck(host: string, bridge: string, type: string | undefined): DoctorCheck {
  const check = `datapath ${bridge}`;
  const t = type || "system";
  if (t === "netdev") {
    return ok(
      host,
      check,
      "netdev (userspace, as ovslb's lab): OVS routes GRE itself (ovs-appctl ovs/route/show), so a tunnel address must be on a netdev bridge's internal port",
    );
  }
  if (t === "system") {
    return ok(
      host,
      check,
      "system (kernel): gre delivery needs the ip_gre module, connectionLimit needs nf_conncount (Linux 4.18+); not the datapath ovslb's lab tests",
    );
  }
  return warn(
    host,
    check,
    `datapath_type ${t}: neither netdev nor system; ovslb has not run on it`,
    `use datapath_type netdev or system (ovs-vsctl set bridge ${bridge} datapath_type=netdev)`,
  );
}

// ---------------------------------------------------------------- underlay MTU

export function mtuCheck(host: string, segmentMtu: number, facts: readonly UnderlayFacts[]): DoctorCheck {
  const check = "underlay mtu";
  if (facts.length === 0) return skip(host, check, "no tunnel address for this host in the config: gre delivery is not used here (mac delivery adds nothing)");
  const rows: string[] = [];
  const failures: string[] = [];
  const fixes: string[] = [];
  for (const f of facts) {
    const overhead = greOverhead(f.tunnelAddress);
    const need = segmentMtu + overhead;
    if (!f.iface || f.mtu === undefined) {
      failures.push(`no interface holds the tunnel address ${f.tunnelAddress}`);
      fixes.push(`give the host ${f.tunnelAddress} (on the underlay bridge's internal port for the netdev datapath), or correct its tunnelAddress`);
    } else if (f.mtu < need) {
      failures.push(
        `${f.iface} (${f.tunnelAddress}) has MTU ${f.mtu}, below ${need} = the segment's ${segmentMtu} + ${overhead} of GRE (${overheadParts(f.tunnelAddress)}): full-size frames are dropped without a word`,
      );
      fixes.push(
        `raise the underlay MTU to ${need} or more (\`ip link set ${f.iface} mtu ${need}\`, and on every underlay link and switch between), or lower the segment's MTU (or the backends' MSS) to ${f.mtu - overhead}`,
      );
    } else rows.push(`${f.iface} (${f.tunnelAddress}) MTU ${f.mtu} >= ${need} (segment ${segmentMtu} + ${overhead})`);
  }
  if (failures.length > 0) return fail(host, check, failures.join("; "), fixes.join("; "));
  return ok(host, check, rows.join("; "));
}

// ---------------------------------------------------------------- conntrack

export interface ConntrackFacts {
  /** Entries per zone (`dpctl/dump-conntrack -m`). */
  zones: Map<number, number>;
  /** Limits of those zones (`dpctl/ct-get-limits`), 0 = none. */
  limits: Map<number, number>;
  defaultLimit?: number;
  /** The whole table's size limit and use, where the datapath reports them (userspace). */
  maxConns?: number;
  nConns?: number;
}

/** Counts `dpctl/dump-conntrack` entries per zone as the dump arrives (a busy host's table is never held whole); an entry without `zone=` is zone 0. */
export class ZoneCounter {
  readonly zones = new Map<number, number>();
  private rest = "";

  push(chunk: Buffer | string): void {
    const lines = (this.rest + chunk.toString()).split("\n");
    this.rest = lines.pop() ?? "";
    for (const line of lines) this.line(line);
  }

  end(): Map<number, number> {
    if (this.rest) this.line(this.rest);
    this.rest = "";
    return this.zones;
  }

  private line(line: string): void {
    if (!/^\w+,orig=\(/.test(line.trim())) return;
    const zone = Number(/,zone=(\d+)/.exec(line)?.[1] ?? 0);
    this.zones.set(zone, (this.zones.get(zone) ?? 0) + 1);
  }
}

export function conntrackCheck(host: string, f: ConntrackFacts | undefined, error?: string): DoctorCheck {
  const check = "conntrack";
  if (!f)
    return warn(
      host,
      check,
      `cannot read the datapath's conntrack: ${error ?? "no answer"}`,
      "check that the login user can run ovs-appctl (the ovs-vswitchd socket above)",
    );
  const total = [...f.zones.values()].reduce((a, b) => a + b, 0);
  const zoneText = [...f.zones.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([z, n]) => {
      const limit = f.limits.get(z) || f.defaultLimit || 0;
      return `zone ${z}: ${n}${limit > 0 ? ` of ${limit}` : ""}`;
    });
  const table = f.maxConns ? `; table ${f.nConns ?? total} of ${f.maxConns}` : "";
  const detail = `${total} entries in ${f.zones.size} zones${zoneText.length ? ` (${zoneText.join(", ")}${f.zones.size > 8 ? ", ..." : ""})` : ""}${table}`;
  const full = [...f.zones.entries()].filter(([z, n]) => {
    const limit = f.limits.get(z) || f.defaultLimit || 0;
    return limit > 0 && n >= NEARLY_FULL * limit;
  });
  if (full.length > 0) {
    return warn(
      host,
      check,
      `${detail}: ${full.map(([z]) => `zone ${z}`).join(", ")} at ${Math.round(NEARLY_FULL * 100)}% of its limit or more: new connections there are dropped once it is full`,
      "raise that service's connectionLimit, or find what fills it (a flood: ovs-appctl dpctl/dump-conntrack zone=Z)",
    );
  }
  if (f.maxConns && (f.nConns ?? total) >= NEARLY_FULL * f.maxConns) {
    return warn(
      host,
      check,
      `${detail}: the table is nearly full`,
      "raise it (ovs-appctl dpctl/ct-set-maxconns N), or give the flooded services a connectionLimit",
    );
  }
  return ok(host, check, detail);
}

// ---------------------------------------------------------------- summary

export const failed = (checks: readonly DoctorCheck[]) => checks.some((c) => c.status === "FAIL");

export function summary(checks: readonly DoctorCheck[]): Record<CheckStatus, number> {
  const s: Record<CheckStatus, number> = { ok: 0, FAIL: 0, warn: 0, skip: 0 };
  for (const c of checks) s[c.status]++;
  return s;
}
