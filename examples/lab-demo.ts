import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Harness, HarnessError } from "../test/harness/engine";
import { summary } from "../test/harness/cli";
import type { LabInventory } from "../test/lab/topology";

/**
 * npm run demo -- [up|preview|refresh|destroy]: the quick start (the
 * repository's root Pulumi.yaml, stack "lab", whose Pulumi.lab.yaml `npm run
 * lab -- up` writes) run through the test harness (test/harness: the SDK's
 * own program runner and dynamic-provider plugin, as `pulumi up` runs them;
 * the lab has no Pulumi CLI), then, after up, ten connections from the lab's
 * client to the VIP. OVSLB_DEMO_DELIVERY=gre sets the stack's `delivery`.
 */
const root = resolve(__dirname, "..", "..");

async function main(command = "up") {
  if (!["up", "preview", "refresh", "destroy"].includes(command)) throw new Error(`npm run demo -- up|preview|refresh|destroy (not ${command})`);
  const labDir = process.env.OVSLB_LAB_DIR ?? "/run/ovslb-lab";
  const inv = JSON.parse(readFileSync(join(labDir, "inventory.json"), "utf8")) as LabInventory;
  if (!existsSync(join(root, "Pulumi.lab.yaml"))) throw new Error(`${root}/Pulumi.lab.yaml is missing: \`npm run lab -- up\` writes it`);
  const delivery = process.env.OVSLB_DEMO_DELIVERY;
  const stack = await Harness.open({
    cwd: root,
    stack: "lab",
    statePath: join(inv.labDir, "demo-harness-state.json"),
    ...(delivery ? { config: { delivery } } : {}),
  });
  console.log(`${command} of ${root}/Pulumi.yaml (stack lab) through the test harness; with the Pulumi CLI: pulumi ${command} --stack lab`);
  const result = await stack[command as "up"]();
  console.log(summary(result));
  if (command !== "up") return;
  const vip = stack.configValue("vip") ?? "10.0.0.200";
  const probe = `const net=require("node:net");(async()=>{for(let i=0;i<10;i++){await new Promise((r)=>{const s=net.connect({host:${JSON.stringify(vip)},port:80});s.setTimeout(3000,()=>{console.log("timeout");s.destroy();r()});s.once("data",(d)=>{console.log(String(d).trim());s.end();r()});s.once("error",(e)=>{console.log(e.code);r()})})}})()`;
  console.log(`\n10 connections from ${inv.client.address} to ${vip}:80 (backend, the client it saw, its own address):`);
  process.stdout.write(execFileSync("ip", ["netns", "exec", inv.client.namespace, process.execPath, "-e", probe], { encoding: "utf8" }));
}

main(process.argv[2]).catch((e) => {
  if (e instanceof HarnessError) console.log(summary(e.result));
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
