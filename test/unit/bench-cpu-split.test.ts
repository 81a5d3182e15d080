import { describe, expect, it } from "vitest";
import type { Profiler } from "node:inspector";
import { splitProfile } from "../../bench/cpu-split";

/** scale-planning's split of a profile: the provider's own CPU apart from SSH's, node's I/O and GC. */

const frame = (functionName: string, url = "") => ({ functionName, url, scriptId: "0", lineNumber: 0, columnNumber: 0 });

// root -> update (provider) -> updateScope (provider)
//                           -> exec (ssh2) -> onData (provider/transport) -> parseGroups (provider/openflow: the provider's)
//      -> onStreamRead (node) ; (idle) ; (garbage collector)
const nodes: Profiler.ProfileNode[] = [
  { id: 1, callFrame: frame("(root)"), children: [2, 5, 6, 7] },
  { id: 2, callFrame: frame("update", "file:///w/dist/provider/resources/deferred-nat-load-balancer/handler.js"), children: [3, 4] },
  { id: 3, callFrame: frame("updateScope", "file:///w/dist/provider/resources/deferred-nat-load-balancer/scope.js") },
  { id: 4, callFrame: frame("exec", "file:///w/node_modules/ssh2/lib/client.js"), children: [8] },
  { id: 5, callFrame: frame("onStreamRead", "node:internal/stream_base_commons") },
  { id: 6, callFrame: frame("(idle)") },
  { id: 7, callFrame: frame("(garbage collector)") },
  { id: 8, callFrame: frame("onData", "file:///w/dist/provider/transport/ovsdb-client.js"), children: [9] },
  { id: 9, callFrame: frame("parseGroups", "file:///w/dist/provider/openflow/parse.js") },
];

describe("splitProfile", () => {
  it("each sample's time (until the next sample) goes to the provider, SSH, I/O or GC by the frames on its stack; idle to none", () => {
    // Samples: updateScope, updateScope, exec, onData, onStreamRead, idle, gc, parseGroups, (last: no time after it).
    const samples = [3, 3, 4, 8, 5, 6, 7, 9, 3];
    const timeDeltas = [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000];
    const split = splitProfile({ nodes, samples, timeDeltas, startTime: 0, endTime: 36000 });
    expect(split).toEqual({ providerMs: 1 + 2 + 8, sshMs: 3 + 4, ioMs: 5, gcMs: 7, sampledMs: 1 + 2 + 3 + 4 + 5 + 7 + 8 });
  });
});
