/**
 * An engine of the test suite: a real Pulumi program runs as `pulumi up`
 * runs it, short of the CLI (which cannot be installed here). A TEST TOOL:
 * users run `pulumi up`.
 *
 * Usage (tests):
 *
 *   import { Harness } from "../harness/engine";
 *   const stack = await Harness.open({
 *     cwd: projectDir,               // holds Pulumi.yaml (name, main, runtime) and Pulumi.<stack>.yaml
 *     stack: "dev",                  // default "dev"
 *     statePath: "/tmp/x/state.json", // default <cwd>/.ovslb-harness/<stack>.json
 *     config: { "lab:bridge": "br-x" },          // more stack config (keys without ":" get the project's namespace)
 *     secretConfig: { "ovslb:ssh": { ... } },    // secret config (objects are JSON-encoded, as the CLI does)
 *   });
 *   const p = await stack.preview();   // p.steps: [{ urn, type, op: "create"|"update"|"replace"|"delete"|"same", keys, replaces }]
 *   const u = await stack.up();        // u.resources: [{ urn, type, name, parent, dependencies, id, inputs, outputs, secretPaths }]
 *   const r = await stack.refresh();   // r.steps: op "refresh" with changedPaths (output paths that differ), or "delete" when gone
 *   await stack.preview({ refresh: true, expectNoChanges: true }); // throws HarnessError when anything would change
 *   await stack.destroy();
 *   // every result: { kind, steps, resources, outputs (the stack's, plain), diagnostics, changes, stdout, stderr, durationMs }
 *   // a failed run throws HarnessError (its .result holds the steps so far and the diagnostics)
 *   // observer: { started(pid), stopping(pid), call(method, urn, sentMs, answeredMs, ok) }: each run's plugin and its calls
 *
 * What it does, as the Pulumi engine does it:
 * - runs the program with the project's own @pulumi/pulumi program runner
 *   (`node <sdk>/cmd/run --monitor --engine --organization --project
 *   --root-directory --stack --pwd [--dry-run] --parallel <entry>`, pwd and
 *   entry from Pulumi.yaml's `main` as the CLI computes them), config in
 *   PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS;
 * - serves the ResourceMonitor and Engine gRPC services (the SDK's own stubs,
 *   grpc-js and protobuf instances) and answers SupportsFeature truthfully:
 *   only "secrets" (no resource references, output values, transforms, hooks,
 *   alias specs, deletedWith, parameterization), so the SDK sends what this
 *   engine handles;
 * - sends every `pulumi-nodejs:dynamic...` resource to the real
 *   dynamic-provider plugin (started in the program's directory as the CLI
 *   starts pulumi-resource-pulumi-nodejs, configured with the whole stack config):
 *   check, then diff against the recorded outputs, then create, update,
 *   replace (create-before-delete, or delete-before-replace when asked) or
 *   nothing; preview calls only check and diff and answers unknowns;
 * - secrets: the plugin does not accept them, so they are stripped on the way
 *   in and re-marked on the way out where an input of the same name was
 *   secret, and on additionalSecretOutputs;
 * - deletes what the program no longer declares after it exits, dependents
 *   first; records a partial failure (ErrorResourceInitFailed) with its id.
 * What it does not do is listed in test/harness/README.md.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { EXIT_WITH_PARENT, startProviderPlugin, type PluginCall, type PluginError, type PluginObserver } from "../support/provider-plugin";
import { repoRoot } from "../lab/stack-config";
import { deferSdkModules } from "../support/defer-sdk-modules";
import { propertyDiffText } from "./diff-text";
import { inVersionRange, versionRangeRefusal } from "./version-range";
import { StateStore, UNKNOWN, containsSecret, isSecret, plain, secret, secretPaths, type Props, type State, type StateResource } from "./state";

export type Op = "create" | "update" | "replace" | "delete" | "same" | "refresh" | "read";

export interface Step {
  urn: string;
  type: string;
  op: Op;
  /** A custom resource (sent to a provider) rather than a component or the stack. */
  custom: boolean;
  /** Top-level inputs that differ from the recorded ones (update, replace). */
  keys: string[];
  /** What the provider's diff named as needing replacement. */
  replaces?: string[];
  /** update, replace: the property diff of the checked inputs, as `pulumi preview --diff` prints it (changed lines only; diff-text.ts). */
  diff?: string;
  /** refresh: the output paths whose value the host read back differently. */
  changedPaths?: string[];
  deleteBeforeReplace?: boolean;
  /** What the program registered (create, update, replace, same): its parent, dependencies and, plain, the inputs as checked. */
  parent?: string;
  dependencies?: string[];
  inputs?: Props;
}

export interface ResourceView {
  urn: string;
  type: string;
  name: string;
  custom: boolean;
  id?: string;
  parent?: string;
  dependencies: string[];
  propertyDependencies?: Record<string, string[]>;
  /** Plain values (secrets unwrapped); where the secrets were is in secretPaths. */
  inputs: Props;
  outputs: Props;
  secretPaths: { inputs: string[]; outputs: string[] };
  initErrors?: string[];
}

export interface Diagnostic {
  severity: "debug" | "info" | "warning" | "error";
  message: string;
  urn?: string;
}

export interface Result {
  kind: "preview" | "up" | "refresh" | "destroy";
  steps: Step[];
  resources: ResourceView[];
  /** The stack's outputs, plain. */
  outputs: Props;
  diagnostics: Diagnostic[];
  /** Anything other than "same" (refresh: any output read back differently, or gone). */
  changes: boolean;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export class HarnessError extends Error {
  constructor(
    message: string,
    readonly result: Result,
  ) {
    super(message);
  }
}

export interface OpenOptions {
  cwd: string;
  stack?: string;
  statePath?: string;
  /** Config beside Pulumi.<stack>.yaml's (these win). */
  config?: Record<string, unknown>;
  /** Secret config; also read from OVSLB_HARNESS_SECRET_CONFIG (JSON). */
  secretConfig?: Record<string, unknown>;
  /** Encrypts secrets in the state file (default OVSLB_HARNESS_PASSPHRASE, PULUMI_CONFIG_PASSPHRASE, or ""). */
  passphrase?: string;
  /** --parallel (default 16). */
  parallel?: number;
  /** More environment for the program and the plugin. */
  env?: Record<string, string>;
  /** Told of each run's plugin process and of every call to it (benchmarks: where a run's time goes). */
  observer?: PluginObserver;
  /**
   * When preview and up start the dynamic-provider plugin. "program" (the
   * default): together with the program, so that both load @pulumi/pulumi
   * at once (about 1 s each here) and the first resource finds its plugin up.
   * "first-resource": when the program registers its first dynamic resource,
   * as the Pulumi engine loads a provider (a benchmark timing a run as
   * `pulumi` takes it).
   */
  pluginStart?: "program" | "first-resource";
  /**
   * Whether the program and plugin processes load the SDK's closure-serializer
   * modules (typescript, @npmcli/arborist) at first use rather than at start
   * (default true: about 0.5 s of CPU less each; test/support/defer-sdk-modules.ts).
   * false: as `pulumi` runs them (a benchmark of what a run costs).
   */
  deferSdkModules?: boolean;
  /**
   * The CLI version this engine plays (default OVSLB_HARNESS_PULUMI_VERSION,
   * else the program's @pulumi/pulumi version: a CLI as new as the SDK):
   * before 3.139.0 it gives dynamic providers no stack config and no
   * project; before 3.217.0 it lacks RequirePulumiVersion; from then on it
   * answers it for this version.
   */
  pulumiVersion?: string;
}

export interface RunOptions {
  /** Refresh first (preview: in memory only, as `pulumi preview --refresh`). */
  refresh?: boolean;
  /** Throw when anything would change (`--expect-no-changes`). */
  expectNoChanges?: boolean;
}

interface Project {
  name: string;
  root: string;
  main?: string;
  runtime: { name: string; options?: Props };
  config?: Props;
}

const STACK_TYPE = "pulumi:pulumi:Stack";
const t0 = Date.now();
/** OVSLB_HARNESS_DEBUG=1: what the engine does, with times, on stderr. */
const debug = (msg: string) => {
  if (process.env.OVSLB_HARNESS_DEBUG) process.stderr.write(`harness +${Date.now() - t0} ms: ${msg}\n`);
};
const DYNAMIC = /^pulumi-nodejs:dynamic(\/[^:]*)?:/;
const SUPPORTED_FEATURES = new Set(["secrets"]);

function yaml(sdk: string): { load(text: string): any } {
  // The SDK's own js-yaml (a dependency of @pulumi/pulumi): not a dependency of ovslb.
  return require(require.resolve("js-yaml", { paths: [sdk] }));
}

function sdkOf(root: string): string {
  return dirname(require.resolve("@pulumi/pulumi/package.json", { paths: [root] }));
}

function readProject(cwd: string, sdk: string): Project {
  const file = ["Pulumi.yaml", "Pulumi.yml"].map((f) => join(cwd, f)).find(existsSync);
  if (!file) throw new Error(`${cwd}: no Pulumi.yaml`);
  const p = yaml(sdk).load(readFileSync(file, "utf8")) ?? {};
  if (typeof p.name !== "string" || !p.name) throw new Error(`${file}: name is required`);
  const runtime = typeof p.runtime === "string" ? { name: p.runtime } : p.runtime;
  if (runtime?.name !== "nodejs") throw new Error(`${file}: runtime ${JSON.stringify(runtime?.name)} is not nodejs`);
  return { name: p.name, root: cwd, main: p.main, runtime, config: p.config };
}

/** pwd and entry point as the CLI derives them from `main` (a directory: pwd = it, entry "."; a file: its directory and name). */
function pwdAndEntry(project: Project): { pwd: string; entry: string } {
  if (!project.main) return { pwd: project.root, entry: "." };
  if (isAbsolute(project.main)) throw new Error("project 'main' must be a relative path");
  const main = resolve(project.root, project.main);
  if (!main.startsWith(resolve(project.root))) throw new Error("project 'main' must be a subfolder");
  if (!existsSync(main)) throw new Error(`project 'main' could not be read: ${main} does not exist (built?)`);
  return statSync(main).isDirectory() ? { pwd: main, entry: "." } : { pwd: dirname(main), entry: basename(main) };
}

const configString = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

interface StackConfig {
  values: Record<string, string>;
  secretKeys: string[];
}

function readConfig(project: Project, stack: string, sdk: string, extra: Props, secrets: Props): StackConfig {
  const key = (k: string) => (k.includes(":") ? k : `${project.name}:${k}`);
  const values: Record<string, string> = {};
  const secure: string[] = [];
  for (const [k, v] of Object.entries(project.config ?? {})) {
    const d = v && typeof v === "object" && !Array.isArray(v) ? (v.value ?? v.default) : v;
    if (d !== undefined) values[key(k)] = configString(d);
  }
  const file = join(project.root, `Pulumi.${stack}.yaml`);
  const doc = existsSync(file) ? (yaml(sdk).load(readFileSync(file, "utf8")) ?? {}) : {};
  for (const [k, v] of Object.entries((doc.config ?? {}) as Props)) {
    if (v && typeof v === "object" && !Array.isArray(v) && "secure" in v) secure.push(key(k));
    else values[key(k)] = configString(v);
  }
  for (const [k, v] of Object.entries(extra)) values[key(k)] = configString(v);
  const secretKeys: string[] = [];
  for (const [k, v] of Object.entries(secrets)) {
    values[key(k)] = configString(v);
    secretKeys.push(key(k));
  }
  const missing = secure.filter((k) => !secretKeys.includes(k));
  if (missing.length) {
    throw new Error(
      `${file}: ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} encrypted (secure:), which only the Pulumi CLI can decrypt: give ${missing.length > 1 ? "them" : "it"} in OVSLB_HARNESS_SECRET_CONFIG (JSON) or secretConfig`,
    );
  }
  return { values, secretKeys };
}

/** The top-level keys whose values differ. */
function changedKeys(a: Props, b: Props): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete("__provider");
  return [...keys].filter((k) => JSON.stringify(plain(a[k])) !== JSON.stringify(plain(b[k]))).sort();
}

/**
 * Output properties a schema of the repo marks "x-observation" (traffic
 * counters): a refresh that only sees them move reports no change. The
 * engine shows no refresh diff for any output-only property since 3.117
 * (pulumi/pulumi#16146: refresh diffs against the desired state through the
 * provider's Diff); the harness counts every other output, stricter.
 */
const OBSERVATIONS: ReadonlySet<string> = (() => {
  const dir = join(repoRoot(), "schema");
  const names = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .flatMap((f) => {
      const outputs = (JSON.parse(readFileSync(join(dir, f), "utf8")) as { "x-outputs"?: { properties?: Record<string, Record<string, unknown>> } })[
        "x-outputs"
      ];
      return Object.entries(outputs?.properties ?? {}).flatMap(([name, p]) => (p["x-observation"] === true ? [name] : []));
    });
  return new Set(names);
})();

/** Whether a changed path (a.b[0]) is under an observation output. */
const isObservation = (path: string) => OBSERVATIONS.has(path.split(/[.[]/)[0]);

/** The paths (a.b[0]) whose values differ. */
export function changedPaths(a: any, b: any, path = "", out: string[] = []): string[] {
  const obj = (x: any) => x && typeof x === "object";
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) changedPaths(a[i], b[i], `${path}[${i}]`, out);
  } else if (obj(a) && obj(b) && !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      if (!path && k === "__provider") continue;
      changedPaths(a[k], b[k], path ? `${path}.${k}` : k, out);
    }
  } else if (JSON.stringify(a) !== JSON.stringify(b)) out.push(path);
  return out;
}

/** Re-marks secret the outputs whose same-named input was secret (what the engine does for a provider that does not accept secrets). */
function annotateSecrets(outs: Props, ins: Props): Props {
  const r: Props = { ...outs };
  for (const k of Object.keys(r)) if (containsSecret(ins[k]) && !isSecret(r[k])) r[k] = secret(plain(r[k]));
  return r;
}

function markOutputs(props: Props, checked: Props, additional: string[], acceptsSecrets: boolean): Props {
  let r = acceptsSecrets ? { ...props } : annotateSecrets(props, checked);
  for (const k of additional) if (k in r && !isSecret(r[k])) r = { ...r, [k]: secret(r[k]) };
  return r;
}

const jsonSafe = (v: Props): Props => JSON.parse(JSON.stringify(v ?? {}));

class Limit {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly n: number) {}
  async run<T>(f: () => Promise<T>): Promise<T> {
    if (this.active >= this.n) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
    try {
      return await f();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }
}

function view(r: StateResource): ResourceView {
  return {
    urn: r.urn,
    type: r.type,
    name: r.urn.split("::").slice(3).join("::"),
    custom: r.custom,
    id: r.id,
    parent: r.parent,
    dependencies: r.dependencies,
    propertyDependencies: r.propertyDependencies,
    inputs: plain(r.inputs),
    outputs: plain(r.outputs),
    secretPaths: { inputs: secretPaths(r.inputs), outputs: secretPaths(r.outputs) },
    initErrors: r.initErrors,
  };
}

/** One stack of one project. */
export class Harness {
  private constructor(
    readonly project: Project,
    readonly stack: string,
    private readonly sdk: string,
    private readonly store: StateStore,
    private readonly config: StackConfig,
    private readonly options: OpenOptions,
  ) {}

  static async open(options: OpenOptions): Promise<Harness> {
    const cwd = resolve(options.cwd);
    const stack = options.stack ?? "dev";
    const sdk = sdkOf(cwd);
    const project = readProject(cwd, sdk);
    const envSecrets = process.env.OVSLB_HARNESS_SECRET_CONFIG ? JSON.parse(process.env.OVSLB_HARNESS_SECRET_CONFIG) : {};
    const config = readConfig(project, stack, sdk, options.config ?? {}, { ...envSecrets, ...(options.secretConfig ?? {}) });
    const statePath = resolve(options.statePath ?? join(cwd, ".ovslb-harness", `${stack}.json`));
    return new Harness(project, stack, sdk, new StateStore(statePath, options.passphrase), config, options);
  }

  get statePath(): string {
    return this.store.path;
  }

  /** A stack config value as the program sees it (a key without ":" is the project's). */
  configValue(key: string): string | undefined {
    return this.config.values[key.includes(":") ? key : `${this.project.name}:${key}`];
  }

  /** The recorded resources. */
  resources(): ResourceView[] {
    return this.store.load(this.project.name, this.stack).resources.map(view);
  }

  preview(o: RunOptions = {}): Promise<Result> {
    return this.run("preview", o);
  }
  up(o: RunOptions = {}): Promise<Result> {
    return this.run("up", o);
  }
  refresh(o: RunOptions = {}): Promise<Result> {
    return this.run("refresh", o);
  }
  destroy(o: RunOptions = {}): Promise<Result> {
    return this.run("destroy", o);
  }

  private async run(kind: Result["kind"], o: RunOptions): Promise<Result> {
    const started = Date.now();
    const d = new Deployment(this, kind, this.store.load(this.project.name, this.stack));
    try {
      if (o.refresh || kind === "refresh") await d.refresh(kind !== "preview");
      if (kind === "preview" || kind === "up") await d.runProgram(kind === "preview");
      if (kind === "up") await d.deleteUndeclared();
      if (kind === "destroy") await d.destroyAll();
    } catch (e) {
      d.error(e instanceof Error ? e.message : String(e));
      d.failed = true;
    } finally {
      await d.close();
    }
    const result = d.result(started);
    if (d.failed)
      throw new HarnessError(
        `${kind} failed:\n${result.diagnostics
          .filter((x) => x.severity === "error")
          .map((x) => `  ${x.message}`)
          .join("\n")}`,
        result,
      );
    if (o.expectNoChanges && result.changes) {
      throw new HarnessError(
        `${kind}: changes where none were expected:\n${result.steps
          .filter((s) => s.op !== "same")
          .map((s) => `  ${s.op} ${s.urn}`)
          .join("\n")}`,
        result,
      );
    }
    return result;
  }

  /** Internal, for Deployment. */
  get internals() {
    return { sdk: this.sdk, store: this.store, config: this.config, options: this.options };
  }
}

class Deployment {
  readonly steps: Step[] = [];
  readonly diagnostics: Diagnostic[] = [];
  failed = false;
  private program?: ChildProcess;
  private stdout = "";
  private stderr = "";
  /** Registered this run, in registration order. */
  private readonly registered = new Map<string, StateResource>();
  private readonly old: Map<string, StateResource>;
  private plugin?: Promise<PluginCall>;
  private server?: any;
  private rootUrn?: string;
  private dryRun = false;
  private readonly limit: Limit;
  private readonly grpc: any;
  private readonly pb: { resource: any; engine: any; struct: any; empty: any; provider: any };

  constructor(
    private readonly h: Harness,
    private readonly kind: Result["kind"],
    private state: State,
  ) {
    this.old = new Map(state.resources.filter((r) => !r.pendingDelete).map((r) => [r.urn, r]));
    const { sdk, options } = h.internals;
    this.limit = new Limit(options.parallel ?? 16);
    const fromSdk = (id: string) => require(require.resolve(id, { paths: [sdk] }));
    this.grpc = fromSdk("@grpc/grpc-js");
    this.pb = {
      resource: require(join(sdk, "proto", "resource_pb")),
      engine: require(join(sdk, "proto", "engine_pb")),
      provider: require(join(sdk, "proto", "provider_pb")),
      struct: fromSdk("google-protobuf/google/protobuf/struct_pb"),
      empty: fromSdk("google-protobuf/google/protobuf/empty_pb"),
    };
  }

  error(message: string, urn?: string) {
    this.diagnostics.push({ severity: "error", message, urn });
  }

  private get persisting() {
    return this.kind !== "preview";
  }

  private env(): Record<string, string> {
    const { config, options } = this.h.internals;
    return {
      PULUMI_CONFIG: JSON.stringify(config.values),
      PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(config.secretKeys),
      ...(options.env ?? {}),
    };
  }

  /** The CLI version this engine plays (OpenOptions.pulumiVersion). */
  private cliVersion(): string {
    const { sdk, options } = this.h.internals;
    return options.pulumiVersion ?? process.env.OVSLB_HARNESS_PULUMI_VERSION ?? require(join(sdk, "package.json")).version;
  }

  private startPlugin(): Promise<PluginCall> {
    if (!this.plugin) {
      const { config } = this.h.internals;
      // The engine gives a dynamic provider the whole stack config, namespaces kept, secrets marked, and names the
      // project (since 3.139.0, pulumi/pulumi#17673 and #17697); an older one, only pulumi-nodejs's own keys (none here).
      const configures = inVersionRange(this.cliVersion(), ">=3.139.0");
      const args: Props = {};
      if (configures) for (const [k, v] of Object.entries(config.values)) args[k] = config.secretKeys.includes(k) ? secret(v) : v;
      const project = configures ? this.h.project.name : "";
      debug("plugin starting");
      this.plugin = startProviderPlugin({
        // Where the CLI runs plugins: the program's directory (its pwd), as it runs the program.
        programDirectory: pwdAndEntry(this.h.project).pwd,
        engine: this.address,
        env: { PULUMI_PROJECT: project, PULUMI_NODEJS_PROJECT: project, ...this.env() },
        configure: { args, variables: config.values },
        observer: this.h.internals.options.observer,
        deferSdkModules: this.h.internals.options.deferSdkModules,
      });
    }
    return this.plugin;
  }

  private address?: string;

  private async listen(): Promise<string> {
    const grpc = this.grpc;
    const { sdk } = this.h.internals;
    const resourceGrpc = require(join(sdk, "proto", "resource_grpc_pb"));
    const engineGrpc = require(join(sdk, "proto", "engine_grpc_pb"));
    const server = new grpc.Server({ "grpc.max_receive_message_length": 400 * 1024 * 1024 });
    const unary = (f: (req: any) => Promise<any>) => (call: any, cb: any) =>
      f(call.request).then(
        (r) => {
          debug(`answered ${f.name || "call"}`);
          cb(null, r);
        },
        (e: any) => cb({ code: e?.grpcCode ?? grpc.status.UNKNOWN, details: e instanceof Error ? e.message : String(e) }),
      );
    const unimplemented = (what: string) => async () => {
      throw Object.assign(new Error(`${what} is not implemented by the ovslb test harness`), { grpcCode: grpc.status.UNIMPLEMENTED });
    };
    server.addService(resourceGrpc.ResourceMonitorService, {
      supportsFeature: unary(async (req) => {
        const r = new this.pb.resource.SupportsFeatureResponse();
        r.setHassupport(SUPPORTED_FEATURES.has(req.getId()));
        return r;
      }),
      registerResource: unary((req) => this.registerResource(req)),
      registerResourceOutputs: unary((req) => this.registerResourceOutputs(req)),
      readResource: unary((req) => this.readResource(req)),
      invoke: unary(async (req) => {
        throw Object.assign(new Error(`invoke ${req.getTok()} is not supported by the ovslb test harness`), { grpcCode: grpc.status.UNIMPLEMENTED });
      }),
      call: unary(unimplemented("Call")),
      signalAndWaitForShutdown: unary(async () => new this.pb.empty.Empty()),
    });
    server.addService(engineGrpc.EngineService, {
      log: unary(async (req) => {
        debug(`log ${req.getSeverity()} ${req.getMessage().slice(0, 300)}`);
        const sev = (["debug", "info", "warning", "error"] as const)[req.getSeverity()] ?? "info";
        if (sev !== "debug") this.diagnostics.push({ severity: sev, message: req.getMessage(), urn: req.getUrn() || undefined });
        return new this.pb.empty.Empty();
      }),
      getRootResource: unary(async () => {
        const r = new this.pb.engine.GetRootResourceResponse();
        r.setUrn(this.rootUrn ?? "");
        return r;
      }),
      setRootResource: unary(async (req) => {
        this.rootUrn = req.getUrn();
        return new this.pb.engine.SetRootResourceResponse();
      }),
      // As the engine answers it since 3.217.0 (pkg/host/host_server.go): a plain error, so gRPC's UNKNOWN. Older: unimplemented.
      requirePulumiVersion: unary(async (req) => {
        if (!inVersionRange(this.cliVersion(), ">=3.217.0")) await unimplemented("RequirePulumiVersion (before CLI 3.217.0)")();
        const refusal = versionRangeRefusal(this.cliVersion(), req.getPulumiVersionRange());
        if (refusal) throw new Error(refusal);
        return new this.pb.engine.RequirePulumiVersionResponse();
      }),
    });
    const port = await new Promise<number>((res, rej) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e: Error | null, p: number) => (e ? rej(e) : res(p))),
    );
    this.server = server;
    return `127.0.0.1:${port}`;
  }

  private urnOf(type: string, name: string, parent: string): string {
    let qualified = type;
    if (parent) {
      const parentType = parent.split("::")[2];
      if (parentType && parentType !== STACK_TYPE) qualified = `${parentType}$${type}`;
    }
    return `urn:pulumi:${this.h.stack}::${this.h.project.name}::${qualified}::${name}`;
  }

  private struct(v: Props) {
    return this.pb.struct.Struct.fromJavaScript(jsonSafe(v));
  }

  /** The state as it stands: what was registered, then what was not (yet) deleted (old copies of replaced resources too). */
  private current(): StateResource[] {
    return [...this.registered.values(), ...this.state.resources.filter((r) => r.pendingDelete || !this.registered.has(r.urn))];
  }

  private saveTimer?: NodeJS.Timeout;

  /**
   * The state as it stands after a step. Written at most every 200 ms and
   * once more when the run ends (close): the whole file after each of a large
   * stack's steps would cost the square of its size.
   */
  private persist() {
    if (!this.persisting) return;
    this.state = { ...this.state, resources: this.current() };
    this.saveTimer ??= setTimeout(() => this.save(), 200);
  }

  private save() {
    clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    this.h.internals.store.save(this.state);
  }

  async runProgram(dryRun: boolean) {
    this.dryRun = dryRun;
    // A refresh before it (preview --refresh) already serves: a second server would never be shut down.
    this.address ??= await this.listen();
    // Started now, its failure is met by the first step that awaits it (or by close).
    if (this.h.internals.options.pluginStart !== "first-resource") void this.startPlugin().catch(() => undefined);
    const { sdk, options } = this.h.internals;
    const { pwd, entry } = pwdAndEntry(this.h.project);
    const ts = this.h.project.runtime.options?.typescript;
    const deferred = deferSdkModules(sdk, options.deferSdkModules !== false);
    const args = [
      EXIT_WITH_PARENT,
      ...deferred.execArgv,
      join(sdk, "cmd", "run"),
      "--monitor",
      this.address,
      "--engine",
      this.address,
      "--organization",
      "organization",
      "--project",
      this.h.project.name,
      "--root-directory",
      this.h.project.root,
      "--stack",
      this.h.stack,
      "--pwd",
      pwd,
      ...(dryRun ? ["--dry-run"] : []),
      "--parallel",
      String(options.parallel ?? 16),
      entry,
    ];
    const child = spawn(process.execPath, args, {
      cwd: pwd,
      env: { ...process.env, ...this.env(), ...deferred.env, PULUMI_NODEJS_TYPESCRIPT: String(ts !== false) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.program = child;
    child.stdout.on("data", (b: Buffer) => (this.stdout += b.toString()));
    child.stderr.on("data", (b: Buffer) => {
      this.stderr += b.toString();
      debug(`program stderr: ${b.toString().trimEnd()}`);
    });
    debug(`program started`);
    const code = await new Promise<number | null>((res) => child.once("close", (c) => res(c)));
    debug(`program exited ${code}`);
    if (code !== 0) {
      this.failed = true;
      if (!this.diagnostics.some((x) => x.severity === "error")) this.error(`the program exited ${code}: ${this.stderr.trim().slice(-2000)}`);
      throw new Error(`the program exited ${code}`);
    }
    if (this.failed) throw new Error("a resource operation failed");
  }

  private async registerResource(req: any) {
    const type: string = req.getType();
    const name: string = req.getName();
    const parent: string = req.getParent();
    const custom: boolean = req.getCustom();
    const urn = this.urnOf(type, name, parent);
    debug(`register ${urn}`);
    try {
      if (this.registered.has(urn)) throw new Error(`Duplicate resource URN '${urn}'; try giving it a unique name`);
      if (req.getRemote()) throw new Error(`${urn}: remote (multi-language) components are not supported by the ovslb test harness`);
      const inputs: Props = req.getObject()?.toJavaScript() ?? {};
      const propertyDependencies: Record<string, string[]> = {};
      req.getPropertydependenciesMap().forEach((v: any, k: string) => (propertyDependencies[k] = v.getUrnsList()));
      const entry: StateResource = {
        urn,
        type,
        custom,
        parent: parent || undefined,
        dependencies: req.getDependenciesList(),
        propertyDependencies,
        inputs,
        outputs: {},
        protect: req.getProtect() || undefined,
        retainOnDelete: req.getRetainondelete() || undefined,
        deleteBeforeReplace: req.getDeletebeforereplace() || undefined,
        additionalSecretOutputs: req.getAdditionalsecretoutputsList().length ? req.getAdditionalsecretoutputsList() : undefined,
      };
      const resp = new this.pb.resource.RegisterResourceResponse();
      resp.setUrn(urn);
      if (!custom) {
        const old = this.old.get(urn);
        entry.outputs = old && !old.pendingDelete ? old.outputs : {};
        if (type === STACK_TYPE && !this.rootUrn) this.rootUrn = urn;
        this.registered.set(urn, entry);
        this.steps.push({
          urn,
          type,
          op: old ? "same" : "create",
          custom: false,
          keys: [],
          parent: entry.parent,
          dependencies: entry.dependencies,
          inputs: plain(inputs),
        });
        resp.setObject(this.struct({}));
        return resp;
      }
      if (!DYNAMIC.test(type)) throw new Error(`${urn}: only dynamic resources (pulumi-nodejs:dynamic...) are supported by the ovslb test harness`);
      if (req.getProvider()) throw new Error(`${urn}: explicit providers are not supported by the ovslb test harness`);
      const done = await this.limit.run(() => this.step(entry, req));
      resp.setId(done.id ?? "");
      resp.setObject(this.struct(done.outputs));
      return resp;
    } catch (e) {
      this.failed = true;
      const message = e instanceof Error ? e.message : String(e);
      debug(`failed ${urn}: ${message.slice(0, 200)}`);
      this.error(message.startsWith(urn) ? message : `${urn}: ${message}`, urn);
      // As the engine cancels a deployment whose step failed: the program is ended (it may
      // wait forever on outputs that will never resolve), after a moment to log its own errors.
      const program = this.program;
      setTimeout(() => program?.exitCode === null && program.kill("SIGTERM"), 2000).unref();
      throw e;
    }
  }

  /** One custom resource: check, diff, then the operation (or, in preview, what it would be). */
  private async step(entry: StateResource, req: any): Promise<StateResource> {
    const plugin = await this.startPlugin();
    debug(`step ${entry.urn}`);
    const at = plugin.at(entry.urn);
    const toPlugin = (v: Props) => (plugin.acceptsSecrets ? v : plain(v));
    const old = this.old.get(entry.urn);
    const prior = old && !old.pendingDelete ? old : undefined;
    let news = entry.inputs;
    for (const k of req.getIgnorechangesList() as string[]) if (prior && k in prior.inputs) news = { ...news, [k]: prior.inputs[k] };
    const checked = await at.check(prior ? toPlugin(prior.inputs) : {}, toPlugin(news));
    debug(`checked ${entry.urn}`);
    if (checked.failures.length) {
      throw new Error(`check failed:\n${checked.failures.map((f) => `    ${f.property}: ${f.reason}`).join("\n")}`);
    }
    const inputs = plugin.acceptsSecrets ? checked.inputs : annotateSecrets(checked.inputs, news);
    entry.inputs = inputs;
    const additional = entry.additionalSecretOutputs ?? [];
    const outputsOf = (props: Props) => markOutputs(props, inputs, additional, plugin.acceptsSecrets);
    const step: Step = {
      urn: entry.urn,
      type: entry.type,
      op: "create",
      custom: true,
      keys: [],
      parent: entry.parent,
      dependencies: entry.dependencies,
      inputs: plain(inputs),
    };
    const record = (r: StateResource) => {
      this.registered.set(r.urn, r);
      this.persist();
      return r;
    };

    const create = async (): Promise<StateResource> => {
      try {
        debug(`create ${entry.urn}`);
        const made = await at.create(toPlugin(inputs));
        return { ...entry, id: made.id, outputs: outputsOf(made.properties) };
      } catch (e) {
        this.partial(entry, e as PluginError, outputsOf, record);
        throw e;
      }
    };

    if (!prior) {
      step.keys = Object.keys(inputs)
        .filter((k) => k !== "__provider")
        .sort();
      this.steps.push(step);
      if (this.dryRun) return { ...entry, outputs: inputs };
      return record(await create());
    }

    const diff = await at.diff(prior.id!, toPlugin(prior.outputs), toPlugin(inputs));
    step.keys = changedKeys(prior.inputs, inputs);
    const changes = diff.changes === "unknown" ? (step.keys.length ? "some" : "none") : diff.changes;
    let replaces = diff.replaces;
    const replaceOn = req.getReplaceonchangesList() as string[];
    if (changes === "some" && replaceOn.some((k) => k === "*" || step.keys.includes(k)))
      replaces = [...new Set([...replaces, ...replaceOn.filter((k) => k === "*" || step.keys.includes(k))])];
    if (changes === "none") {
      step.op = "same";
      step.keys = [];
      this.steps.push(step);
      const same = { ...entry, id: prior.id, outputs: prior.outputs };
      return this.dryRun ? same : record(same);
    }
    // What `pulumi preview --diff` prints under an update or a replace.
    step.diff = propertyDiffText(prior.inputs, inputs);
    if (replaces.length) {
      step.op = "replace";
      step.replaces = replaces;
      step.deleteBeforeReplace = diff.deleteBeforeReplace || !!entry.deleteBeforeReplace;
      this.steps.push(step);
      if (this.dryRun) return { ...entry, outputs: inputs };
      if (prior.protect) throw new Error("the resource is protected and cannot be replaced");
      if (step.deleteBeforeReplace) {
        await this.deleteOne(prior);
        this.old.delete(prior.urn);
        this.state = { ...this.state, resources: this.state.resources.filter((r) => r !== prior) };
        this.persist();
        return record(await create());
      }
      const made = await create();
      // The old copy stays in state until the end of the run, then is deleted (create-before-delete).
      prior.pendingDelete = true;
      return record(made);
    }
    step.op = "update";
    this.steps.push(step);
    if (this.dryRun) {
      const outs: Props = { ...inputs };
      // What the provider would compute is unknown until it runs.
      for (const k of Object.keys(prior.outputs)) if (!(k in outs)) outs[k] = UNKNOWN;
      return { ...entry, id: prior.id, outputs: outs };
    }
    try {
      const updated = await at.update(prior.id!, toPlugin(prior.outputs), toPlugin(inputs));
      return record({ ...entry, id: prior.id, outputs: outputsOf(updated.properties) });
    } catch (e) {
      this.partial({ ...entry, id: prior.id }, e as PluginError, outputsOf, record);
      throw e;
    }
  }

  /** A create or update that failed part-way: the engine records the id and state the provider reported. */
  private partial(entry: StateResource, e: PluginError, outputsOf: (p: Props) => Props, record: (r: StateResource) => StateResource) {
    if (!e.initFailed) return;
    record({ ...entry, id: e.initFailed.id, outputs: outputsOf(e.initFailed.properties), initErrors: e.initFailed.reasons });
  }

  private async registerResourceOutputs(req: any) {
    const urn: string = req.getUrn();
    const r = this.registered.get(urn);
    if (!r) throw new Error(`registerResourceOutputs: ${urn} was not registered`);
    r.outputs = req.getOutputs()?.toJavaScript() ?? {};
    this.persist();
    return new this.pb.empty.Empty();
  }

  /** Resource.get(): read through the plugin, recorded as an external resource. */
  private async readResource(req: any) {
    const type: string = req.getType();
    const urn = this.urnOf(type, req.getName(), req.getParent());
    if (!DYNAMIC.test(type)) throw new Error(`${urn}: only dynamic resources can be read by the ovslb test harness`);
    const plugin = await this.startPlugin();
    const props: Props = req.getProperties()?.toJavaScript() ?? {};
    const r = await plugin.at(urn).read(req.getId(), plain(props));
    if (!r.id) throw new Error(`${urn}: resource '${req.getId()}' does not exist`);
    const outputs = markOutputs(r.properties, props, req.getAdditionalsecretoutputsList(), plugin.acceptsSecrets);
    this.registered.set(urn, {
      urn,
      type,
      custom: true,
      id: r.id,
      parent: req.getParent() || undefined,
      dependencies: req.getDependenciesList(),
      inputs: props,
      outputs,
    });
    this.steps.push({ urn, type, op: "read", custom: true, keys: [] });
    this.persist();
    const resp = new this.pb.resource.ReadResourceResponse();
    resp.setUrn(urn);
    resp.setProperties(this.struct(outputs));
    return resp;
  }

  private async deleteOne(r: StateResource) {
    if (r.protect) throw new Error(`${r.urn}: the resource is protected and cannot be deleted`);
    if (!r.custom || r.retainOnDelete || r.id === undefined) return;
    const plugin = await this.startPlugin();
    await plugin.at(r.urn).delete(r.id, plugin.acceptsSecrets ? r.outputs : plain(r.outputs));
  }

  /** After a successful program run: what it no longer declares, and old copies of replaced resources, dependents first. */
  async deleteUndeclared() {
    const doomed = this.state.resources.filter((r) => r.pendingDelete || !this.registered.has(r.urn)).reverse();
    await this.deleteInOrder(doomed);
  }

  async destroyAll() {
    this.address ??= await this.listen();
    await this.deleteInOrder([...this.state.resources].reverse());
  }

  /**
   * Deletes `doomed` (dependents listed before what they depend on) as the
   * engine does: each once everything that depends on it is gone (its
   * dependencies, property dependencies or parent), the rest in parallel up
   * to the run's parallelism. The first failure stops what has not started.
   */
  private async deleteInOrder(doomed: StateResource[]) {
    const done = new Map<StateResource, Promise<void>>();
    let failed: Error | undefined;
    const dependsOn = (x: StateResource, urn: string) =>
      x.parent === urn || x.dependencies.includes(urn) || Object.values(x.propertyDependencies ?? {}).some((urns) => urns.includes(urn));
    for (const r of doomed) {
      const first = doomed.filter((x) => x !== r && done.has(x) && dependsOn(x, r.urn)).map((x) => done.get(x)!);
      const deleted = Promise.all(first).then(() =>
        this.limit.run(async () => {
          if (failed !== undefined) throw failed;
          this.steps.push({ urn: r.urn, type: r.type, op: "delete", custom: r.custom, keys: [] });
          try {
            await this.deleteOne(r);
          } catch (e) {
            failed ??= e instanceof Error ? e : new Error(String(e));
            throw e;
          }
          this.state = { ...this.state, resources: this.state.resources.filter((x) => x !== r) };
          if (this.registered.get(r.urn) === r) this.registered.delete(r.urn);
          this.persist();
        }),
      );
      deleted.catch(() => undefined);
      done.set(r, deleted);
    }
    await Promise.all(done.values());
  }

  /** Reads every custom resource back through the plugin; `save` writes what it read (refresh) or not (preview --refresh). */
  async refresh(save: boolean) {
    this.address ??= await this.listen();
    const resources: StateResource[] = [];
    // The reads run in parallel, up to the run's parallelism, as the engine's refresh does; their steps keep the state's order.
    const reads = await Promise.all(
      this.state.resources.map((r) =>
        !r.custom || r.id === undefined
          ? Promise.resolve(undefined)
          : this.limit.run(async () => {
              const plugin = await this.startPlugin();
              const toPlugin = (v: Props) => (plugin.acceptsSecrets ? v : plain(v));
              debug(`read ${r.urn}`);
              const got = await plugin.at(r.urn).read(r.id!, toPlugin(r.outputs), toPlugin(r.inputs));
              debug(`read done ${r.urn}`);
              return { got, acceptsSecrets: plugin.acceptsSecrets };
            }),
      ),
    );
    for (const [i, r] of this.state.resources.entries()) {
      const read = reads[i];
      if (!read) {
        resources.push(r);
        continue;
      }
      const { got, acceptsSecrets } = read;
      if (!got.id) {
        this.steps.push({ urn: r.urn, type: r.type, op: "delete", custom: true, keys: [] });
        continue;
      }
      const outputs = markOutputs(annotateSecrets(got.properties, r.outputs), r.inputs, r.additionalSecretOutputs ?? [], acceptsSecrets);
      const readInputs = Object.keys(got.inputs).filter((k) => k !== "__provider").length ? annotateSecrets(got.inputs, r.inputs) : r.inputs;
      const paths = changedPaths(plain(r.outputs), plain(outputs)).filter((p) => !isObservation(p));
      this.steps.push({ urn: r.urn, type: r.type, op: paths.length ? "refresh" : "same", custom: true, keys: [], changedPaths: paths });
      resources.push({ ...r, id: got.id, outputs, inputs: readInputs });
    }
    this.state = { ...this.state, resources };
    this.old.clear();
    for (const r of resources) if (!r.pendingDelete) this.old.set(r.urn, r);
    if (save) this.h.internals.store.save(this.state);
    // A preview's refresh counts as its own changes only through the steps after it.
  }

  async close() {
    if (this.saveTimer) this.save();
    const plugin = await this.plugin?.catch(() => undefined);
    plugin?.stop();
    await new Promise<void>((res) => (this.server ? this.server.tryShutdown(() => res()) : res()));
  }

  result(started: number): Result {
    const resources = (this.kind === "preview" ? this.state.resources : this.current()).map(view);
    const root = this.kind === "preview" ? this.registered.get(this.rootUrn ?? "") : this.current().find((r) => r.type === STACK_TYPE);
    const changes = this.steps.some((s) => s.op !== "same" && s.op !== "read");
    return {
      kind: this.kind,
      steps: this.steps,
      resources,
      outputs: plain(root?.outputs ?? {}),
      diagnostics: this.diagnostics,
      changes,
      stdout: this.stdout,
      stderr: this.stderr,
      durationMs: Date.now() - started,
    };
  }
}
