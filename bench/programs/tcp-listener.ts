/**
 * Started by bench/liveness.ts in a host's namespace, with arguments PORT
 * ADDRESS: a TCP listener that accepts each connection and closes it at once.
 * Prints "listening" once bound ("error CODE" and exits 1 if it cannot) and
 * ends when stdin closes.
 */
import { createServer } from "node:net";

const [port, address] = process.argv.slice(2);
const s = createServer((c) => c.destroy());
s.on("error", (e: NodeJS.ErrnoException) => {
  console.log("error " + e.code);
  process.exit(1);
});
s.listen(Number(port), address, () => console.log("listening"));
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
setTimeout(() => process.exit(0), 1800000).unref();
