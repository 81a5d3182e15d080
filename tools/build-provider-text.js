// Writes dist/provider/provider-text.json after tsc: the text Pulumi's
// closure serializer makes of ovslb's dynamic provider object, with
// placeholders for the resource kind and ovslb's path, which a program fills
// in (provider/dynamic.ts, providerText) instead of running the serializer in
// every process. Written only if the filled text is the serializer's own for
// every kind and path tried here.
"use strict";
const { writeFileSync } = require("node:fs");
const { join } = require("node:path");

/** The serializer's text of providerObject(kind, installed), from the dynamic.js module given. */
async function serializedText(dynamic, kind, installed) {
  const { serializeFunction } = require("@pulumi/pulumi").runtime;
  const provider = dynamic.providerObject(kind, installed);
  return (await serializeFunction(() => provider, { allowSecrets: true })).text;
}

/** The template: the serializer's text with the placeholders as kind and path, checked against direct serializations. */
async function checkedTemplate(dynamic, kinds, paths) {
  const template = await serializedText(dynamic, dynamic.TEMPLATE_KIND, dynamic.TEMPLATE_INSTALLED);
  for (const placeholder of [dynamic.TEMPLATE_KIND, dynamic.TEMPLATE_INSTALLED]) {
    if (!template.includes(JSON.stringify(placeholder))) throw new Error(`the serialized provider does not hold ${placeholder}`);
  }
  for (const kind of kinds) {
    for (const installed of paths) {
      if (dynamic.fillProviderText(template, kind, installed) !== (await serializedText(dynamic, kind, installed))) {
        throw new Error(`the filled template is not the serializer's text for ${kind} at ${JSON.stringify(installed)}`);
      }
    }
  }
  return template;
}

/** Paths that test the filling: the checkout's own, a nested install, and one with characters a string literal escapes. */
const CHECKED_PATHS = ["", "node_modules/lib/node_modules/ovslb", 'node_modules/"q"\\b/ünï cödé/ovslb'];

if (require.main === module) {
  const dynamic = require(join(__dirname, "..", "dist", "provider", "dynamic.js"));
  checkedTemplate(dynamic, ["OvsBridge", "DeferredNatLoadBalancer"], CHECKED_PATHS).then(
    (text) => writeFileSync(dynamic.PROVIDER_TEXT_TEMPLATE, `${JSON.stringify({ source: dynamic.providerObjectDigest(), text })}\n`),
    (e) => {
      console.error(`tools/build-provider-text.js: ${e.message}`);
      process.exit(1);
    },
  );
}

module.exports = { checkedTemplate, serializedText, CHECKED_PATHS };
