"use strict";
/**
 * Preloaded (`--require`) into the test harness's program and plugin
 * processes: the modules named in OVSLB_DEFER_SDK_MODULES load at their
 * first use instead of at `require`. @pulumi/pulumi 3.248 requires
 * `typescript` and `@npmcli/arborist` when it loads, for its closure
 * serializer (runtime/closure/parseFunction.js, codePaths.js): half of a
 * plugin's CPU to its first answer (`npm run bench -- harness-plugin`),
 * though ovslb's programs and the plugin never serialize a closure. A
 * process that does use them gets the real module at that moment; a missing
 * module still fails at the `require`, as without this. test/support/defer-sdk-modules.ts writes the
 * variable; test/unit/defer-sdk-modules.test.ts shows both cases.
 *
 * OVSLB_DEFER_SDK_MODULES: JSON [{ file, functions? }]: each module's resolved
 * file, and for one the SDK imports with TypeScript's __importStar (which
 * copies every export at the require), the names of its exports, all
 * functions, which stand in until the module loads.
 */
const Module = require("node:module");

const deferred = new Map(JSON.parse(process.env.OVSLB_DEFER_SDK_MODULES || "[]").map((m) => [m.file, m.functions]));
// Only these requests are resolved a second time here: every other require goes straight through.
const CANDIDATE = /(?:^|\/)(?:typescript|typescript\.js|arborist)$/;
const load = Module._load;

Module._load = function (request, parent, isMain) {
  if (deferred.size === 0 || !CANDIDATE.test(request)) return load.apply(this, arguments);
  let file;
  try {
    file = Module._resolveFilename(request, parent, isMain);
  } catch {
    // Not found: the real require says so, with its own error.
    return load.apply(this, arguments);
  }
  if (!deferred.has(file) || Module._cache[file]) return load.apply(this, arguments);
  return deferredModule(() => load.call(this, request, parent, isMain), deferred.get(file));
};

/** The module's exports, loaded at the first look inside them. */
function deferredModule(loadReal, functions) {
  let real;
  const target = () => (real ??= loadReal());
  const standIns = new Map((functions ?? []).map((name) => [name, deferredFunction(() => target()[name])]));
  const listed = (name) => real === undefined && standIns.has(name);
  return new Proxy(
    {},
    {
      get(_t, name) {
        // TypeScript's import helpers ask first; neither module is an ES module.
        if (real === undefined && name === "__esModule") return undefined;
        return listed(name) ? standIns.get(name) : Reflect.get(target(), name);
      },
      has: (_t, name) => listed(name) || Reflect.has(target(), name),
      ownKeys: () => (real === undefined && functions !== undefined ? [...functions] : Reflect.ownKeys(target())),
      getOwnPropertyDescriptor(_t, name) {
        if (listed(name)) return { value: standIns.get(name), writable: true, enumerable: true, configurable: true };
        const d = Reflect.getOwnPropertyDescriptor(target(), name);
        return d && { ...d, configurable: true };
      },
    },
  );
}

/** A function export (a class, for arborist) that loads its module when called, constructed or looked into. */
function deferredFunction(real) {
  return new Proxy(function () {}, {
    apply: (_t, self, args) => Reflect.apply(real(), self, args),
    construct: (_t, args) => Reflect.construct(real(), args),
    get: (_t, name) => Reflect.get(real(), name),
    has: (_t, name) => Reflect.has(real(), name),
  });
}
