import { describe, expect, it } from "vitest";
import { OpenFlowParseError } from "../../provider/openflow";
import type { CommandResult, CommandRunner } from "../../provider/transport/exec";
import { OpenFlowBridge, OpenFlowError } from "../../provider/transport/openflow-bridge";

/** A runner that answers every command with one result (the transport's parsing and error typing are pure). */
const answering = (result: CommandResult): CommandRunner => ({ hostName: "root@172.30.0.11:22", run: async () => result });
const bridge = (result: CommandResult) => new OpenFlowBridge(answering(result), "unix:/run/openvswitch/br-seg.mgmt");

describe("OpenFlowBridge errors carry the host and a typed outcome", () => {
  it("a dump line that does not parse names the host and bridge that printed it", async () => {
    // A bucket without its id: ovslb gives every bucket one, so such a group cannot be read back.
    const err = await bridge({ stdout: " group_id=1,type=select,bucket=weight:1,actions=drop\n", stderr: "", exitCode: 0 })
      .dumpGroups()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenFlowParseError);
    expect((err as Error).message).toMatch(/^root@172\.30\.0\.11:22: bridge unix:\/run\/openvswitch\/br-seg\.mgmt: cannot parse OVS dump line /);
  });

  it("OVS refusing a bundle is 'refused'; ovs-ofctl killed before it could tell (no exit status) is 'unknown'", async () => {
    const mods = [{ op: "delete-group" as const, groupId: 7 }];
    const refused = await bridge({ stdout: "", stderr: "OFPT_ERROR (OF1.5) (xid=0x2): OFPGMFC_UNKNOWN_GROUP\n", exitCode: 1 })
      .applyBundle(mods)
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenFlowError);
    expect((refused as OpenFlowError).kind).toBe("refused");
    const killed = await bridge({ stdout: "", stderr: "", exitCode: -1 })
      .applyBundle(mods)
      .catch((e: unknown) => e);
    expect((killed as OpenFlowError).kind).toBe("unknown");
  });
});
