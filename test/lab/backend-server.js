// A backend VM's servers on one port: over TCP, it greets each connection with
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
server.listen(Number(port), "0.0.0.0");
const udp = dgram.createSocket("udp4");
udp.on("message", (msg, peer) => udp.send(`${name} ${peer.address}:${peer.port} ${msg}`, peer.port, peer.address));
udp.bind(Number(port), "0.0.0.0");
process.on("SIGTERM", () => process.exit(0));
