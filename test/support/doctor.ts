import { spawnSync } from "node:child_process";
import { join } from "node:path";
import type { DoctorCheck } from "../../provider/doctor/checks";
import { repoRoot, type StackConfig } from "../lab/stack-config";

/** `ovslb doctor` as a user runs it: the package's bin. */
export const DOCTOR_BIN = join(repoRoot(), "bin", "ovslb.js");

/** A config value as `pulumi config --json --show-secrets` prints it. */
export function cliJson(config: StackConfig, secret: string[] = ["ovslb:ssh"]): string {
  return JSON.stringify(
    Object.fromEntries(
      Object.entries(config).map(([k, v]) => [
        k,
        typeof v === "string" ? { value: v, secret: secret.includes(k) } : { value: JSON.stringify(v), objectValue: v, secret: secret.includes(k) },
      ]),
    ),
  );
}

export interface Doctor {
  status: number | null;
  stdout: string;
  stderr: string;
  checks: DoctorCheck[];
}

/** Runs the bin with the config on stdin (and --json, whose rows it returns), as `pulumi config ... | npx ovslb doctor` does. */
export function doctor(stdin: string | undefined, args: string[] = []): Doctor {
  const r = spawnSync(process.execPath, [DOCTOR_BIN, "doctor", "--json", ...args], { input: stdin ?? "", encoding: "utf8", timeout: 90_000 });
  let checks: DoctorCheck[] = [];
  try {
    checks = (JSON.parse(r.stdout) as { checks: DoctorCheck[] }).checks;
  } catch {
    /* the test asserting on it says what came */
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, checks };
}

export const row = (d: Doctor, host: string, check: string) => d.checks.find((c) => c.host === host && c.check === check);
