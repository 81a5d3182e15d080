import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseDatabaseSchema } from "../../provider/ovsdb/encoding";
import { loadInventory } from "../support/lab";

/**
 * tools/ovsdb-modelgen.js and the unit tests read the .ovsschema files
 * committed in test/fixtures/ovsdb-schemas/, never /usr/share, so that the
 * unit tests run where Open vSwitch and OVN are not installed and a package
 * upgrade cannot change the generated model unnoticed. This is where an
 * upgrade is noticed: the copies must be byte-for-byte the installed files,
 * and the schemas the lab's ovsdb-servers serve must be theirs. The lab
 * creates its databases from the installed files (test/lab/lab.ts), so on a
 * machine that runs this project they are there; a missing one fails.
 */

const COMMITTED = join(__dirname, "..", "fixtures", "ovsdb-schemas");
const FILES: [string, string][] = [
  ["vswitch.ovsschema", "/usr/share/openvswitch/vswitch.ovsschema"],
  ["ovn-nb.ovsschema", "/usr/share/ovn/ovn-nb.ovsschema"],
  ["ovn-sb.ovsschema", "/usr/share/ovn/ovn-sb.ovsschema"],
];

const committed = (file: string) => readFileSync(join(COMMITTED, file), "utf8");

describe("the committed .ovsschema copies", () => {
  it.each(FILES)("%s is byte-for-byte %s", (file, installed) => {
    expect(existsSync(installed), `${installed} is not installed`).toBe(true);
    expect(committed(file)).toBe(readFileSync(installed, "utf8"));
  });

  it("are the schemas the lab's ovsdb-servers serve (name, version, cksum, column types)", () => {
    const inv = loadInventory();
    const served: [string, string][] = [];
    for (const host of Object.values(inv.hosts)) {
      if (host.ovsRundir) served.push([`unix:${join(host.ovsRundir, "db.sock")}`, "vswitch.ovsschema"]);
      if (host.ovn) served.push([`unix:${host.ovn.nbSock}`, "ovn-nb.ovsschema"], [`unix:${host.ovn.sbSock}`, "ovn-sb.ovsschema"]);
    }
    // Every database kind the lab runs is checked: at least one OVS host and OVN central.
    expect(new Set(served.map(([, file]) => file))).toEqual(new Set(FILES.map(([file]) => file)));
    for (const [remote, file] of served) {
      const wire = JSON.parse(execFileSync("ovsdb-client", ["get-schema", remote], { encoding: "utf8" }));
      const ours = JSON.parse(committed(file));
      // ovsdb-server normalizes the types it sends (defaults such as max 1 dropped): compare what they mean.
      expect([wire.name, wire.version, wire.cksum], remote).toEqual([ours.name, ours.version, ours.cksum]);
      expect(parseDatabaseSchema(wire), remote).toEqual(parseDatabaseSchema(ours));
    }
  });
});
