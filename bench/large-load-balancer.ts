import type { DeferredNatBackend, DeferredNatGateway, DeferredNatLoadBalancerInputs as Inputs } from "../provider/model/inputs.generated";

/**
 * The large DeferredNatLoadBalancer that scale-planning and preview-cost
 * measure: `size.vips` VIPs of `size.backends` backends each, on one
 * gateway, and the one change both make to it (a backend added to the
 * middle VIP). Addresses and MACs are distinct and reproducible.
 */

export interface LoadBalancerSize {
  vips: number;
  backends: number;
}

const hex2 = (n: number) => (n & 255).toString(16).padStart(2, "0");
const backend = (v: number, i: number): DeferredNatBackend => ({
  address: `10.${64 + (v >> 8)}.${v & 255}.${i + 1}`,
  port: 8080,
  mac: `02:01:${hex2(v >> 8)}:${hex2(v)}:${hex2(i >> 8)}:${hex2(i + 1)}`,
  hypervisor: "hv1",
});

export function largeLoadBalancer(name: string, gateway: DeferredNatGateway, size: LoadBalancerSize): Inputs {
  return {
    name,
    gateways: [gateway],
    hypervisors: [{ name: "hv1" }],
    vips: Array.from({ length: size.vips }, (_, v) => ({
      address: `10.201.${v >> 8}.${v & 255}`,
      port: 80,
      protocol: "tcp" as const,
      backends: Array.from({ length: size.backends }, (_, i) => backend(v, i)),
    })),
  };
}

/** The VIP the one change is made to (the middle one unless told), and the backend added to it. */
export const changed = (size: LoadBalancerSize, vip = size.vips >> 1) => ({ vip, added: backend(vip, size.backends) });

/** One backend added to the middle VIP (or to `vip`). */
export function withAdded(inputs: Inputs, size: LoadBalancerSize, at?: number): Inputs {
  const { vip, added } = changed(size, at);
  return { ...inputs, vips: inputs.vips.map((v, i) => (i === vip ? { ...v, backends: [...v.backends, added] } : v)) };
}
