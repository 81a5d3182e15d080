import type { DsrHypervisorFlowsInputs } from "../provider/model/inputs.generated";

/** A backend as components take it: where it runs, and its port on that hypervisor's bridge. */
export interface HypervisorBackend {
  address: string;
  port: number;
  mac: string;
  hypervisor: string;
  bridgePort: string;
}

export interface ServiceVip<B extends HypervisorBackend = HypervisorBackend> {
  address: string;
  port: number;
  protocol: "tcp" | "udp" | "sctp";
  backends: readonly B[];
}

/** The VIPs with backends on one hypervisor, holding only those backends: one DsrHypervisorFlows' vips. */
export function vipsOn(hypervisor: string, vips: readonly ServiceVip[]): DsrHypervisorFlowsInputs["vips"] {
  return vips
    .map((vip) => ({
      address: vip.address,
      port: vip.port,
      protocol: vip.protocol,
      backends: vip.backends
        .filter((b) => b.hypervisor === hypervisor)
        .map((b) => ({ address: b.address, port: b.port, mac: b.mac, bridgePort: b.bridgePort })),
    }))
    .filter((vip) => vip.backends.length > 0);
}

/** Backends placed on hypervisors nobody listed, named by their place in the arguments. */
export function unknownHypervisors(hypervisors: readonly { name: string }[], vips: readonly ServiceVip[]): string[] {
  const known = new Set(hypervisors.map((h) => h.name));
  return vips.flatMap((vip, v) =>
    vip.backends.flatMap((b, i) => (known.has(b.hypervisor) ? [] : [`vips[${v}].backends[${i}].hypervisor "${b.hypervisor}" is not in hypervisors`])),
  );
}
