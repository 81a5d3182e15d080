import { Harness, HarnessError, type Result, type Step } from "./engine";
import { UNKNOWN } from "./state";

/**
 * node dist/test/harness/cli.js up|preview|refresh|destroy [--cwd DIR]
 *   [--stack NAME] [--state FILE] [--refresh] [--expect-no-changes] [--diff]
 *
 * The test suite's engine (test/harness/engine.ts) as a command. A test tool:
 * with the Pulumi CLI, run `pulumi up` and friends instead. Secret config
 * comes from OVSLB_HARNESS_SECRET_CONFIG (JSON), the state's secrets are
 * encrypted with OVSLB_HARNESS_PASSPHRASE.
 */

const USAGE = "usage: cli.js up|preview|refresh|destroy [--cwd DIR] [--stack NAME] [--state FILE] [--refresh] [--expect-no-changes] [--diff]";

const SYMBOL: Record<Step["op"], string> = { create: "+ ", update: "~ ", replace: "+-", delete: "- ", same: "  ", refresh: "~ ", read: "> " };

export function summary(r: Result, opts: { diff?: boolean } = {}): string {
  const lines: string[] = [];
  for (const s of r.steps) {
    if (s.op === "same") continue;
    let detail = "";
    if (s.op === "update") detail = ` [diff: ${s.keys.map((k) => `~${k}`).join(", ")}]`;
    if (s.op === "replace")
      detail = ` [diff: ${s.keys.map((k) => `~${k}`).join(", ")}; replace: ${s.replaces!.join(", ")}${s.deleteBeforeReplace ? "; delete first" : ""}]`;
    lines.push(`${SYMBOL[s.op]} ${s.type} ${s.urn.split("::").slice(3).join("::")} ${s.op === "refresh" ? "drift" : s.op}${detail}`);
    for (const p of s.changedPaths ?? []) lines.push(`      ~ ${p}`);
    if (opts.diff && s.diff)
      lines.push(
        ...s.diff
          .trimEnd()
          .split("\n")
          .map((l) => `    ${l}`),
      );
  }
  const counts = new Map<string, number>();
  for (const s of r.steps) counts.set(s.op, (counts.get(s.op) ?? 0) + 1);
  const verb = r.kind === "preview" ? "to " : "";
  const parts = [...counts].filter(([op]) => op !== "same").map(([op, n]) => `${n} ${verb}${op}`);
  lines.push(
    `Resources: ${parts.length ? parts.join(", ") : "no changes"}${counts.get("same") ? `, ${counts.get("same")} unchanged` : ""} (${(r.durationMs / 1000).toFixed(1)} s)`,
  );
  const outs = Object.entries(r.outputs);
  if (outs.length && r.kind !== "destroy") {
    lines.push("Outputs:");
    for (const [k, v] of outs) lines.push(`    ${k}: ${JSON.stringify(v, (_k, x) => (x === UNKNOWN ? "[unknown]" : x))}`);
  }
  return lines.join("\n");
}

function diagnostics(r: Result): string {
  const out: string[] = [];
  if (r.stdout.trim()) out.push(r.stdout.trimEnd());
  for (const d of r.diagnostics) if (d.severity !== "info") out.push(`${d.severity}: ${d.urn ? `${d.urn}: ` : ""}${d.message.trim()}`);
  return out.join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!["up", "preview", "refresh", "destroy"].includes(command ?? "")) {
    console.error(USAGE);
    return 2;
  }
  let cwd = process.cwd();
  let stack: string | undefined;
  let statePath: string | undefined;
  let refresh = false;
  let expectNoChanges = false;
  let showDiff = false;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    const value = () => {
      const v = rest[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    if (a === "--cwd") cwd = value();
    else if (a === "--stack") stack = value();
    else if (a === "--state") statePath = value();
    else if (a === "--refresh") refresh = true;
    else if (a === "--expect-no-changes") expectNoChanges = true;
    else if (a === "--diff") showDiff = true;
    else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  const h = await Harness.open({ cwd, stack, statePath });
  const verb = { up: "Updating", preview: "Previewing update", refresh: "Refreshing", destroy: "Destroying" }[command as Result["kind"]];
  console.log(`${verb} (${h.project.name}/${h.stack}; a test harness: with the Pulumi CLI, run \`pulumi ${command}\`)`);
  try {
    const r = await h[command as "up"]({ refresh, expectNoChanges });
    const d = diagnostics(r);
    if (d) console.log(d);
    console.log(summary(r, { diff: showDiff }));
    return 0;
  } catch (e) {
    if (e instanceof HarnessError) {
      const d = diagnostics(e.result);
      if (d) console.log(d);
      console.log(summary(e.result, { diff: showDiff }));
      console.error(e.message);
      return 1;
    }
    throw e;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e) => {
      console.error(e instanceof Error ? e.message : e);
      process.exitCode = 1;
    },
  );
}
