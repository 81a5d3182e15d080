import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { ipv6Twin, type LabInventory } from "../lab/topology";
import { OvnChassis, ovnTwin6, type OvnInventory, type OvnVm } from "../lab/ovn-chassis";
import { loadInventory, lockLab } from "../support/lab";
import { killChassis, monitorStatusByAddress, reviveChassis, routerLbBackends, routerLbWithHealthCheck, setVmNic } from "../support/ovn-incident";
import { connectAndClose, times } from "../support/tcp-clients";
import { waitUntil } from "../support/wait";

/**
 * The stale-monitor incident, with real chassis (test/lab/ovn-chassis.ts):
 * OVN's own load balancer with OVN's own health check, on backends of hv1
 * and hv2. Only the chassis a backend's port is bound to probes it and
 * writes its Service_Monitor status. hv1 dies abruptly (its ovn-controller
 * and ovs-vswitchd SIGKILLed, its management, segment and underlay links
 * cut): nobody is left to write hv1's backend offline, so OVN keeps it
 * online and in the load balancer, and the connections OVN sends it fail,
 * while hv2's chassis goes on probing its own backend. The same for an IPv4
 * VIP and an IPv6 VIP (a load balancer each) of the same VMs.
 */

const VIP = "10.0.0.228";
const LB = "lab-incident";
const SRC_IP = "10.10.0.254";
/** Each family's load balancer: its VIP, its backends' addresses and the probes' source. */
const FAMILIES = [
  { lb: LB, vip: VIP, address: (vm: OvnVm) => vm.address, sourceIp: SRC_IP, endpoint: (a: string, port: number) => `${a}:${port}` },
  {
    lb: `${LB}6`,
    vip: ipv6Twin(VIP),
    address: (vm: OvnVm) => vm.address6,
    sourceIp: ovnTwin6(SRC_IP),
    endpoint: (a: string, port: number) => `[${a}]:${port}`,
  },
] as const;
const DEAD = "hv1";
/**
 * How long "stays online" is watched: three times the slowest a live chassis can be with these settings (interval 1 s,
 * timeout 1 s): interval + timeout + interval = 3 s (controller/pinctrl.c writes the status a pass after the timeout;
 * the ovn-incident benchmark measures 3.0 s). The control test checks that a live chassis does find it within the window.
 */
const WINDOW_MS = 9_000;

let inv: LabInventory;
let chassis: OvnChassis;
let ovn: OvnInventory;
let unlock: (() => void) | undefined;
let killed = false;

const nbctl = (...args: string[]) => chassis.nbctl(...args);
const sbctl = (...args: string[]) => chassis.sbctl(...args);
/** The backends: the first OVN VM of hv1 (it dies with hv1) and of hv2. */
const backends = () => [ovn.vms.find((v) => v.hypervisor === DEAD)!, ovn.vms.find((v) => v.hypervisor === "hv2")!];

/** Every backend's Service_Monitor of each family, by "port address". */
const monitors = () =>
  monitorStatusByAddress(
    chassis,
    backends().map((b) => b.name),
  );
/** What every monitor of the backends should read, given each backend's status. */
const monitorsOf = (status: Record<string, string>) =>
  Object.fromEntries(
    backends()
      .flatMap((vm) => FAMILIES.map((f) => [`${vm.name} ${f.address(vm)}`, status[vm.name]]))
      .sort(),
  );
/** Whether every monitor of this backend (both families) reads status. */
const allOf = (vm: OvnVm, status: string) => FAMILIES.every((f) => monitors()[`${vm.name} ${f.address(vm)}`] === status);

/** Packets to the service monitor MAC that hv2's br-int handed to its ovn-controller: its backend's probe replies (measured: about 5 a second with interval 1). */
function hv2ProbeReplies(): number {
  const mac = JSON.parse(nbctl("get", "nb_global", ".", "options:svc_monitor_mac")) as string;
  const flows = chassis.onLabHost("hv2", ["ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", `dl_dst=${mac}`]);
  return flows
    .split("\n")
    .filter((l) => l.includes("controller"))
    .reduce((sum, l) => sum + Number(/n_packets=(\d+)/.exec(l)?.[1] ?? 0), 0);
}

beforeAll(async () => {
  inv = loadInventory();
  unlock = await lockLab("ovn-central");
  chassis = new OvnChassis(inv);
  ovn = chassis.up();
  // OVN's own load balancer on the gateway router, one per family, with a health check probing every second.
  for (const f of FAMILIES) {
    routerLbWithHealthCheck(chassis, {
      router: ovn.router,
      name: f.lb,
      vip: f.vip,
      port: ovn.backendPort,
      backends: backends().map((vm) => ({ name: vm.name, address: f.address(vm) })),
      sourceIp: f.sourceIp,
      options: { interval: 1, timeout: 1, success_count: 1, failure_count: 1 },
    });
  }
});

afterAll(async () => {
  try {
    if (killed) await reviveChassis(inv, chassis, DEAD);
  } finally {
    if (chassis) for (const f of FAMILIES) nbctl("--if-exists", "lb-del", f.lb);
    // The layer goes with the file (its ovn-controllers, br-ints and OVN's conntrack zones): the next file finds the hosts
    // as the lab made them.
    chassis?.down();
    unlock?.();
  }
});

describe("the stale-monitor incident with real chassis: hv1 dies abruptly", () => {
  it("before: both backends probed online by their own chassis, and OVN spreads connections over both", async () => {
    const [b1, b2] = backends();
    await waitUntil(() => JSON.stringify(monitors()) === JSON.stringify(monitorsOf({ [b1.name]: "online", [b2.name]: "online" })), {
      what: "every Service_Monitor of both families online",
      timeoutMs: 20_000,
    });
    for (const f of FAMILIES) {
      const served = connectAndClose(ovn.client.namespace, times(f.vip, 80, 16)).map((c) => c.error ?? c.backend);
      expect(new Set(served), f.vip).toEqual(new Set([b1.name, b2.name]));
    }
  });

  it("control: while hv1's chassis lives, its backend that stops answering is found offline within the window used below, and online again once it answers", async () => {
    const [b1] = backends();
    const cut = Date.now();
    setVmNic(ovn, b1, false);
    try {
      await waitUntil(() => allOf(b1, "offline"), { what: `${b1.name}'s monitors offline`, timeoutMs: WINDOW_MS });
      expect(Date.now() - cut).toBeLessThan(WINDOW_MS);
    } finally {
      setVmNic(ovn, b1, true);
    }
    await waitUntil(() => allOf(b1, "online"), { what: `${b1.name}'s monitors online again`, timeoutMs: 20_000 });
  });

  it("after: hv1's monitor stays online and in OVN's load balancer while hv2's chassis keeps probing, and the connections OVN sends to hv1's backend fail", async () => {
    const [b1, b2] = backends();
    killed = true;
    await killChassis(inv, chassis, DEAD);
    const diedAt = Date.now();
    const repliesAtDeath = hv2ProbeReplies();

    // "Stays online" is over time: the window in which a live chassis found its backend dead (the control above),
    // during which hv2's chassis goes on probing its own backend (its probe replies keep arriving).
    await waitUntil(() => Date.now() - diedAt >= WINDOW_MS && hv2ProbeReplies() > repliesAtDeath + 5, {
      what: "three detection times since hv1 died, with hv2's probes still answered",
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    expect(monitors()).toEqual(monitorsOf({ [b1.name]: "online", [b2.name]: "online" }));
    // The port is still bound to the dead chassis, and marked up: nothing in the southbound says hv1 is gone.
    const bound = sbctl("--bare", "--columns=chassis", "find", "port_binding", `logical_port=${b1.name}`);
    expect(sbctl("--bare", "--columns=name", "list", "chassis", bound)).toBe(DEAD);
    expect(sbctl("--bare", "--columns=up", "find", "port_binding", `logical_port=${b1.name}`)).toBe("true");
    for (const f of FAMILIES) {
      // northd keeps the dead backend in the router's load-balancing flow.
      const both = [b1, b2].map((vm) => f.endpoint(f.address(vm), ovn.backendPort)).sort();
      expect(routerLbBackends(chassis, ovn.router, f.vip, 80), f.vip).toEqual(both);

      // Real connections: OVN still sends some to hv1's backend, and those fail; the rest are hv2's.
      const conns = connectAndClose(ovn.client.namespace, times(f.vip, 80, 16), { greetingTimeoutMs: 2000 });
      const served = conns.map((c) => c.backend || "failed");
      expect(served.filter((s) => s === "failed").length, f.vip).toBeGreaterThan(0);
      expect(served.filter((s) => s !== "failed").every((s) => s === b2.name)).toBe(true);
    }
    // Still online after all that.
    expect(allOf(b1, "online")).toBe(true);
  });
});
