/**
 * Observed health, as pure data, for every resource that reports it
 * (DeferredNatLoadBalancer's healthCheck, HealthCheck): what the southbound
 * (Service_Monitor, Port_Binding) and every gateway's BFD sessions say about
 * each backend, and which backends OVN reports online although they cannot
 * be (stale). Only ovslb reads every gateway, so only it can take the
 * majority of their BFD views that OVN lacks.
 */

import { canonicalAddress } from "../model/addresses";

/** One gateway's BFD session toward one hypervisor (Interface.bfd_status). */
export interface BfdView {
  /** admin_down, down, init or up; "absent" when the gateway has no session (port missing). */
  state: string;
  forwarding: boolean;
}

/** A southbound Service_Monitor row, as read. */
export interface MonitorView {
  logicalPort: string;
  ip: string;
  port: number;
  protocol: string;
  /** online, offline, error; undefined before the first probe. */
  status?: string;
  /** Service_Monitor.chassis_name where the schema has it (OVN 24.03+). */
  chassis?: string;
}

/** A logical port's southbound Port_Binding, as read. */
export interface BindingView {
  chassis?: string;
  up: boolean;
}

export interface HealthObservations {
  /** Service_Monitor rows; undefined when the southbound is not read. */
  monitors?: readonly MonitorView[];
  /** Port_Binding by logical port name. */
  bindings?: ReadonlyMap<string, BindingView>;
  /** gateway name -> hypervisor name -> that gateway's session toward it (only gateways with BFD sessions). */
  bfd: ReadonlyMap<string, ReadonlyMap<string, BfdView>>;
}

/** One backend of one VIP, as every source sees it. */
export interface BackendHealth {
  vip: string;
  backend: string;
  /** The backend's hypervisor, when the inputs name it. */
  hypervisor?: string;
  /** Service_Monitor status: online, offline, error, unknown (not probed yet), absent (no row). Only with probe and southbound. */
  monitor?: string;
  /** Its logical port's binding: chassis (null when bound to none) and up. */
  port?: { name: string; chassis: string | null; up: boolean };
  /** gateway -> BFD state of its session to the backend's hypervisor ("up" only when forwarding). */
  bfd: Record<string, string>;
}

/** A backend OVN reports online that cannot serve: why, and the monitor to set offline. */
export interface StaleBackend {
  vip: string;
  backend: string;
  logicalPort: string;
  reason: string;
}

export interface HealthReport {
  backends: BackendHealth[];
  stale: StaleBackend[];
}

/** A VIP as the assessment sees it: DeferredNatVip and HealthCheckVip both are. */
export interface HealthVip {
  address: string;
  port: number;
  protocol: string;
  backends: readonly { address: string; port: number; hypervisor?: string; logicalPort?: string }[];
}

export const healthVipKey = (v: Pick<HealthVip, "protocol" | "address" | "port">) => `${v.protocol}:${v.address}:${v.port}`;
const backendKey = (b: { address: string; port: number }) => `${b.address}:${b.port}`;

/** The address compared as the inputs record it (IPv6 in RFC 5952 form), whatever form the southbound wrote; the row keeps its own for writes. */
export const monitorKey = (m: Pick<MonitorView, "logicalPort" | "ip" | "port" | "protocol">) =>
  `${m.protocol}:${m.logicalPort}:${canonicalAddress(m.ip)}:${m.port}`;

/** A session counts as up only when BFD says the port may forward. */
const bfdWord = (v: BfdView) => (v.state === "up" && !v.forwarding ? "up-not-forwarding" : v.state);

/**
 * Per backend, what was observed; and the stale ones: online while the port
 * is bound to no chassis, or while a strict majority of the gateways that
 * peer with its hypervisor see their BFD session not forwarding (a flap on
 * one gateway of several is no majority).
 */
export function assessVips(vips: readonly HealthVip[], obs: HealthObservations): HealthReport {
  const monitors = new Map((obs.monitors ?? []).map((m) => [monitorKey(m), m]));
  const backends: BackendHealth[] = [];
  const stale: StaleBackend[] = [];
  for (const vip of vips) {
    for (const b of vip.backends) {
      const h: BackendHealth = { vip: healthVipKey(vip), backend: backendKey(b), ...(b.hypervisor === undefined ? {} : { hypervisor: b.hypervisor }), bfd: {} };
      const views =
        b.hypervisor === undefined
          ? []
          : [...obs.bfd].flatMap(([gw, byHv]) => {
              const v = byHv.get(b.hypervisor!);
              return v ? [[gw, v] as const] : [];
            });
      for (const [gw, v] of views) h.bfd[gw] = bfdWord(v);
      const binding = b.logicalPort ? obs.bindings?.get(b.logicalPort) : undefined;
      if (b.logicalPort && obs.bindings) h.port = { name: b.logicalPort, chassis: binding?.chassis ?? null, up: binding?.up ?? false };
      if (obs.monitors && b.logicalPort) {
        const m = monitors.get(monitorKey({ logicalPort: b.logicalPort, ip: b.address, port: b.port, protocol: vip.protocol }));
        h.monitor = m ? (m.status ?? "unknown") : "absent";
        if (m?.status === "online") {
          const reason = staleReason(
            b.logicalPort,
            binding,
            views.map(([, v]) => v),
            b.hypervisor,
          );
          if (reason) stale.push({ vip: h.vip, backend: h.backend, logicalPort: b.logicalPort, reason });
        }
      }
      backends.push(h);
    }
  }
  return { backends, stale };
}

function staleReason(port: string, binding: BindingView | undefined, views: readonly BfdView[], hypervisor: string | undefined): string | undefined {
  if (!binding) return `online while its logical port ${port} has no Port_Binding`;
  if (!binding.chassis) return `online while its logical port ${port} is bound to no chassis${binding.up ? " (and still marked up)" : ""}`;
  const down = views.filter((v) => !v.forwarding).length;
  if (views.length > 0 && down * 2 > views.length) {
    return `online while ${down} of the ${views.length} gateways peering with hypervisor ${hypervisor} see its BFD session down`;
  }
  return undefined;
}

/** The monitors to set offline: each stale backend's, once (a monitor serves every VIP with that backend). */
export function staleMonitors(report: HealthReport, vips: readonly HealthVip[], monitors: readonly MonitorView[]): MonitorView[] {
  const protocolOf = new Map(vips.map((v) => [healthVipKey(v), v.protocol]));
  const wanted = new Set(
    report.stale.map((s) => {
      // "ADDRESS:PORT", the address IPv4 or IPv6: the port after the last colon.
      const at = s.backend.lastIndexOf(":");
      return monitorKey({ logicalPort: s.logicalPort, ip: s.backend.slice(0, at), port: Number(s.backend.slice(at + 1)), protocol: protocolOf.get(s.vip)! });
    }),
  );
  return monitors.filter((m) => wanted.has(monitorKey(m)) && m.status === "online");
}

/** The logical ports of the VIPs' backends, each once. */
export const logicalPortsOf = (vips: readonly HealthVip[]) => [
  ...new Set(vips.flatMap((v) => v.backends.flatMap((b) => (b.logicalPort ? [b.logicalPort] : [])))),
];
