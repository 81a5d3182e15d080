import { spawn } from "node:child_process";
import { existsSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OVN_RUN_SUBDIR, isAlive, readPid } from "../lab/lab";
import type { OvnVm } from "../lab/ovn-chassis";
import type { LabInventory } from "../lab/topology";
import { waitUntil } from "./wait";

/**
 * The lab's backend server in an OVN VM (test/lab/ovn-chassis.ts starts one
 * in each, recording its pid in the layer's directory), killed and started
 * again as ovnUp() starts it, at the same pid file, so the layer's status
 * counts it as running again.
 */

const pidFileOf = (inv: LabInventory, vm: OvnVm) => join(inv.labDir, OVN_RUN_SUBDIR, `${vm.name}.server.pid`);

/** Plain JS in test/lab, whether this runs from source or from dist/. */
const BACKEND_SERVER = [join(__dirname, "..", "lab", "backend-server.js"), join(__dirname, "..", "..", "..", "test", "lab", "backend-server.js")].find((p) =>
  existsSync(p),
)!;

/** SIGKILLs the VM's server (its port then answers SYNs with RST) and waits until it has gone. */
export async function killVmServer(inv: LabInventory, vm: OvnVm): Promise<void> {
  const pid = readPid(pidFileOf(inv, vm));
  if (pid === undefined || !isAlive(pid)) throw new Error(`${vm.name}'s backend server is not running`);
  process.kill(pid, "SIGKILL");
  await waitUntil(() => !isAlive(pid), { what: `${vm.name}'s backend server (${pid}) gone after SIGKILL`, timeoutMs: 10_000, intervalMs: 10 });
}

/** Starts the VM's server again (name and port as ovnUp() gives them), unless it runs. */
export function startVmServer(inv: LabInventory, vm: OvnVm, port: number): void {
  const pidFile = pidFileOf(inv, vm);
  const pid = readPid(pidFile);
  if (pid !== undefined && isAlive(pid)) return;
  const log = openSync(join(inv.labDir, OVN_RUN_SUBDIR, `${vm.name}.server.log`), "a");
  const child = spawn("ip", ["netns", "exec", vm.namespace, process.execPath, BACKEND_SERVER, vm.name, String(port)], {
    detached: true,
    stdio: ["ignore", log, log],
  });
  writeFileSync(pidFile, `${child.pid}\n`);
  child.unref();
}
