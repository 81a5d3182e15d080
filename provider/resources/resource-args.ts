import * as pulumi from "@pulumi/pulumi";
import { afterCliFloor } from "../cli-floor";
import { CREDENTIALS_OUTPUT, CREDENTIAL_KEYS } from "../secrets";

/**
 * A generated input type with pulumi.Input at every level, for resource
 * arguments. A scalar union stays whole (`Input<"tcp" | "udp">`, not
 * `Input<"tcp"> | Input<"udp">`, which an `Output<"tcp" | "udp">` is not).
 */
export type DeepInput<T> = [T] extends [string | number | boolean | undefined]
  ? pulumi.Input<T>
  : T extends readonly (infer E)[]
    ? pulumi.Input<readonly DeepInput<E>[]>
    : T extends object
      ? pulumi.Input<{ [K in keyof T]: DeepInput<T[K]> }>
      : T;

/** Wraps every privateKey and passphrase in the arguments as a Pulumi secret, wherever it sits. */
export function withSecretCredentials<T>(args: T): T {
  const walk = (v: unknown): unknown => {
    if (pulumi.Output.isInstance(v)) return v.apply(walk);
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== "object" || pulumi.Resource.isInstance(v)) return v;
    if (v instanceof Promise) return pulumi.output(v).apply(walk);
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, child]) => [
        k,
        (CREDENTIAL_KEYS as readonly string[]).includes(k) && child !== undefined ? pulumi.secret(child) : walk(child),
      ]),
    );
  };
  return walk(args) as T;
}

/** Options every ovslb resource gets: lifted SSH credentials are a secret output; registered once the CLI is known to be at the floor. */
export function resourceOptions(opts: pulumi.CustomResourceOptions | undefined): pulumi.CustomResourceOptions {
  return { ...opts, dependsOn: afterCliFloor(opts?.dependsOn), additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), CREDENTIALS_OUTPUT] };
}
