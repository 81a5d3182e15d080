import type { DeferredNatDefaulted as Inputs } from "./plan";
import { ensureTunnelPorts, readTunnelPorts, removeTunnelPorts } from "../../engine/tunnel-ports";
import type { OvsHostSession } from "../../transport/ovs-host";
import type { BfdView } from "./health";
import { BFD_ROLE, TUNNEL_ROLE, hasRole, lbId, tunnelPorts } from "./plan";

/**
 * gre delivery, on each gateway: the load balancer's ports toward each
 * hypervisor (data tunnels, and BFD liveness ports with healthCheck.bfd),
 * through the engine's owned tunnel ports. What the ports are is plan.ts.
 */

type Gateway = Inputs["gateways"][number];

/** Creates the ports a gateway lacks and puts back ones changed by hand; refuses names someone else holds. */
export const ensureTunnels = (s: OvsHostSession, inputs: Inputs, gw: Gateway, where: string) =>
  ensureTunnelPorts(s, lbId(inputs), gw.bridge, tunnelPorts(inputs, gw), where);

/** What a gateway's ports are: the working ones' ofports by hypervisor, and its BFD view of each hypervisor. */
export async function workingTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway) {
  const tunnelOfports = new Map<string, number>();
  const bfdOfports = new Map<string, number>();
  const bfd = new Map<string, BfdView>();
  for (const read of await readTunnelPorts(s, lbId(inputs), gw.bridge, tunnelPorts(inputs, gw))) {
    const hv = read.want.hypervisor;
    const isBfd = read.want.bfd !== undefined;
    if (isBfd) {
      const status = read.bfdStatus;
      bfd.set(hv, status ? { state: status.get("state") ?? "down", forwarding: status.get("forwarding") === "true" } : { state: "absent", forwarding: false });
    }
    if (read.ofport !== undefined) (isBfd ? bfdOfports : tunnelOfports).set(hv, read.ofport);
  }
  return { tunnelOfports, bfdOfports, bfd };
}

/** Removes the load balancer's ports on the gateway that no hypervisor needs any more (all of them when `keepNone`). */
export async function removeStaleTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway, keepNone = false): Promise<void> {
  const keep = keepNone ? [] : tunnelPorts(inputs, gw);
  // Both roles in one read and one transaction.
  const ours = (ids: ReadonlyMap<string, string>) => hasRole(TUNNEL_ROLE)(ids) || hasRole(BFD_ROLE)(ids);
  await removeTunnelPorts(s, lbId(inputs), gw.bridge, "tunnel and BFD", ours, keep);
}
