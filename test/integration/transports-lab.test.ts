import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { OpenFlowBridge, OpenFlowError } from "../../provider/transport/openflow-bridge";
import { type Modification } from "../../provider/openflow";
import { traceBuckets } from "../../provider/transport/openflow-trace";
import { OvsHostSession, bridgeSocket, ovsRundirOf } from "../../provider/transport/ovs-host";
import { OvsdbTransactionError, Transaction, mutation, where } from "../../provider/ovsdb";
import { SshSession } from "../../provider/transport/ssh";
import { labSsh, loadInventory, sshTo } from "../support/lab";

/**
 * The transports as the providers use them: over SSH to a lab host, the
 * OpenFlow bundle through ovs-ofctl on stdin and OVSDB through a stream-local
 * channel to the host's db.sock.
 */

const BRIDGE = "br-ovslb-tx";
let host: OvsHostSession;
/** The test's own commands (ovs-vsctl), with gw2's run directory; the transports under test get a plain session. */
let own: SshSession;

beforeAll(async () => {
  const inv = loadInventory();
  const gw2 = inv.hosts.gw2;
  host = new OvsHostSession({ connection: sshTo(inv, gw2), ovsRundir: gw2.ovsRundir }, await SshSession.connect(sshTo(inv, gw2)));
  own = await labSsh(inv, gw2);
  await own.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
  await own.run([
    "ovs-vsctl",
    "add-br",
    BRIDGE,
    "--",
    "set",
    "bridge",
    BRIDGE,
    "datapath_type=netdev",
    "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15",
    "fail_mode=secure",
  ]);
});

afterAll(async () => {
  await own?.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE]);
  own?.close();
  await host?.close();
});

describe("OpenFlow over SSH", () => {
  const cookie = 0x0b5e_0000_0000_0042n;
  const group: Modification = {
    op: "add-group",
    group: {
      groupId: 7,
      type: "select",
      selectionMethod: "hash",
      fields: ["ip_src", "ip_dst", "tcp_src", "tcp_dst"],
      buckets: [
        { bucketId: 100, weight: 100, actions: [{ type: "set_field", field: "eth_dst", value: "02:00:0a:00:00:65" }, { type: "in_port" }] },
        { bucketId: 200, weight: 100, actions: [{ type: "set_field", field: "eth_dst", value: "02:00:0a:00:00:66" }, { type: "in_port" }] },
      ],
    },
  };
  const flow: Modification = {
    op: "add-flow",
    flow: { table: 0, priority: 100, cookie, match: { protocol: "tcp", nw_dst: "10.0.0.199", tp_dst: 80 }, actions: [{ type: "group", groupId: 7 }] },
  };

  it("applies a group and its flow as one bundle and reads them back typed", async () => {
    const of = new OpenFlowBridge(host.ssh, bridgeSocket(host.host, BRIDGE));
    const sent = await of.applyBundle([group, flow]);
    expect(sent.messages).toBe(2);
    const [g] = await of.dumpGroups();
    expect(g.groupId).toBe(7);
    expect(g.buckets.map((b) => [b.bucketId, b.weight])).toEqual([
      [100, 100],
      [200, 100],
    ]);
    const flows = await of.dumpFlows({ cookie, mask: 0xffff_ffff_ffff_ffffn });
    expect(flows).toHaveLength(1);
  });

  it("traces over a session that sets no environment only when told the host's run directory", async () => {
    const packet = { protocol: "tcp" as const, nw_src: "10.9.0.1", nw_dst: "10.0.0.199", tp_src: 1234, tp_dst: 80 };
    const [bucket] = await traceBuckets(host.ssh, BRIDGE, [packet], { ovsRundir: ovsRundirOf(host.host) });
    expect([100, 200]).toContain(bucket);
    // Without it ovs-appctl looks in OVS's default run directory, where this host's ovs-vswitchd is not.
    await expect(traceBuckets(host.ssh, BRIDGE, [packet])).rejects.toThrow();
    await expect(traceBuckets(host.ssh, BRIDGE, [packet], { ovsRundir: "/run;reboot" })).rejects.toThrow(/ovsRundir: .* is not an absolute path/);
  });

  it("leaves the bridge exactly as it was when the bundle's last operation fails", async () => {
    const of = new OpenFlowBridge(host.ssh, bridgeSocket(host.host, BRIDGE));
    const dump = async () => [
      (await own.run(["ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", BRIDGE])).stdout,
      (await own.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", BRIDGE])).stdout,
    ];
    const before = await dump();
    const err = await of
      .applyBundle([
        { op: "insert-buckets", groupId: 7, commandBucketId: "last", buckets: [{ bucketId: 300, weight: 100, actions: [{ type: "in_port" }] }] },
        { op: "add-flow", flow: { ...flow.flow, priority: 101, match: { protocol: "tcp", nw_dst: "10.0.0.198", tp_dst: 80 } } },
        { op: "remove-buckets", groupId: 7, commandBucketId: 999 },
      ] as Modification[])
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenFlowError);
    expect(err.codes).toContain("OFPGMFC_UNKNOWN_BUCKET");
    expect(err.message).toContain(host.hostName);
    expect(await dump()).toEqual(before);
  });
});

describe("OVSDB over an SSH stream-local channel", () => {
  it("commits nothing and reports the conflict when a wait precondition fails", async () => {
    const db = await host.vswitchDb();
    const read = async () => {
      const t = new Transaction();
      t.select("Bridge", [where("name", "==", BRIDGE)], ["external_ids", "fail_mode"]);
      return (await db.transact("Open_vSwitch", t.operations))[0].rows![0];
    };
    const before = await read();
    const txn = new Transaction();
    // Precondition: fail_mode is standalone (it is secure), so nothing below may commit.
    txn.wait("Bridge", [where("name", "==", BRIDGE)], { columns: ["fail_mode"], until: "==", rows: [{ fail_mode: ["standalone"] }] });
    txn.mutate("Bridge", [where("name", "==", BRIDGE)], [mutation("external_ids", "insert", { touched: "yes" })]);
    const err = await db.transact("Open_vSwitch", txn.operations).catch((e) => e);
    expect(err).toBeInstanceOf(OvsdbTransactionError);
    expect(err.kind).toBe("conflict");
    expect(err.operation).toEqual({ index: 0, op: "wait", table: "Bridge" });
    expect(await read()).toEqual(before);
    const vsctl = await own.run(["ovs-vsctl", "get", "bridge", BRIDGE, "external_ids"]);
    expect(vsctl.stdout.trim()).toBe("{}");
  });
});

describe("ovs-appctl's commands over the control socket", () => {
  /** A session whose exec commands are recorded, on gw2. */
  async function recorded(ovsRundir: string) {
    const inv = loadInventory();
    const ssh = await SshSession.connect(sshTo(inv, inv.hosts.gw2));
    const commands: string[] = [];
    const run = ssh.run.bind(ssh);
    ssh.run = (argv, opts) => (commands.push(argv.join(" ")), run(argv, opts));
    return { session: new OvsHostSession({ connection: sshTo(inv, inv.hosts.gw2), ovsRundir }, ssh), commands };
  }

  it("answers as ovs-appctl does, every command of a session on one channel: no process per command", async () => {
    const { session, commands } = await recorded(ovsRundirOf(host.host));
    try {
      const asAppctl = (await own.run(["ovs-appctl", "version"])).stdout;
      const [version, limits, dump] = await Promise.all([
        session.appctl(["version"]),
        session.zoneLimit(64999),
        session.dumpConntrack(64999),
        session.appctl(["dpctl/ct-get-maxconns"]),
      ]);
      expect(version).toBe(asAppctl);
      expect(limits).toMatchObject({ zone: 64999, own: false });
      expect(dump).toEqual([]);
      await session.flushConntrack({ zone: 64999 });
      // The pid file read once to find the socket; no ovs-appctl ran.
      expect(commands).toEqual([`cat ${ovsRundirOf(host.host)}/ovs-vswitchd.pid`]);
      // A command the daemon refuses fails naming the host, the daemon and the command, as ovs-appctl's error would.
      await expect(session.appctl(["no-such-command"])).rejects.toThrow(
        /^root@[^:]+:\d+: ovs-vswitchd: no-such-command: "no-such-command" is not a valid command/,
      );
      // The channel stays usable after a refusal.
      expect(await session.appctl(["version"])).toBe(asAppctl);
    } finally {
      await session.close();
    }
  });

  it("runs ovs-appctl itself where the control socket cannot be reached, and fails as it does", async () => {
    // No pid file in this run directory: the socket cannot be found, so ovs-appctl runs (and cannot find it either).
    const { session, commands } = await recorded("/tmp/ovslb-no-such-rundir");
    try {
      await expect(session.appctl(["version"])).rejects.toThrow(/ovs-appctl/);
      expect(commands).toEqual(["cat /tmp/ovslb-no-such-rundir/ovs-vswitchd.pid", "env OVS_RUNDIR=/tmp/ovslb-no-such-rundir ovs-appctl version"]);
    } finally {
      await session.close();
    }
  });
});
