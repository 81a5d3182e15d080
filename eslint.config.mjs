// ESLint for the whole repository (`npm run lint`, with Prettier's check; CI
// fails on any warning). TypeScript is linted with type information from
// tsconfig.test.json, the one tsconfig that includes every .ts file here (the
// library, the examples, the tests, the lab, the harness, the benchmarks) and
// vitest.config.mts. Formatting is Prettier's alone: eslint-config-prettier,
// last, turns off every rule that would argue with it.
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["dist/", "node_modules/", "bench/results/", ".lab/", ".ovslb-harness/"],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },

  // --- TypeScript: type-aware ---------------------------------------------
  {
    files: ["**/*.ts", "**/*.mts"],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        project: ["./tsconfig.test.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled rejection
      // kills the provider process) and its ordering; `void` says it is meant.
      "@typescript-eslint/no-floating-promises": "error",
      // An async callback where a void one is expected (an event listener, a
      // forEach) runs unawaited and its rejection goes nowhere.
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // `_name` says a parameter or binding is unused on purpose (a handler's
      // signature, a destructured field left out of a rest object).
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          args: "after-used",
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrors: "all",
          caughtErrorsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
      // Type-only imports vanish from the emitted CommonJS: no require() of a
      // module for its types alone (no load order, no cycle at run time).
      "@typescript-eslint/consistent-type-imports": ["error", { prefer: "type-imports", fixStyle: "inline-type-imports" }],
      eqeqeq: ["error", "always"],
      // `interface X extends Generated {}` is how a resource class takes the
      // output properties generated from its schema; any other empty
      // interface is still reported.
      "@typescript-eslint/no-empty-object-type": ["error", { allowInterfaces: "with-single-extends" }],
      // Off: an `async` function with no `await` is how this code implements
      // a Promise-returning interface (the provider's methods, a
      // CommandRunner's run): a throw in it becomes a rejection. Dropping
      // `async` to satisfy the rule would make the same throw synchronous.
      "@typescript-eslint/require-await": "off",
    },
  },

  // A resource class merges the interface of its outputs generated from the
  // schema's "x-outputs" (provider/model/resource-outputs.generated.ts): the
  // SDK sets those properties from the provider's outputs, so the class never
  // initializes them, which is the case the rule is there to catch.
  {
    files: ["provider/resources/*/resource.ts"],
    rules: { "@typescript-eslint/no-unsafe-declaration-merging": "off" },
  },

  // provider/dynamic.ts builds the provider object Pulumi serializes into
  // every stack's state as JavaScript text. Its functions require ovslb's
  // handlers by name when the plugin runs them (the installed ovslb, not the
  // one that wrote the state), which only require() can do, and the module
  // they get is untyped there. Its emitted text is part of the state
  // contract: no edit for a lint rule may change it.
  {
    files: ["provider/dynamic.ts"],
    rules: {
      "@typescript-eslint/no-require-imports": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
    },
  },

  // The tests, the harness, the lab and the benchmarks drive the Pulumi SDK
  // through its untyped internals (the gRPC messages of provider_pb and
  // resource_pb, the closure serializer), read Pulumi state files and
  // `--format=json` output of ovs-vsctl/ovn-sbctl, and load modules from
  // paths known only at run time (the SDK of a scratch install, the dist/
  // just built). Every such value is checked by the assertion that reads it;
  // giving each JSON shape a type only to satisfy no-unsafe-* would add code
  // that checks nothing. The library itself (provider/, components/,
  // index.ts) and the examples keep these rules.
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-require-imports": "off",
      // The fault tests and benchmarks wrap a method in place (SshSession's
      // run, OvsdbClient's run) and call the saved original with
      // `.call(this, ...)`: the unbound reference is the point.
      "@typescript-eslint/unbound-method": "off",
      // Tests index what the provider returns (Record<string, unknown>) as Record<string, any>: the rule
      // counts that assertion as no change (the two are assignable both ways), yet tsc needs it to index.
      "@typescript-eslint/no-unnecessary-type-assertion": "off",
    },
  },

  // A child process's "exit" can come before its stdout and stderr are read
  // to the end (Node's child_process docs), so output collected by then may
  // be short: a benchmark once parsed no `ip route get` answers that way.
  // Wait for "close", which comes after the streams end. `process`'s own
  // "exit" is a different event and stays allowed.
  {
    files: ["**/*.ts", "**/*.mts", "**/*.js", "**/*.cjs", "**/*.mjs"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "CallExpression[callee.property.name=/^(on|once|addListener|prependListener)$/][callee.object.name!='process'] > Literal.arguments:first-child[value='exit']",
          message: 'A child\'s "exit" can come before its output is read: listen for "close".',
        },
      ],
    },
  },

  // --- Generated TypeScript ------------------------------------------------
  // provider/model/*.generated.ts (json-schema-to-typescript, from schema/)
  // and provider/ovsdb/models.generated.ts (tools/ovsdb-modelgen.js) start
  // with their generator's `/* eslint-disable */`, so they are not linted;
  // they are only told apart here so that directive is not reported as
  // unused. They were checked clean with --no-inline-config.
  {
    files: ["**/*.generated.ts"],
    linterOptions: { reportUnusedDisableDirectives: "off" },
  },

  // --- Plain JavaScript: the generators, the dump recorder, the harness's
  // Pulumi programs. CommonJS for Node, not in any tsconfig (no checkJs), so
  // without type information.
  {
    files: ["**/*.js", "**/*.cjs"],
    extends: [js.configs.recommended, tseslint.configs.disableTypeChecked],
    languageOptions: {
      sourceType: "commonjs",
      globals: { ...globals.node },
    },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always"],
    },
  },
  {
    files: ["**/*.mjs"],
    extends: [js.configs.recommended, tseslint.configs.disableTypeChecked],
    languageOptions: { sourceType: "module", globals: { ...globals.node } },
  },

  prettier,
);
