import { Lab } from "./lab";
import { writeLabStackConfigs } from "./stack-config";
import { DEFAULT_LAB_DIR, LAB_STACK } from "./topology";

/** npm run lab -- up|down|status */
function main(argv: string[]): number {
  const lab = new Lab();
  switch (argv[0]) {
    case "up": {
      const wasUp = lab.status().up;
      const inventory = lab.up();
      console.log(wasUp ? `lab already up; inventory: ${lab.inventoryPath}` : `lab up in ${inventory.upSeconds.toFixed(2)} s; inventory: ${lab.inventoryPath}`);
      const sw = inventory.software;
      if (sw) console.log(`its hosts run Open vSwitch ${sw.ovs} and OVN ${sw.ovn}${sw.root ? ` from ${sw.root}` : ""}`);
      const written = writeLabStackConfigs(inventory);
      console.log(`the lab's stack config (stack "${LAB_STACK}"): ${written.length} Pulumi.${LAB_STACK}.yaml files, for the root project and the examples`);
      return 0;
    }
    case "down":
      lab.down();
      console.log("lab down");
      return 0;
    case "status": {
      const { up, problems } = lab.status();
      console.log(up ? `lab up; inventory: ${lab.inventoryPath}` : `lab not up: ${problems.join("; ")}`);
      return up ? 0 : 1;
    }
    default:
      console.error(
        `usage: npm run lab -- up|down|status   (OVSLB_LAB_DIR overrides ${DEFAULT_LAB_DIR}; OVSLB_LAB_INSTANCE=b is the second lab, c the lab of the newer versions)`,
      );
      return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
