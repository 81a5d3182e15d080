import { beforeAll } from "vitest";
import { loadInventory } from "./support/lab";
import { closeStaleBackendSockets } from "./support/stale-sockets";

// Before each file of a lab lane: no backend socket left over from a connection an earlier file broke (see
// closeStaleBackendSockets). Global setup has brought the lane's lab up.
beforeAll(() => {
  closeStaleBackendSockets(loadInventory());
});
