import { failed, summary, type DoctorCheck } from "./checks";

/**
 * How doctor prints its rows: a table for people (one line per check, the
 * fix after a failure's detail), JSON for machines. Both go through
 * `scrub`: no secret of the config (a private key, a passphrase) and no
 * private key block is ever printed, whatever a message carried.
 */

const PRIVATE_KEY_BLOCK = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g;

/** text with every secret (and every private key block) replaced by [secret]. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text.replace(PRIVATE_KEY_BLOCK, "[secret]");
  // Longest first, so a secret that contains another is replaced whole.
  for (const s of [...secrets].filter((x) => x.length >= 4).sort((a, b) => b.length - a.length)) {
    out = out.split(s).join("[secret]");
    // A multi-line key also goes line by line: a message may quote one line of it.
    for (const line of s.split("\n").map((l) => l.trim())) if (line.length >= 16) out = out.split(line).join("[secret]");
  }
  return out;
}

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, " ");

/** The table: HOST CHECK STATUS DETAIL, and `fix: ...` after the detail of each FAIL and warn; a summary line last. */
export function renderTable(checks: readonly DoctorCheck[], secrets: readonly string[] = []): string {
  const widths = [
    Math.max(4, ...checks.map((c) => c.host.length)),
    Math.max(5, ...checks.map((c) => c.check.length)),
    Math.max(6, ...checks.map((c) => c.status.length)),
  ];
  const row = (cells: string[]) => cells.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c)).join("  ");
  const lines = [row(["HOST", "CHECK", "STATUS", "DETAIL"])];
  for (const c of checks) {
    const fix = c.fix && c.status !== "ok" && c.status !== "skip" ? `  -- fix: ${oneLine(c.fix)}` : "";
    lines.push(row([c.host, c.check, c.status, `${oneLine(c.detail)}${fix}`]).trimEnd());
  }
  const s = summary(checks);
  lines.push(
    "",
    `${checks.length} check${checks.length === 1 ? "" : "s"}: ${s.ok} ok, ${s.FAIL} FAIL, ${s.warn} warn, ${s.skip} skipped${failed(checks) ? "" : " (no failure)"}`,
  );
  return scrub(`${lines.join("\n")}\n`, secrets);
}

/** `--json`: {ok, summary, checks: [{host, check, status, detail, fix?}]}. */
export function renderJson(checks: readonly DoctorCheck[], secrets: readonly string[] = []): string {
  return scrub(`${JSON.stringify({ ok: !failed(checks), summary: summary(checks), checks }, null, 2)}\n`, secrets);
}
