import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { observeBundles } from "../../provider/engine/bridge";
import type { HealthCheckInputs } from "../../provider/model/inputs.generated";
import type { SshSession } from "../../provider/transport/ssh";
import { ipv6Twin, type LabInventory } from "../lab/topology";
import { ProviderDriver, labBackend, labLoadBalancer } from "../support/deferred-nat";
import { labSsh, loadInventory, lockLab, sshTo } from "../support/lab";
import { OvnCentral } from "../support/ovn-central";
import { waitUntil } from "../support/wait";

/**
 * HealthCheck against the lab's OVN central (ovsdb-server + ovn-northd, no
 * ovn-controller), attached to a DeferredNatLoadBalancer with ovn and no
 * healthCheck of its own: it writes a health check per VIP and the mappings
 * on the load balancer's rows; northd makes the Service_Monitor rows and
 * keeps only monitored, non-offline backends in each VIP's flow. Chassis,
 * bindings and probe results are faked in the SB, as a controller would
 * write them. The gateways' flows and groups stay byte-identical and no
 * bundle is sent throughout.
 *
 * Why faked, with real chassis in the lab (test/lab/ovn-chassis.ts): these
 * are the HealthCheck resource's own rows and its reading of every state a
 * monitor can be in, each set exactly and at once (bound and online, unbound
 * yet online, offline) for both address families on the same ports; the
 * lab's chassis bind OVN's own VMs, not the deferred-NAT backends used here.
 * The same stale -> enforce path with an ovn-controller that really dies is
 * ovn-incident-ovslb.test.ts.
 */

const VIP = "10.0.0.206";
const NAME = "hcres";
const ROUTER = "lr-ovslb-hcr";
const SWITCH = "ls-ovslb-hcr";
const TCP_ROW = `ovslb-${NAME}-tcp`;
const SRC_IP = "10.0.0.252";
const CHASSIS = "ch-ovslb-hcr1";
/** hcr1 bound (healthy), hcr2 left unbound but up (stale). */
const LSP = ["lsp-hcr1", "lsp-hcr2"];
const OWNER = `health-check/${NAME}`;
type Props = Record<string, any>;

let inv: LabInventory;
let central: SshSession;
const gws: Record<string, SshSession> = {};
let unlock: (() => void) | undefined;
let stopObserving: (() => void) | undefined;
const bundles: string[] = [];
const lb = new ProviderDriver("DeferredNatLoadBalancer");
const hc = new ProviderDriver("HealthCheck");
let ovn: OvnCentral;
const nbctl = (...args: string[]) => ovn.nbctl(...args);
const sbctl = (...args: string[]) => ovn.sbctl(...args);

const backends = () => inv.backends.slice(0, 2);
const addr = (i: number) => backends()[i].address;
const be = (i: number) => `${addr(i)}:${inv.backendPort}`;

function lbInputs() {
  return labLoadBalancer(inv, NAME, [{ address: VIP, port: 80, protocol: "tcp", backends: backends().map((b) => labBackend(inv, b)) }], {
    ovn: { northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock }, router: ROUTER },
  });
}

function hcInputs(extra: Partial<HealthCheckInputs> = {}): HealthCheckInputs {
  return {
    loadBalancer: NAME,
    northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock },
    southbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.sbSock },
    sourceIp: SRC_IP,
    vips: [
      {
        address: VIP,
        port: 80,
        protocol: "tcp",
        backends: backends().map((b, i) => ({ address: b.address, port: inv.backendPort, logicalPort: LSP[i], hypervisor: b.hypervisor })),
      },
    ],
    probe: { interval: 7 },
    ...extra,
  };
}

/** Both gateways' flows and groups, as dumped. */
const dumps = () =>
  Promise.all(
    ["gw1", "gw2"].map(async (g) => {
      const run = async (...args: string[]) => {
        const r = await gws[g].run(["ovs-ofctl", "-O", "OpenFlow15", ...args]);
        if (r.exitCode !== 0) throw new Error(`${g}: ovs-ofctl ${args.join(" ")}: ${r.stderr}`);
        return r.stdout;
      };
      return (await run("--no-stats", "dump-flows", "br-seg")) + (await run("dump-groups", "br-seg"));
    }),
  );

/** The health-check rows referenced by the load balancer's row: vip -> { uuid, options, external_ids }. */
async function healthChecks(): Promise<Record<string, { uuid: string; options: string; external_ids: string }>> {
  const refs = (await nbctl("get", "load_balancer", TCP_ROW, "health_check"))
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

/** The load balancer's row, every column but health_check (whose uuids the tests compare on their own). */
const lbRow = () => nbctl("--columns=name,vips,ip_port_mappings,options,selection_fields,protocol,external_ids", "list", "load_balancer", TCP_ROW);

const monitors = () => ovn.monitors(LSP);

/** northd's load-balancing flow of a VIP on the switch: its backends, sorted; undefined while none. */
async function flowBackends(vip = VIP): Promise<string[] | undefined> {
  const family = vip.includes(":") ? "ip6" : "ip4";
  const match = new RegExp(`${family}\\.dst == ${vip.replace(/[.]/g, "\\.")} && tcp\\.dst == 80\\)`);
  const lines = (await sbctl("lflow-list", SWITCH)).split("\n").filter((l) => /ls_in_lb/.test(l) && l.includes("ct.new") && match.test(l));
  const found = lines.map((l) => /ct_lb(?:_mark)?\(backends=([^;)]*)/.exec(l)?.[1]).filter((x): x is string => x !== undefined);
  return found.length === 1 ? found[0].split(",").sort() : undefined;
}

const flowIs = (want: string[], vip = VIP) =>
  waitUntil(async () => JSON.stringify(await flowBackends(vip)) === JSON.stringify([...want].sort()), {
    what: `northd's flow for ${vip}:80 to list ${want.join(",")}`,
    timeoutMs: 15_000,
  });

async function cleanup(): Promise<void> {
  await sbctl("--if-exists", "chassis-del", CHASSIS).catch(() => undefined);
  await nbctl("--if-exists", "ls-del", SWITCH).catch(() => undefined);
  await nbctl("--if-exists", "lr-del", ROUTER).catch(() => undefined);
}

let gatewaysBefore: string[];

beforeAll(async () => {
  inv = loadInventory();
  unlock = await lockLab("ovn-central");
  central = await labSsh(inv, "central");
  for (const g of ["gw1", "gw2"]) gws[g] = await labSsh(inv, g);
  ovn = new OvnCentral(inv, central);
  await hc.purge(hcInputs()).catch(() => undefined);
  await lb.purge(lbInputs()).catch(() => undefined);
  await cleanup();
  await nbctl("lr-add", ROUTER, "--", "set", "logical_router", ROUTER, "options:chassis=gw1");
  const lsArgs = ["ls-add", SWITCH];
  backends().forEach((b, i) => lsArgs.push("--", "lsp-add", SWITCH, LSP[i], "--", "lsp-set-addresses", LSP[i], `${b.mac} ${b.address}`));
  await nbctl(...lsArgs);
  await lb.create(lbInputs());
  await nbctl("ls-lb-add", SWITCH, TCP_ROW);
  gatewaysBefore = await dumps();
  stopObserving = observeBundles((host) => bundles.push(host));
});

afterAll(async () => {
  stopObserving?.();
  if (hc.id) await hc.delete().catch(() => undefined);
  if (lb.id) await lb.delete().catch(() => undefined);
  if (central) {
    await cleanup();
    central.close();
  }
  for (const s of Object.values(gws)) s.close();
  unlock?.();
});

describe("HealthCheck, a resource of its own on a deferred-NAT load balancer's OVN rows", () => {
  it("create writes a health check per VIP (vip the full IP:PORT key, owned, naming the load balancer and the mappings it inserted) and the mappings; northd makes the monitors", async () => {
    const rowBefore = await lbRow();
    expect(await healthChecks()).toEqual({});
    await hc.create(hcInputs());
    expect(hc.id).toBe(OWNER);
    const checks = await healthChecks();
    expect(Object.keys(checks)).toEqual([`${VIP}:80`]);
    expect(checks[`${VIP}:80`].options).toBe('{failure_count="1", interval="7", success_count="1", timeout="3"}');
    expect(checks[`${VIP}:80`].external_ids).toBe(
      `{"ovslb:ip-port-mappings"="${addr(0)},${addr(1)}", "ovslb:load-balancer"="deferred-nat/${NAME}", "ovslb:owner"="${OWNER}"}`,
    );
    expect(await nbctl("get", "load_balancer", TCP_ROW, "ip_port_mappings")).toBe(`{"${addr(0)}"="lsp-hcr1:${SRC_IP}", "${addr(1)}"="lsp-hcr2:${SRC_IP}"}`);
    // Nothing else on the load balancer's row changed: only ip_port_mappings and health_check.
    expect((await lbRow()).replace(/ip_port_mappings\s*:.*\n/, "")).toBe(rowBefore.replace(/ip_port_mappings\s*:.*\n/, ""));

    await nbctl("--wait=sb", "--timeout=30", "sync");
    const seen = await waitUntil(async () => ((await monitors()).length === 2 ? monitors() : undefined), { what: "northd's Service_Monitor rows" });
    expect(seen.map((m) => [m.logicalPort, m.ip, m.port, m.protocol, m.srcIp, m.status])).toEqual([
      ["lsp-hcr1", addr(0), inv.backendPort, "tcp", SRC_IP, ""],
      ["lsp-hcr2", addr(1), inv.backendPort, "tcp", SRC_IP, ""],
    ]);
    await flowIs([be(0), be(1)]);
    expect(hc.outputs.stale).toEqual([]);
    expect((hc.outputs.health as Props[]).map((h) => [h.backend, h.monitor])).toEqual([
      [be(0), "unknown"],
      [be(1), "unknown"],
    ]);
    // The load balancer reads its row as in sync: the attached health check and mappings are not its drift.
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("refresh reports a monitor online for a port bound to no chassis as stale (never the bound one); enforce sets it offline and northd drops that backend", async () => {
    await sbctl("chassis-add", CHASSIS, "geneve", "127.0.0.31");
    await sbctl("lsp-bind", "lsp-hcr1", CHASSIS);
    for (const lsp of LSP) await sbctl("set", "port_binding", lsp, "up=true");
    for (const m of await monitors()) await sbctl("set", "service_monitor", m.uuid, "status=online");

    const read = await hc.read();
    const stale = {
      vip: `tcp:${VIP}:80`,
      backend: be(1),
      logicalPort: "lsp-hcr2",
      reason: "online while its logical port lsp-hcr2 is bound to no chassis (and still marked up)",
    };
    expect(read.props.stale).toEqual([stale]);
    expect((read.props.health as Props[]).map((h) => [h.backend, h.monitor, h.port.chassis])).toEqual([
      [be(0), "online", CHASSIS],
      [be(1), "online", null],
    ]);
    expect(read.props.drift).toEqual([]);
    // A read only reports.
    expect((await monitors()).map((m) => m.status)).toEqual(["online", "online"]);

    hc.outputs = read.props;
    const outs = await hc.update(hcInputs({ enforce: true }));
    expect(outs.stale).toEqual([stale]);
    expect((await monitors()).map((m) => `${m.logicalPort}=${m.status}`)).toEqual(["lsp-hcr1=online", "lsp-hcr2=offline"]);
    await flowIs([be(0)]);
    // Offline is not stale, and enforce never writes online.
    const again = await hc.update(hcInputs({ enforce: true }));
    expect(again.stale).toEqual([]);
    expect((await monitors()).map((m) => m.status)).toEqual(["online", "offline"]);
  });

  it("an interval update changes only the health-check row, in place", async () => {
    const before = await healthChecks();
    const row = await lbRow();
    await hc.update(hcInputs({ enforce: true, probe: { interval: 11 } }));
    const after = await healthChecks();
    expect(after[`${VIP}:80`]).toEqual({ ...before[`${VIP}:80`], options: '{failure_count="1", interval="11", success_count="1", timeout="3"}' });
    expect(await lbRow()).toBe(row);
  });

  it("refresh reports a hand edit of the row as drift; the diff shows it and update puts it back", async () => {
    const uuid = (await healthChecks())[`${VIP}:80`].uuid;
    await nbctl("set", "load_balancer_health_check", uuid, "options:interval=30");
    const read = await hc.read();
    expect(read.props.drift).toEqual([`OVN Load_Balancer ${TCP_ROW}: health check of VIP ${VIP}:80 differs`]);
    const desired = hcInputs({ enforce: true, probe: { interval: 11 } });
    expect((await hc.diff(desired, read.props)).changes).toBe(true);
    hc.outputs = read.props;
    await hc.update(desired);
    const after = (await healthChecks())[`${VIP}:80`];
    expect([after.uuid, after.options]).toEqual([uuid, '{failure_count="1", interval="11", success_count="1", timeout="3"}']);
    expect((await hc.read()).props.drift).toEqual([]);
  });

  it("a load balancer that owns the probe rows itself (healthCheck.probe) is refused, naming the property and the owner", async () => {
    const other = new ProviderDriver("HealthCheck");
    // A second load balancer's rows carry their own probe: a HealthCheck on it refuses.
    const dnat2 = new ProviderDriver("DeferredNatLoadBalancer");
    const name2 = "hcres2";
    const inputs2 = labLoadBalancer(
      inv,
      name2,
      [{ address: "10.0.0.184", port: 80, protocol: "tcp", backends: [{ ...labBackend(inv, backends()[0]), logicalPort: LSP[0] }] }],
      {
        ovn: { northbound: { connection: sshTo(inv, "central"), socket: inv.hosts.central.ovn!.nbSock }, router: ROUTER, healthCheckSourceIp: SRC_IP },
        healthCheck: { probe: {} },
      },
    );
    // The second load balancer's own bundles are not the HealthCheck's: not observed.
    stopObserving?.();
    await dnat2.purge(inputs2).catch(() => undefined);
    await dnat2.create(inputs2);
    try {
      const hc2 = {
        ...hcInputs(),
        loadBalancer: name2,
        vips: [{ address: "10.0.0.184", port: 80, protocol: "tcp" as const, backends: [{ address: addr(0), port: inv.backendPort, logicalPort: LSP[0] }] }],
      };
      await expect(other.create(hc2)).rejects.toThrow(
        `health-check/${name2}: refused, nothing changed: vips[0]: the health check of tcp VIP 10.0.0.184:80 on OVN Load_Balancer ovslb-${name2}-tcp is DeferredNatLoadBalancer ${name2}'s own healthCheck.probe (owned by deferred-nat/${name2}): remove healthCheck.probe from the load balancer first; refusing to take it over`,
      );
    } finally {
      await dnat2.delete();
      stopObserving = observeBundles((host) => bundles.push(host));
    }
  });

  it("delete removes exactly its rows and the mappings it inserted; the load balancer's row is as before; the gateways were never touched", async () => {
    await hc.delete();
    hc.id = "";
    expect(await healthChecks()).toEqual({});
    expect(await nbctl("--bare", "--columns=_uuid", "find", "load_balancer_health_check", `vip="${VIP}:80"`)).toBe("");
    expect(await nbctl("get", "load_balancer", TCP_ROW, "ip_port_mappings")).toBe("{}");
    expect(await nbctl("--bare", "--columns=name", "find", "load_balancer", `name=${TCP_ROW}`)).toBe(TCP_ROW);
    expect((await lb.read()).props.drift).toEqual([]);
    await nbctl("--wait=sb", "--timeout=30", "sync");
    await waitUntil(async () => (await monitors()).length === 0, { what: "northd to drop the Service_Monitor rows" });
    expect(await dumps()).toEqual(gatewaysBefore);
    expect(bundles).toEqual([]);
  });
});

/**
 * A dual-stack service (OVN 23.03 probes IPv6 backends): the load balancer
 * gains an IPv6 VIP of the same backends' IPv6 addresses, and one
 * HealthCheck probes both VIPs, each backend from the source of its family.
 */
describe("HealthCheck of a dual-stack service", () => {
  const VIP6 = "fd00:20::ce";
  const SRC_IP6 = "fd00:10::fc";
  const addr6 = (i: number) => ipv6Twin(addr(i));
  const be6 = (i: number) => `[${addr6(i)}]:${inv.backendPort}`;
  const dualLb = () => {
    const inputs = lbInputs();
    const v6 = {
      address: VIP6,
      port: 80,
      protocol: "tcp" as const,
      backends: backends().map((b) => ({ ...labBackend(inv, b), address: ipv6Twin(b.address) })),
    };
    return { ...inputs, vips: [...inputs.vips, v6] };
  };
  const dualHc = (extra: Partial<HealthCheckInputs> = {}): HealthCheckInputs => {
    const inputs = hcInputs(extra);
    const v6 = {
      address: VIP6,
      port: 80,
      protocol: "tcp" as const,
      backends: backends().map((b, i) => ({ address: ipv6Twin(b.address), port: inv.backendPort, logicalPort: LSP[i], hypervisor: b.hypervisor })),
    };
    return { sourceIpv6: SRC_IP6, ...inputs, vips: [...inputs.vips, v6] };
  };

  beforeAll(async () => {
    stopObserving?.();
    stopObserving = undefined;
    await sbctl("--if-exists", "chassis-del", CHASSIS);
    lb.outputs = (await lb.read()).props;
    await lb.update(dualLb());
    hc.id = "";
  });

  it("create writes a health check per VIP ([IP]:PORT for IPv6) and each backend's mapping with its family's source; northd probes all four", async () => {
    await hc.create(dualHc());
    const checks = await healthChecks();
    expect(Object.keys(checks).sort()).toEqual([`${VIP}:80`, `[${VIP6}]:80`]);
    expect(checks[`[${VIP6}]:80`].external_ids).toContain(`"ovslb:ip-port-mappings"="[${addr6(0)}],[${addr6(1)}]"`);
    expect(await nbctl("get", "load_balancer", TCP_ROW, "ip_port_mappings")).toBe(
      `{"${addr(0)}"="lsp-hcr1:${SRC_IP}", "${addr(1)}"="lsp-hcr2:${SRC_IP}", "[${addr6(0)}]"="lsp-hcr1:[${SRC_IP6}]", "[${addr6(1)}]"="lsp-hcr2:[${SRC_IP6}]"}`,
    );
    await nbctl("--wait=sb", "--timeout=30", "sync");
    const seen = await waitUntil(async () => ((await monitors()).length === 4 ? monitors() : undefined), { what: "northd's four Service_Monitor rows" });
    expect(seen.map((m) => [m.logicalPort, m.ip, m.srcIp]).sort()).toEqual(
      [
        ["lsp-hcr1", addr(0), SRC_IP],
        ["lsp-hcr1", addr6(0), SRC_IP6],
        ["lsp-hcr2", addr(1), SRC_IP],
        ["lsp-hcr2", addr6(1), SRC_IP6],
      ].sort(),
    );
    await flowIs([be6(0), be6(1)], VIP6);
    expect((await hc.read()).props.drift).toEqual([]);
    expect((await lb.read()).props.drift).toEqual([]);
  });

  it("an unbound port's monitors of both families are stale; enforce sets both offline and northd drops that backend from both VIPs", async () => {
    await sbctl("chassis-add", CHASSIS, "geneve", "127.0.0.31");
    await sbctl("lsp-bind", "lsp-hcr1", CHASSIS);
    for (const lsp of LSP) await sbctl("set", "port_binding", lsp, "up=true");
    for (const m of await monitors()) await sbctl("set", "service_monitor", m.uuid, "status=online");
    const read = await hc.read();
    expect((read.props.stale as Props[]).map((x) => [x.vip, x.backend]).sort()).toEqual(
      [
        [`tcp:${VIP}:80`, be(1)],
        [`tcp:${VIP6}:80`, `${addr6(1)}:${inv.backendPort}`],
      ].sort(),
    );
    hc.outputs = read.props;
    await hc.update(dualHc({ enforce: true }));
    expect((await monitors()).map((m) => `${m.logicalPort}/${m.ip}=${m.status}`).sort()).toEqual(
      [`lsp-hcr1/${addr(0)}=online`, `lsp-hcr1/${addr6(0)}=online`, `lsp-hcr2/${addr(1)}=offline`, `lsp-hcr2/${addr6(1)}=offline`].sort(),
    );
    await flowIs([be(0)]);
    await flowIs([be6(0)], VIP6);
  });

  it("delete removes both families' rows and mappings", async () => {
    await hc.delete();
    hc.id = "";
    expect(await healthChecks()).toEqual({});
    expect(await nbctl("get", "load_balancer", TCP_ROW, "ip_port_mappings")).toBe("{}");
    await nbctl("--wait=sb", "--timeout=30", "sync");
    await waitUntil(async () => (await monitors()).length === 0, { what: "northd to drop the Service_Monitor rows" });
  });
});
