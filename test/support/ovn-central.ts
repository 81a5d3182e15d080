import type { SshSession } from "../../provider/transport/ssh";
import type { LabInventory } from "../lab/topology";

/**
 * The lab's OVN central as tests drive it: ovn-nbctl and ovn-sbctl against
 * its NB and SB sockets over one SSH session. The lab runs no
 * ovn-controller unless a test adds the chassis (test/lab/ovn-chassis.ts),
 * so tests fake what a chassis would write in the SB (Chassis rows,
 * bindings, `up`, probe results) with these.
 */
export class OvnCentral {
  constructor(
    private readonly inv: LabInventory,
    private readonly ssh: SshSession,
  ) {}

  private async ctl(tool: string, sock: string, args: string[]): Promise<string> {
    const r = await this.ssh.run([tool, `--db=unix:${sock}`, ...args]);
    if (r.exitCode !== 0) throw new Error(`${tool} ${args.join(" ")}: ${r.stderr}`);
    return r.stdout.trim();
  }

  nbctl(...args: string[]): Promise<string> {
    return this.ctl("ovn-nbctl", this.inv.hosts.central.ovn!.nbSock, args);
  }

  sbctl(...args: string[]): Promise<string> {
    return this.ctl("ovn-sbctl", this.inv.hosts.central.ovn!.sbSock, args);
  }

  /** The SB Service_Monitor rows of these logical ports: uuid, port, protocol and status. */
  async monitors(
    lsps: readonly string[],
  ): Promise<{ uuid: string; logicalPort: string; ip: string; port: number; protocol: string; srcIp: string; status: string }[]> {
    const out = await this.sbctl(
      "--format=csv",
      "--data=bare",
      "--no-headings",
      "--columns=_uuid,logical_port,ip,port,protocol,src_ip,status",
      "list",
      "service_monitor",
    );
    return out
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split(","))
      .map(([uuid, logicalPort, ip, p, protocol, srcIp, status]) => ({ uuid, logicalPort, ip, port: Number(p), protocol, srcIp, status }))
      .filter((m) => lsps.includes(m.logicalPort))
      .sort((a, b) => `${a.logicalPort}/${a.protocol}`.localeCompare(`${b.logicalPort}/${b.protocol}`));
  }
}
