/**
 * The engine's RequirePulumiVersion check, for the harness: whether a CLI
 * version is in a range, in the syntax the engine takes
 * (github.com/blang/semver ParseRange: comparators >=, <=, >, <, =, ==, !,
 * != or none; AND-ed with spaces, OR-ed with `||`), and the engine's own
 * refusal text (pkg/resource/plugin/plugin.go, ValidatePulumiVersionRange).
 * Versions are MAJOR.MINOR.PATCH; pre-releases are refused as unsupported.
 */

type Version = [number, number, number];

function parse(v: string): Version {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(v.trim());
  if (!m) throw new Error(`version ${JSON.stringify(v)} is not MAJOR.MINOR.PATCH`);
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

const TESTS: Record<string, (c: number) => boolean> = {
  ">=": (c) => c >= 0,
  "<=": (c) => c <= 0,
  ">": (c) => c > 0,
  "<": (c) => c < 0,
  "=": (c) => c === 0,
  "==": (c) => c === 0,
  "": (c) => c === 0,
  "!": (c) => c !== 0,
  "!=": (c) => c !== 0,
};

/** Whether `version` is in `range`; throws on a range the engine would not parse (all of it, as the engine parses it first). */
export function inVersionRange(version: string, range: string): boolean {
  const v = parse(version);
  const alternatives = range.split("||").map((alternative) => {
    const parts = alternative.trim().split(/\s+/).filter(Boolean);
    if (parts.length === 0) throw new Error(`version range ${JSON.stringify(range)} has an empty alternative`);
    return parts.map((part) => {
      const m = /^(>=|<=|==|!=|>|<|=|!)?(.+)$/.exec(part)!;
      return { test: TESTS[m[1] ?? ""], bound: parse(m[2]) };
    });
  });
  return alternatives.some((all) => all.every(({ test, bound }) => test(compare(v, bound))));
}

/** The engine's error when the CLI is outside the range, or undefined when it is in it. */
export function versionRangeRefusal(version: string, range: string): string | undefined {
  return inVersionRange(version, range) ? undefined : `Pulumi CLI version ${version} does not satisfy the version range ${JSON.stringify(range)}`;
}
