import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The README's quick start is a real program: the one `npm run demo` and the
 * examples' integration test apply to the lab (examples/lab-deferred-nat,
 * also the root Pulumi.yaml's), as a user's project imports it. It once
 * showed a program of its own that nothing ran.
 */

const root = join(__dirname, "..", "..");
const readme = readFileSync(join(root, "README.md"), "utf8");
const section = readme.slice(readme.indexOf("## Quick start"), readme.indexOf("\n## ", readme.indexOf("## Quick start") + 1));
const blocks = (lang: string) => [...section.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);

describe("the README's quick start", () => {
  it("shows examples/lab-deferred-nat/index.ts as a project of its own imports it", () => {
    const program = readFileSync(join(root, "examples", "lab-deferred-nat", "index.ts"), "utf8");
    const asUsers = program.replace(`"../../index"; // in your project: from "ovslb"`, `"ovslb";`);
    expect(asUsers).not.toBe(program);
    expect(blocks("ts")).toEqual([asUsers]);
  });

  it("configures the hosts in ovslb:hosts, the login in ovslb:ssh (its key a secret), and every key the program requires", () => {
    const [sh] = blocks("sh");
    expect(sh).toMatch(/'ovslb:hosts\.gw1\.connection\.host'/);
    expect(sh).toMatch(/'ovslb:hosts\.gw1\.connection\.hostKey'/);
    expect(sh).toMatch(/--secret --path 'ovslb:ssh\.privateKey'/);
    const program = readFileSync(join(root, "examples", "lab-deferred-nat", "index.ts"), "utf8");
    const required = [...program.matchAll(/requireObject<[^>]+>\("(\w+)"\)/g)].map((m) => m[1]);
    expect(required.length).toBeGreaterThan(0);
    const [yaml] = blocks("yaml");
    for (const key of required) expect(yaml).toContain(`web:${key}:`);
  });
});
