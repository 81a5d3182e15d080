import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * docs/hosts.md shows the very files test/integration/hosts.test.ts runs
 * (docs/hosts/): each whole, unchanged, in a code block of its own, under
 * the path its first line says it is installed at.
 */

const root = join(__dirname, "..", "..");
const page = readFileSync(join(root, "docs", "hosts.md"), "utf8");
const blocks = [...page.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1]);
const files = readdirSync(join(root, "docs", "hosts")).sort();

describe("docs/hosts.md", () => {
  it("has the drop-ins and the sshd block as files", () => {
    expect(files).toEqual(["ovs-vswitchd.conf", "ovsdb-server.conf", "sshd-ovslb.conf"]);
  });

  it.each(files)("shows docs/hosts/%s verbatim, as a block of its own, with the path to install it at", (file) => {
    const text = readFileSync(join(root, "docs", "hosts", file), "utf8");
    expect(blocks).toContain(text);
    const path = /^# (\/etc\/\S+) \(docs\/hosts\.md\)$/m.exec(text.split("\n")[0])?.[1];
    expect(path, "the file's first line names where it goes").toBeDefined();
    expect(page).toContain(`\`${path}\``);
  });
});
