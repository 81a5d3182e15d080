import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { DEMO_VIP, labInventory, labService } from "./lab-deferred-nat/program";
import { run } from "./local-engine";

/**
 * npm run demo -- [up|preview|refresh|destroy]: the lab-deferred-nat program
 * applied to the lab without the Pulumi CLI (see local-engine.ts), then ten
 * connections from the lab's client to the VIP.
 */
async function main(command = "up") {
  const inv = labInventory();
  await run(command, () => labService(inv), join(inv.labDir, "demo-state.json"));
  if (command !== "up") return;
  const probe = `const net=require("node:net");(async()=>{for(let i=0;i<10;i++){await new Promise((r)=>{const s=net.connect({host:"${DEMO_VIP}",port:80});s.setTimeout(3000,()=>{console.log("timeout");s.destroy();r()});s.once("data",(d)=>{console.log(String(d).trim());s.end();r()});s.once("error",(e)=>{console.log(e.code);r()})})}})()`;
  console.log(`\n10 connections from ${inv.client.address} to ${DEMO_VIP}:80 (backend, the client it saw, its own address):`);
  process.stdout.write(execFileSync("ip", ["netns", "exec", inv.client.namespace, process.execPath, "-e", probe], { encoding: "utf8" }));
}

main(process.argv[2]).catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
