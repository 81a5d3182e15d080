import { createConnection } from "node:net";
import type { Duplex } from "node:stream";
import { Client } from "ssh2";
import type { SshConnection } from "../model/inputs.generated";
import { parseOvsVersion } from "../model/ovs-versions";
import { parseZoneLimits } from "../openflow/conntrack";
import { OPEN_VSWITCH, Transaction } from "../ovsdb";
import { hostKeyAlgorithmsFor, keyMatches, parsePublicKey, trustedKeysFor, type TrustedKey } from "../transport/known-hosts";
import { OpenFlowBridge } from "../transport/openflow-bridge";
import { OvsdbClient } from "../transport/ovsdb-client";
import { bridgeSocket, ovsRundirOf } from "../transport/ovs-host";
import { SshSession, describeHost, mapBounded } from "../transport/ssh";
import { connectVswitchd, type UnixctlClient } from "../transport/unixctl";
import { readUnderlay } from "../transport/underlay";
import {
  ZoneCounter,
  bridgeChecks,
  conntrackCheck,
  datapathCheck,
  fail,
  fingerprint,
  hostKeyCheck,
  loginCheck,
  mtuCheck,
  ovsdbChannelCheck,
  reachableCheck,
  skip,
  versionCheck,
  vswitchdSocketCheck,
  type ConntrackFacts,
  type DoctorCheck,
  type HostKeyFacts,
  type SocketFacts,
  type TcpForwarding,
} from "./checks";
import type { DoctorHost, DoctorPlan } from "./config";

/**
 * doctor's I/O: what each check needs from a host, read over the transport
 * the provider uses (provider/transport/*: the same login, host-key
 * verification, stream-local channels, unixctl, ovs-ofctl), turned into rows
 * by provider/doctor/checks.ts. Nothing is changed on a host: every command
 * reads. No value reaches a shell as text: commands are argv, and the one
 * script below takes its paths as arguments.
 */

/** Hosts checked at once. */
const PARALLEL_HOSTS = 8;
/** Every key type ovslb can pin, the one to print first first. */
const ANY_KEY = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"];

/** Runs every check of the plan; the config's own problems come first. */
export async function runDoctor(plan: DoctorPlan): Promise<DoctorCheck[]> {
  const rows = await mapBounded(plan.hosts, PARALLEL_HOSTS, (h) =>
    checkHost(h, plan).catch((e: unknown) => [fail(h.name, "doctor", `stopped: ${(e as Error).message ?? String(e)}`, "run again; report it if it stays")]),
  );
  return [...plan.problems, ...rows.flat()];
}

const LATER = ["host key", "login", "ovsdb channel", "socket ovs-vswitchd", "ovs version", "bridges", "underlay mtu", "conntrack"];

const skipped = (host: string, after: string, why: string) => LATER.slice(LATER.indexOf(after) + 1).map((check) => skip(host, check, `not checked: ${why}`));

async function checkHost(h: DoctorHost, plan: DoctorPlan): Promise<DoctorCheck[]> {
  const c = h.connection;
  const rows: DoctorCheck[] = [];
  const target = `${c.host}:${c.port ?? 22}`;
  const via = c.jumpHost ? describeHost(c.jumpHost) : undefined;

  const banner = await readBanner(c).then(
    (b) => ({ banner: b }),
    (e: unknown) => ({ error: (e as Error).message }),
  );
  rows.push(reachableCheck(h.name, target, { ...banner, ...(via ? { via } : {}) }));
  if (!("banner" in banner) || !banner.banner.startsWith("SSH-")) return [...rows, ...skipped(h.name, "reachable", "the host is not reachable")];

  const key = hostKeyCheck(await hostKeyFacts(h));
  rows.push(key);
  if (key.status === "FAIL") return [...rows, ...skipped(h.name, "host key", "the host key is not verified")];

  let ssh: SshSession;
  try {
    ssh = await SshSession.fresh(c);
  } catch (e) {
    rows.push(loginCheck(h.name, c.user, (e as Error).message));
    return [...rows, ...skipped(h.name, "login", "the login failed")];
  }
  rows.push(loginCheck(h.name, c.user));
  try {
    rows.push(...(await ovsChecks(h, plan, ssh)));
  } finally {
    ssh.close();
  }
  return rows;
}

/** A byte stream to the host's SSH port: directly, or through its jump host (logged in as the provider does). */
async function openSshPort(c: SshConnection): Promise<{ stream: Duplex; close: () => void }> {
  const port = c.port ?? 22;
  const timeoutMs = c.connectTimeoutMs ?? 10_000;
  if (c.jumpHost) {
    const jump = await SshSession.fresh(c.jumpHost);
    try {
      const stream = await jump.forwardTcp(c.host, port);
      return { stream, close: () => (stream.destroy(), jump.close()) };
    } catch (e) {
      jump.close();
      throw e;
    }
  }
  return new Promise((resolve, reject) => {
    const sock = createConnection({ host: c.host, port });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no TCP answer within ${timeoutMs} ms (timed out)`));
    }, timeoutMs);
    sock.once("connect", () => {
      clearTimeout(timer);
      resolve({ stream: sock, close: () => sock.destroy() });
    });
    sock.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** The server's identification line (`SSH-2.0-OpenSSH_9.2p1 ...`). */
async function readBanner(c: SshConnection): Promise<string> {
  const { stream, close } = await openSshPort(c);
  const timeoutMs = c.connectTimeoutMs ?? 10_000;
  try {
    return await new Promise<string>((resolve, reject) => {
      let got = "";
      const timer = setTimeout(() => reject(new Error(`connected, but no SSH identification within ${timeoutMs} ms`)), timeoutMs);
      stream.on("data", (d: Buffer) => {
        got += d.toString("latin1");
        const nl = got.indexOf("\n");
        if (nl >= 0 || got.length > 255) {
          clearTimeout(timer);
          resolve(got.slice(0, nl >= 0 ? nl : 255).replace(/\r$/, ""));
        }
      });
      stream.once("error", (e: Error) => (clearTimeout(timer), reject(e)));
      stream.once("end", () => (clearTimeout(timer), reject(new Error("the connection closed before the SSH identification"))));
    });
  } finally {
    close();
  }
}

/** The host key the server presents when offered `algorithms` (a key exchange, no login). */
async function presentedKey(c: SshConnection, algorithms: string[]): Promise<{ key?: Buffer; error?: string }> {
  let opened: { stream: Duplex; close: () => void };
  try {
    opened = await openSshPort(c);
  } catch (e) {
    return { error: (e as Error).message };
  }
  return new Promise((resolve) => {
    const client = new Client();
    let key: Buffer | undefined;
    let done = false;
    const finish = (r: { key?: Buffer; error?: string }) => {
      if (done) return;
      done = true;
      client.end();
      opened.close();
      resolve(r);
    };
    client.on("error", (e: Error) =>
      finish(key ? { key } : { error: /no matching host key format/.test(e.message) ? "the host offers no key of those types" : e.message }),
    );
    client.on("ready", () => finish(key ? { key } : { error: "logged in without a host key" }));
    client.on("close", () => finish(key ? { key } : { error: "connection closed during the key exchange" }));
    client.connect({
      sock: opened.stream,
      username: "ovslb-doctor",
      readyTimeout: c.connectTimeoutMs ?? 10_000,
      algorithms: { serverHostKey: algorithms as never },
      // Refused whatever it is: the key is only read here, nothing is sent after the key exchange.
      hostVerifier: (presented: Buffer) => {
        key = Buffer.from(presented);
        return false;
      },
    });
  });
}

async function hostKeyFacts(h: DoctorHost): Promise<HostKeyFacts> {
  const c = h.connection;
  const port = c.port ?? 22;
  const base = { host: h.name, address: c.host, port, configKey: h.configKey };
  let trusted: TrustedKey[] = [];
  try {
    if (c.hostKey) trusted.push(parsePublicKey(c.hostKey));
    if (c.knownHosts) {
      const { trusted: t, revoked } = trustedKeysFor(c.knownHosts, c.host, port);
      trusted.push(...t.filter((k) => !keyMatches(k.blob, revoked)));
    }
  } catch (e) {
    trusted = [];
    const any = await presentedKey(c, ANY_KEY);
    return { ...base, pinned: [], matches: false, anyKey: any.key, error: `the pinned key cannot be read: ${(e as Error).message}` };
  }
  const pinned = trusted.map((k) => fingerprint(k.blob));
  if (trusted.length > 0) {
    const got = await presentedKey(c, hostKeyAlgorithmsFor(trusted));
    if (got.key) return { ...base, pinned, presentedPinnedType: got.key, matches: keyMatches(got.key, trusted) };
    const any = await presentedKey(c, ANY_KEY);
    return { ...base, pinned, matches: false, anyKey: any.key, error: got.error };
  }
  const any = await presentedKey(c, ANY_KEY);
  return { ...base, pinned, matches: false, anyKey: any.key, error: any.error };
}

/**
 * What the login user sees of a socket: there (-S), writable (-w), its
 * directory searchable (-x), its owner and mode, and the user's groups.
 * The script is fixed text; the paths are its arguments.
 */
const SOCKET_FACTS = [
  "p=$1 d=$2 s=0 w=0 x=0 m=0",
  '[ -x "$d" ] && x=1',
  '[ -x "$(dirname "$d")" ] && [ ! -e "$d" ] && m=1',
  '[ -S "$p" ] && s=1',
  '[ -w "$p" ] && w=1',
  'echo "$s $w $x $m"',
  "stat -c '%U:%G %a' \"$p\" 2>/dev/null || echo",
  "id -un",
  "id -Gn",
].join("\n");

async function socketFacts(ssh: SshSession, path: string): Promise<SocketFacts> {
  const r = await ssh.run(["sh", "-c", SOCKET_FACTS, "ovslb-doctor", path, path.slice(0, path.lastIndexOf("/")) || "/"]);
  const [flags = "", mode = "", user = "", groups = ""] = r.stdout.split("\n");
  const [s, w, x, m] = flags.split(" ");
  return {
    path,
    exists: s === "1",
    writable: w === "1",
    dirSearchable: x === "1",
    // Missing only when its parent is searchable: a directory behind one the user cannot enter is not known missing.
    ...(m === "1" ? { dirExists: false } : {}),
    ...(mode.trim() ? { mode: mode.trim() } : {}),
    ...(user.trim() ? { user: user.trim() } : {}),
    ...(groups.trim() ? { groups: groups.trim() } : {}),
  };
}

/** Whether sshd forwards TCP for this login (to its own SSH port): tells DisableForwarding from AllowStreamLocalForwarding. */
async function tcpForwarding(ssh: SshSession, c: SshConnection): Promise<TcpForwarding> {
  try {
    (await ssh.forwardTcp(c.host, c.port ?? 22)).destroy();
    return "works";
  } catch (e) {
    return /open failed|prohibited/i.test((e as Error).message) ? "refused" : "unknown";
  }
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

async function ovsChecks(h: DoctorHost, plan: DoctorPlan, ssh: SshSession): Promise<DoctorCheck[]> {
  const rows: DoctorCheck[] = [];
  const name = h.name;
  const rundir = ovsRundirOf(h.host);
  const timeoutMs = ssh.commandTimeoutMs;

  // OVSDB over the stream-local channel, as every resource reaches it.
  let db: OvsdbClient | undefined;
  try {
    db = new OvsdbClient(await ssh.openUnixStream(`${rundir}/db.sock`), { host: ssh.hostName, requestTimeoutMs: timeoutMs });
    await db.listDbs();
    rows.push(ovsdbChannelCheck(name, `${rundir}/db.sock`, {}));
  } catch (e) {
    db?.close();
    db = undefined;
    const socket = await socketFacts(ssh, `${rundir}/db.sock`);
    rows.push(
      ovsdbChannelCheck(name, `${rundir}/db.sock`, {
        error: message(e),
        socket,
        tcpForwarding: await tcpForwarding(ssh, h.connection),
        ...(ssh.keyOptions ? { keyOptions: ssh.keyOptions } : {}),
      }),
    );
  }

  // ovs-vswitchd's control socket (unixctl over a stream-local channel, as traces and versions use it).
  let unixctl: UnixctlClient | undefined;
  let version: string | undefined;
  try {
    unixctl = await connectVswitchd(ssh, rundir, { requestTimeoutMs: timeoutMs });
    version = parseOvsVersion(await unixctl.call("version", []));
    rows.push(vswitchdSocketCheck(name, `${rundir}/ovs-vswitchd.PID.ctl`, {}));
  } catch (e) {
    const pid = await ssh.run(["cat", `${rundir}/ovs-vswitchd.pid`]);
    const path = pid.exitCode === 0 && /^\d+$/.test(pid.stdout.trim()) ? `${rundir}/ovs-vswitchd.${pid.stdout.trim()}.ctl` : `${rundir}/ovs-vswitchd.pid`;
    const socket = await socketFacts(ssh, path);
    // The pid file is no socket: it is there when cat could read it (or was refused it).
    if (path.endsWith(".pid")) socket.exists = pid.exitCode === 0 || /Permission denied/.test(pid.stderr);
    rows.push(
      vswitchdSocketCheck(name, path, {
        error: message(e),
        socket,
        tcpForwarding: await tcpForwarding(ssh, h.connection),
        ...(ssh.keyOptions ? { keyOptions: ssh.keyOptions } : {}),
      }),
    );
    // ovs-appctl on the host reaches the same socket without a channel (sshd may refuse channels, not commands).
    const appctl = await ssh.run(["env", `OVS_RUNDIR=${rundir}`, "ovs-appctl", "version"]);
    if (appctl.exitCode === 0) version = parseOvsVersion(appctl.stdout);
  } finally {
    unixctl?.close();
  }
  rows.push(version === undefined ? skip(name, "ovs version", "not checked: needs ovs-vswitchd's control socket") : versionCheck(name, version, plan.dpHash));

  // Bridges: named ones, or every bridge of the host.
  if (db) {
    try {
      const readBridges = async () => {
        const txn = new Transaction(OPEN_VSWITCH);
        const sel = txn.select("Bridge", [], ["name", "datapath_type", "protocols"]);
        return (await db.run(txn)).rows(sel);
      };
      let found = await readBridges();
      const known = found.map((b) => b.name).sort();
      const wanted = [...new Set([...plan.bridges, ...h.bridges])];
      const listening = async (br: string) => {
        const speaks = /^[A-Za-z0-9_.-]+$/.test(br) ? await new OpenFlowBridge(ssh, bridgeSocket(h.host, br)).speaksOpenFlow15().catch(() => false) : false;
        return { speaks, socket: speaks ? undefined : await socketFacts(ssh, `${rundir}/${br}.mgmt`) };
      };
      for (const br of wanted.length > 0 ? wanted : known) {
        let row = found.find((b) => b.name === br);
        if (!row) {
          rows.push(...bridgeChecks(name, { name: br, exists: false }, known));
          continue;
        }
        let { speaks, socket } = await listening(br);
        // A bridge another client is adding (or deleting) right now has no socket until ovs-vswitchd applies the database
        // (a client need not wait for it): give it up to a second to appear, or the row to go.
        for (let waited = 0; socket && !socket.exists && waited < 1000; waited += 100) {
          await new Promise((r) => setTimeout(r, 100));
          found = await readBridges();
          row = found.find((b) => b.name === br);
          if (!row) break;
          ({ speaks, socket } = await listening(br));
        }
        if (!row) {
          // Deleted meanwhile: a bridge the config names is missing; any other is not the host's any more.
          if (wanted.length > 0) rows.push(...bridgeChecks(name, { name: br, exists: false }, known));
          continue;
        }
        const protocols = [...row.protocols];
        rows.push(
          ...bridgeChecks(
            name,
            { name: br, exists: true, datapathType: row.datapath_type, protocols, speaksOpenFlow15: speaks, ...(socket ? { socket } : {}) },
            known,
          ),
        );
        rows.push(datapathCheck(name, br, row.datapath_type));
      }
    } catch (e) {
      rows.push(fail(name, "bridges", `cannot read the bridges from OVSDB: ${message(e)}`, "check ovsdb-server's log"));
    } finally {
      db.close();
    }
  } else rows.push(skip(name, "bridges", "not checked: needs the OVSDB channel"));

  rows.push(mtuCheck(name, plan.segmentMtu, await readUnderlay(ssh, h.tunnelAddresses)));
  rows.push(await conntrack(ssh, name, rundir));
  return rows;
}

async function conntrack(ssh: SshSession, name: string, rundir: string): Promise<DoctorCheck> {
  const appctl = (args: string[], onStdout?: (chunk: Buffer) => void) =>
    ssh.run(["env", `OVS_RUNDIR=${rundir}`, "ovs-appctl", ...args], onStdout ? { onStdout } : {});
  const counter = new ZoneCounter();
  const dump = await appctl(["dpctl/dump-conntrack", "-m"], (chunk) => counter.push(chunk)).catch((e: unknown) => ({
    exitCode: -1,
    stderr: message(e),
    stdout: "",
  }));
  if (dump.exitCode !== 0) return conntrackCheck(name, undefined, dump.stderr.trim() || `ovs-appctl exited ${dump.exitCode}`);
  const facts: ConntrackFacts = { zones: counter.end(), limits: new Map() };
  const zones = [...facts.zones.keys()].slice(0, 64);
  const limits = await appctl(["dpctl/ct-get-limits", ...(zones.length ? [`zone=${zones.join(",")}`] : [])]);
  if (limits.exitCode === 0) {
    for (const l of parseZoneLimits(limits.stdout)) facts.limits.set(l.zone, l.limit);
    const d = /^default limit=(\d+)$/m.exec(limits.stdout);
    if (d) facts.defaultLimit = Number(d[1]);
  }
  const max = await appctl(["dpctl/ct-get-maxconns"]);
  const n = await appctl(["dpctl/ct-get-nconns"]);
  if (max.exitCode === 0 && /^\d+$/.test(max.stdout.trim())) facts.maxConns = Number(max.stdout.trim());
  if (n.exitCode === 0 && /^\d+$/.test(n.stdout.trim())) facts.nConns = Number(n.stdout.trim());
  return conntrackCheck(name, facts);
}
