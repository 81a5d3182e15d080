import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(__dirname, "..", "..");

/**
 * A Pulumi project in a temp directory, laid out as a user's: a copy of
 * `fixture` (Pulumi.yaml, package.json, the program), node_modules holding
 * this checkout's @pulumi/pulumi and ovslb (links; `npm run build` first:
 * ovslb's main is dist/), and `files` written beside them (e.g. a
 * Pulumi.<stack>.yaml). Remove it with removeTempProject.
 */
export function tempProject(fixture: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "ovslb-harness-"));
  cpSync(fixture, dir, { recursive: true });
  mkdirSync(join(dir, "node_modules", "@pulumi"), { recursive: true });
  symlinkSync(join(repo, "node_modules", "@pulumi", "pulumi"), join(dir, "node_modules", "@pulumi", "pulumi"));
  symlinkSync(repo, join(dir, "node_modules", "ovslb"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

export function removeTempProject(dir: string | undefined): void {
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** A Pulumi.<stack>.yaml whose config values are given as objects (written as JSON, which is YAML). */
export function stackConfigYaml(config: Record<string, unknown>): string {
  return `config:\n${Object.entries(config)
    .map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)
    .join("\n")}\n`;
}
