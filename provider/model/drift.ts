import type { DriftFinding } from "./outputs.generated";

/**
 * Drift as data: producers record findings (schema/common.json, driftFinding),
 * and the `drift` output's sentences, which users' programs and pipelines
 * read, are rendered from them here and nowhere else. Decisions read the
 * findings' fields, never the sentences. Pure.
 */
export type { DriftFinding };
export type DriftKind = DriftFinding["kind"];

/** What a gateway's finding says after its object ("bucket 7 (10.0.0.1:80#0) missing"). */
const SAYS: Readonly<Partial<Record<DriftKind, string>>> = {
  "flow-changed": "missing or changed",
  "group-missing": "missing",
  "bucket-missing": "missing",
  "bucket-changed": "changed",
  "bucket-stray": "is not declared",
  "slot-flows-changed": "missing or changed",
  "tunnel-port": "missing or changed",
  "bfd-port": "missing, changed, or not dropping data",
};

/** The sentence of one finding, as the `drift` output has always said it. */
export function renderFinding(f: DriftFinding): string {
  const detail = f.detail ?? "";
  switch (f.kind) {
    // The northbound's sentences name the row, not a host.
    case "northbound-row":
      return `${f.object} ${detail}`;
    case "northbound-column":
      return `${f.object}: ${detail}`;
    case "not-applied":
      return `${f.host}: not changed: ${detail}`;
    case "may-be-applied":
      return `${f.host}: may or may not have been changed: ${detail}`;
    case "failed-after-apply":
      return `${f.host}: changed every host (${f.object}), then failed: ${detail}`;
    case "gateway-removal-failed":
      return `${f.host}: changed every listed gateway; removing it from ${f.object} failed: ${detail}`;
    default: {
      const says = f.kind === "selection-changed" ? `is ${detail}` : SAYS[f.kind];
      return `${f.host}: ${f.vip === undefined ? "" : `VIP ${f.vip}: `}${f.object} ${says}`;
    }
  }
}

/** The two outputs a state records for its findings: the data, and the sentences rendered from it. */
export const driftOutputs = (findings: readonly DriftFinding[]): { drift: string[]; driftFindings: DriftFinding[] } => ({
  drift: findings.map(renderFinding),
  driftFindings: [...findings],
});

/**
 * Kinds that concern only their VIP's group and flow: repairing one needs
 * only that VIP read. A tunnel or BFD port is the gateway's (its BFD drop
 * flows serve every VIP), though reported under each VIP it cuts.
 */
const ONE_VIPS: ReadonlySet<DriftKind> = new Set<DriftKind>([
  "flow-changed",
  "group-missing",
  "selection-changed",
  "bucket-missing",
  "bucket-changed",
  "bucket-stray",
  "slot-flows-changed",
]);

/** The VIP a finding is confined to, or undefined when repairing it needs everything read. */
export const confinedVip = (f: DriftFinding): string | undefined => (f.vip !== undefined && ONE_VIPS.has(f.kind) ? f.vip : undefined);

/**
 * The findings a state records. State written before findings were has
 * only `drift` sentences: they are not parsed, so non-empty drift without
 * findings yields undefined, which callers take as "not known to be one
 * VIP's" (an update then reads everything, which is always safe).
 */
export function recordedFindings(state: { drift?: readonly string[]; driftFindings?: readonly DriftFinding[] }): readonly DriftFinding[] | undefined {
  if (state.driftFindings) return state.driftFindings;
  return (state.drift ?? []).length === 0 ? [] : undefined;
}
