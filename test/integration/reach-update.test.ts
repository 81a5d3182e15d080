import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { observeBundles } from "../../provider/engine/bridge";
import type { BundleSent } from "../../provider/transport/openflow-bridge";
import { handle } from "../../provider/handlers";
import type { SshConnection } from "../../provider/model/inputs.generated";
import { listedInputs } from "../../provider/model/keyed";
import { mapConnections } from "../../provider/model/validate";
import type { LabInventory } from "../lab/topology";
import { sshdCommand, sshdConfig } from "../lab/lab";
import { FaultHost } from "../support/fault-host";
import { faultLoadBalancer } from "../support/fault-lb";
import { loadInventory } from "../support/lab";
import { waitUntil } from "../support/wait";
import bridgeSchema from "../../schema/ovs-bridge.json";
import dnlbSchema from "../../schema/deferred-nat-load-balancer.json";

/**
 * An update that changes only how the hosts are reached (the connection,
 * "x-reach" in schema/: an inline key, user, port, timeouts, host-key pin,
 * known hosts, a jump host) logs in to every host the new way before it is
 * recorded, and sends nothing else. Driven through provider/handlers on two
 * hosts of this test's own, whose sshd logs at DEBUG1: every login
 * ("Accepted publickey", with the key's fingerprint) and every channel a
 * client opens (a command's or OVSDB's "session"/"direct-streamlocal", a
 * jump's "direct-tcpip") is in the log. ru1 is also the jump host to ru2,
 * over a link of their own. Both present the lab's gw1 host key (FaultHost);
 * gw2's key is a wrong pin.
 */

let inv: LabInventory;
let ru1: ReachHost;
let ru2: ReachHost;
let keys: string;
let keyB: { private: string; public: string; fingerprint: string };
let keyUnauthorized: string;
const sent: { host: string; sent: BundleSent }[] = [];
let stopObserving: () => void;

/** A fault host whose sshd logs at DEBUG1 (channels opened and what is asked on them). */
class ReachHost extends FaultHost {
  override startSshd(): void {
    const config = sshdConfig({
      address: this.address,
      hostKey: join(inv.labDir, "hosts", "gw1", "ssh_host_ed25519_key"),
      pidFile: join(this.dir, "sshd.pid"),
      authorizedKeys: this.authorizedKeysFile,
      user: "root",
    });
    writeFileSync(join(this.dir, "sshd_config"), `${config}LogLevel DEBUG1\n`);
    writeFileSync(this.authorizedKeysFile, `${inv.clientPublicKey}\n`);
    execFileSync("ip", ["netns", "exec", this.namespace, ...sshdCommand(join(this.dir, "sshd_config"), this.logPath)]);
  }

  get logPath(): string {
    return join(this.dir, "sshd.log");
  }

  log(): string {
    return readFileSync(this.logPath, "utf8");
  }

  /** The connections its sshd serves now: its per-connection processes (the listener calls itself "sshd: ... [listener]"). */
  sessions(): number {
    return this.processes("sshd: ").filter((pid) => {
      try {
        return !readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("[listener]");
      } catch {
        return false;
      }
    }).length;
  }
}

/** The connection the resources are created with: the lab client's key from a file, gw1's key pinned. */
const reach = (h: FaultHost): SshConnection => ({ host: h.address, port: 22, user: "root", hostKey: inv.hosts.gw1.hostKey, privateKeyPath: inv.clientKeyPath });
const name = (h: FaultHost) => `root@${h.address}:22`;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

type Props = Record<string, any>;
interface Kind {
  kind: string;
  schema: object;
  /** Where the resource is; the last one is reached through ru1 in the jump cases. */
  hosts: () => ReachHost[];
  inputs: () => Props;
}

const KINDS: Kind[] = [
  { kind: "OvsBridge", schema: bridgeSchema, hosts: () => [ru2], inputs: () => ({ host: { connection: reach(ru2), ovsRundir: ru2.rundir }, name: "br-ru" }) },
  {
    kind: "DeferredNatLoadBalancer",
    schema: dnlbSchema,
    hosts: () => [ru1, ru2],
    inputs: () => faultLoadBalancer("ru", [ru1, ru2], [10, 76], 2, 2),
  },
];

/** The inputs with f applied to the connection of each host (by address), others kept. */
function reachedAs(k: Kind, inputs: Props, f: (c: SshConnection, h: ReachHost) => SshConnection, only?: ReachHost): Props {
  return mapConnections(k.schema, inputs, (c) => {
    const h = [ru1, ru2].find((x) => x.address === c.host)!;
    return only && h !== only ? c : f(c, h);
  });
}

/** Everything on both hosts that a command, an OVSDB transaction or an OpenFlow bundle could change. */
const everything = () =>
  [ru1, ru2].map(
    (h) =>
      `${h.vsctl("show")}${h.vsctl("list-br")}${h.dataplane()}${h
        .vsctl("list-br")
        .split("\n")
        .filter((b) => b && b !== h.bridge)
        .map((b) => `${h.ofctl("--no-stats", "--sort", "dump-flows", b)}${h.ofctl("dump-groups", b)}`)
        .join("")}`,
  );

/**
 * Runs an update and returns it (or its error) with what each host's sshd
 * logged meanwhile, once every connection it opened has ended.
 */
async function updateLogged(k: Kind, id: string, olds: Props, news: Props) {
  const at = [ru1, ru2].map((h) => h.log().length);
  const bundles = sent.length;
  const result = await (handle(k.kind, "update", [id, olds, news]) as Promise<{ outs: Props }>).then(
    (r) => ({ outs: r.outs, error: undefined }),
    (e: Error) => ({ outs: undefined, error: e }),
  );
  await waitUntil(() => ru1.sessions() === 0 && ru2.sessions() === 0, { what: "every SSH connection to have ended" });
  const logs = new Map([ru1, ru2].map((h, i) => [h, h.log().slice(at[i])]));
  return { ...result, logs, bundles: sent.length - bundles };
}

const logins = (log: string) => log.match(/Accepted publickey for root/g)?.length ?? 0;
/** Channels a client opened: "session" (a command or subsystem), "direct-streamlocal@openssh.com" (OVSDB's db.sock), "direct-tcpip" (a jump). */
const channels = (log: string) => [...log.matchAll(/server_input_channel_open: ctype (\S+)/g)].map((m) => m[1]);

beforeAll(async () => {
  inv = loadInventory();
  keys = mkdtempSync(join(tmpdir(), "ovslb-reach-"));
  for (const k of ["b", "unauthorized"]) execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", `reach-${k}`, "-f", join(keys, k)]);
  const fingerprint = execFileSync("ssh-keygen", ["-l", "-f", join(keys, "b.pub")], { encoding: "utf8" }).split(" ")[1];
  keyB = { private: readFileSync(join(keys, "b"), "utf8"), public: readFileSync(join(keys, "b.pub"), "utf8").trim(), fingerprint };
  keyUnauthorized = readFileSync(join(keys, "unauthorized"), "utf8");
  ru1 = await new ReachHost(inv, "ru1", 223).up();
  ru2 = await new ReachHost(inv, "ru2", 224).up();
  for (const h of [ru1, ru2]) h.authorize([inv.clientPublicKey, keyB.public]);
  // ru1 reaches ru2's sshd over a link of their own: ru1 is the jump host to ru2.
  execFileSync("ip", ["link", "add", "rujA", "netns", ru1.namespace, "type", "veth", "peer", "name", "rujB", "netns", ru2.namespace]);
  const inNs = (h: FaultHost, argv: string[]) => execFileSync("ip", ["netns", "exec", h.namespace, ...argv]);
  inNs(ru1, ["ip", "addr", "add", "172.31.225.1/30", "dev", "rujA"]);
  inNs(ru2, ["ip", "addr", "add", "172.31.225.2/30", "dev", "rujB"]);
  inNs(ru1, ["ip", "link", "set", "rujA", "up"]);
  inNs(ru2, ["ip", "link", "set", "rujB", "up"]);
  inNs(ru1, ["ip", "route", "add", `${ru2.address}/32`, "dev", "rujA", "src", "172.31.225.1"]);
  stopObserving = observeBundles((host, s) => sent.push({ host, sent: s }));
}, 180_000);

afterAll(() => {
  stopObserving?.();
  ru1?.down();
  ru2?.down();
  if (keys) rmSync(keys, { recursive: true, force: true });
});

describe.each(KINDS)("$kind: an update of how its hosts are reached only", (k) => {
  let id: string;
  let created: Props;
  let inputs: Props;
  let before: string[];

  beforeAll(async () => {
    const checked = (await handle(k.kind, "check", [{}, k.inputs()])) as { inputs: Props; failures: unknown[] };
    expect(checked.failures).toEqual([]);
    inputs = checked.inputs;
    const r = (await handle(k.kind, "create", [inputs])) as { id: string; outs: Props };
    id = r.id;
    created = r.outs;
    await waitUntil(() => ru1.sessions() === 0 && ru2.sessions() === 0, { what: "create's SSH connections to have ended" });
    before = everything();
  }, 120_000);

  afterAll(async () => {
    if (id) await handle(k.kind, "delete", [id, created]);
  }, 120_000);

  const refusals: Array<{
    what: string;
    change: (c: SshConnection, h: ReachHost) => SshConnection;
    jumpOnly?: boolean;
    refused: (h: ReachHost) => RegExp;
    secret?: () => string;
  }> = [
    {
      what: "a garbage inline private key",
      change: ({ privateKeyPath: _path, ...c }) => ({
        ...c,
        privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAZ2FyYmFnZS1rZXktbWF0ZXJpYWw=\n-----END OPENSSH PRIVATE KEY-----\n",
      }),
      refused: () => /the private key cannot be used: Cannot parse privateKey/,
      secret: () => "b3BlbnNzaC1rZXktdjEAZ2FyYmFnZS1rZXktbWF0ZXJpYWw",
    },
    {
      what: "a well-formed key the host does not accept",
      change: ({ privateKeyPath: _path, ...c }) => ({ ...c, privateKey: keyUnauthorized }),
      refused: () => /authentication refused: the host did not accept the key for root/,
      secret: () => keyUnauthorized.split("\n")[2],
    },
    {
      what: "a host-key pin that is not the host's key",
      change: (c) => ({ ...c, hostKey: inv.hosts.gw2.hostKey }),
      refused: () => /host key refused: host key verification failed: the key the host presented is not the pinned or known key/,
    },
    {
      what: "a jump host pinned to the wrong key",
      change: (c) => ({ ...c, jumpHost: { ...reach(ru1), hostKey: inv.hosts.gw2.hostKey } }),
      jumpOnly: true,
      refused: () => new RegExp(`jump host ${escape(name(ru1))}: host key refused: host key verification failed`),
    },
  ];

  it.each(refusals)("refuses $what: the error starts with the host and the resource and says what was refused; nothing recorded or sent", async (r) => {
    const hosts = r.jumpOnly ? [k.hosts().at(-1)!] : k.hosts();
    const news = reachedAs(k, inputs, r.change, r.jumpOnly ? hosts[0] : undefined);
    const { error, outs, logs, bundles } = await updateLogged(k, id, created, news);
    expect(outs).toBeUndefined();
    expect(error).toBeInstanceOf(Error);
    // A plain error: nothing for the engine to record as partial state.
    expect(error).not.toHaveProperty("properties");
    expect(error).not.toHaveProperty("id");
    expect(error!.message.startsWith(`${name(hosts[0])}: ${k.kind} ${id}: `)).toBe(true);
    for (const h of hosts) expect(error!.message).toMatch(new RegExp(`${escape(name(h))}: ${k.kind} ${escape(id)}: ${r.refused(h).source}`));
    // Only the hosts reached the refused way are refused (another may be named as their jump host).
    for (const h of k.hosts().filter((x) => !hosts.includes(x))) expect(error!.message).not.toContain(`${name(h)}: ${k.kind}`);
    if (r.secret) expect(error!.message).not.toContain(r.secret());
    for (const log of logs.values()) expect(channels(log).filter((c) => c !== "direct-tcpip")).toEqual([]);
    expect(bundles).toBe(0);
    expect(everything()).toEqual(before);
  });

  const accepted: Array<{ what: string; change: (c: SshConnection, h: ReachHost) => SshConnection; jumpOnly?: boolean; fingerprint?: () => string }> = [
    {
      what: "a new inline key",
      change: ({ privateKeyPath: _path, ...c }) => ({ ...c, privateKey: keyB.private }),
      fingerprint: () => keyB.fingerprint,
    },
    {
      what: "a new pin (known hosts instead of the pinned key)",
      change: ({ hostKey: _pin, ...c }) => ({ ...c, knownHosts: `${c.host} ${inv.hosts.gw1.hostKey}\n` }),
    },
    { what: "new timeouts", change: (c) => ({ ...c, connectTimeoutMs: 4000, commandTimeoutMs: 30_000 }) },
    { what: "a jump host with its right key", change: (c) => ({ ...c, jumpHost: reach(ru1) }), jumpOnly: true },
  ];

  it.each(accepted)(
    "accepts $what: one login per host the new way, no channel opened, nothing sent; the new connection and the old state recorded",
    async (a) => {
      const target = k.hosts().at(-1)!;
      const news = reachedAs(k, inputs, a.change, a.jumpOnly ? target : undefined);
      const { error, outs, logs, bundles } = await updateLogged(k, id, created, news);
      expect(error).toBeUndefined();
      for (const h of [ru1, ru2]) {
        const log = logs.get(h)!;
        const asTarget = k.hosts().includes(h) ? 1 : 0;
        const asJump = a.jumpOnly && h === ru1 ? 1 : 0;
        expect(logins(log), `logins on ${h.tag}`).toBe(asTarget + asJump);
        // The login was with the new key: its fingerprint is on every login line.
        if (a.fingerprint) for (const line of log.match(/Accepted publickey for root .*/g) ?? []) expect(line).toContain(a.fingerprint());
        // No command, no OVSDB, no OpenFlow: no channel at all, but the jump's forward to ru2.
        expect(channels(log), `channels on ${h.tag}`).toEqual(asJump ? ["direct-tcpip"] : []);
      }
      expect(bundles).toBe(0);
      expect(everything()).toEqual(before);
      // Recorded: the new connections (the inline key lifted into the secret output), the state as it was.
      const { sshCredentials, ...plain } = outs!;
      const { sshCredentials: _old, ...oldPlain } = created;
      // Outputs record lists, in the recorded order.
      const recordedInputs = mapConnections(k.schema, listedInputs(k.schema, news, created), ({ privateKey: _k, passphrase: _p, ...c }) => c);
      for (const key of Object.keys(oldPlain)) expect(plain[key], key).toEqual(key in recordedInputs ? recordedInputs[key] : oldPlain[key]);
      if (a.fingerprint) expect(JSON.stringify(sshCredentials)).toContain(keyB.private.split("\n")[2]);
      else expect(sshCredentials).toEqual({});
    },
  );
});
