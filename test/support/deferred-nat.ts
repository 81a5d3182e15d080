import type { DeferredNatBackend, DeferredNatLoadBalancerInputs, DsrHypervisorFlowsInputs } from "../../provider/model/inputs.generated";
import { asLists, handle } from "../../provider/handlers";
import type { LabBackend, LabInventory } from "../lab/topology";
import { sshTo } from "./lab";

type Props = Record<string, any>;

/** A lab backend VM as a deferred-NAT backend. */
export function labBackend(inv: LabInventory, b: LabBackend, weight?: number): DeferredNatBackend {
  return { address: b.address, port: inv.backendPort, mac: b.mac, hypervisor: b.hypervisor, ...(weight ? { weight } : {}) };
}

/** A load balancer on the lab's two gateways (br-seg, one-armed on seg0). */
export function labLoadBalancer(
  inv: LabInventory,
  name: string,
  vips: DeferredNatLoadBalancerInputs["vips"],
  extra: Partial<DeferredNatLoadBalancerInputs> = {},
): DeferredNatLoadBalancerInputs {
  return {
    name,
    gateways: ["gw1", "gw2"].map((g) => {
      const h = inv.hosts[g];
      return { name: g, host: { connection: sshTo(inv, h), ovsRundir: h.ovsRundir }, bridge: "br-seg", segmentPort: "seg0", mac: h.segment!.mac };
    }),
    hypervisors: ["hv1", "hv2", "hv3"].map((name) => ({ name })),
    vips,
    ...extra,
  };
}

/**
 * The provider's operations as the engine calls them (check first, outputs
 * carried from call to call), in-process: the gRPC boundary has its own test.
 */
export class ProviderDriver {
  id = "";
  outputs: Props = {};
  constructor(private readonly kind: string) {}

  async check(inputs: object): Promise<Props> {
    const r = (await handle(this.kind, "check", [{}, inputs])) as { inputs: Props; failures: unknown[] };
    if (r.failures.length > 0) throw new Error(`check failed: ${JSON.stringify(r.failures)}`);
    return r.inputs;
  }

  /** The checked inputs as lists, for a test to plan with (check itself returns sets keyed by identity). */
  async checked(inputs: object): Promise<Props> {
    return asLists(this.kind, await this.check(inputs));
  }

  async create(inputs: object): Promise<Props> {
    const r = (await handle(this.kind, "create", [await this.check(inputs)])) as { id: string; outs: Props };
    this.id = r.id;
    this.outputs = r.outs;
    return r.outs;
  }

  async update(inputs: object): Promise<Props> {
    const r = (await handle(this.kind, "update", [this.id, this.outputs, await this.check(inputs)])) as { outs: Props };
    this.outputs = r.outs;
    return r.outs;
  }

  /** The read's inputs as lists (the engine records them keyed by identity, provider/model/keyed.ts). */
  async read(): Promise<{ id: string; props: Props; inputs: Props }> {
    const r = (await handle(this.kind, "read", [this.id, this.outputs])) as { id: string; props: Props; inputs: Props };
    return { ...r, inputs: asLists(this.kind, r.inputs) };
  }

  async diff(inputs: object, outputs = this.outputs): Promise<{ changes: boolean; replaces?: string[] }> {
    return (await handle(this.kind, "diff", [this.id, outputs, await this.check(inputs)])) as { changes: boolean };
  }

  /** Removes what an earlier, interrupted run of the same resource left on the hosts (its flows, by cookie). */
  async purge(inputs: object): Promise<void> {
    await handle(this.kind, "delete", ["", await this.check(inputs)]);
  }

  async delete(): Promise<void> {
    await handle(this.kind, "delete", [this.id, this.outputs]);
  }
}

/** Deletes each driver's resource that exists and forgets it, so the next apply creates it afresh. */
export async function removeAll(...drivers: ProviderDriver[]): Promise<void> {
  for (const d of drivers) {
    if (!d.id) continue;
    await d.delete();
    d.id = "";
  }
}

/**
 * The hypervisor side for lab backends: one DsrHypervisorFlows (mac mode) on
 * `hypervisor` for every VIP, holding the VIP's backends that live there.
 */
export function labHypervisorFlows(
  inv: LabInventory,
  name: string,
  hypervisor: string,
  vips: { address: string; port: number; protocol?: "tcp" | "udp"; backends: LabBackend[] }[],
): DsrHypervisorFlowsInputs {
  const h = inv.hosts[hypervisor];
  return {
    name,
    host: { connection: sshTo(inv, h), ovsRundir: h.ovsRundir },
    bridge: "br-seg",
    mode: "mac",
    vips: vips
      .map((v) => ({
        address: v.address,
        port: v.port,
        protocol: v.protocol ?? "tcp",
        backends: v.backends
          .filter((b) => b.hypervisor === hypervisor)
          .map((b) => ({ address: b.address, port: inv.backendPort, mac: b.mac, bridgePort: b.port })),
      }))
      .filter((v) => v.backends.length > 0),
  };
}
