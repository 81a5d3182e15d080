import { hash } from "node:crypto";
import type { OvsHost } from "../model/inputs.generated";
import { OPEN_VSWITCH, Transaction, mutation, type TransactionResults } from "../ovsdb";
import {
  dumpConntrackArgs,
  flushConntrackArgs,
  flushSelects,
  parseConntrack,
  parseZoneLimits,
  zoneLimitArgs,
  type ConntrackEntry,
  type ConntrackFlush,
  type ZoneLimit,
} from "../openflow/conntrack";
import { runChecked } from "./exec";
import { OvsdbClient } from "./ovsdb-client";
import { SshSession, mapBounded, withSessions } from "./ssh";
import { DEFAULT_OVS_RUNDIR, connectVswitchd, type UnixctlClient } from "./unixctl";

export const ovsRundirOf = (host: OvsHost) => host.ovsRundir ?? DEFAULT_OVS_RUNDIR;

/** The OpenFlow management socket of a bridge: ovs-ofctl talks to it directly. */
export const bridgeSocket = (host: OvsHost, bridge: string) => `unix:${ovsRundirOf(host)}/${bridge}.mgmt`;

/** Flushes of one selection before an apply gives up on entries that stay. */
const FLUSH_ROUNDS = 4;

/** One SSH session to an OVS host, and its Open_vSwitch database over the same connection. */
export class OvsHostSession {
  private db: OvsdbClient | undefined;
  /** ovs-vswitchd's control socket (appctl), once asked for: its client, or "exec" where it cannot be opened. */
  private control: Promise<UnixctlClient | "exec"> | undefined;
  /** Locks this session holds (claim). */
  private readonly claimed: string[] = [];

  constructor(
    readonly host: OvsHost,
    readonly ssh: SshSession,
  ) {}

  get hostName() {
    return this.ssh.hostName;
  }

  /**
   * ovs-appctl's command against this host's ovs-vswitchd: over its control
   * socket (unixctl, what ovs-appctl speaks), one stream-local channel kept
   * for the session's commands, so a command costs no process and no exec
   * round trip (an update that flushes conntrack runs ten of them). Where
   * that channel cannot be opened, `ovs-appctl` itself runs (no shell: `env`
   * sets its run directory). A channel the daemon closed (it restarted) is
   * opened again for the next command.
   */
  async appctl(args: readonly string[]): Promise<string> {
    const control = await this.vswitchdControl();
    if (control === "exec") return runChecked(this.ssh, ["env", `OVS_RUNDIR=${ovsRundirOf(this.host)}`, "ovs-appctl", ...args]);
    return control.call(args[0], args.slice(1));
  }

  /** Opens the control channel appctl uses now, beside an operation's reads, for an apply that will send it commands. */
  prepareAppctl(): void {
    void this.vswitchdControl();
  }

  private vswitchdControl(): Promise<UnixctlClient | "exec"> {
    const connect = () =>
      connectVswitchd(this.ssh, ovsRundirOf(this.host), { requestTimeoutMs: this.ssh.connection.commandTimeoutMs }).then(
        (c): UnixctlClient | "exec" => c,
        (): "exec" => "exec",
      );
    // Chained, so commands asked for at once share one connect (and one reconnect).
    this.control = (this.control ?? connect()).then((c) => (c !== "exec" && c.closed ? connect() : c));
    return this.control;
  }

  /** What the running ovs-vswitchd says of its version (`ovs-appctl version`), as it prints it. */
  vswitchdVersion(): Promise<string> {
    return this.appctl(["version"]);
  }

  /** A zone's conntrack limit and the entries it holds (`dpctl/ct-get-limits`); `own` is false where the datapath's default applies. */
  async zoneLimit(zone: number): Promise<ZoneLimit & { own: boolean }> {
    const found = parseZoneLimits(await this.appctl(zoneLimitArgs.get(zone))).find((l) => l.zone === zone);
    if (!found) throw new Error(`${this.hostName}: dpctl/ct-get-limits printed nothing for zone ${zone}`);
    return found;
  }

  /** Sets a zone's conntrack limit (`dpctl/ct-set-limits`), or removes it (undefined: `dpctl/ct-del-limits`). */
  async setZoneLimit(zone: number, limit: number | undefined): Promise<void> {
    await this.appctl(limit === undefined ? zoneLimitArgs.del(zone) : zoneLimitArgs.set(zone, limit));
  }

  /** The datapath's conntrack entries of one zone (`dpctl/dump-conntrack`), parsed. */
  async dumpConntrack(zone: number): Promise<ConntrackEntry[]> {
    return parseConntrack(await this.appctl(dumpConntrackArgs(zone)));
  }

  /**
   * Removes the conntrack entries a flush selects (`dpctl/flush-conntrack`),
   * and reads the zone back until none is left. A flush by partial tuple
   * dumps the table and deletes what matches as it goes; on OVS 3.1.0's
   * userspace datapath that walk can skip entries (measured in the lab: 3 of
   * 48 matching entries left), so one flush is not proof. A flush comes
   * after the flows that made its entries are gone: none comes back.
   */
  async flushConntrack(flush: ConntrackFlush): Promise<void> {
    let left = 0;
    for (let round = 0; round < FLUSH_ROUNDS; round++) {
      await this.appctl(flushConntrackArgs(flush));
      left = (await this.dumpConntrack(flush.zone)).filter((e) => flushSelects(flush, e)).length;
      if (left === 0) return;
    }
    throw new Error(`${this.hostName}: conntrack zone ${flush.zone}: ${left} entries the flush selects are still there after ${FLUSH_ROUNDS} flushes`);
  }

  /** The host's Open_vSwitch database, through a stream-local channel to its db.sock. */
  async vswitchDb(): Promise<OvsdbClient> {
    if (!this.db) {
      // A request waits no longer than a command may run on this host (commandTimeoutMs).
      this.db = new OvsdbClient(await this.ssh.openUnixStream(`${ovsRundirOf(this.host)}/db.sock`), {
        host: this.hostName,
        requestTimeoutMs: this.ssh.connection.commandTimeoutMs,
      });
    }
    return this.db;
  }

  /**
   * Commits txn with a next_cfg bump and waits until ovs-vswitchd has applied
   * it (cur_cfg catches up), as `ovs-vsctl --wait` does: after it, new ports
   * have their ofports and new bridges their management sockets.
   */
  async commitApplied(txn: Transaction<typeof OPEN_VSWITCH>, timeoutMs = 10_000): Promise<TransactionResults> {
    const db = await this.vswitchDb();
    txn.mutate("Open_vSwitch", [], [mutation("next_cfg", "+=", 1)]);
    const cfg = txn.select("Open_vSwitch", [], ["next_cfg"]);
    const results = await db.run(txn);
    const next = results.first(cfg)!.next_cfg;
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
      const poll = new Transaction(OPEN_VSWITCH);
      const cur = poll.select("Open_vSwitch", [], ["cur_cfg"]);
      if ((await db.run(poll)).first(cur)!.cur_cfg >= next) return results;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error(`${this.hostName}: ovs-vswitchd did not apply configuration ${next} within ${timeoutMs / 1000} s`);
  }

  /**
   * Claims `lock` on this host's ovsdb-server for as long as the session
   * lasts, or fails naming the host: another operation holds it.
   */
  async claim(lock: OperationLock): Promise<void> {
    if (!(await (await this.vswitchDb()).tryLock(lock.name))) {
      throw new OperationInProgressError(`${this.hostName}: another operation on ${lock.resource} is in progress (it holds ovsdb lock ${lock.name} there)`);
    }
    this.claimed.push(lock.name);
  }

  /**
   * Gives back the locks it claimed, each once the server says so, then
   * ends the session. The next operation may follow at once on the same
   * shared SSH connection: it must not find the lock still held while the
   * server has yet to see this channel close. A lock whose unlock fails is
   * released by the connection's end all the same.
   */
  async close(): Promise<void> {
    const db = this.db;
    if (db) await Promise.allSettled(this.claimed.splice(0).map((name) => db.unlock(name)));
    db?.close();
    const control = await this.control;
    if (control && control !== "exec") control.close();
    this.ssh.close();
  }
}

/**
 * The lock an operation that changes a resource holds on each of its hosts
 * (on their ovsdb-server, so it dies with the connection of whoever took
 * it): two changes of one resource at once cannot interleave; the second
 * is refused before it reads or writes anything.
 */
export interface OperationLock {
  /** The resource id, for errors. */
  resource: string;
  /** An OVSDB id ([A-Za-z_][A-Za-z0-9_]*), derived from the resource id. */
  name: string;
}

export const operationLock = (resourceId: string): OperationLock => ({
  resource: resourceId,
  name: `ovslb_${hash("sha256", resourceId, "hex").slice(0, 24)}`,
});

/** Another change of the same resource holds its lock on a host: nothing was read or changed. */
export class OperationInProgressError extends Error {
  override name = "OperationInProgressError";
}

/**
 * Claims the lock on every host at once (once per ovsdb-server: two gateways
 * may be two bridges of one host); fails naming every host where another
 * operation holds it.
 */
async function claimAll(sessions: readonly OvsHostSession[], lock: OperationLock): Promise<void> {
  const servers = new Map(sessions.map((s) => [`${s.host.connection.host}:${s.host.connection.port ?? 22}:${ovsRundirOf(s.host)}`, s]));
  const held = (await Promise.allSettled([...servers.values()].map((s) => s.claim(lock)))).flatMap((r) => (r.status === "rejected" ? [r.reason as Error] : []));
  if (held.length === 0) return;
  // A host that failed otherwise (its ovsdb-server gone) says so first.
  const other = held.find((e) => !(e instanceof OperationInProgressError));
  if (other) throw other;
  throw new OperationInProgressError(`${held.map((e) => e.message).join("; ")}: nothing was changed; run again once it has ended`);
}

/**
 * How many SSH connections withAllOvsHosts opens at once: 16, so a resource
 * of up to 16 gateways connects in one wave (a larger fleet in waves of
 * 16, which bounds the handshakes this process runs at once). Once every
 * host is connected, the reads, plans and bundles go to all hosts together,
 * so the bundles commit close together (bench/scale-fanout.ts measures it).
 */
export const HOST_CONNECT_PARALLELISM = 16;

/**
 * Opens a session to every host (at most HOST_CONNECT_PARALLELISM at a
 * time), runs fn with all of them, and closes them all afterwards: for
 * resources that read every host before they plan and change any.
 */
export async function withAllOvsHosts<R>(hosts: readonly OvsHost[], fn: (sessions: OvsHostSession[]) => Promise<R>, lock?: OperationLock): Promise<R> {
  // Every connect settles before anything is closed or thrown, so none leaks.
  const opened = await mapBounded(hosts, HOST_CONNECT_PARALLELISM, (h) =>
    SshSession.connect(h.connection).then(
      (ssh) => ({ session: new OvsHostSession(h, ssh) }),
      (error: unknown) => ({ error }),
    ),
  );
  const sessions = opened.flatMap((o) => ("session" in o ? [o.session] : []));
  try {
    // Every host that could not be reached, named (each error starts with its host), before anything is changed.
    const failed = opened.flatMap((o) => ("error" in o ? [o.error] : []));
    if (failed.length === 1) throw failed[0];
    if (failed.length > 1)
      throw new Error(`${failed.length} of ${hosts.length} hosts unreachable: ${failed.map((e) => (e as Error).message ?? String(e)).join("; ")}`);
    if (lock) await claimAll(sessions, lock);
    return await fn(sessions);
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
  }
}

/** Runs fn with one session per host (bounded parallelism), closing them all afterwards; with `lock`, each session claims it first. */
export function withOvsHosts<R>(hosts: readonly OvsHost[], fn: (s: OvsHostSession, index: number) => Promise<R>, lock?: OperationLock): Promise<R[]> {
  return withSessions(
    hosts.map((h) => h.connection),
    async (ssh, i) => {
      const session = new OvsHostSession(hosts[i], ssh);
      try {
        if (lock) await claimAll([session], lock);
        return await fn(session, i);
      } finally {
        await session.close();
      }
    },
  );
}
