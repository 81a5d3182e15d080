import { describe, it, expect } from "vitest";
import { check } from "../../provider/handlers";

/**
 * A backend's logicalPort becomes the LSP half of OVN's ip_port_mappings
 * value "LSP:SRC_IP": a ':' in it would split the value in the wrong place,
 * so check refuses it, naming the property and the reason.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const conn = (host: string) => ({ host, user: "root", hostKey: KEY, privateKeyPath: "/k" });
const lb = (logicalPort: string) => ({
  name: "web",
  gateways: [{ name: "gw1", host: { connection: conn("172.30.0.11") }, bridge: "br-seg", segmentPort: "seg0", mac: "02:00:0a:00:00:0b" }],
  hypervisors: [{ name: "hv1" }],
  vips: [
    {
      address: "10.0.0.193",
      port: 80,
      protocol: "tcp",
      backends: [{ address: "10.1.0.1", port: 8080, mac: "02:00:00:00:00:01", hypervisor: "hv1", logicalPort }],
    },
  ],
  ovn: { northbound: { connection: conn("172.30.0.2"), socket: "/run/ovn/ovnnb_db.sock" }, router: "lr0", healthCheckSourceIp: "10.1.0.254" },
});

describe("check: logicalPort", () => {
  it("accepts an OVN port name", async () => {
    expect((await check("DeferredNatLoadBalancer", {}, lb("vm1-port_0.a"))).failures).toEqual([]);
    expect((await check("DeferredNatLoadBalancer", {}, lb("4f1c2a9e-7d1b-4c36-9a51-0d3b1e2f6a7c"))).failures).toEqual([]);
  });

  it.each(["vm1:10.1.0.254", "vm1:", ":vm1", "vm 1", "vm1,x", "vm1=x", 'vm1"', ""])("refuses %j, naming the property and why", async (bad) => {
    const { failures } = await check("DeferredNatLoadBalancer", {}, lb(bad));
    expect(failures).toHaveLength(1);
    expect(failures[0].property).toBe("vips[0].backends[0].logicalPort");
    expect(failures[0].reason).toMatch(/^must be an OVN logical switch port name/);
    expect(failures[0].reason).toContain("no ':'");
    expect(failures[0].reason).toContain("ip_port_mappings");
    expect(failures[0].reason).toContain("LSP:SRC_IP");
  });

  it("never echoes the refused value", async () => {
    const { failures } = await check("DeferredNatLoadBalancer", {}, lb("secret-ish:value"));
    expect(JSON.stringify(failures)).not.toContain("secret-ish");
  });
});
