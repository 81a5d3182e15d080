import type * as pulumi from "@pulumi/pulumi";
import { createHash } from "node:crypto";
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
  // One object per kind, so a kind is serialized once per program when the SDK's serializer runs (providerText).
  let provider = providers.get(kind);
  if (!provider) providers.set(kind, (provider = providerObject(kind, installedRelativeToProject())));
  return provider;
}

const providers = new Map<string, pulumi.dynamic.ResourceProvider>();

/**
 * The provider object of `kind`, finding ovslb by name or else at `installed`.
 * Its closures are what the serializer writes: the names `kind`, `installed`
 * and `handlers`, and every function's text, are part of the serialized text.
 */
export function providerObject(kind: string, installed: string): pulumi.dynamic.ResourceProvider {
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

/**
 * The serialized provider a resource of `kind` carries in `__provider`: the
 * text Pulumi's closure serializer makes of dynamicProvider(kind), written
 * once by the build (tools/build-provider-text.js) with placeholders for the
 * kind and ovslb's path and filled in here, so a program does not run the
 * serializer, which reads each closure through a V8 inspector session (about
 * 0.3 s of CPU in a program's first resource). The build checks that the
 * filled text is the serializer's own. Run from source (no build beside this
 * module, or one made from other code) the serializer writes it, as
 * pulumi.dynamic.Resource does.
 */
export function providerText(kind: string): Promise<string> | string {
  template ??= providerTextTemplate(PROVIDER_TEXT_TEMPLATE) ?? null;
  if (template !== null) return fillProviderText(template, kind, installedRelativeToProject());
  let text = serialized.get(kind);
  if (!text) {
    const { serializeFunction } = (require("@pulumi/pulumi") as typeof pulumi).runtime;
    const provider = dynamicProvider(kind);
    serialized.set(kind, (text = serializeFunction(() => provider, { allowSecrets: true }).then((sf) => sf.text)));
  }
  return text;
}

const serialized = new Map<string, Promise<string>>();

/** Where the build writes the template, and the placeholders it holds for the kind and ovslb's path. */
export const PROVIDER_TEXT_TEMPLATE = join(__dirname, "provider-text.json");
export const TEMPLATE_KIND = "@ovslb-kind@";
export const TEMPLATE_INSTALLED = "@ovslb-installed@";

let template: string | null | undefined;

/** What the build writes: the template, and the digest of the providerObject source it was made from. */
export interface ProviderTextTemplate {
  source: string;
  text: string;
}

/** The digest of providerObject's source: the closures the serializer reads, so a template made from other code is never used. */
export function providerObjectDigest(): string {
  return createHash("sha256").update(providerObject.toString()).digest("hex");
}

/** The template in `file`, if there is one and it was made from this providerObject; else undefined (the serializer then runs). */
export function providerTextTemplate(file: string): string | undefined {
  if (!existsSync(file)) return undefined;
  const written = JSON.parse(readFileSync(file, "utf8")) as ProviderTextTemplate;
  return written.source === providerObjectDigest() ? written.text : undefined;
}

/** The template with the kind and ovslb's path in place of the placeholders, each written as the serializer writes a captured string. */
export function fillProviderText(text: string, kind: string, installed: string): string {
  return text.split(JSON.stringify(TEMPLATE_KIND)).join(JSON.stringify(kind)).split(JSON.stringify(TEMPLATE_INSTALLED)).join(JSON.stringify(installed));
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
