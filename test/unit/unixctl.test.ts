import { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { UnixctlClient, UnixctlCommandError } from "../../provider/transport/unixctl";

/** A daemon's end of a unixctl connection: the requests it got, and a way to answer them (in any order, in any chunks). */
function daemon() {
  const requests: Array<{ id: number; method: string; params: string[] }> = [];
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, done) {
      // Requests arrive back to back with no delimiter, as from ovs-appctl.
      for (const text of chunk.toString().split(/(?<=\})(?=\{)/)) requests.push(JSON.parse(text) as (typeof requests)[number]);
      done();
    },
  });
  const reply = (id: number, result: string | null, error: string | null = null) => stream.push(JSON.stringify({ id, result, error }));
  return { stream, requests, reply };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("UnixctlClient", () => {
  it("matches replies to their requests by id, whatever their order and however the bytes are cut", async () => {
    const d = daemon();
    const client = new UnixctlClient(d.stream, { target: "gw1: ovs-vswitchd" });
    const calls = ["a", "b", "c"].map((flow) => client.call("ofproto/trace", ["br-seg", flow]));
    await tick();
    expect(d.requests.map((r) => [r.method, r.params])).toEqual([
      ["ofproto/trace", ["br-seg", "a"]],
      ["ofproto/trace", ["br-seg", "b"]],
      ["ofproto/trace", ["br-seg", "c"]],
    ]);
    const [a, b, c] = d.requests.map((r) => r.id);
    d.reply(c, "trace c");
    const both = JSON.stringify({ id: a, result: 'trace "a" {}', error: null }) + JSON.stringify({ id: b, result: "trace b", error: null });
    d.stream.push(both.slice(0, 17));
    d.stream.push(both.slice(17));
    expect(await Promise.all(calls)).toEqual(['trace "a" {}', "trace b", "trace c"]);
    client.close();
  });

  it("a refused command rejects with the daemon's text, naming the target; the connection goes on", async () => {
    const d = daemon();
    const client = new UnixctlClient(d.stream, { target: "gw1: ovs-vswitchd" });
    const refused = client.call("ofproto/trace", ["br-nope", "in_port=1"]);
    await tick();
    d.reply(d.requests[0].id, null, "no such bridge\n");
    await expect(refused).rejects.toBeInstanceOf(UnixctlCommandError);
    await expect(refused).rejects.toThrow("gw1: ovs-vswitchd: ofproto/trace: no such bridge");
    const next = client.call("version", []);
    await tick();
    d.reply(d.requests[1].id, "ovs-vswitchd (Open vSwitch) 3.1.0\n");
    expect(await next).toBe("ovs-vswitchd (Open vSwitch) 3.1.0\n");
    client.close();
  });

  it("keeps at most maxInFlight commands outstanding; the rest are sent as replies come", async () => {
    const d = daemon();
    const client = new UnixctlClient(d.stream, { maxInFlight: 2 });
    const calls = Array.from({ length: 5 }, (_, i) => client.call("echo", [String(i)]));
    await tick();
    expect(d.requests).toHaveLength(2);
    for (let answered = 0; answered < 5; answered++) {
      d.reply(d.requests[answered].id, d.requests[answered].params[0]);
      await tick();
      expect(d.requests.length).toBe(Math.min(5, answered + 3));
    }
    expect(await Promise.all(calls)).toEqual(["0", "1", "2", "3", "4"]);
    client.close();
  });

  it("a command with no reply in time ends the connection: it and every other command fail, later ones too", async () => {
    const d = daemon();
    const client = new UnixctlClient(d.stream, { target: "hv1: ovs-vswitchd", requestTimeoutMs: 50, maxInFlight: 1 });
    const first = client.call("ofproto/trace", ["br-seg", "a"]);
    const queued = client.call("ofproto/trace", ["br-seg", "b"]);
    await expect(first).rejects.toThrow("hv1: ovs-vswitchd: ofproto/trace had no reply within 50 ms");
    await expect(queued).rejects.toThrow("had no reply within 50 ms");
    await expect(client.call("version", [])).rejects.toThrow("had no reply within 50 ms");
  });

  it("the daemon closing the connection fails what is outstanding", async () => {
    const d = daemon();
    const client = new UnixctlClient(d.stream, { target: "gw2: ovs-vswitchd" });
    const pending = client.call("bfd/show", []);
    await tick();
    d.stream.push(null);
    await expect(pending).rejects.toThrow("gw2: ovs-vswitchd: connection closed by the daemon");
  });
});
