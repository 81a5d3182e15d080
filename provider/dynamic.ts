import type * as pulumi from "@pulumi/pulumi";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";

/**
 * The provider object Pulumi serializes into state. It must stay thin: each
 * method only requires the installed ovslb at call time and forwards to
 * provider/handlers.ts, so refresh and destroy run the installed code and no
 * client, socket or class instance is captured. Its text is part of every
 * resource's state (docs/state-contract.md): every text ever written must
 * keep working, so `ovslb/dist/provider/handlers` and its
 * `handle(kind, method, args)` never move or change.
 *
 * Where the text runs: the dynamic-provider plugin evaluates it with
 * require-from-string and no file name, so its `require` resolves from the
 * plugin's working directory (the project root, where the program ran too)
 * and NODE_PATH, and nothing else. When ovslb is a dependency of a component
 * library rather than of the program, `ovslb` does not resolve by name from
 * there. So the text first requires ovslb by name (the installed package, as
 * every earlier text did), and only when that name does not resolve, the
 * ovslb the program itself loaded: recorded as a path relative to the project
 * root when the provider is serialized (the same convention the SDK uses for
 * the modules a closure captures), e.g. node_modules/lib/node_modules/ovslb,
 * or "" for ovslb's own checkout.
 */
export function dynamicProvider(kind: string): pulumi.dynamic.ResourceProvider {
  // One object per kind: the SDK caches a provider's serialized text by object (30-90 ms of a program's CPU per
  // serialization), so every resource of a kind shares one serialization. The text is the same either way.
  let provider = providers.get(kind);
  if (!provider) providers.set(kind, (provider = newDynamicProvider(kind)));
  return provider;
}

const providers = new Map<string, pulumi.dynamic.ResourceProvider>();

function newDynamicProvider(kind: string): pulumi.dynamic.ResourceProvider {
  const installed = installedRelativeToProject();
  const handlers = () => {
    try {
      return require("ovslb/dist/provider/handlers");
    } catch (e) {
      // Only when ovslb itself is not found by name; a failure inside it is its own.
      if (!String((e as Error).message).startsWith("Cannot find module 'ovslb/dist/provider/handlers'")) throw e;
      return require(require("path").resolve(installed, "dist", "provider", "handlers"));
    }
  };
  return {
    // The stack's config reaches the provider here, once per plugin process; only `ovslb:ssh` is taken.
    configure: async (req) => handlers().handle(kind, "configure", [req.config.get("ovslb:ssh")]),
    check: (olds, news) => handlers().handle(kind, "check", [olds, news]),
    diff: (id, olds, news) => handlers().handle(kind, "diff", [id, olds, news]),
    create: (inputs) => handlers().handle(kind, "create", [inputs]),
    read: (id, props) => handlers().handle(kind, "read", [id, props]),
    update: (id, olds, news) => handlers().handle(kind, "update", [id, olds, news]),
    delete: (id, props) => handlers().handle(kind, "delete", [id, props]),
  };
}

let packageRoot: string | undefined;

/** This ovslb's package directory (the one holding its package.json), relative to the working directory, with "/" separators. */
function installedRelativeToProject(): string {
  if (packageRoot === undefined) {
    // dist/provider/dynamic.js, or provider/dynamic.ts when run from source: look up, do not assume the depth.
    let dir: string | undefined = __dirname;
    while (dir !== undefined) {
      const manifest = join(dir, "package.json");
      if (existsSync(manifest) && JSON.parse(readFileSync(manifest, "utf8")).name === "ovslb") break;
      dir = dirname(dir) === dir ? undefined : dirname(dir);
    }
    // Not found (a bundler flattened the package): the layout it was built with. The name lookup comes first anyway.
    packageRoot = dir ?? join(__dirname, "..", "..");
  }
  return relative(process.cwd(), packageRoot).split(sep).join("/");
}
