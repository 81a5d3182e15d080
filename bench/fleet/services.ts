/**
 * The fleet's services, shared by the program and the benchmark that checks
 * what it made: service i (from 0) is `svc-<i+1>`, VIP 10.64.X.Y:80 and one
 * backend 10.65.X.Y:8080 (no traffic is sent), on hypervisor i mod the
 * fleet's size, so consecutive services land on different hosts. Its backend
 * hangs off `seg0`, the port every bench host's br-seg has.
 */
export interface FleetService {
  name: string;
  hypervisor: string;
  vip: string;
  backend: { address: string; port: number; mac: string; bridgePort: string };
}

export const MAX_SERVICES = 65_534;

export function fleetService(i: number, hypervisors: readonly string[], moved = false): FleetService {
  if (!Number.isInteger(i) || i < 0 || i >= MAX_SERVICES) throw new Error(`service ${i}: out of range`);
  if (hypervisors.length === 0) throw new Error("no hypervisors");
  const n = i + 1;
  const [hi, lo] = [n >> 8, n & 255];
  const hex = (b: number) => b.toString(16).padStart(2, "0");
  return {
    name: `svc-${n}`,
    hypervisor: hypervisors[i % hypervisors.length],
    vip: `10.64.${hi}.${lo}`,
    // The change moves the backend to another port: one update, one bundle on one host.
    backend: { address: `10.65.${hi}.${lo}`, port: moved ? 8081 : 8080, mac: `02:00:41:00:${hex(hi)}:${hex(lo)}`, bridgePort: "seg0" },
  };
}
