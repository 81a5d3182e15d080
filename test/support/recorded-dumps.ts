import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ObservedBridge } from "../../provider/engine/plan";
import { parseFlows, parseGroups } from "../../provider/openflow";

/**
 * Dumps recorded from a real OVS (test/fixtures/dumps/record.js): what the
 * provider left on a lab bridge, verbatim, with the inputs and outputs that
 * produced it. Planner unit tests plan against these, never against states
 * built by the code under test.
 */
export interface RecordedDump {
  bridge: string;
  /** The dump-flows filter used (`table=0`, `cookie=C/-1`), or null for every flow. */
  flowFilter: string | null;
  ports: Record<string, number>;
  flows: string;
  groups: string;
  inputs: Record<string, any>;
  outputs: Record<string, any>;
}

export function recordedDump(name: string): RecordedDump {
  return JSON.parse(readFileSync(join(__dirname, "..", "fixtures", "dumps", `${name}.json`), "utf8"));
}

/** The recorded bridge as the engine observes it, parsed by the provider's own parsers. */
export function observedFrom(dump: RecordedDump): ObservedBridge {
  return { ports: new Map(Object.entries(dump.ports)), flows: parseFlows(dump.flows), groups: parseGroups(dump.groups) };
}

/** A recorded bridge with its text changed by hand, as an operator would (e.g. a flow line removed). */
export function editedDump(dump: RecordedDump, edit: (text: { flows: string; groups: string }) => { flows: string; groups: string }): RecordedDump {
  return { ...dump, ...edit({ flows: dump.flows, groups: dump.groups }) };
}
