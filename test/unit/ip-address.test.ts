import { describe, expect, it } from "vitest";
import { canonicalIpv6, canonicalPrefix, ipFamily, ipv6Number, parseFlows, renderBundle, type Flow } from "../../provider/openflow";

/** IP addresses as OVS prints them (RFC 5952 for IPv6), and IPv6 in flows: rendered, parsed back, compared. */

describe("IP addresses in OVS's text", () => {
  it("writes IPv6 in RFC 5952 form: lowercase, no leading zeros, the first longest zero run compressed, a lone zero group kept", () => {
    expect(canonicalIpv6("2001:DB8:0::1")).toBe("2001:db8::1");
    expect(canonicalIpv6("2001:0db8:0000:0000:0000:0000:0000:0001")).toBe("2001:db8::1");
    expect(canonicalIpv6("2001:db8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1");
    expect(canonicalIpv6("2001:db8:1:0:1:0:0:1")).toBe("2001:db8:1:0:1::1");
    expect(canonicalIpv6("::")).toBe("::");
    expect(canonicalIpv6("fe80::1%eth0")).toBeUndefined();
    expect(canonicalIpv6("10.0.0.1")).toBeUndefined();
    expect(ipFamily("10.0.0.1")).toBe(4);
    expect(ipFamily("2001:db8::1")).toBe(6);
    expect(ipFamily("010.0.0.1")).toBeUndefined();
    expect(ipv6Number("2001:db8::1")).toBe((0x20010db8n << 96n) | 1n);
  });

  it("prefixes: the address canonical, a full length bare; refuses host bits, lengths beyond the family, scoped and IPv4-mapped addresses", () => {
    expect(canonicalPrefix("2001:DB8::/32")).toEqual({ family: 6, text: "2001:db8::/32" });
    expect(canonicalPrefix("2001:db8::5/128")).toEqual({ family: 6, text: "2001:db8::5" });
    expect(canonicalPrefix("10.0.0.0/24")).toEqual({ family: 4, text: "10.0.0.0/24" });
    expect(canonicalPrefix("10.0.0.5/32")).toEqual({ family: 4, text: "10.0.0.5" });
    expect(canonicalPrefix("2001:db8::1/64")).toEqual({ reason: "host bits set (the prefix's address must end in zero bits)" });
    expect(canonicalPrefix("10.0.0.1/24")).toEqual({ reason: "host bits set (the prefix's address must end in zero bits)" });
    expect(canonicalPrefix("2001:db8::/129")).toEqual({ reason: "a prefix length of 1-128" });
    expect(canonicalPrefix("10.0.0.0/33")).toEqual({ reason: "a prefix length of 1-32" });
    expect(canonicalPrefix("fe80::1%eth0")).toEqual({ reason: "a scoped address (%zone) names an interface of one host" });
    expect(canonicalPrefix("::ffff:10.0.0.1")).toEqual({ reason: "an IPv4-mapped IPv6 address: write the IPv4 address itself" });
    expect(canonicalPrefix("2001:db8::1", 4)).toEqual({ reason: "an IPv6 address where IPv4 is needed" });
    expect(canonicalPrefix("10.0.0.1", 6)).toEqual({ reason: "an IPv4 address where IPv6 is needed" });
  });
});

describe("IPv6 in flows", () => {
  const flow: Flow = {
    table: 0,
    priority: 100,
    cookie: 0x1bn,
    match: { protocol: "tcp6", ipv6_dst: "2001:DB8::100", tp_dst: 80 },
    actions: [{ type: "ct", commit: true, table: 62, zone: 7, nat: { kind: "dst", ip: "2001:db8:0:0::5", port: 8080 } }],
  };

  it("renders addresses as OVS prints them, the NAT address bracketed before a port", () => {
    expect(renderBundle([{ op: "add-flow", flow }])).toEqual([
      "flow add table=0,priority=100,cookie=0x1b,tcp6,ipv6_dst=2001:db8::100,tp_dst=80,actions=ct(commit,table=62,zone=7,nat(dst=[2001:db8::5]:8080))",
    ]);
  });

  it("parses OVS 3.1's dump of IPv6 flows back to the same flows", () => {
    const dump = [
      " cookie=0x1b, duration=0.129s, table=0, n_packets=0, n_bytes=0, idle_age=0, priority=100,tcp6,ipv6_dst=2001:db8::100,tp_dst=80 actions=ct(commit,table=62,zone=7,nat(dst=[2001:db8::5]:8080))",
      " cookie=0x1b, duration=0.073s, table=0, n_packets=0, n_bytes=0, idle_age=0, priority=5,tcp6,ipv6_dst=2001:db8::1 actions=ct(commit,zone=5,nat(dst=2001:db8::5))",
      " cookie=0x1b, duration=0.087s, table=70, n_packets=0, n_bytes=0, idle_age=0, priority=7,icmp6,ipv6_dst=2001:db8::1,icmp_type=2,icmp_code=0 actions=set_field:2001:db8::9->ipv6_dst,output:1",
    ].join("\n");
    const [a, b, c] = parseFlows(dump);
    expect({ match: a.match, actions: a.actions, other: a.otherMatch }).toEqual({
      match: { ...flow.match, ipv6_dst: "2001:db8::100" },
      actions: [{ ...flow.actions[0], nat: { kind: "dst", ip: "2001:db8::5", port: 8080 } }],
      other: [],
    });
    expect(b.actions).toEqual([{ type: "ct", commit: true, zone: 5, nat: { kind: "dst", ip: "2001:db8::5" } }]);
    expect(c.match).toEqual({ protocol: "icmp6", ipv6_dst: "2001:db8::1", icmp_type: 2, icmp_code: 0 });
    expect(c.actions).toEqual([
      { type: "set_field", field: "ipv6_dst", value: "2001:db8::9" },
      { type: "output", port: 1 },
    ]);
  });

  it("refuses an IPv6 field without an IPv6 protocol, an IPv4 field with one, and scoped or mapped addresses, naming the field", () => {
    const render = (match: Flow["match"]) => () => renderBundle([{ op: "add-flow", flow: { ...flow, match, actions: [{ type: "drop" }] } }]);
    expect(render({ protocol: "tcp", ipv6_dst: "2001:db8::1" })).toThrow(/match\.ipv6_dst.*needs protocol ipv6 or tcp6/);
    expect(render({ protocol: "tcp6", nw_dst: "10.0.0.1" })).toThrow(/match\.nw_dst.*needs protocol ip or tcp/);
    expect(render({ protocol: "tcp6", ipv6_dst: "fe80::1%eth0" })).toThrow(/match\.ipv6_dst/);
    expect(render({ protocol: "tcp6", ipv6_dst: "::ffff:10.0.0.1" })).toThrow(/match\.ipv6_dst/);
    expect(render({ protocol: "tcp6", ipv6_dst: "2001:db8::1/64" })).toThrow(/host bits zero/);
  });
});
