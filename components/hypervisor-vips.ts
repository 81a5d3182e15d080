import type * as pulumi from "@pulumi/pulumi";
import type { CheckFailure } from "../provider/model/validate";
import { mustBePlain } from "./args";

/** A backend as components take it: a server, where it runs, and its port on that hypervisor's bridge. */
export interface HypervisorBackend {
  /** The server's own address: requests for the VIP are DNATed to it on its hypervisor. */
  address: pulumi.Input<string>;
  /** The port the server listens on (the VIP's port is DNATed to it). */
  port: pulumi.Input<number>;
  /** The server's MAC on its hypervisor's bridge: requests reach it addressed to it. */
  mac: pulumi.Input<string>;
  /**
   * The `name` of the hypervisor (one of `hypervisors`) the server runs on:
   * its NAT flows go there. Plain (not an Output): it decides which
   * hypervisors get a DsrHypervisorFlows.
   */
  hypervisor: string;
  /** The server's port on its hypervisor's bridge (e.g. its VM's tap), where its flows deliver. */
  bridgePort: pulumi.Input<string>;
}

/** A VIP and the backends behind it. */
export interface ServiceVip<B = HypervisorBackend> {
  /** The virtual address clients connect to; replies leave from it. */
  address: pulumi.Input<string>;
  /** The VIP's port. */
  port: pulumi.Input<number>;
  /** The VIP's transport protocol: tcp, udp or sctp. */
  protocol: pulumi.Input<"tcp" | "udp" | "sctp">;
  /** The servers behind the VIP. The list is plain; each backend's values may be Outputs. */
  backends: readonly B[];
}

/** A hypervisor's VIPs as its DsrHypervisorFlows takes them. */
export type HypervisorVips = ServiceVip<Omit<HypervisorBackend, "hypervisor">>[];

/** The VIPs with backends on one hypervisor, holding only those backends: one DsrHypervisorFlows' vips. */
export function vipsOn(hypervisor: string, vips: readonly ServiceVip[]): HypervisorVips {
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

/** A list's items, or none when it is not a plain list. */
const listed = (x: unknown): readonly unknown[] => (Array.isArray(x) ? x : []);

/**
 * What must be plain in a hypervisors-and-backends component, and its rules:
 * the lists, each hypervisor's name (once each) and each backend's placement
 * on a listed hypervisor. (A backend without one is the schema's refusal.)
 */
export function placementProblems(hypervisors: readonly { name: string }[], vips: readonly ServiceVip[]): CheckFailure[] {
  const why = "where backends run decides which hypervisors get flows";
  const lists = [
    ...mustBePlain(hypervisors, "hypervisors", why),
    ...mustBePlain(vips, "vips", why),
    ...listed(hypervisors).flatMap((h, i) => mustBePlain(h, `hypervisors[${i}]`, why)),
    ...listed(vips).flatMap((vip, v) => [
      ...mustBePlain(vip, `vips[${v}]`, why),
      ...mustBePlain((vip as ServiceVip | undefined)?.backends, `vips[${v}].backends`, why),
      ...listed((vip as ServiceVip | undefined)?.backends).flatMap((b, i) => mustBePlain(b, `vips[${v}].backends[${i}]`, why)),
    ]),
  ];
  if (lists.length > 0) return lists;
  const problems: CheckFailure[] = [];
  const first = new Map<string, number>();
  hypervisors.forEach((h, i) => {
    const at = `hypervisors[${i}].name`;
    const plain = mustBePlain(h.name, at, "it names the hypervisor's DsrHypervisorFlows");
    const other = first.get(h.name);
    if (plain.length > 0) problems.push(...plain);
    else if (other !== undefined) problems.push({ property: at, reason: `"${h.name}" is also hypervisors[${other}]'s: give each hypervisor once` });
    else first.set(h.name, i);
  });
  const names = [...first.keys()].join(", ");
  vips.forEach((vip, v) =>
    (vip.backends ?? ([] as readonly HypervisorBackend[])).forEach((b, i) => {
      const at = `vips[${v}].backends[${i}].hypervisor`;
      // A backend without one is the schema's refusal ("is required").
      if (b.hypervisor === undefined) return;
      const plain = mustBePlain(b.hypervisor, at, why);
      if (plain.length > 0) problems.push(...plain);
      else if (!first.has(b.hypervisor)) problems.push({ property: at, reason: `"${b.hypervisor}" is not the name of one of hypervisors (${names})` });
    }),
  );
  return problems;
}

/** Two hypervisor entries on one host and bridge would be two resources fighting over one zone and one GRE port. */
export function sameBridgeTwice(hypervisors: readonly { host: { connection: { host: string } }; bridge: string }[]): CheckFailure[] {
  const problems: CheckFailure[] = [];
  const bridges = new Map<string, number>();
  hypervisors.forEach((h, i) => {
    const key = `${h.host.connection.host}/${h.bridge}`;
    const other = bridges.get(key);
    if (other !== undefined)
      problems.push({ property: `hypervisors[${i}]`, reason: `is on the same host and bridge as hypervisors[${other}]: give each hypervisor once` });
    else bridges.set(key, i);
  });
  return problems;
}
