import type { DeferredNatLoadBalancerInputs as Inputs } from "../../model/inputs.generated";
import { OPEN_VSWITCH, OwnedTransaction, Transaction, describeOwner, mutation, ownerMark, where, type Uuid } from "../../ovsdb";
import type { OvsHostSession } from "../../transport/ovs-host";
import { lbId, tunnelPortState, tunnelPorts, type TunnelPort } from "./plan";

/**
 * gre delivery, on each gateway: the load balancer's GRE ports, one per
 * hypervisor with a fixed remote_ip, in owned OVSDB transactions. I/O only;
 * what the ports are is plan.ts (tunnelPorts, tunnelPortState).
 */

type Gateway = Inputs["gateways"][number];

/** 802.1Q reserves VLAN 4095: no frame on the segment carries it. */
const TUNNEL_VLAN = 4095;

/** The bridge, the wanted tunnel ports' rows by name, and every port this load balancer owns on the host. */
async function readTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway) {
  const wanted = tunnelPorts(inputs, gw);
  const txn = new Transaction(OPEN_VSWITCH);
  const bridge = txn.select("Bridge", [where("name", "==", gw.bridge)], ["_uuid", "ports"]);
  const owned = txn.select("Port", [where("external_ids", "includes", { "ovslb:owner": lbId(inputs) })], ["_uuid", "name", "external_ids"]);
  const ports = wanted.map((w) => txn.select("Port", [where("name", "==", w.name)], ["_uuid", "name", "external_ids"]));
  const ifaces = wanted.map((w) => txn.select("Interface", [where("name", "==", w.name)], ["_uuid", "name", "type", "options"]));
  const r = await (await s.vswitchDb()).run(txn);
  return {
    bridge: r.first(bridge),
    owned: r.rows(owned),
    wanted: wanted.map((w, i) => ({ want: w, port: r.first(ports[i]), iface: r.first(ifaces[i]) })),
  };
}

const transaction = (inputs: Inputs, what: string) => new OwnedTransaction(OPEN_VSWITCH, ownerMark(lbId(inputs)), `ovslb: ${what} of ${lbId(inputs)}`);

/** Creates the tunnel ports a gateway lacks and puts back ones changed by hand, in one transaction; refuses names someone else holds. */
export async function ensureTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway, where_: string): Promise<void> {
  const t = await readTunnels(s, inputs, gw);
  if (t.wanted.length === 0) return;
  if (!t.bridge) throw new Error(`${where_}: bridge ${gw.bridge} does not exist`);
  const txn = transaction(inputs, "tunnel ports");
  for (const { want, port, iface } of t.wanted) {
    const state = tunnelPortState(inputs, want, { port, iface });
    if (state === "foreign") {
      throw new Error(`${where_}: port ${want.name} (tunnel to hypervisor ${want.hypervisor}) exists and is ${port ? describeOwner(port) : "not owned by ovslb"}; refusing to take it over`);
    }
    if (state === "absent") addTunnel(txn, want, t.bridge);
    if (state === "changed") {
      txn.requireOwned("Port", port!);
      txn.update("Interface", [where("_uuid", "==", iface!._uuid)], { type: "gre", options: want.options });
    }
  }
  if (txn.operations.length > 1) await s.commitApplied(txn);
}

function addTunnel(txn: ReturnType<typeof transaction>, want: TunnelPort, bridge: { _uuid: Uuid }) {
  txn.requireAbsent("Port", [where("name", "==", want.name)]);
  txn.requireAbsent("Interface", [where("name", "==", want.name)]);
  const iface = txn.insertOwned("Interface", { name: want.name, type: "gre", options: want.options, ofport_request: [want.ofportRequest] });
  // An access port in VLAN 4095, which never occurs on a wire: the bridge's NORMAL never floods the segment into the tunnel.
  const port = txn.insertOwned("Port", { name: want.name, interfaces: [iface], tag: [TUNNEL_VLAN], external_ids: { "ovslb:hypervisor": want.hypervisor } });
  txn.requirePresent("Bridge", [where("_uuid", "==", bridge._uuid)]);
  txn.mutate("Bridge", [where("_uuid", "==", bridge._uuid)], [mutation("ports", "insert", [port])]);
}

/** The gateway's working tunnel ports (right type and options, attached): hypervisor -> ofport. */
export async function workingTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway, ofports: ReadonlyMap<string, number>): Promise<Map<string, number>> {
  const t = await readTunnels(s, inputs, gw);
  const working = new Map<string, number>();
  for (const { want, port, iface } of t.wanted) {
    const ofport = ofports.get(want.name);
    if (ofport !== undefined && tunnelPortState(inputs, want, { port, iface }) === "right") working.set(want.hypervisor, ofport);
  }
  return working;
}

/** Removes the load balancer's tunnel ports on the gateway that no hypervisor needs any more (all of them when `keepNone`). */
export async function removeStaleTunnels(s: OvsHostSession, inputs: Inputs, gw: Gateway, keepNone = false): Promise<void> {
  const t = await readTunnels(s, inputs, gw);
  const keep = new Set(keepNone ? [] : t.wanted.map((w) => w.want.name));
  const stale = t.owned.filter((p) => p.external_ids.has("ovslb:hypervisor") && !keep.has(p.name));
  if (stale.length === 0 || !t.bridge) return;
  const txn = transaction(inputs, "remove tunnel ports");
  for (const p of stale) txn.requireOwned("Port", p);
  txn.mutate("Bridge", [where("_uuid", "==", t.bridge._uuid)], [mutation("ports", "delete", stale.map((p) => p._uuid))]);
  await s.commitApplied(txn);
}
