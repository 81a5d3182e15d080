import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { LabInventory } from "../lab/topology";
import { inNamespace } from "./lab";

/**
 * Whether a backend's namespace holds a TCP socket on the backend port that is not listening: read from
 * /proc/<pid>/net/tcp{,6} of its server (in that namespace), a file read instead of a process per namespace.
 */
function holdsConnections(inv: LabInventory, backend: string): boolean {
  const pidFile = join(inv.labDir, `${backend}.server.pid`);
  if (!existsSync(pidFile)) return true;
  const pid = readFileSync(pidFile, "utf8").trim();
  const port = `:${inv.backendPort.toString(16).toUpperCase().padStart(4, "0")}`;
  return ["tcp", "tcp6"].some((table) => {
    const path = `/proc/${pid}/net/${table}`;
    if (!existsSync(path)) return true;
    // Columns: sl, local address:port, remote address:port, state (0A is LISTEN).
    return readFileSync(path, "utf8")
      .split("\n")
      .slice(1)
      .some((line) => {
        const [, local, , state] = line.trim().split(/\s+/);
        return local?.endsWith(port) && state !== "0A";
      });
  });
}

/**
 * A lab backend's sockets whose client is gone, closed (`ss -K`).
 *
 * Tests break connections on purpose (a backend removed without draining, a
 * hypervisor cut off): the client's reset then goes elsewhere, and the
 * backend keeps its ESTABLISHED socket for as long as the lab runs (its
 * server sets no keepalive). A later connection from the same client port
 * meets that socket: the backend answers the SYN with a challenge ACK, which
 * OVS's userspace conntrack takes as the reply's first packet
 * (lib/conntrack-tcp.c), so the entry's windows belong to the old
 * connection, the real handshake and close fall outside them, and the entry
 * stays ESTABLISHED after both ends have closed: a drained backend's
 * `connections` then never reads 0. After some hundred runs on one lab, that
 * happened in about one run of two. A socket is stale when its peer is one of
 * the lab's clients and that client holds no socket of that address and port
 * (TIME_WAIT included); a connection being opened or closed still has one.
 */
export function closeStaleBackendSockets(inv: LabInventory): number {
  const holding = inv.backends.filter((b) => holdsConnections(inv, b.name));
  if (holding.length === 0) return 0;
  const clients = [inv.client, inv.tenantClient, inv.farClient].filter((c) => c !== undefined).map((c) => c.namespace);
  const clientAddresses = new Set<string>();
  const clientSockets = new Set<string>();
  for (const ns of clients) {
    const addrs = JSON.parse(inNamespace(ns, ["ip", "-j", "addr", "show"])) as { addr_info: { local: string }[] }[];
    for (const a of addrs.flatMap((l) => l.addr_info)) clientAddresses.add(a.local);
    for (const line of inNamespace(ns, ["ss", "-tanH"]).split("\n")) {
      const local = line.trim().split(/\s+/)[3];
      if (local) clientSockets.add(local);
    }
  }
  let closed = 0;
  for (const b of holding) {
    const stale: { address: string; port: string }[] = [];
    for (const line of inNamespace(b.namespace, ["ss", "-tanH", `( sport = :${inv.backendPort} )`]).split("\n")) {
      const [state, , , , peer] = line.trim().split(/\s+/);
      if (!peer || state === "LISTEN") continue;
      const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(peer);
      if (!m || !clientAddresses.has(m[1]) || clientSockets.has(peer)) continue;
      stale.push({ address: m[1], port: m[2] });
    }
    // One ss per 40 sockets: the filter names each (peer, port).
    for (let i = 0; i < stale.length; i += 40) {
      const each = stale.slice(i, i + 40).map((s) => `( dst ${s.address.includes(":") ? `[${s.address}]` : s.address} and dport = :${s.port} )`);
      inNamespace(b.namespace, ["ss", "-K", "-tnH", `( sport = :${inv.backendPort} ) and ( ${each.join(" or ")} )`]);
    }
    closed += stale.length;
  }
  return closed;
}
