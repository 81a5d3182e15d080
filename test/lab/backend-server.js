// A backend VM's servers on one port, IPv4 and IPv6: over TCP, it greets each connection with
// its own name and the peer it sees, then answers every line with
// "<name> <line>"; over UDP, it answers each datagram with
// "<name> <peer> <datagram>". Plain JS so it runs without a build, inside the
// VM's namespace.
"use strict";
const dgram = require("node:dgram");
const net = require("node:net");
const [name, port] = process.argv.slice(2);
const server = net.createServer((socket) => {
  socket.setNoDelay(true);
  socket.write(`${name} ${socket.remoteAddress}:${socket.remotePort} ${socket.localAddress}:${socket.localPort}\n`);
  let buffered = "";
  socket.on("data", (chunk) => {
    buffered += chunk.toString("utf8");
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      socket.write(`${name} ${buffered.slice(0, nl)}\n`);
      buffered = buffered.slice(nl + 1);
    }
  });
  socket.on("error", () => socket.destroy());
});
// Both families, each on its own socket (a dual-stack socket would show IPv4 peers as ::ffff:a.b.c.d).
server.listen(Number(port), "0.0.0.0");
const server6 = net.createServer(server.listeners("connection")[0]);
server6.listen({ port: Number(port), host: "::", ipv6Only: true });
for (const type of ["udp4", "udp6"]) {
  const udp = dgram.createSocket({ type, ipv6Only: type === "udp6" });
  udp.on("message", (msg, peer) => udp.send(`${name} ${peer.address}:${peer.port} ${msg}`, peer.port, peer.address));
  udp.bind(Number(port), type === "udp4" ? "0.0.0.0" : "::");
}
process.on("SIGTERM", () => process.exit(0));
