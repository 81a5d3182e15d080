import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory, lockLab, sshTo } from "../support/lab";
import { OvnCentral } from "../support/ovn-central";
import { waitUntil } from "../support/wait";

/**
 * healthCheck.probe against the lab's OVN central (ovsdb-server + ovn-northd,
 * no ovn-controller): ovslb writes the health checks and mappings; northd
 * makes the Service_Monitor rows and keeps only monitored, non-offline
 * backends in each VIP's flow. Chassis, bindings and probe results are faked
 * in the SB, as a controller would write them, to show read's stale report and
 * enforce.
 *
 * Why faked, with real chassis in the lab (test/lab/ovn-chassis.ts): the
 * backends here are the deferred-NAT backends of the gateways' select groups,
 * which no chassis binds, and the cases need a port unbound while its monitor
 * reads online beside bound ones, and a backend missing from the NB, in one
 * load balancer. With an ovn-controller that really dies, the stale ->
 * enforce path is ovn-incident-ovslb.test.ts.
 */

const VIP1 = "10.0.0.204";
const VIP2 = "10.0.0.205";
const NAME = "ovnhc";
const ROUTER = "lr-ovslb-hc";
const SWITCH = "ls-ovslb-hc";
const TCP_ROW = `ovslb-${NAME}-tcp`;
const UDP_ROW = `ovslb-${NAME}-udp`;
const SRC_IP = "10.0.0.253";
const CHASSIS = ["ch-ovslb-hc1", "ch-ovslb-hc2"];
/** Logical ports of the backends: hc1 bound (healthy), hc2 left unbound but up (stale), hc3 bound (healthy); hc4 is not in the NB. */
const LSP = ["lsp-hc1", "lsp-hc2", "lsp-hc3", "lsp-hc4"];
type Props = Record<string, any>;

let inv: LabInventory;
let central: SshSession;
let unlock: (() => void) | undefined;
const lb = new ProviderDriver("DeferredNatLoadBalancer");
let desired: ReturnType<typeof inputs>;

let ovn: OvnCentral;
const nbctl = (...args: string[]) => ovn.nbctl(...args);
const sbctl = (...args: string[]) => ovn.sbctl(...args);

const backends = () => inv.backends.slice(0, 1).concat(inv.backends.slice(1, 2), inv.backends.slice(4, 6));
const addr = (i: number) => backends()[i].address;

function inputs() {
  const b = backends().map((x, i) => ({ ...labBackend(inv, x), logicalPort: LSP[i] }));
  return labLoadBalancer(
    inv,
    NAME,
    [
      // b[3]'s port is not in the NB: OVN makes no monitor for it and drops it from the VIP.
      { address: VIP1, port: 80, protocol: "tcp", backends: [b[0], b[1], b[2], b[3]] },
      { address: VIP2, port: 80, protocol: "tcp", backends: [b[0], b[2]] },
      { address: VIP1, port: 53, protocol: "udp", backends: [b[1], b[2]] },
    ],
    {
      ovn: {
        northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock },
        router: ROUTER,
        // Attached: the test reads northd's router flows for the VIPs.
        attach: true,
        healthCheckSourceIp: SRC_IP,
      },
      healthCheck: {
        probe: { interval: 7 },
        southbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.sbSock },
        enforce: true,
      },
    },
  );
}

/** The NB health-check rows referenced by a Load_Balancer row: vip -> { uuid, options, external_ids }. */
async function healthChecks(row: string): Promise<Record<string, { uuid: string; options: string; external_ids: string }>> {
  const refs = (await nbctl("get", "load_balancer", row, "health_check"))
    .replace(/^\[|\]$/g, "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const out: Record<string, { uuid: string; options: string; external_ids: string }> = {};
  for (const uuid of refs) {
    const vip = JSON.parse(await nbctl("get", "load_balancer_health_check", uuid, "vip")) as string;
    out[vip] = {
      uuid,
      options: await nbctl("get", "load_balancer_health_check", uuid, "options"),
      external_ids: await nbctl("get", "load_balancer_health_check", uuid, "external_ids"),
    };
  }
  return out;
}

/** Health-check rows anywhere in the NB for this test's VIPs. */
async function allHealthCheckVips(): Promise<string[]> {
  const vips = (await nbctl("--bare", "--columns=vip", "list", "load_balancer_health_check"))
    .split("\n")
    .map((s) => s.trim())
    .filter(Boolean);
  return vips.filter((v) => v.startsWith(`${VIP1}:`) || v.startsWith(`${VIP2}:`)).sort();
}

/** The SB Service_Monitor rows of this test's logical ports. */
const monitors = () => ovn.monitors(LSP);

const monitorOf = async (lsp: string, protocol: string) => (await monitors()).find((m) => m.logicalPort === lsp && m.protocol === protocol)!;

/**
 * The backends of a VIP's load-balancing flow on the switch and on the
 * router, as northd wrote them (ct_lb or ct_lb_mark, by what the chassis support).
 * Both must agree; undefined while either has none.
 */
async function flowBackends(vip: string, vport: number, protocol: string): Promise<string[] | undefined> {
  // The switch matches "ip4.dst == V && tcp.dst == P", the router "ip4.dst == V && tcp && tcp.dst == P".
  const match = new RegExp(`ip4\\.dst == ${vip.replace(/\./g, "\\.")} && (${protocol} && )?${protocol}\\.dst == ${vport}\\)`);
  const per = await Promise.all(
    [SWITCH, ROUTER].map(async (dp) => {
      const lines = (await sbctl("lflow-list", dp)).split("\n").filter((l) => /ls_in_lb|lr_in_dnat/.test(l) && l.includes("ct.new") && match.test(l));
      const found = lines.map((l) => /ct_lb(?:_mark)?\(backends=([^;)]*)/.exec(l)?.[1]).filter((x): x is string => x !== undefined);
      return found.length === 1 ? found[0].split(",").sort() : undefined;
    }),
  );
  if (!per[0] || !per[1]) return undefined;
  expect(per[1]).toEqual(per[0]);
  return per[0];
}

/** Waits until northd's flow for the VIP holds exactly `want`. */
async function flowIs(vip: string, vport: number, protocol: string, want: string[]): Promise<void> {
  await waitUntil(async () => JSON.stringify(await flowBackends(vip, vport, protocol)) === JSON.stringify([...want].sort()), {
    what: `northd's flow for ${protocol} ${vip}:${vport} to list ${want.join(",")}`,
    timeoutMs: 15_000,
  });
}

async function cleanup(): Promise<void> {
  for (const ch of CHASSIS) await sbctl("--if-exists", "chassis-del", ch).catch(() => undefined);
  await nbctl("--if-exists", "ls-del", SWITCH).catch(() => undefined);
  await nbctl("--if-exists", "lr-del", ROUTER).catch(() => undefined);
}

beforeAll(async () => {
  inv = loadInventory();
  // The SB chassis this test fakes are seen by every northd-driven test: one run at a time.
  unlock = await lockLab("ovn-central");
  central = await labSsh(inv, "central");
  ovn = new OvnCentral(inv, central);
  desired = inputs();
  await lb.purge(desired).catch(() => undefined);
  await cleanup();
  await nbctl("lr-add", ROUTER, "--", "set", "logical_router", ROUTER, "options:chassis=gw1");
  // The backends' ports (hc1..hc3) with addresses, on a switch: northd monitors only ports it knows.
  const lsArgs = ["ls-add", SWITCH];
  for (let i = 0; i < 3; i++) {
    const b = backends()[i];
    lsArgs.push("--", "lsp-add", SWITCH, LSP[i], "--", "lsp-set-addresses", LSP[i], `${b.mac} ${b.address}`);
  }
  await nbctl(...lsArgs);
});

afterAll(async () => {
  if (lb.id) await lb.delete().catch(() => undefined);
  if (central) {
    await cleanup();
    central.close();
  }
  unlock?.();
});

describe("deferred-NAT load balancer, OVN health checks", () => {
  it("writes one health check per VIP and the mappings; northd makes the monitors and keeps only monitored backends in each flow", async () => {
    await lb.create(desired);
    const p = inv.backendPort;
    // The switch carries the load balancer too, so northd builds its ls_in_lb flows (a weak reference ovslb leaves alone).
    await nbctl("ls-lb-add", SWITCH, TCP_ROW, "--", "ls-lb-add", SWITCH, UDP_ROW);

    const options = '{failure_count="1", interval="7", success_count="1", timeout="3"}';
    const owner = `{"ovslb:owner"="deferred-nat/${NAME}"}`;
    const tcp = await healthChecks(TCP_ROW);
    expect(Object.keys(tcp).sort()).toEqual([`${VIP1}:80`, `${VIP2}:80`]);
    for (const hc of Object.values(tcp)) expect([hc.options, hc.external_ids]).toEqual([options, owner]);
    const udp = await healthChecks(UDP_ROW);
    expect(Object.keys(udp)).toEqual([`${VIP1}:53`]);
    expect([udp[`${VIP1}:53`].options, udp[`${VIP1}:53`].external_ids]).toEqual([options, owner]);
    expect(await nbctl("get", "load_balancer", TCP_ROW, "ip_port_mappings")).toBe(
      `{"${addr(0)}"="lsp-hc1:${SRC_IP}", "${addr(1)}"="lsp-hc2:${SRC_IP}", "${addr(2)}"="lsp-hc3:${SRC_IP}", "${addr(3)}"="lsp-hc4:${SRC_IP}"}`,
    );
    expect(await nbctl("get", "load_balancer", UDP_ROW, "ip_port_mappings")).toBe(`{"${addr(1)}"="lsp-hc2:${SRC_IP}", "${addr(2)}"="lsp-hc3:${SRC_IP}"}`);

    await nbctl("--wait=sb", "--timeout=30", "sync");
    // One monitor per (port, address, port, protocol): hc1 serves two VIPs but has one; hc4 (no such port) has none.
    const want = [
      { logicalPort: "lsp-hc1", ip: addr(0), port: p, protocol: "tcp", srcIp: SRC_IP },
      { logicalPort: "lsp-hc2", ip: addr(1), port: p, protocol: "tcp", srcIp: SRC_IP },
      { logicalPort: "lsp-hc2", ip: addr(1), port: p, protocol: "udp", srcIp: SRC_IP },
      { logicalPort: "lsp-hc3", ip: addr(2), port: p, protocol: "tcp", srcIp: SRC_IP },
      { logicalPort: "lsp-hc3", ip: addr(2), port: p, protocol: "udp", srcIp: SRC_IP },
    ];
    const seen = await waitUntil(
      async () => {
        const m = await monitors();
        return m.length === want.length ? m : undefined;
      },
      { what: "northd's Service_Monitor rows" },
    );
    expect(seen.map(({ logicalPort, ip, port, protocol, srcIp }) => ({ logicalPort, ip, port, protocol, srcIp }))).toEqual(want);
    // Not probed yet (no controller): OVN keeps such a backend.
    expect(seen.map((m) => m.status)).toEqual(["", "", "", "", ""]);

    const be = (i: number) => `${addr(i)}:${p}`;
    await flowIs(VIP1, 80, "tcp", [be(0), be(1), be(2)]);
    await flowIs(VIP2, 80, "tcp", [be(0), be(2)]);
    await flowIs(VIP1, 53, "udp", [be(1), be(2)]);
    // The row still lists hc4's backend: only the health check drops it.
    expect(await nbctl("get", "load_balancer", TCP_ROW, "vips")).toContain(be(3));

    // create read no monitor online, so nothing was stale or set offline.
    expect(lb.outputs.stale).toEqual([]);
  });

  it("reports a port bound to no chassis but up, its monitor online, as stale; never a bound, online one", async () => {
    await sbctl("chassis-add", CHASSIS[0], "geneve", "127.0.0.21", "--", "chassis-add", CHASSIS[1], "geneve", "127.0.0.22");
    await sbctl("lsp-bind", "lsp-hc1", CHASSIS[0], "--", "lsp-bind", "lsp-hc3", CHASSIS[1]);
    for (const lsp of LSP.slice(0, 3)) await sbctl("set", "port_binding", lsp, "up=true");
    for (const m of await monitors()) await sbctl("set", "service_monitor", m.uuid, "status=online");

    const read = await lb.read();
    const p = inv.backendPort;
    // A set: in the order of the recorded VIPs, which is their key order since a create (tcp:...:80 after udp:...:53).
    const stale = [...(read.props.stale as Props[])].sort((a, b) => String(a.vip).localeCompare(String(b.vip)));
    expect(stale).toEqual([
      {
        vip: `tcp:${VIP1}:80`,
        backend: `${addr(1)}:${p}`,
        logicalPort: "lsp-hc2",
        reason: "online while its logical port lsp-hc2 is bound to no chassis (and still marked up)",
      },
      {
        vip: `udp:${VIP1}:53`,
        backend: `${addr(1)}:${p}`,
        logicalPort: "lsp-hc2",
        reason: "online while its logical port lsp-hc2 is bound to no chassis (and still marked up)",
      },
    ]);
    expect(stale.some((s) => s.logicalPort !== "lsp-hc2")).toBe(false);
    const health = (read.props.health as Props[])
      .map((h) => [h.vip, h.backend, h.monitor, h.port?.chassis, h.port?.up])
      .sort((a, b) => `${a[0]} ${a[1]}`.localeCompare(`${b[0]} ${b[1]}`));
    expect(health).toEqual([
      [`tcp:${VIP1}:80`, `${addr(0)}:${p}`, "online", CHASSIS[0], true],
      [`tcp:${VIP1}:80`, `${addr(1)}:${p}`, "online", null, true],
      [`tcp:${VIP1}:80`, `${addr(2)}:${p}`, "online", CHASSIS[1], true],
      [`tcp:${VIP1}:80`, `${addr(3)}:${p}`, "absent", null, false],
      [`tcp:${VIP2}:80`, `${addr(0)}:${p}`, "online", CHASSIS[0], true],
      [`tcp:${VIP2}:80`, `${addr(2)}:${p}`, "online", CHASSIS[1], true],
      [`udp:${VIP1}:53`, `${addr(1)}:${p}`, "online", null, true],
      [`udp:${VIP1}:53`, `${addr(2)}:${p}`, "online", CHASSIS[1], true],
    ]);
    expect(read.props.drift).toEqual([]);
    // read only reports: the stale monitors are still online.
    expect((await monitorOf("lsp-hc2", "tcp")).status).toBe("online");
    expect((await monitorOf("lsp-hc2", "udp")).status).toBe("online");
  });

  it("enforce: update sets the stale monitors offline and northd drops that backend; the healthy ones stay online and in the flows", async () => {
    const p = inv.backendPort;
    const be = (i: number) => `${addr(i)}:${p}`;
    const outs = await lb.update(desired);
    // The report says what was found, before enforce acted on it.
    expect((outs.stale as Props[]).map((s) => `${s.vip} ${s.logicalPort}`).sort()).toEqual([`tcp:${VIP1}:80 lsp-hc2`, `udp:${VIP1}:53 lsp-hc2`]);
    expect((await monitors()).map((m) => `${m.logicalPort}/${m.protocol}=${m.status}`)).toEqual([
      "lsp-hc1/tcp=online",
      "lsp-hc2/tcp=offline",
      "lsp-hc2/udp=offline",
      "lsp-hc3/tcp=online",
      "lsp-hc3/udp=online",
    ]);
    await flowIs(VIP1, 80, "tcp", [be(0), be(2)]);
    await flowIs(VIP1, 53, "udp", [be(2)]);
    await flowIs(VIP2, 80, "tcp", [be(0), be(2)]);

    // Offline is not stale: the next read reports nothing.
    const read = await lb.read();
    expect(read.props.stale).toEqual([]);
    expect((read.props.health as Props[]).filter((h) => h.port?.name === "lsp-hc2").map((h) => h.monitor)).toEqual(["offline", "offline"]);
  });

  it("enforce never writes online: a monitor set offline by hand, and the one it set, stay offline after update", async () => {
    const p = inv.backendPort;
    const hc3 = await monitorOf("lsp-hc3", "tcp");
    await sbctl("set", "service_monitor", hc3.uuid, "status=offline");
    await flowIs(VIP2, 80, "tcp", [`${addr(0)}:${p}`]);
    lb.outputs = (await lb.read()).props;
    await lb.update(desired);
    expect((await monitors()).map((m) => `${m.logicalPort}/${m.protocol}=${m.status}`)).toEqual([
      "lsp-hc1/tcp=online",
      "lsp-hc2/tcp=offline",
      "lsp-hc2/udp=offline",
      "lsp-hc3/tcp=offline",
      "lsp-hc3/udp=online",
    ]);
    await flowIs(VIP2, 80, "tcp", [`${addr(0)}:${p}`]);
    await flowIs(VIP1, 80, "tcp", [`${addr(0)}:${p}`]);
    // Put hc3 back as a probe would, for the tests below.
    await sbctl("set", "service_monitor", hc3.uuid, "status=online");
    await flowIs(VIP2, 80, "tcp", [`${addr(0)}:${p}`, `${addr(2)}:${p}`]);
  });

  it("reports a health check deleted by hand as drift, and update puts it back", async () => {
    const before = await healthChecks(TCP_ROW);
    await nbctl("remove", "load_balancer", TCP_ROW, "health_check", before[`${VIP2}:80`].uuid);
    // Unreferenced, the row is gone (garbage-collected).
    expect(await nbctl("--bare", "--columns=_uuid", "find", "load_balancer_health_check", `vip="${VIP2}:80"`)).toBe("");
    const read = await lb.read();
    expect(read.props.drift).toEqual([`OVN Load_Balancer ${TCP_ROW}: health check of VIP ${VIP2}:80 missing`]);
    expect(read.inputs.ovn).toBeUndefined();
    expect((await lb.diff(desired, read.props)).changes).toBe(true);
    lb.outputs = read.props;
    await lb.update(desired);
    const after = await healthChecks(TCP_ROW);
    expect(Object.keys(after).sort()).toEqual([`${VIP1}:80`, `${VIP2}:80`]);
    expect(after[`${VIP2}:80`].options).toBe('{failure_count="1", interval="7", success_count="1", timeout="3"}');
    expect(after[`${VIP2}:80`].external_ids).toBe(`{"ovslb:owner"="deferred-nat/${NAME}"}`);
    // The one not touched is kept, not rewritten as a new row.
    expect(after[`${VIP1}:80`].uuid).toBe(before[`${VIP1}:80`].uuid);
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("reports a health check changed by hand, or one added by hand, as drift, and update restores the declared ones", async () => {
    const before = await healthChecks(UDP_ROW);
    const uuid = before[`${VIP1}:53`].uuid;
    await nbctl("set", "load_balancer_health_check", uuid, "options:interval=30");
    await nbctl("--", "--id=@hc", "create", "load_balancer_health_check", `vip="${VIP1}:54"`, "--", "add", "load_balancer", UDP_ROW, "health_check", "@hc");
    const read = await lb.read();
    expect(read.props.drift).toEqual([
      `OVN Load_Balancer ${UDP_ROW}: health check of VIP ${VIP1}:53 differs`,
      `OVN Load_Balancer ${UDP_ROW}: health check of VIP ${VIP1}:54 not declared (not owned by ovslb)`,
    ]);
    expect((await lb.diff(desired, read.props)).changes).toBe(true);
    lb.outputs = read.props;
    await lb.update(desired);
    const after = await healthChecks(UDP_ROW);
    expect(Object.keys(after)).toEqual([`${VIP1}:53`]);
    // Updated in place.
    expect(after[`${VIP1}:53`]).toEqual({ ...before[`${VIP1}:53`], options: '{failure_count="1", interval="7", success_count="1", timeout="3"}' });
    expect(await allHealthCheckVips()).toEqual([`${VIP1}:53`, `${VIP1}:80`, `${VIP2}:80`]);
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("delete removes the health checks (and northd the monitors)", async () => {
    await lb.delete();
    lb.id = "";
    expect(await allHealthCheckVips()).toEqual([]);
    expect(await nbctl("--bare", "--columns=name", "find", "load_balancer", `name=${TCP_ROW}`)).toBe("");
    await nbctl("--wait=sb", "--timeout=30", "sync");
    await waitUntil(async () => (await monitors()).length === 0, { what: "northd to drop the Service_Monitor rows" });
  });
});
