import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { chmodSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { asLists, handle } from "../../provider/handlers";
import { closeIdleSshConnections } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { FaultHost } from "../support/fault-host";
import { loadInventory } from "../support/lab";

/**
 * Least privilege (issue 13; README "Least privilege"): ovslb logs in as an
 * unprivileged user, with no sudo, whose only grant is membership of the
 * group that owns the OVS run directory and its sockets (db.sock for OVSDB
 * over the forwarded unix socket, BRIDGE.mgmt for ovs-ofctl, the
 * ovs-vswitchd control socket for ovs-appctl). On a host of this test's own
 * (namespace, sshd, ovsdb-server, ovs-vswitchd), set up as the README says,
 * an OvsBridge and a DsrHypervisorFlows are created, read, updated and
 * deleted through that user; without the group the same call fails with an
 * error naming the host, the socket and why.
 */

const USER = "ovslb-op";
const GROUP = "ovslb-ovs";
const BRIDGE = "br-lp";

/** The fault host, with an sshd that lets only the unprivileged user in. */
class UnprivilegedHost extends FaultHost {
  protected override readonly sshUser = USER;

  // The lab's own authorized_keys: the user reads it itself, and can (this host's copy lives in a root-only directory).
  override get authorizedKeysFile(): string {
    return join(loadInventory().labDir, "authorized_keys");
  }
}

let inv: LabInventory;
let host: UnprivilegedHost;

const run = (argv: string[]) => execFileSync(argv[0], argv.slice(1), { encoding: "utf8" });
const userExists = () => {
  try {
    run(["id", USER]);
    return true;
  } catch {
    return false;
  }
};
const groupExists = () =>
  run(["getent", "group"])
    .split("\n")
    .some((l) => l.startsWith(`${GROUP}:`));

function removeAccounts() {
  if (userExists()) run(["userdel", USER]);
  if (groupExists()) run(["groupdel", GROUP]);
}

beforeAll(async () => {
  inv = loadInventory();
  removeAccounts();
  run(["groupadd", "--system", GROUP]);
  // No home, no password, no sudo: a login shell and the group only.
  run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", "--groups", GROUP, USER]);
  // No password ("*"), but not locked ("!"): sshd refuses a locked account even for key logins.
  run(["usermod", "--password", "*", USER]);
  host = new UnprivilegedHost(inv, "lp", 211);
  // As the README says for a real host: the daemons run with umask 0007, so the sockets they
  // make (OVS asks for 0770) keep group access; the run directory is the group's, setgid,
  // so every socket made later (a new bridge's BRIDGE.mgmt) is the group's too.
  const umask = process.umask(0o007);
  try {
    await host.up();
  } finally {
    process.umask(umask);
  }
  chmodSync(host.dir, 0o755);
  run(["chgrp", "-R", GROUP, host.rundir]);
  chmodSync(host.rundir, 0o2770);
});

afterAll(() => {
  host?.down();
  removeAccounts();
});

const connection = () => ({ host: host.address, user: USER, hostKey: inv.hosts.gw1.hostKey, privateKeyPath: inv.clientKeyPath, connectTimeoutMs: 5000 });
const ovsHost = () => ({ connection: connection(), ovsRundir: host.rundir });

async function checked(kind: string, inputs: Record<string, unknown>) {
  const r = (await handle(kind, "check", [{}, inputs])) as { inputs: Record<string, unknown>; failures: unknown[] };
  expect(r.failures).toEqual([]);
  return asLists(kind, r.inputs);
}

describe("an unprivileged user with only the OVS group", () => {
  it("the host is set up as documented: the sockets are the group's, read-write, and the user is not root", () => {
    for (const name of readdirSync(host.rundir).filter((n) => /\.(sock|mgmt|ctl)$/.test(n))) {
      const st = statSync(join(host.rundir, name));
      expect(st.isSocket(), name).toBe(true);
      expect(st.mode & 0o070, name).toBe(0o070);
      expect(st.gid, name).toBe(Number(run(["getent", "group", GROUP]).split(":")[2]));
    }
    expect(run(["id", "-u", USER]).trim()).not.toBe("0");
    // No sudo for it anywhere.
    expect(() => run(["sudo", "-n", "-l", "-U", USER])).not.toThrow(/may run/);
  });

  it("OvsBridge: create, read, update and delete through that user", async () => {
    const inputs = await checked("OvsBridge", { host: ovsHost(), name: BRIDGE, externalIds: { team: "lp" } });
    const created = (await handle("OvsBridge", "create", [inputs])) as { id: string; outs: Record<string, any> };
    expect(host.vsctl("list-br")).toContain(BRIDGE);
    // The bridge's new management socket is the group's too (setgid directory, umask 0007).
    expect(statSync(join(host.rundir, `${BRIDGE}.mgmt`)).mode & 0o070).toBe(0o070);
    const read = (await handle("OvsBridge", "read", [created.id, created.outs])) as { props: Record<string, any>; inputs: Record<string, unknown> };
    expect(read.props.externalIds).toEqual({ team: "lp" });
    // read asked ovs-vswitchd for its version through its control socket.
    expect(read.props.ovsVersions[host.address].version).toMatch(/^\d+\.\d+\.\d+/);
    const updated = (await handle("OvsBridge", "update", [created.id, read.props, { ...inputs, externalIds: { team: "lp2" } }])) as {
      outs: Record<string, any>;
    };
    expect(host.vsctl("get", "bridge", BRIDGE, "external_ids:team").trim().replace(/"/g, "")).toBe("lp2");
    await handle("OvsBridge", "delete", [created.id, updated.outs]);
    expect(host.vsctl("list-br")).not.toContain(BRIDGE);
  });

  it("DsrHypervisorFlows: flows are bundled, read back and removed through that user", async () => {
    const inputs = await checked("DsrHypervisorFlows", {
      name: "lp",
      host: ovsHost(),
      bridge: host.bridge,
      vips: [{ address: "10.0.0.150", port: 80, backends: [{ address: "10.0.0.151", port: 8080, mac: "02:00:0a:00:00:97", bridgePort: host.segmentPort }] }],
    });
    const created = (await handle("DsrHypervisorFlows", "create", [inputs])) as { id: string; outs: Record<string, any> };
    expect(created.outs.lastApply.messages).toBeGreaterThan(0);
    expect(host.ofctl("dump-flows", host.bridge)).toContain("nw_dst=10.0.0.150");
    const read = (await handle("DsrHypervisorFlows", "read", [created.id, created.outs])) as { id: string; props: Record<string, any> };
    expect(read.id).toBe(created.id);
    const next = { ...inputs, vips: [{ ...(inputs.vips as any[])[0], port: 81 }] };
    const updated = (await handle("DsrHypervisorFlows", "update", [created.id, read.props, next])) as { outs: Record<string, any> };
    expect(host.ofctl("dump-flows", host.bridge)).toContain("tp_dst=81");
    await handle("DsrHypervisorFlows", "delete", [created.id, updated.outs]);
    expect(host.ofctl("dump-flows", host.bridge)).not.toContain("nw_dst=10.0.0.150");
  });

  it("without the group, the same create fails naming the host, the socket and why, and changes nothing", async () => {
    run(["gpasswd", "--delete", USER, GROUP]);
    // A login's groups are fixed when it logs in: the change applies to the next login, not to this process's open connection.
    closeIdleSshConnections();
    try {
      const inputs = await checked("OvsBridge", { host: ovsHost(), name: BRIDGE });
      await expect(handle("OvsBridge", "create", [inputs])).rejects.toThrow(
        new RegExp(
          `^ovs-bridge/\\S+: no host was changed: ${USER}@${host.address.replace(/\./g, "\\.")}:22: cannot open ${host.rundir}/db\\.sock: .*(permission|access)`,
          "i",
        ),
      );
      expect(host.vsctl("list-br")).not.toContain(BRIDGE);
    } finally {
      run(["gpasswd", "--add", USER, GROUP]);
    }
  });
});
