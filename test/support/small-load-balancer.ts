import type { DeferredNatBackend, DeferredNatLoadBalancerInputs } from "../../provider/model/inputs.generated";

/** A host key of no host: check reads it, nothing connects. */
export const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";

/** Backend i: 10.1.0.i:8080 on hv1 (i below 10), with `extra` over it. */
export const smallBackend = (i: number, extra: Partial<DeferredNatBackend> = {}): DeferredNatBackend => ({
  address: `10.1.0.${i}`,
  port: 8080,
  mac: `02:00:00:00:00:0${i}`,
  hypervisor: "hv1",
  ...extra,
});

/** A load balancer "web" of these VIPs on one gateway (an inline key, so the gateways stay a list) and hypervisor hv1, for check and diff without a host. */
export const smallLoadBalancer = (vips: DeferredNatLoadBalancerInputs["vips"]): DeferredNatLoadBalancerInputs => ({
  name: "web",
  gateways: [
    {
      name: "gw1",
      host: { connection: { host: "172.30.0.11", user: "root", hostKey: HOST_KEY, privateKey: "KEY-ONE-----" } },
      bridge: "br-seg",
      segmentPort: "seg0",
      mac: "02:00:0a:00:00:0b",
    },
  ],
  hypervisors: [{ name: "hv1" }],
  vips,
});
