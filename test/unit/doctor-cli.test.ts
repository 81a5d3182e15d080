import { describe, expect, it, vi } from "vitest";
import { fail, ok, type DoctorCheck } from "../../provider/doctor/checks";
import { doctorMain, main, parseDoctorArgs, type CliIo } from "../../provider/doctor/cli";
import { parseTarget, planFromConfig, readConfigJson, type DoctorPlan } from "../../provider/doctor/config";
import { renderJson, renderTable, scrub } from "../../provider/doctor/render";

/**
 * ovslb doctor's config reading, arguments, rendering and exit status
 * (provider/doctor/config.ts, cli.ts, render.ts), the hosts mocked: `run`
 * stands in for the I/O. What it reads is what `pulumi config --json
 * --show-secrets` prints.
 */

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAqMwlVB7c5MftfAcic5SDZ4W3AMK31WMyG35QH8iDpy";
const PRIVATE =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACBEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEEXAMPLEAAAA\n-----END OPENSSH PRIVATE KEY-----\n";
const PASSPHRASE = "correct horse battery staple";

/** A config as the CLI prints it: {key: {value, objectValue?, secret}}. */
const cli = (config: Record<string, unknown>, secret = ["ovslb:ssh"]) =>
  JSON.stringify(
    Object.fromEntries(
      Object.entries(config).map(([k, v]) => [
        k,
        typeof v === "string" ? { value: v, secret: secret.includes(k) } : { value: JSON.stringify(v), objectValue: v, secret: secret.includes(k) },
      ]),
    ),
  );

const stack = {
  "ovslb:ssh": { user: "ovslb", privateKey: PRIVATE, passphrase: PASSPHRASE, profiles: { "site-b": { user: "ops", privateKeyPath: "/keys/b" } } },
  "ovslb:hosts": {
    gw1: { connection: { host: "192.0.2.11", hostKey: KEY }, ovsRundir: "/run/ovs" },
    gw2: { connection: { host: "192.0.2.12", hostKey: KEY, sshProfile: "site-b" } },
    hv1: { connection: { host: "192.0.2.21" } },
  },
  "web:gateways": [
    { name: "gw1", mac: "02:00:0a:00:00:0b", tunnelAddress: "172.16.11.2", bridge: "br-gw" },
    { name: "gw2", mac: "02:00:0a:00:00:0c", tunnelAddress: "172.16.12.2" },
  ],
  "web:bridge": "br-seg",
  "web:service": { selectionMethod: "dp_hash" },
};

describe("reading the stack config", () => {
  it("takes what `pulumi config --json --show-secrets` prints: objects from objectValue, strings from value", () => {
    const { config, problems } = readConfigJson(cli({ ...stack, "web:name": "x" }));
    expect(problems).toEqual([]);
    expect(config["ovslb:hosts"]).toEqual(stack["ovslb:hosts"]);
    expect(config["web:name"]).toBe("x");
    // Without objectValue (older CLIs), the value's JSON text.
    expect(readConfigJson(JSON.stringify({ "ovslb:ssh": { value: '{"user":"u"}', secret: true } })).config["ovslb:ssh"]).toEqual({ user: "u" });
  });

  it("a secret without its value (no --show-secrets) is named, and a plain key -> value object is read as it is", () => {
    const r = readConfigJson(JSON.stringify({ "ovslb:ssh": { secret: true } }));
    expect(r.problems.map((p) => p.detail)).toEqual(["ovslb:ssh is a secret and the JSON holds no value for it"]);
    expect(r.problems[0].fix).toContain("--show-secrets");
    expect(readConfigJson(JSON.stringify({ "ovslb:hosts": { a: 1 } })).config).toEqual({ "ovslb:hosts": { a: 1 } });
    expect(readConfigJson("not json").problems[0].detail).toMatch(/^the stack config is not JSON/);
  });

  it("puts the stack's login (or the profile a host names) under each host, as the provider does", () => {
    const plan = planFromConfig(readConfigJson(cli(stack)).config);
    expect(plan.problems).toEqual([]);
    const [gw1, gw2, hv1] = plan.hosts;
    expect(gw1.connection).toMatchObject({ host: "192.0.2.11", user: "ovslb", privateKey: PRIVATE, passphrase: PASSPHRASE, hostKey: KEY });
    expect(gw2.connection).toMatchObject({ user: "ops", privateKeyPath: "/keys/b" });
    // No pin: the host-key check reports it, with the line to pin; the host is still checked.
    expect(hv1.connection.hostKey).toBeUndefined();
    expect(plan.secrets.sort()).toEqual([PASSPHRASE, PRIVATE].sort());
  });

  it("reads what the program's config names: tunnel addresses and bridges by host, bridges for all, dp_hash", () => {
    const plan = planFromConfig(readConfigJson(cli(stack)).config);
    expect(plan.hosts.map((h) => [h.name, h.tunnelAddresses, h.bridges])).toEqual([
      ["gw1", ["172.16.11.2"], ["br-gw"]],
      ["gw2", ["172.16.12.2"], []],
      ["hv1", [], []],
    ]);
    expect(plan.bridges).toEqual(["br-seg"]);
    expect(plan.dpHash).toBe(true);
    expect(plan.segmentMtu).toBe(1500);
  });

  it("refuses bad values naming the key, never the value", () => {
    const plan = planFromConfig({
      "ovslb:ssh": { user: "u", port: 0, privateKey: PRIVATE },
      "ovslb:hosts": {
        GW: { connection: { host: "x" } },
        gw3: { connection: { host: "not a host!" } },
        gw4: { connection: { host: "192.0.2.4", sshProfile: "nope" } },
      },
    });
    const details = plan.problems.map((p) => p.detail);
    expect(details).toContain("ovslb:ssh.port: must be SSH port (default 22)");
    expect(details.some((d) => d.startsWith("ovslb:hosts.GW: the name must be"))).toBe(true);
    expect(details.some((d) => d.startsWith("ovslb:hosts.gw3.connection.host: "))).toBe(true);
    expect(details).toContain('ovslb:hosts.gw4.connection.sshProfile: profile "nope" is not in ovslb:ssh.profiles');
    expect(JSON.stringify(plan.problems)).not.toContain("BEGIN OPENSSH");
    expect(planFromConfig({}).problems[0].detail).toBe("ovslb:hosts is not set: no host to check");
  });

  it("a host without a key to log in with is a config problem", () => {
    const plan = planFromConfig({ "ovslb:ssh": { user: "u" }, "ovslb:hosts": { h: { connection: { host: "192.0.2.1", hostKey: KEY } } } });
    expect(plan.hosts).toEqual([]);
    expect(plan.problems[0].detail).toBe("ovslb:hosts.h.connection.privateKey: give privateKey, privateKeyPath or agent: only key authentication is used");
  });

  it("--host: one host, by user@address[:port]", () => {
    expect(parseTarget("ovslb@192.0.2.11:2222")).toEqual({ user: "ovslb", host: "192.0.2.11", port: 2222 });
    expect(parseTarget("gw1.example.net")).toEqual({ host: "gw1.example.net" });
    expect(parseTarget("a@b@c")).toBeUndefined();
    const plan = planFromConfig(
      {},
      { host: { target: "ovslb@192.0.2.11:2222", hostKey: KEY, privateKeyPath: "/k", tunnelAddresses: ["172.16.0.2"], passphrase: PASSPHRASE } },
    );
    expect(plan.problems).toEqual([]);
    expect(plan.hosts[0]).toMatchObject({ name: "ovslb@192.0.2.11:2222", configKey: "--host", tunnelAddresses: ["172.16.0.2"] });
    expect(plan.hosts[0].connection).toMatchObject({ host: "192.0.2.11", port: 2222, user: "ovslb", hostKey: KEY, privateKeyPath: "/k" });
    expect(plan.secrets).toEqual([PASSPHRASE]);
    // With a config too: the stack's login under it.
    const under = planFromConfig({ "ovslb:ssh": { user: "ovslb", privateKey: PRIVATE } }, { host: { target: "192.0.2.11" } });
    expect(under.hosts[0].connection).toMatchObject({ user: "ovslb", privateKey: PRIVATE });
  });
});

describe("arguments", () => {
  it("parses the flags; refuses unknown ones and host flags without --host", () => {
    const a = parseDoctorArgs([
      "--json",
      "--bridge",
      "br0",
      "--bridge",
      "br1",
      "--segment-mtu",
      "9000",
      "--host",
      "u@h",
      "--key",
      "/k",
      "--tunnel-address",
      "10.0.0.1",
    ]);
    expect(a).toMatchObject({
      json: true,
      bridges: ["br0", "br1"],
      segmentMtu: 9000,
      host: { target: "u@h", privateKeyPath: "/k", tunnelAddresses: ["10.0.0.1"], agent: false },
    });
    expect(parseDoctorArgs(["--key", "/k"])).toEqual({ error: "--key goes with --host" });
    expect(parseDoctorArgs(["--segment-mtu", "big"])).toEqual({ error: "--segment-mtu must be a whole number from 68 to 65535" });
    expect(parseDoctorArgs(["--uses", "magic"])).toEqual({ error: '--uses: unknown feature "magic" (known: dp_hash)' });
    expect("error" in parseDoctorArgs(["--passphrase", "x"])).toBe(true);
  });
});

function io(stdin: string, checks: DoctorCheck[] | ((plan: DoctorPlan) => DoctorCheck[]), over: Partial<CliIo> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const run = vi.fn(async (plan: DoctorPlan) => (typeof checks === "function" ? checks(plan) : checks));
  const value: CliIo = {
    readStdin: async () => stdin,
    stdinIsTty: false,
    readFile: () => stdin,
    env: {},
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    run,
    ...over,
  };
  return { value, out, err, run };
}

describe("exit status and output", () => {
  it("0 with no failure (warnings and skips allowed), 1 with one, 2 for a usage error", async () => {
    const green = io(cli(stack), [ok("gw1", "login", "logged in as ovslb")]);
    expect(await doctorMain([], green.value)).toBe(0);
    expect(green.run).toHaveBeenCalledOnce();
    const red = io(cli(stack), [ok("gw1", "login", "x"), fail("gw1", "bridge br0", "no bridge br0", "create it")]);
    expect(await doctorMain([], red.value)).toBe(1);
    expect(red.out.join("")).toMatch(/gw1\s+bridge br0\s+FAIL\s+no bridge br0 {2}-- fix: create it\n/);
    const usage = io("", []);
    expect(await doctorMain(["--nope"], usage.value)).toBe(2);
    expect(usage.run).not.toHaveBeenCalled();
    // A terminal on stdin and nothing else: it says how to give the config instead of waiting.
    const tty = io("", [], { stdinIsTty: true });
    expect(await doctorMain([], tty.value)).toBe(2);
    expect(tty.err.join("")).toContain("pipe in `pulumi config --json --show-secrets`");
    expect(await main(["other"], io("", []).value)).toBe(2);
  });

  it("--json: ok, summary and the rows", async () => {
    const x = io(cli(stack), [ok("gw1", "login", "x"), fail("gw1", "conntrack", "d", "f")]);
    expect(await doctorMain(["--json"], x.value)).toBe(1);
    expect(JSON.parse(x.out.join(""))).toEqual({
      ok: false,
      summary: { ok: 1, FAIL: 1, warn: 0, skip: 0 },
      checks: [
        { host: "gw1", check: "login", status: "ok", detail: "x" },
        { host: "gw1", check: "conntrack", status: "FAIL", detail: "d", fix: "f" },
      ],
    });
  });

  it("never prints a secret: the key and passphrase of the config are scrubbed from whatever a check says", async () => {
    const leaky = (plan: DoctorPlan) => [
      fail("gw1", "login", `refused: ${PASSPHRASE} ${plan.hosts[0].connection.privateKey} ${PRIVATE.split("\n")[1]}`, `try ${PASSPHRASE}`),
    ];
    for (const json of [false, true]) {
      const x = io(cli(stack), leaky);
      await doctorMain(json ? ["--json"] : [], x.value);
      const printed = x.out.join("") + x.err.join("");
      expect(printed).toContain("[secret]");
      expect(printed).not.toContain(PASSPHRASE);
      expect(printed).not.toContain("BEGIN OPENSSH");
      for (const line of PRIVATE.split("\n").filter((l) => l.length > 16)) expect(printed).not.toContain(line);
    }
    // A --passphrase-env passphrase too.
    const x = io("", (plan) => [fail(plan.hosts[0].name, "login", `bad ${PASSPHRASE}`, "f")], { env: { PP: PASSPHRASE } });
    await doctorMain(["--host", "u@192.0.2.1", "--key", "/k", "--passphrase-env", "PP"], x.value);
    expect(x.out.join("")).toContain("bad [secret]");
    expect(x.out.join("")).not.toContain(PASSPHRASE);
  });

  it("scrub: any private key block, even one not in the config", () => {
    expect(scrub(`a ${PRIVATE.trim()} b`, [])).toBe("a [secret] b");
    expect(renderTable([ok("h", "c", "d")])).toBe(
      "HOST  CHECK  STATUS  DETAIL\nh     c      ok      d\n\n1 check: 1 ok, 0 FAIL, 0 warn, 0 skipped (no failure)\n",
    );
    expect(JSON.parse(renderJson([])).ok).toBe(true);
  });
});
