import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";
import type { FaultHost } from "./fault-host";

/** A backend by number (addresses only: fault tests send no traffic). */
export function faultBackend(i: number): DeferredNatBackend {
  return {
    address: `10.${60 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
    port: 8080,
    mac: `02:00:00:${(i >> 16).toString(16).padStart(2, "0")}:${((i >> 8) & 255).toString(16).padStart(2, "0")}:${(i & 255).toString(16).padStart(2, "0")}`,
    hypervisor: "hv1",
  };
}

/**
 * A load balancer on fault hosts: `vips` VIPs in `vipBase`/16, each with `backends` backends.
 */
export function faultLoadBalancer(
  name: string,
  hosts: FaultHost[],
  vipBase: [number, number],
  vips: number,
  backends: number,
  extra: Partial<DeferredNatLoadBalancerInputs> = {},
): DeferredNatLoadBalancerInputs {
  return {
    name,
    gateways: hosts.map((h, i) => ({
      name: `g${i + 1}`,
      host: h.ovsHost,
      bridge: h.bridge,
      segmentPort: h.segmentPort,
      mac: `02:00:0f:00:00:${(i + 1).toString(16).padStart(2, "0")}`,
    })),
    hypervisors: [{ name: "hv1" }],
    vips: Array.from({ length: vips }, (_, v) => ({
      address: `${vipBase.join(".")}.${Math.floor(v / 250)}.${1 + (v % 250)}`,
      port: 80,
      protocol: "tcp" as const,
      backends: Array.from({ length: backends }, (_, b) => faultBackend(b + 1)),
    })),
    ...extra,
  };
}
