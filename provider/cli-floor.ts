import * as pulumi from "@pulumi/pulumi";
import type { CheckFailure } from "./model/validate";

/**
 * The oldest Pulumi CLI ovslb runs under. 3.139.0 is the first whose engine
 * gives a dynamic provider the whole stack config, namespaces kept
 * (pulumi/pulumi#17673, `GetPackageConfig` in pkg/resource/deploy/target.go)
 * and the first whose Node.js SDK hands it to the provider's `configure`
 * (pulumi/pulumi#17697); CHANGELOG.md, 3.139.0 (2024-11-14). ovslb takes
 * `ovslb:ssh` there: under an older CLI the provider never sees it.
 */
export const PULUMI_CLI_FLOOR = "3.139.0";
export const PULUMI_CLI_RANGE = `>=${PULUMI_CLI_FLOOR}`;

const DYNAMIC_PROVIDER_SCRIPT = /[\\/]cmd[\\/]dynamic-provider(?:[\\/]index\.js)?$/;

/**
 * In the provider's process: refused unless the CLI is at the floor. The
 * engine of 3.139.0 and later starts a dynamic provider with PULUMI_PROJECT
 * (#17673) and PULUMI_NODEJS_PROJECT (#17697) set, together with the stack
 * config; an older one sets neither and passes none. Reported as a failure
 * of `ovslb:ssh` by every check (that is the config the provider cannot see),
 * so every resource is refused before any host is reached. This is the
 * floor's real guard: the CLIs below it cannot answer requirePulumiVersion.
 */
export function cliFloorFailures(env: NodeJS.ProcessEnv = process.env, script: string | undefined = process.argv[1]): CheckFailure[] {
  // Only in the process a CLI starts (pulumi-resource-pulumi-nodejs runs node on the SDK's cmd/dynamic-provider): not in-process callers.
  if (!DYNAMIC_PROVIDER_SCRIPT.test(script ?? "")) return [];
  if (env.PULUMI_PROJECT || env.PULUMI_NODEJS_PROJECT) return [];
  return [
    {
      property: "ovslb:ssh",
      reason: `cannot reach the provider: ovslb needs the Pulumi CLI ${PULUMI_CLI_RANGE}, the first that passes the stack's config to dynamic providers (this CLI started the provider without PULUMI_PROJECT, as CLIs before ${PULUMI_CLI_FLOOR} do)`,
    },
  ];
}

/** The SDK's message when the CLI lacks the RequirePulumiVersion RPC (runtime/settings.js); the engine has it since 3.217.0. */
const NO_RPC = /does not support the `RequirePulumiVersion` RPC/;

/**
 * What an answer of `requirePulumiVersion(PULUMI_CLI_RANGE)` means for ovslb:
 * resolved, or a CLI older than 3.217.0 that cannot say its version (such a
 * CLI may well be 3.139 or later, so it is not refused): undefined; the
 * engine's refusal: an error naming the floor and why.
 */
export function cliFloorError(answer: unknown): Error | undefined {
  if (answer === undefined) return undefined;
  const message = answer instanceof Error ? answer.message : JSON.stringify(answer);
  if (NO_RPC.test(message)) return undefined;
  return new Error(
    `ovslb needs the Pulumi CLI ${PULUMI_CLI_RANGE}, the first that passes the stack's config (ovslb:ssh) to dynamic providers: ${message.trim()}`,
  );
}

type RequireVersion = (range: string) => Promise<void>;

let verdict: Promise<void> | undefined;

/**
 * Asks the engine, once per program, whether its CLI is at least the floor,
 * through the SDK's own `requirePulumiVersion` (@pulumi/pulumi 3.217.0 and
 * later; an older SDK has no way to ask). Rejects naming the floor when the
 * engine refuses.
 */
export function requirePulumiCli(): Promise<void> {
  if (!verdict) {
    const ask = (pulumi as unknown as { requirePulumiVersion?: RequireVersion }).requirePulumiVersion;
    verdict = ask
      ? ask(PULUMI_CLI_RANGE).then(
          () => undefined,
          (e: unknown) => {
            const error = cliFloorError(e ?? new Error("refused"));
            if (error) throw error;
          },
        )
      : Promise.resolve();
  }
  return verdict;
}

/** A resource's dependsOn that waits for the CLI's verdict first: no resource reaches the engine under a CLI below the floor. */
export function afterCliFloor(dependsOn: pulumi.CustomResourceOptions["dependsOn"]): pulumi.CustomResourceOptions["dependsOn"] {
  // The SDK gathers dependsOn through promises, outputs and arrays alike (runtime/dependsOn.js); its type names fewer shapes.
  return requirePulumiCli().then(() => dependsOn ?? []) as Promise<pulumi.Input<pulumi.Resource>[]>;
}
