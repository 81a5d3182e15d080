import { Lab } from "./lab/lab";

/** Brings the lab up once for the whole run (idempotent: a healthy lab is reused). */
export default function setup() {
  const lab = new Lab();
  const inv = lab.up();
  console.log(`lab ready (${lab.inventoryPath}, built in ${inv.upSeconds.toFixed(2)} s)`);
}
