/* eslint-disable */
// Generated from schema/*.json by schema/generate-types.js. Do not edit.

/**
 * An OVS bridge ensured on one host through OVSDB, owned by ovslb through external_ids.
 */
export interface OvsBridgeInputs {
  host: OvsHost;
  /**
   * an OVS bridge name: 1-15 letters, digits, '-' or '_', starting with a letter (a Linux interface name)
   */
  name: string;
  /**
   * the datapath: netdev (userspace) or system (kernel); default netdev
   */
  datapathType?: "netdev" | "system";
  /**
   * what the bridge does with no controller; default secure
   */
  failMode?: "secure" | "standalone";
  /**
   * a unicast Ethernet MAC address, e.g. 02:00:0a:00:00:65
   */
  hwaddr?: string;
  /**
   * extra external_ids to set on the bridge
   */
  externalIds?: {
    [k: string]: string;
  };
}
/**
 * a host running Open vSwitch, reached over SSH; ovsRundir is where its sockets live (db.sock, BRIDGE.mgmt), default /var/run/openvswitch
 */
export interface OvsHost {
  connection: SshConnection;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  ovsRundir?: string;
}
/**
 * how to reach a host over SSH; its host key is always verified, against hostKey or knownHosts (one is required)
 */
export interface SshConnection {
  /**
   * a DNS name or an IPv4 address
   */
  host: string;
  /**
   * SSH port (default 22)
   */
  port?: number;
  /**
   * a login name
   */
  user: string;
  /**
   * a public host key as in known_hosts, e.g. "ssh-ed25519 AAAA..."
   */
  hostKey?: string;
  /**
   * OpenSSH known_hosts lines that name this host
   */
  knownHosts?: string;
  /**
   * an OpenSSH or PEM private key (kept secret)
   */
  privateKey?: string;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  privateKeyPath?: string;
  /**
   * the private key's passphrase (kept secret)
   */
  passphrase?: string;
  /**
   * an absolute path of letters, digits and . _ - /
   */
  agent?: string;
  /**
   * milliseconds
   */
  connectTimeoutMs?: number;
  /**
   * milliseconds
   */
  commandTimeoutMs?: number;
  jumpHost?: SshConnection;
}
