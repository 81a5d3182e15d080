import { describe, it, expect } from "vitest";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import * as dynamic from "../../provider/dynamic";
import { RESOURCE_KINDS } from "../../provider/handlers";

/**
 * The serialized provider a program writes into each resource's
 * `__provider` is the build's template filled in (provider/dynamic.ts,
 * providerText), not a run of Pulumi's closure serializer. That text is the
 * state contract, so it must be exactly what the serializer writes of the
 * same provider object, for every kind and wherever ovslb is installed.
 */

const repo = resolve(__dirname, "..", "..");
const build = require(join(repo, "tools", "build-provider-text.js")) as {
  checkedTemplate: (d: unknown, kinds: readonly string[], paths: readonly string[]) => Promise<string>;
  serializedText: (d: unknown, kind: string, installed: string) => Promise<string>;
  CHECKED_PATHS: string[];
};
/** Install paths: the build's own, and more a string literal must escape or a template could mistake for syntax. */
const PATHS = [...build.CHECKED_PATHS, "../../elsewhere/node_modules/ovslb", "C:\\odd\\path", "line\u2028sep", "${x}`'", "@ovslb-kind@"];
const count = (text: string, part: string) => text.split(part).length - 1;

describe("the provider's text, filled from the build's template", () => {
  it("is the serializer's own text of that kind's provider object, for every kind and install path", async () => {
    const template = await build.serializedText(dynamic, dynamic.TEMPLATE_KIND, dynamic.TEMPLATE_INSTALLED);
    expect(RESOURCE_KINDS.length).toBe(6);
    for (const kind of RESOURCE_KINDS) {
      for (const installed of PATHS) {
        expect(dynamic.fillProviderText(template, kind, installed), `${kind} at ${JSON.stringify(installed)}`).toBe(
          await build.serializedText(dynamic, kind, installed),
        );
      }
    }
  });

  it("holds the kind in each of the seven methods' closures and the path once, in the closure that finds ovslb", async () => {
    const template = await build.serializedText(dynamic, dynamic.TEMPLATE_KIND, dynamic.TEMPLATE_INSTALLED);
    expect(count(template, `kind: ${JSON.stringify(dynamic.TEMPLATE_KIND)}`)).toBe(7);
    expect(count(template, `installed: ${JSON.stringify(dynamic.TEMPLATE_INSTALLED)}`)).toBe(1);
    expect(template).toMatch(/^exports\.handler = __f0;/);
    expect(template).toContain('require("ovslb/dist/provider/handlers")');
  });

  it("the build refuses a template whose filling is not the serializer's text", async () => {
    const wrongFill = {
      ...dynamic,
      fillProviderText: (text: string, kind: string) => text.split(JSON.stringify(dynamic.TEMPLATE_KIND)).join(JSON.stringify(kind)),
    };
    await expect(build.checkedTemplate(wrongFill, ["OvsBridge"], ["node_modules/ovslb"])).rejects.toThrow(
      /the filled template is not the serializer's text for OvsBridge at "node_modules\/ovslb"/,
    );
    await expect(build.checkedTemplate(dynamic, ["OvsBridge"], build.CHECKED_PATHS)).resolves.toContain("exports.handler");
  });

  it("a template is used only if it was made from this providerObject's source: another build's, or none, leaves the text to the serializer", () => {
    const dir = mkdtempSync(join(tmpdir(), "ovslb-provider-text-"));
    try {
      const file = join(dir, "provider-text.json");
      expect(dynamic.providerTextTemplate(file)).toBeUndefined();
      writeFileSync(file, JSON.stringify({ source: dynamic.providerObjectDigest(), text: "exports.handler = __f0;" }));
      expect(dynamic.providerTextTemplate(file)).toBe("exports.handler = __f0;");
      writeFileSync(file, JSON.stringify({ source: "0".repeat(64), text: "exports.handler = __f0;" }));
      expect(dynamic.providerTextTemplate(file)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const built = join(repo, "dist", "provider", "provider-text.json");
  it.skipIf(!existsSync(built))(
    "the built provider serves the build's text without the serializer, and it is the serializer's text of the built object",
    async () => {
      const distDynamic = require(join(repo, "dist", "provider", "dynamic.js")) as typeof dynamic;
      expect(distDynamic.PROVIDER_TEXT_TEMPLATE).toBe(built);
      const here = relative(process.cwd(), repo).split("\\").join("/");
      for (const kind of RESOURCE_KINDS) {
        const text = distDynamic.providerText(kind);
        // A string, not the serializer's promise: the template was used.
        expect(typeof text, kind).toBe("string");
        expect(text, kind).toBe(await build.serializedText(distDynamic, kind, here));
      }
    },
  );
});
