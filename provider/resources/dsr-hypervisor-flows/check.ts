import type { DsrHypervisorFlowsInputs } from "../../model/inputs.generated";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { ipv4Number } from "../../openflow";
import { addressFamily, canonicalAddress, checkFamilies, handOnKeyCollisions, underlayFamily } from "../../model/addresses";
import { canonicalPrefix } from "../../openflow";
import { backendKey, vipKey, type DsrDefaulted } from "./ids";

/** DsrHypervisorFlows inputs: defaults (applied once, at check) and the rules the schema cannot say (pure). */

type Inputs = DsrDefaulted;

/** The GRE port's name when gre.port is not given. */
export const DEFAULT_GRE_PORT = "ovslb-gre";

export function withDefaults(inputs: DsrHypervisorFlowsInputs): Inputs {
  const { gre, ...rest } = inputs;
  return {
    ...rest,
    mode: inputs.mode ?? "mac",
    ...(gre
      ? {
          gre: {
            ...gre,
            port: gre.port ?? DEFAULT_GRE_PORT,
            // An IPv6 underlay's addresses as OVS prints them (canonical), so a refresh shows no change.
            ...(gre.allowedSources.some((a) => a.includes(":")) ? { allowedSources: gre.allowedSources.map(canonicalSource) } : {}),
            ...(gre.bfd?.peers.some((p) => p.address.includes(":"))
              ? { bfd: { ...gre.bfd, peers: gre.bfd.peers.map((p) => ({ ...p, address: canonicalAddress(p.address) })) } }
              : {}),
            ...(gre.secondChance?.peers.some((p) => p.includes(":"))
              ? { secondChance: { ...gre.secondChance, peers: gre.secondChance.peers.map(canonicalAddress) } }
              : {}),
          },
        }
      : {}),
    // OVS prints MACs in lower case: so must the inputs, or a refresh shows a change.
    vips: inputs.vips.map((v) => ({
      ...v,
      address: canonicalAddress(v.address),
      protocol: v.protocol ?? "tcp",
      backends: v.backends.map((b) => ({ ...b, address: canonicalAddress(b.address), mac: b.mac.toLowerCase() })),
    })),
  };
}

/** An allowed source (an address or a prefix) in canonical form; one check refuses stays as written. */
function canonicalSource(source: string): string {
  const parsed = canonicalPrefix(source);
  return "text" in parsed ? parsed.text : source;
}

/** Rules across VIPs and backends that the schema cannot say. */
export function checkRules(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [...checkConnection(inputs.host.connection, "host.connection"), ...checkGre(inputs), ...checkFamilies(inputs.vips)];
  const vips = new Map<string, number>();
  const vipAddresses = new Set(inputs.vips.map((v) => v.address));
  // One backend address is one VM: it has one MAC and one port on the bridge, whichever VIPs it serves; one MAC has one address of each family.
  const byAddress = new Map<string, { mac: string; bridgePort: string; at: string }>();
  const byMac = new Map<string, { address: string; at: string }>();

  inputs.vips.forEach((vip, i) => {
    const at = `vips[${i}]`;
    if (vip.fragments && vip.protocol !== "udp") failures.push({ property: `${at}.fragments`, reason: "is for udp VIPs: TCP does not fragment" });
    if (vip.fragments && inputs.gre?.secondChance) failures.push({ property: `${at}.fragments`, reason: "cannot be used with gre.secondChance yet" });
    const first = vips.get(vipKey(vip));
    if (first !== undefined) {
      failures.push({ property: at, reason: `duplicates vips[${first}]: the same address, port and protocol` });
    } else vips.set(vipKey(vip), i);

    const backends = new Map<string, number>();
    const macs = new Map<string, number>();
    vip.backends.forEach((b, k) => {
      const bat = `${at}.backends[${k}]`;
      const mac = b.mac;
      const same = backends.get(backendKey(b));
      if (same !== undefined) {
        failures.push({ property: bat, reason: `duplicates ${at}.backends[${same}]: the same address and port` });
        return;
      }
      backends.set(backendKey(b), k);
      const sameMac = macs.get(mac);
      if (sameMac !== undefined) {
        failures.push({
          property: `${bat}.mac`,
          reason: `is also the MAC of ${at}.backends[${sameMac}]: in mac mode a VIP's frames are told apart by MAC, so each backend of a VIP needs its own`,
        });
      } else macs.set(mac, k);
      if (b.address === vip.address) {
        failures.push({ property: `${bat}.address`, reason: "equals the VIP's address: a backend must not be its own VIP" });
      } else if (vipAddresses.has(b.address)) {
        failures.push({ property: `${bat}.address`, reason: "is the address of another VIP here: a backend must not be a VIP" });
      }
      const seen = byAddress.get(b.address);
      if (!seen) byAddress.set(b.address, { mac, bridgePort: b.bridgePort, at: bat });
      else if (seen.mac !== mac) {
        failures.push({ property: `${bat}.mac`, reason: `differs from the MAC given for the same address at ${seen.at}` });
      } else if (seen.bridgePort !== b.bridgePort) {
        failures.push({ property: `${bat}.bridgePort`, reason: `differs from the bridge port given for the same address at ${seen.at}` });
      }
      // A dual-stack VM has an address of each family behind its one MAC.
      const owner = byMac.get(`${mac}/${b.address.includes(":") ? 6 : 4}`);
      if (!owner) byMac.set(`${mac}/${b.address.includes(":") ? 6 : 4}`, { address: b.address, at: bat });
      else if (owner.address !== b.address) {
        failures.push({ property: `${bat}.mac`, reason: `is also the MAC of another address at ${owner.at}` });
      }
    });
  });
  return failures;
}

/** gre settings belong to gre mode, and each allowed source is a prefix with no host bits set, given once. */
function checkGre(inputs: Inputs): CheckFailure[] {
  const failures: CheckFailure[] = [];
  if (inputs.mode === "ipip") {
    failures.push({
      property: "mode",
      reason:
        "ipip cannot be received by OVS (it has no IPIP port type, and its decap action strips only Ethernet, NSH and MPLS); have the load balancer send GRE and use gre",
    });
  }
  if (inputs.mode === "gre" && !inputs.gre) {
    failures.push({ property: "gre", reason: "is required in gre mode: give gre.allowedSources, the load balancers whose GRE may be delivered" });
  }
  if (inputs.mode !== "gre" && inputs.gre) failures.push({ property: "gre", reason: "is only used in gre mode" });
  const gre = inputs.gre;
  if (gre) {
    const underlay = underlayFamily(
      [
        ...gre.allowedSources.map((address, i) => ({ property: `gre.allowedSources[${i}]`, address })),
        ...(gre.bfd?.peers ?? []).map((p, i) => ({ property: `gre.bfd.peers[${i}].address`, address: p.address })),
        ...(gre.secondChance?.peers ?? []).map((address, i) => ({ property: `gre.secondChance.peers[${i}]`, address })),
      ],
      failures,
    );
    if (underlay === 6)
      failures.push(...handOnKeyCollisions((gre.secondChance?.peers ?? []).map((address, i) => ({ property: `gre.secondChance.peers[${i}]`, address }))));
  }
  if (inputs.gre?.secondChance && inputs.gre.key !== undefined) {
    failures.push({
      property: "gre.key",
      reason: "must not be set with gre.secondChance: the gateways' GRE key then carries the previous owner's hypervisor, not a fixed key",
    });
  }
  const handOn = new Map<string, number>();
  (inputs.gre?.secondChance?.peers ?? []).forEach((peer, i) => {
    if (peer.includes(":")) addressFamily(peer, `gre.secondChance.peers[${i}]`, failures);
    if (handOn.has(peer)) failures.push({ property: `gre.secondChance.peers[${i}]`, reason: `is also gre.secondChance.peers[${handOn.get(peer)}]` });
    else handOn.set(peer, i);
  });
  const peers = new Map<string, number>();
  (inputs.gre?.bfd?.peers ?? []).forEach((p, i) => {
    const key = `${p.address}/${p.key}`;
    if (peers.has(key)) failures.push({ property: `gre.bfd.peers[${i}]`, reason: `is also gre.bfd.peers[${peers.get(key)}]: one session per gateway and key` });
    else peers.set(key, i);
    if (p.address.includes(":")) addressFamily(p.address, `gre.bfd.peers[${i}].address`, failures);
    if (inputs.gre?.key !== undefined && p.key === inputs.gre.key) {
      failures.push({ property: `gre.bfd.peers[${i}].key`, reason: "equals gre.key: the BFD port would take the data the flow-based port must receive" });
    }
  });
  const seen = new Map<string, number>();
  (inputs.gre?.allowedSources ?? []).forEach((prefix, i) => {
    const at = `gre.allowedSources[${i}]`;
    if (prefix.includes(":")) {
      // An IPv6 underlay's source: its rules are canonicalPrefix's; duplicates by the canonical form.
      const parsed = canonicalPrefix(prefix);
      if ("reason" in parsed) failures.push({ property: at, reason: `${JSON.stringify(prefix)}: ${parsed.reason}` });
      const key = "text" in parsed ? parsed.text : prefix;
      if (seen.has(key)) failures.push({ property: at, reason: `is also gre.allowedSources[${seen.get(key)}]` });
      else seen.set(key, i);
      return;
    }
    const [address, length] = prefix.split("/");
    const bits = length === undefined ? 32 : Number(length);
    const host = bits === 32 ? 0 : ipv4Number(address) % 2 ** (32 - bits);
    if (bits === 0)
      failures.push({ property: at, reason: "is /0, every source: list the load balancers' own addresses or prefixes (GRE from anywhere else is dropped)" });
    else if (host !== 0) failures.push({ property: at, reason: `has host bits set: write the prefix as its network address (/${bits})` });
    const key = bits === 32 ? address : prefix;
    if (seen.has(key)) failures.push({ property: at, reason: `is also gre.allowedSources[${seen.get(key)}]` });
    else seen.set(key, i);
  });
  return failures;
}
