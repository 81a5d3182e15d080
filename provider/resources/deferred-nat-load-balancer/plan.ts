/**
 * DeferredNatLoadBalancer as pure data, by concept: ids (kind, limits, the
 * group and bucket ids it gives), check (defaults and rules), dataplane (the
 * groups and flows every gateway must hold, and the bundle that takes a
 * gateway there), read-back (what a gateway holds, as inputs).
 */
export * from "./ids";
export * from "./check";
export * from "./dataplane";
export * from "./read-back";
