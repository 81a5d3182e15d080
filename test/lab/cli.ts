import { Lab } from "./lab";
import { OvnChassis } from "./ovn-chassis";
import { writeLabStackConfigs } from "./stack-config";
import { DEFAULT_LAB_DIR, LAB_STACK } from "./topology";

/** npm run lab -- up|down|status, and ovn-up|ovn-down|ovn-status for the OVN chassis on top of it (test/lab/ovn-chassis.ts) */
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
    case "ovn-up": {
      const inventory = lab.status().up ? lab.up() : undefined;
      if (!inventory) {
        console.error("lab not up: run `npm run lab -- up` first");
        return 1;
      }
      const chassis = new OvnChassis(inventory);
      const ovn = chassis.up();
      console.log(
        ovn.upSeconds === 0
          ? `OVN chassis already up; inventory: ${chassis.inventoryPath}`
          : `OVN chassis up in ${ovn.upSeconds.toFixed(2)} s (${ovn.chassis.map((c) => c.name).join(", ")}; ${ovn.vms.length} VMs); inventory: ${chassis.inventoryPath}`,
      );
      return 0;
    }
    case "ovn-down":
      if (lab.status().up) new OvnChassis(lab.up()).down();
      console.log("OVN chassis down");
      return 0;
    case "ovn-status": {
      if (!lab.status().up) {
        console.log("lab not up");
        return 1;
      }
      const { up, problems } = new OvnChassis(lab.up()).status();
      console.log(up ? "OVN chassis up" : `OVN chassis not up: ${problems.join("; ")}`);
      return up ? 0 : 1;
    }
    default:
      console.error(
        `usage: npm run lab -- up|down|status|ovn-up|ovn-down|ovn-status   (OVSLB_LAB_DIR overrides ${DEFAULT_LAB_DIR}; OVSLB_LAB_INSTANCE=b is the second lab, c the lab of the newer versions)`,
      );
      return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
