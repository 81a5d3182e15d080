/**
 * Started by bench/dsr-gre.ts in a backend's namespace, with arguments NAME
 * PORTS OWN CLIENT [OWN6 CLIENT6] (PORTS comma-separated). A tiny HTTP
 * server on each port, on IPv4 and (with OWN6) on IPv6: answers 200 with its
 * name and counts what it saw (requests, and those from a peer other than
 * the client of their family or to a local address other than OWN:PORTS or
 * OWN6:PORTS).
 * Prints {"listening":true} once every port listens; the line "report" on
 * stdin prints the counts and resets them; ends when stdin closes.
 */
import { createServer, type RequestListener } from "node:http";
import { createInterface } from "node:readline";

const [name, portList, own, client, own6, client6] = process.argv.slice(2);
const ports = portList.split(",");
const body = Buffer.from(name + "\n");
let c: { requests: number; badPeer: number; badLocal: number; samples: string[] };
const reset = () => {
  c = { requests: 0, badPeer: 0, badLocal: 0, samples: [] };
};
reset();

const onRequest: RequestListener = (req, res) => {
  c.requests++;
  const peer = req.socket.remoteAddress;
  const local = req.socket.localAddress + ":" + req.socket.localPort;
  const v6 = req.socket.remoteFamily === "IPv6";
  if (peer !== (v6 ? client6 : client)) {
    c.badPeer++;
    if (c.samples.length < 5) c.samples.push("peer " + peer);
  }
  if (req.socket.localAddress !== (v6 ? own6 : own) || !ports.includes(String(req.socket.localPort))) {
    c.badLocal++;
    if (c.samples.length < 5) c.samples.push("local " + local);
  }
  res.writeHead(200, { "content-type": "text/plain", "content-length": body.length });
  res.end(body);
};

const hosts = own6 ? ["0.0.0.0", "::"] : ["0.0.0.0"];
let pending = ports.length * hosts.length;
for (const port of ports) {
  for (const host of hosts) {
    const s = createServer(onRequest);
    s.keepAliveTimeout = 30000;
    s.on("error", (e: NodeJS.ErrnoException) => {
      console.log(JSON.stringify({ error: e.code || e.message }));
      process.exit(1);
    });
    // IPv6 only on "::": IPv4 keeps its own socket (its peers as plain IPv4 addresses).
    s.listen({ port: Number(port), host, ipv6Only: host === "::" }, () => {
      if (--pending === 0) console.log(JSON.stringify({ listening: true }));
    });
  }
}
const rl = createInterface({ input: process.stdin });
rl.on("line", (l) => {
  if (l.trim() === "report") {
    console.log(JSON.stringify(c));
    reset();
  }
});
rl.on("close", () => process.exit(0));
setTimeout(() => process.exit(0), 15 * 60 * 1000).unref();
