/**
 * DsrHypervisorFlows as pure data, by concept: ids (kind, tables, ids,
 * zones, owned ports), check (defaults and rules), dataplane (the flows it
 * wants and the conntrack flushes it owes), read-back (what a bridge holds,
 * as inputs).
 */
export * from "./ids";
export * from "./check";
export * from "./dataplane";
export * from "./read-back";
