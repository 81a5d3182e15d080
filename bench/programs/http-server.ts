/**
 * Started by bench/dsr-gre.ts in a backend's namespace, with arguments NAME
 * PORTS OWN CLIENT (PORTS comma-separated). A tiny HTTP server on each port:
 * answers 200 with its name and counts what it saw (requests, and those from
 * a peer other than CLIENT or to a local address other than OWN:PORTS).
 * Prints {"listening":true} once every port listens; the line "report" on
 * stdin prints the counts and resets them; ends when stdin closes.
 */
import { createServer, type RequestListener } from "node:http";
import { createInterface } from "node:readline";

const [name, portList, own, client] = process.argv.slice(2);
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
  if (peer !== client) {
    c.badPeer++;
    if (c.samples.length < 5) c.samples.push("peer " + peer);
  }
  if (req.socket.localAddress !== own || !ports.includes(String(req.socket.localPort))) {
    c.badLocal++;
    if (c.samples.length < 5) c.samples.push("local " + local);
  }
  res.writeHead(200, { "content-type": "text/plain", "content-length": body.length });
  res.end(body);
};

let pending = ports.length;
for (const port of ports) {
  const s = createServer(onRequest);
  s.keepAliveTimeout = 30000;
  s.on("error", (e: NodeJS.ErrnoException) => {
    console.log(JSON.stringify({ error: e.code || e.message }));
    process.exit(1);
  });
  s.listen(Number(port), "0.0.0.0", () => {
    if (--pending === 0) console.log(JSON.stringify({ listening: true }));
  });
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
