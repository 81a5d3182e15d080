import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../lab/stack-config";

/**
 * What makes a program or plugin process of the harness load the SDK's
 * closure-serializer modules (`typescript`, `@npmcli/arborist`) at their
 * first use rather than at start: the preload test/support/defer-sdk-modules.cjs
 * and the variable naming the modules, as the SDK at `sdk` resolves them.
 * About 0.5 s of CPU less for each process that never serializes a closure;
 * a benchmark of what `pulumi` itself costs passes `deferSdkModules: false`.
 */
export interface DeferredSdkModules {
  execArgv: string[];
  env: Record<string, string>;
}

const bySdk = new Map<string, DeferredSdkModules>();
const NONE: DeferredSdkModules = { execArgv: [], env: {} };

/** What defers the modules of the SDK at `sdk`; with `defer` false, nothing (the process loads them as under `pulumi`). */
export function deferSdkModules(sdk: string, defer = true): DeferredSdkModules {
  if (!defer) return NONE;
  let found = bySdk.get(sdk);
  if (!found) {
    const modules: { file: string; functions?: string[] }[] = [];
    // pulumi/typescript-shim.js: the project's own typescript, else the SDK's vendored one.
    const typescript = resolveFrom(sdk, "typescript") ?? join(sdk, "vendor", "typescript@3.8.3", "typescript.js");
    if (existsSync(typescript)) modules.push({ file: typescript });
    // Required by runtime/closure/codePaths.js up to 3.248 (through __importStar: its exports listed, all functions).
    const codePaths = join(sdk, "runtime", "closure", "codePaths.js");
    const requiresArborist = existsSync(codePaths) && readFileSync(codePaths, "utf8").includes('require("@npmcli/arborist")');
    const arborist = requiresArborist ? resolveFrom(sdk, "@npmcli/arborist") : undefined;
    if (arborist) {
      const exports = require(arborist) as Record<string, unknown>;
      const names = Object.keys(exports);
      if (names.every((n) => typeof exports[n] === "function")) modules.push({ file: arborist, functions: names });
    }
    found = {
      execArgv: [`--require=${join(repoRoot(), "test", "support", "defer-sdk-modules.cjs")}`],
      env: { OVSLB_DEFER_SDK_MODULES: JSON.stringify(modules) },
    };
    bySdk.set(sdk, found);
  }
  return found;
}

function resolveFrom(dir: string, id: string): string | undefined {
  try {
    return require.resolve(id, { paths: [dir] });
  } catch {
    return undefined;
  }
}
