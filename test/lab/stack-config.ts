import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { LAB_STACK, type LabInventory } from "./topology";

/**
 * The lab's stack config, as a user writes one for their own hosts with
 * `pulumi config set`: how to log in (`ovslb:ssh`), the hosts by name
 * (`ovslb:hosts`), and each example's own keys (its project's namespace).
 * `npm run lab -- up` writes it as Pulumi.lab.yaml next to the root
 * Pulumi.yaml and each example's (gitignored: host keys change per lab).
 */

/** The checkout: the nearest directory up from here whose package.json is ovslb's (from test/lab/ or dist/test/lab/). */
export function repoRoot(from = __dirname): string {
  for (let dir = from; dirname(dir) !== dir; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, "utf8")).name === "ovslb") return dir;
  }
  throw new Error(`no ovslb checkout above ${from}`);
}

export type StackConfig = Record<string, unknown>;

/**
 * `ovslb:ssh` and `ovslb:hosts` of the lab: every OVS host by name, logged in as root with the lab's client key.
 * OVN central runs no Open vSwitch, so it is no OvsHost: `ovslb doctor` checks every host listed here.
 */
export function labConnections(inv: LabInventory): StackConfig {
  return {
    "ovslb:ssh": { user: "root", privateKeyPath: inv.clientKeyPath, connectTimeoutMs: 10000 },
    "ovslb:hosts": Object.fromEntries(
      Object.values(inv.hosts)
        .filter((h) => h.ovsRundir !== undefined)
        .map((h) => [h.name, { connection: { host: h.address, port: h.sshPort, hostKey: h.hostKey }, ovsRundir: h.ovsRundir }]),
    ),
  };
}

const vms = (inv: LabInventory, names: string[]) =>
  names
    .map((n) => inv.backends.find((b) => b.name === n)!)
    .map((b) => ({ address: b.address, port: inv.backendPort, mac: b.mac, hypervisor: b.hypervisor, bridgePort: b.port }));

/** Each project's own keys, by project directory (relative to the repo root). */
export function labProjects(inv: LabInventory): Record<string, { project: string; config: StackConfig }> {
  const gateways = ["gw1", "gw2"].map((n) => ({ name: n, mac: inv.hosts[n].segment!.mac, tunnelAddress: inv.hosts[n].underlay!.address }));
  const tunnel = (n: string) => ({ name: n, tunnelAddress: inv.hosts[n].underlay!.address });
  const quickStart = {
    project: "ovslb-lab",
    config: { gateways, hypervisors: ["hv1", "hv2", "hv3"].map(tunnel), backends: vms(inv, ["hv1-vm1", "hv1-vm2", "hv2-vm1"]) },
  };
  return {
    // The quick start's project, from the root (npm run demo) and from its own directory.
    ".": quickStart,
    "examples/lab-deferred-nat": quickStart,
    "examples/deferred-nat-health": {
      project: "ovslb-deferred-nat-health",
      config: { gateways, hypervisors: ["hv1", "hv2"].map(tunnel), backends: vms(inv, ["hv1-vm1", "hv1-vm2", "hv2-vm1", "hv2-vm2"]) },
    },
    "examples/active-active": {
      project: "ovslb-active-active",
      config: { amphorae: vms(inv, ["hv3-vm1", "hv3-vm2", "hv3-vm3"]) },
    },
    "examples/transparent-dsr": {
      project: "ovslb-transparent-dsr",
      config: { loadBalancerSources: [inv.l3dsr!.underlay.address], servers: vms(inv, ["hv1-vm1", "hv1-vm2"]) },
    },
  };
}

/** The stack config of one project of the repo on the lab: connections and its own keys. */
export function labStackConfig(inv: LabInventory, dir: string): StackConfig {
  const p = labProjects(inv)[dir];
  if (!p) throw new Error(`no lab stack config for ${dir}`);
  return { ...labConnections(inv), ...Object.fromEntries(Object.entries(p.config).map(([k, v]) => [`${p.project}:${k}`, v])) };
}

/** Writes Pulumi.LAB_STACK.yaml (Pulumi.lab.yaml for the main lab) for the root project and every example. JSON is YAML: each value is written as a JSON flow. */
export function writeLabStackConfigs(inv: LabInventory, root = repoRoot()): string[] {
  const written: string[] = [];
  for (const dir of Object.keys(labProjects(inv))) {
    if (!existsSync(join(root, dir, "Pulumi.yaml"))) continue;
    const config = labStackConfig(inv, dir);
    const lines = ["# Written by `npm run lab -- up` for this lab (its host keys); do not edit.", "config:"];
    for (const [k, v] of Object.entries(config)) lines.push(`  ${k}: ${JSON.stringify(v)}`);
    const path = join(root, dir, `Pulumi.${LAB_STACK}.yaml`);
    writeFileSync(path, `${lines.join("\n")}\n`);
    written.push(path);
  }
  return written;
}

/** Stack config as the CLI hands it to a program: PULUMI_CONFIG, every value a string (objects as JSON). */
export function configEnv(config: StackConfig): { PULUMI_CONFIG: string } {
  return { PULUMI_CONFIG: JSON.stringify(Object.fromEntries(Object.entries(config).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]))) };
}
