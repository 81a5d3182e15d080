import { describe, expect, it } from "vitest";
import {
  ZoneCounter,
  bridgeChecks,
  conntrackCheck,
  datapathCheck,
  fingerprint,
  hostKeyCheck,
  loginCheck,
  mtuCheck,
  ovsdbChannelCheck,
  reachableCheck,
  socketProblem,
  versionCheck,
  type SocketFacts,
} from "../../provider/doctor/checks";
import { knownHostsToken } from "../../provider/transport/known-hosts";
import { interfaceOf, underlayMtuWarnings } from "../../provider/transport/underlay";

/** ovslb doctor's verdicts, each from what the I/O found (provider/doctor/checks.ts). */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAqMwlVB7c5MftfAcic5SDZ4W3AMK31WMyG35QH8iDpy";
const OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOGNcTjv+2CiX0ztLVIqvrv8sIpI7iZwsbzDLOOFRGSK";
const blob = (k: string) => Buffer.from(k.split(" ")[1], "base64");

describe("host key", () => {
  const base = { host: "gw1", address: "192.0.2.11", port: 22, configKey: "ovslb:hosts.gw1" };

  it("the pinned key presented: ok, with its type and fingerprint", () => {
    const r = hostKeyCheck({ ...base, pinned: [fingerprint(blob(KEY))], presentedPinnedType: blob(KEY), matches: true });
    expect(r).toEqual({ host: "gw1", check: "host key", status: "ok", detail: `ssh-ed25519 ${fingerprint(blob(KEY))} is the pinned key` });
    // As ssh-keygen -lf prints it: SHA256, base64 without padding.
    expect(fingerprint(blob(KEY))).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
  });

  it("nothing pinned: FAIL with the key to compare and the config command and known_hosts line that pin it", () => {
    const r = hostKeyCheck({ ...base, port: 2222, pinned: [], matches: false, anyKey: blob(KEY) });
    expect(r.status).toBe("FAIL");
    expect(r.detail).toBe(`no host key is pinned for [192.0.2.11]:2222; it presents ssh-ed25519 ${fingerprint(blob(KEY))}`);
    expect(r.fix).toContain(`pulumi config set --path 'ovslb:hosts.gw1.connection.hostKey' '${KEY}'`);
    expect(r.fix).toContain(`known_hosts line: [192.0.2.11]:2222 ${KEY}`);
    expect(r.fix).toContain("ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub");
    // --host: the flag, not the config.
    expect(hostKeyCheck({ ...base, configKey: "--host", pinned: [], matches: false, anyKey: blob(KEY) }).fix).toContain(`--host-key '${KEY}'`);
  });

  it("another key: FAIL, refused, with both fingerprints", () => {
    const r = hostKeyCheck({ ...base, pinned: [fingerprint(blob(OTHER))], presentedPinnedType: blob(KEY), matches: false });
    expect(r.status).toBe("FAIL");
    expect(r.detail).toBe(
      `the host presents ssh-ed25519 ${fingerprint(blob(KEY))}, not the pinned key (${fingerprint(blob(OTHER))}): ovslb refuses to connect`,
    );
    expect(r.fix).toMatch(/^if the host's key changed on purpose/);
  });

  it("no key of the pinned type: FAIL naming what it offers", () => {
    const r = hostKeyCheck({ ...base, pinned: ["SHA256:x"], matches: false, anyKey: blob(KEY), error: "the host offers no key of those types" });
    expect(r.detail).toContain(`offers no key of the pinned type; it offers ssh-ed25519 ${fingerprint(blob(KEY))}`);
  });

  it("known_hosts names port 22 bare", () => {
    expect(knownHostsToken("h", 22)).toBe("h");
    expect(knownHostsToken("h", 23)).toBe("[h]:23");
  });
});

describe("reach and login", () => {
  it("reachable: the SSH identification, or why not with what to do", () => {
    expect(reachableCheck("gw1", "192.0.2.11:22", { banner: "SSH-2.0-OpenSSH_9.2p1" }).status).toBe("ok");
    expect(reachableCheck("gw1", "192.0.2.11:22", { banner: "HTTP/1.1 400" })).toMatchObject({ status: "FAIL", fix: "give the port sshd listens on" });
    expect(reachableCheck("gw1", "192.0.2.11:22", { error: "connect ECONNREFUSED 192.0.2.11:22" }).fix).toMatch(/^nothing listens there/);
    expect(reachableCheck("gw1", "192.0.2.11:22", { error: "no TCP answer within 10000 ms (timed out)" }).fix).toMatch(/^no answer/);
    expect(reachableCheck("gw1", "192.0.2.11:22", { error: "x", via: "ops@198.51.100.2:22" }).detail).toBe(
      "192.0.2.11:22 through jump host ops@198.51.100.2:22: x",
    );
  });

  it("login: each refusal in words with its fix", () => {
    expect(loginCheck("gw1", "ovslb")).toMatchObject({ status: "ok", detail: "logged in as ovslb" });
    expect(loginCheck("gw1", "ovslb", "gw1: connect failed: All configured authentication methods failed").fix).toContain("~ovslb/.ssh/authorized_keys");
    expect(loginCheck("gw1", "ovslb", "Cannot parse privateKey: Encrypted private OpenSSH key detected, but no passphrase given").detail).toContain(
      "encrypted",
    );
    expect(loginCheck("gw1", "ovslb", "Cannot parse privateKey: Unsupported key format").detail).toContain("cannot be used");
  });
});

describe("sockets", () => {
  const facts = (f: Partial<SocketFacts>): SocketFacts => ({ path: "/run/openvswitch/db.sock", exists: true, writable: true, dirSearchable: true, ...f });

  it("a socket the user may use: no problem", () => expect(socketProblem(facts({}))).toBeUndefined());

  it("each way it cannot: the directory missing, not enterable, the socket missing, not writable", () => {
    expect(socketProblem(facts({ dirExists: false, dirSearchable: false }))?.detail).toBe(
      "/run/openvswitch does not exist: no Open vSwitch runs with that run directory",
    );
    expect(socketProblem(facts({ dirSearchable: false, user: "ovslb" }))?.detail).toBe("ovslb cannot enter /run/openvswitch (no search permission)");
    expect(socketProblem(facts({ exists: false }))?.fix).toContain("ovsRundir");
    const w = socketProblem(facts({ writable: false, user: "ovslb", groups: "ovslb", mode: "root:root 750" }))!;
    expect(w.detail).toBe("ovslb (groups: ovslb) may not write /run/openvswitch/db.sock (root:root 750)");
    expect(w.fix).toContain("Least privilege");
  });

  it("the OVSDB channel refused by sshd while the socket is usable: sshd's configuration, never permissions", () => {
    const r = ovsdbChannelCheck("gw1", "/run/openvswitch/db.sock", {
      error:
        "gw1: cannot open /run/openvswitch/db.sock: (SSH) Channel open failure: open failed (the socket is missing, or the login user has no permission on it ...)",
      socket: facts({ user: "ovslb", mode: "root:ovslb 770" }),
      tcpForwarding: "refused",
    });
    expect(r.status).toBe("FAIL");
    expect(r.detail).toMatch(/^sshd refuses the stream-local channel to \/run\/openvswitch\/db.sock, which the login user may use \(root:ovslb 770\)/);
    expect(r.detail).toContain("DisableForwarding yes, or restrict / no-port-forwarding");
    expect(r.fix).toContain("`Match User ovslb` with `AllowStreamLocalForwarding local`, `AllowTcpForwarding local` and `DisableForwarding no`");
    // sshd reported the key's options, port-forwarding among them: not the key's line.
    expect(
      ovsdbChannelCheck("gw1", "/p", { error: "open failed", socket: facts({}), tcpForwarding: "refused", keyOptions: ["port-forwarding", "pty"] }).detail,
    ).toContain("DisableForwarding yes");
    const streamOnly = ovsdbChannelCheck("gw1", "/p", { error: "open failed", socket: facts({}), tcpForwarding: "works" });
    expect(streamOnly.detail).toContain("AllowStreamLocalForwarding no (or remote)");
  });

  it("the channel refused where sshd reported the key's options without port-forwarding: the authorized_keys line, with its fix", () => {
    for (const keyOptions of [[], ["agent-forwarding", "pty", "user-rc", "x11-forwarding"]]) {
      const r = ovsdbChannelCheck("gw1", "/run/openvswitch/db.sock", {
        error: "open failed",
        socket: facts({ user: "ovslb", mode: "root:ovslb 770" }),
        tcpForwarding: "refused",
        keyOptions,
      });
      expect(r.status).toBe("FAIL");
      expect(r.detail).toBe(
        `sshd refuses the stream-local channel to /run/openvswitch/db.sock, which the login user may use (root:ovslb 770): the key's line in authorized_keys forbids forwarding (restrict or no-port-forwarding; sshd says "key options:${keyOptions.map((o) => ` ${o}`).join("")}"), not the socket's permissions`,
      );
      expect(r.fix).toBe(
        "on the key's line in ~ovslb/.ssh/authorized_keys write restrict,port-forwarding instead of restrict, or drop no-port-forwarding (sshd(8), AUTHORIZED_KEYS FILE FORMAT; docs/hosts.md)",
      );
    }
  });

  it("the channel refused and the socket not writable: the permission, not sshd", () => {
    const r = ovsdbChannelCheck("gw1", "/run/openvswitch/db.sock", {
      error: "open failed",
      socket: facts({ writable: false, user: "ovslb" }),
      tcpForwarding: "works",
    });
    expect(r.detail).toMatch(/^cannot open \/run\/openvswitch\/db.sock: ovslb \(groups: \?\) may not write/);
    expect(r.detail).not.toContain("sshd");
  });
});

describe("OVS", () => {
  it("version: too old fails; a known defect of a feature in use fails; others are noted", () => {
    expect(versionCheck("h", "2.17.9", false)).toMatchObject({ status: "FAIL", detail: "Open vSwitch 2.17.9 is older than 3.1.0, the oldest ovslb supports" });
    const dp = versionCheck("h", "3.1.0", true);
    expect(dp.status).toBe("FAIL");
    expect(dp.fix).toBe("upgrade to a release with the fix (3.2.6, 3.3.5, 3.4.3, 3.5.1, 3.6.0), or use selectionMethod hash");
    const noted = versionCheck("h", "3.1.0", false);
    expect(noted.status).toBe("ok");
    expect(noted.detail).toContain("dp-hash-buckets (ovslb refuses dp_hash bucket changes here; selectionMethod hash is unaffected");
    expect(noted.detail).toContain("group-modify-race (reported, not refused");
    expect(versionCheck("h", "3.6.0", true).detail).toBe("Open vSwitch 3.6.0: none of the known defects (dp-hash-buckets, group-modify-race)");
    expect(versionCheck("h", "master", false).status).toBe("warn");
  });

  it("bridges: missing, no OpenFlow 1.5 (with the protocols to set), its socket not writable, fine", () => {
    expect(bridgeChecks("h", { name: "br-x", exists: false }, ["br-seg"])[0]).toMatchObject({
      status: "FAIL",
      detail: "no bridge br-x on this host (it has: br-seg)",
    });
    const old = bridgeChecks("h", {
      name: "br0",
      exists: true,
      protocols: ["OpenFlow13"],
      speaksOpenFlow15: false,
      socket: { path: "/r/br0.mgmt", exists: true, writable: true, dirSearchable: true },
    });
    expect(old.map((r) => [r.check, r.status])).toEqual([
      ["socket br0.mgmt", "ok"],
      ["bridge br0", "FAIL"],
    ]);
    expect(old[1].fix).toBe("ovs-vsctl set bridge br0 protocols=OpenFlow13,OpenFlow15");
    const denied = bridgeChecks("h", {
      name: "br0",
      exists: true,
      protocols: [],
      speaksOpenFlow15: false,
      socket: { path: "/r/br0.mgmt", exists: true, writable: false, dirSearchable: true },
    });
    expect(denied.map((r) => [r.check, r.status])).toEqual([
      ["socket br0.mgmt", "FAIL"],
      ["bridge br0", "skip"],
    ]);
    expect(bridgeChecks("h", { name: "br0", exists: true, protocols: [], speaksOpenFlow15: true }).every((r) => r.status === "ok")).toBe(true);
  });

  it("datapath types: what each rules out", () => {
    expect(datapathCheck("h", "br0", "netdev").detail).toContain("internal port");
    expect(datapathCheck("h", "br0", "").detail).toMatch(/^system \(kernel\): gre delivery needs the ip_gre module/);
    expect(datapathCheck("h", "br0", "dummy").status).toBe("warn");
  });
});

describe("underlay MTU", () => {
  it("at least the segment's MTU plus 42; below it fails with both fixes", () => {
    expect(mtuCheck("h", 1500, [{ tunnelAddress: "172.16.0.2", iface: "br-phy", mtu: 1542 }]).status).toBe("ok");
    const r = mtuCheck("h", 1500, [{ tunnelAddress: "172.16.0.2", iface: "eth1", mtu: 1500 }]);
    expect(r.status).toBe("FAIL");
    expect(r.detail).toMatch(
      /^eth1 \(172.16.0.2\) has MTU 1500, below 1542 = the segment's 1500 \+ 42 of GRE \(outer IPv4 20, GRE with key 8, inner Ethernet 14\)/,
    );
    expect(r.fix).toContain("ip link set eth1 mtu 1542");
    expect(r.fix).toContain("to 1458");
    expect(mtuCheck("h", 9000, [{ tunnelAddress: "172.16.0.2", iface: "eth1", mtu: 9000 }]).status).toBe("FAIL");
    expect(mtuCheck("h", 1500, [{ tunnelAddress: "172.16.0.9" }]).detail).toBe("no interface holds the tunnel address 172.16.0.9");
    expect(mtuCheck("h", 1500, []).status).toBe("skip");
  });

  it("finds the interface of an address in `ip -o -4 addr show`", () => {
    const ip = [
      "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever",
      "2: mgmt0@if29    inet 172.30.0.11/24 scope global mgmt0\\       valid_lft forever",
      "5: br-phy    inet 172.16.11.2/24 scope global br-phy\\       valid_lft forever",
    ].join("\n");
    expect(interfaceOf(ip, "172.16.11.2")).toBe("br-phy");
    expect(interfaceOf(ip, "172.30.0.11")).toBe("mgmt0");
    expect(interfaceOf(ip, "172.16.11.20")).toBeUndefined();
    // `ip -o addr show` lists IPv6 too; any spelling of the address finds it.
    const both = `${ip}\n5: br-phy    inet6 fd00:16:11::2/64 scope global nodad \\       valid_lft forever preferred_lft forever`;
    expect(interfaceOf(both, "FD00:16:11:0::2")).toBe("br-phy");
  });

  it("an apply of gre delivery warns of an underlay below 1542, naming the host, interface, address and fixes; not at 1542 or when the interface is unknown", () => {
    expect(underlayMtuWarnings("gateways[0] (gw1)", [{ tunnelAddress: "172.16.11.2", iface: "br-phy", mtu: 1500 }])).toEqual([
      "gateways[0] (gw1): the underlay interface br-phy (tunnel address 172.16.11.2) has MTU 1500, below 1542: gre delivery adds 42 bytes to each frame (outer IPv4 20, GRE with key 8, inner Ethernet 14), so a client's full-size 1500-byte packet is dropped without a word. Raise the underlay MTU to 1542 or more on every link of the path, or lower the clients' MTU (or MSS) to fit 1458 bytes",
    ]);
    expect(underlayMtuWarnings("gw1", [{ tunnelAddress: "172.16.11.2", iface: "br-phy", mtu: 1542 }])).toEqual([]);
    // An IPv6 underlay: the outer header is 40 bytes, so 62 in all.
    expect(underlayMtuWarnings("gw1", [{ tunnelAddress: "fd00:16:11::2", iface: "br-phy", mtu: 1542 }])[0]).toContain(
      "has MTU 1542, below 1562: gre delivery adds 62 bytes to each frame (outer IPv6 40, GRE with key 8, inner Ethernet 14)",
    );
    expect(underlayMtuWarnings("gw1", [{ tunnelAddress: "fd00:16:11::2", iface: "br-phy", mtu: 1600 }])).toEqual([]);
    expect(underlayMtuWarnings("gw1", [{ tunnelAddress: "172.16.11.2" }])).toEqual([]);
  });
});

describe("conntrack", () => {
  it("counts entries per zone as the dump arrives, across chunk boundaries", () => {
    const c = new ZoneCounter();
    const dump =
      "tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=80),reply=(src=10.0.0.2,dst=10.0.0.1,sport=80,dport=1),zone=5,protoinfo=(state=ESTABLISHED)\n" +
      "udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=53),reply=(src=10.0.0.2,dst=10.0.0.1,sport=53,dport=1)\n" +
      "tcp,orig=(src=10.0.0.3,dst=10.0.0.2,sport=1,dport=80),reply=(src=10.0.0.2,dst=10.0.0.3,sport=80,dport=1),zone=5\n";
    for (let i = 0; i < dump.length; i += 17) c.push(dump.slice(i, i + 17));
    expect([...c.end()]).toEqual([
      [5, 2],
      [0, 1],
    ]);
  });

  it("ok with the zones' use; warn at 90% of a zone's limit or of the table", () => {
    const zones = new Map([
      [5, 180],
      [0, 3],
    ]);
    expect(conntrackCheck("h", { zones, limits: new Map([[5, 1000]]) })).toMatchObject({
      status: "ok",
      detail: "183 entries in 2 zones (zone 5: 180 of 1000, zone 0: 3)",
    });
    const full = conntrackCheck("h", { zones, limits: new Map([[5, 200]]) });
    expect(full.status).toBe("warn");
    expect(full.detail).toContain("zone 5 at 90% of its limit or more");
    expect(conntrackCheck("h", { zones, limits: new Map(), maxConns: 200, nConns: 183 }).status).toBe("warn");
    expect(conntrackCheck("h", undefined, "ovs-appctl: cannot connect").status).toBe("warn");
  });
});
