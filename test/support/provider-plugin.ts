import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { deferSdkModules } from "./defer-sdk-modules";

/**
 * The engine's side of the dynamic-provider boundary, without the Pulumi CLI:
 * the real plugin (@pulumi/pulumi/cmd/dynamic-provider) in its own process,
 * driven over gRPC with the generated ResourceProvider stubs, with the
 * provider serialized exactly as a program serializes it.
 */

const repoRoot = resolve(__dirname, "..", "..");
const pulumiDir = dirname(require.resolve("@pulumi/pulumi/package.json"));

// Tests read deep into properties: loosely typed on purpose.
type Props = Record<string, any>;

const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/**
 * A Node option that makes a child exit once its parent is gone (a test
 * run killed by a timeout would otherwise leave plugins and programs behind,
 * retrying their connections forever): it polls its parent id, unref'd.
 */
export const EXIT_WITH_PARENT = `--import=data:text/javascript,${encodeURIComponent(
  "const p=process.ppid;setInterval(()=>{if(process.ppid!==p)process.exit(1)},1000).unref();",
)}`;

/**
 * What the engine sends a provider that does not accept secrets: the
 * registered inputs with secret wrappers removed. `secretPaths` collects
 * where the wrappers were.
 */
export function unwrapSecrets(v: any, secretPaths: string[] = [], path = ""): any {
  if (Array.isArray(v)) return v.map((x, i) => unwrapSecrets(x, secretPaths, `${path}[${i}]`));
  if (v && typeof v === "object") {
    if (v[SECRET_SIG] !== undefined) {
      secretPaths.push(path);
      return unwrapSecrets(v.value, secretPaths, path);
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrapSecrets(x, secretPaths, path ? `${path}.${k}` : k)]));
  }
  return v;
}

/**
 * Runs a Pulumi program under mocks and returns the inputs the engine would
 * receive for the first resource of `type`, including `__provider` (the
 * serialized provider text). The program runs as the language host runs one
 * (inside the root stack resource), and is done when the runtime's queue of
 * registrations, and anything they started, has drained (disconnect awaits
 * it). Each call sets fresh mocks, so it can
 * be called again after a disconnect.
 */
export async function registeredInputs(type: string, program: () => void): Promise<Props> {
  let captured: Props | undefined;
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        if (args.type === type && !captured) captured = args.inputs as Props;
        return { id: `${args.name}-id`, state: args.inputs };
      },
      call: (args) => args.inputs,
    },
    "project",
    "stack",
    false,
  );
  // Nothing is returned: what the program's last expression yields is not the stack's outputs.
  await pulumi.runtime.runInPulumiStack(async () => {
    program();
  });
  await pulumi.runtime.disconnect();
  if (!captured) throw new Error(`no resource of type ${type} was registered`);
  return captured;
}

/** The provider's methods, as the engine calls them for one resource (its URN). */
export interface PluginRequests {
  check(olds: Props, news: Props): Promise<{ inputs: Props; failures: { property: string; reason: string }[] }>;
  diff(id: string, olds: Props, news: Props): Promise<{ changes: "none" | "some" | "unknown"; replaces: string[]; deleteBeforeReplace: boolean }>;
  create(props: Props): Promise<{ id: string; properties: Props }>;
  read(id: string, props: Props, inputs?: Props): Promise<{ id: string; properties: Props; inputs: Props }>;
  update(id: string, olds: Props, news: Props): Promise<{ properties: Props }>;
  delete(id: string, props: Props): Promise<void>;
}

/**
 * What a failed create or update carried when the resource was made but not
 * finished (the SDK's ErrorResourceInitFailed in the gRPC status details):
 * the engine records this id and these properties as the resource's state.
 */
export interface InitFailure {
  id: string;
  properties: Props;
  reasons: string[];
}

/** A plugin call's error; `initFailed` when the plugin reported a partial state. */
export type PluginError = Error & { code?: number; details?: string; initFailed?: InitFailure };

export interface PluginCall extends PluginRequests {
  /** The plugin's process id. */
  pid: number;
  /** What the plugin answered to Configure: the engine strips secrets from what it sends when false. */
  acceptsSecrets: boolean;
  /** The same plugin, every call sending `urn` (e.g. one per resource a program registered). */
  at(urn: string): PluginRequests;
  /** Ends the plugin and removes what was made for it. */
  stop(): void;
  /** Everything the plugin process has printed so far (the engine would log it). */
  logs(): { stdout: string; stderr: string };
}

export interface PluginOptions {
  /** The URN a call sends unless made through at(urn) (default: a Test resource's). */
  urn?: string;
  /**
   * A project root: the plugin of that project's own @pulumi/pulumi is run
   * the way the CLI's pulumi-resource-pulumi-nodejs runs it (`node
   * ./node_modules/@pulumi/pulumi/cmd/dynamic-provider` with the project root
   * as its working directory, no NODE_PATH), so `require` in a serialized
   * provider resolves exactly as it would under `pulumi up`. Without it, this
   * checkout's SDK runs the plugin and `ovslb` resolves to this checkout
   * (built into dist/) through NODE_PATH, as it resolves to node_modules/ovslb
   * in a user's project.
   */
  projectRoot?: string;
  /**
   * Instead of projectRoot: the program's directory (the CLI's pwd, which is
   * Pulumi.yaml's `main` directory, or the project root without one). The
   * plugin runs there as the CLI's current pulumi-resource-pulumi-nodejs
   * runs it: the dynamic-provider script node resolves from that directory,
   * with it as the working directory, no NODE_PATH.
   */
  programDirectory?: string;
  /** The engine address passed as the plugin's argument, as the CLI passes its own (default: none listening). */
  engine?: string;
  /** More environment for the plugin process (the CLI gives dynamic providers PULUMI_CONFIG). */
  env?: Record<string, string>;
  /** Configure's args, as the engine sends the stack config to a dynamic provider (default: none). */
  configure?: { args: Props; variables?: Record<string, string> };
  /** Told of the plugin's process and of every call to it (benchmarks time them). */
  observer?: PluginObserver;
  /** Load the SDK's closure-serializer modules at first use (test/support/defer-sdk-modules.ts; default true). */
  deferSdkModules?: boolean;
}

export type PluginMethod = "configure" | "check" | "diff" | "create" | "read" | "update" | "delete";

/** What a benchmark sees of a plugin: its process, and each call from the engine's side. */
export interface PluginObserver {
  /** The plugin is up (it said its port). */
  started?(pid: number): void;
  /** The plugin is about to be ended: its process can still be read (its CPU time, in /proc). */
  stopping?(pid: number): void;
  /** A call answered (or failed): its method, the URN it was for, and when it was sent and answered (performance.now(), ms). */
  call?(method: PluginMethod, urn: string, sentMs: number, answeredMs: number, ok: boolean): void;
}

const DEFAULT_URN = "urn:pulumi:stack::project::pulumi-nodejs:dynamic/ovslb:Test::t";

/** Starts the dynamic-provider plugin (see PluginOptions for which, and how `ovslb` resolves in it). */
export async function startProviderPlugin(options: PluginOptions = {}): Promise<PluginCall> {
  const { urn: defaultUrn = DEFAULT_URN, projectRoot, programDirectory, engine = "127.0.0.1:1", env: moreEnv = {} } = options;
  // What the CLI (3.139.0 and later) sets for a dynamic provider: the project, by both names (provider/cli-floor.ts).
  const project = defaultUrn.split("::")[1];
  const extraEnv = { PULUMI_PROJECT: project, PULUMI_NODEJS_PROJECT: project, ...moreEnv };
  // The stubs must share the plugin's SDK's own grpc-js and protobuf instances.
  const from = programDirectory ?? projectRoot;
  const sdk = from ? dirname(require.resolve("@pulumi/pulumi/package.json", { paths: [from] })) : pulumiDir;
  const fromSdk = (id: string) => require(require.resolve(id, { paths: [sdk] }));
  const grpc = fromSdk("@grpc/grpc-js");
  const structpb = fromSdk("google-protobuf/google/protobuf/struct_pb");
  const providerpb = require(join(sdk, "proto", "provider_pb"));
  const providerGrpc = require(join(sdk, "proto", "provider_grpc_pb"));
  const statuspb = require(join(sdk, "proto", "status_pb"));
  const deferred = deferSdkModules(sdk, options.deferSdkModules !== false);
  const nodeArgs = [EXIT_WITH_PARENT, ...deferred.execArgv];
  Object.assign(extraEnv, deferred.env);

  let scratch: string | undefined;
  let child: ChildProcess;
  if (programDirectory) {
    const { NODE_PATH: _ignored, ...env } = process.env;
    const script = require.resolve("@pulumi/pulumi/cmd/dynamic-provider", { paths: [programDirectory] });
    child = spawn(process.execPath, [...nodeArgs, script, engine], {
      cwd: programDirectory,
      env: { ...env, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
  } else if (projectRoot) {
    const { NODE_PATH: _ignored, ...env } = process.env;
    child = spawn(process.execPath, [...nodeArgs, "./node_modules/@pulumi/pulumi/cmd/dynamic-provider", engine], {
      cwd: projectRoot,
      env: { ...env, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
  } else {
    scratch = mkdtempSync(join(tmpdir(), "ovslb-plugin-"));
    const modules = join(scratch, "node_modules");
    mkdirSync(modules);
    symlinkSync(repoRoot, join(modules, "ovslb"));
    child = spawn(process.execPath, [...nodeArgs, join(sdk, "cmd", "dynamic-provider", "index.js"), engine], {
      env: { ...process.env, ...extraEnv, NODE_PATH: modules },
      stdio: ["ignore", "pipe", "pipe"],
    });
  }
  const removeScratch = () => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  };
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  let port: string;
  try {
    port = await new Promise<string>((resolvePort, reject) => {
      child.stdout!.once("data", (d: Buffer) => resolvePort(d.toString().trim()));
      child.once("close", (code) => reject(new Error(`plugin exited ${code}: ${stderr}`)));
      // A plugin that never says its port is an error, not a hang.
      setTimeout(() => reject(new Error(`plugin printed no port in 60 s: ${stderr}`)), 60_000).unref();
    });
  } catch (e) {
    removeScratch();
    throw e;
  }
  const { observer } = options;
  observer?.started?.(child.pid!);
  const client = new providerGrpc.ResourceProviderClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  // A partial state comes back in the status details (grpc-status-details-bin), as the engine reads it.
  const initFailure = (err: any): InitFailure | undefined => {
    const bin = err?.metadata?.get?.("grpc-status-details-bin")?.[0];
    if (!bin) return undefined;
    for (const any of statuspb.Status.deserializeBinary(new Uint8Array(bin)).getDetailsList()) {
      if (!String(any.getTypeUrl()).endsWith("pulumirpc.ErrorResourceInitFailed")) continue;
      const d = providerpb.ErrorResourceInitFailed.deserializeBinary(any.getValue_asU8());
      return { id: d.getId(), properties: d.getProperties()?.toJavaScript() ?? {}, reasons: d.getReasonsList() };
    }
    return undefined;
  };
  const unary = <T>(method: PluginMethod, req: unknown, timeoutMs?: number, urn = ""): Promise<T> => {
    const sent = performance.now();
    return new Promise((res, rej) =>
      client[method](req, ...(timeoutMs ? [{ deadline: Date.now() + timeoutMs }] : []), (err: PluginError | null, resp: T) => {
        observer?.call?.(method, urn, sent, performance.now(), !err);
        if (!err) return res(resp);
        try {
          const initFailed = initFailure(err);
          if (initFailed) err.initFailed = initFailed;
        } catch (e) {
          // Never leave the call unsettled: the error stands without its details.
          err.message += ` (its status details did not parse: ${(e as Error).message})`;
        }
        rej(err);
      }),
    );
  };
  const struct = (o: Props) => structpb.Struct.fromJavaScript(o);

  const stop = () => {
    if (child.exitCode === null) observer?.stopping?.(child.pid!);
    client.close();
    child.kill();
    removeScratch();
  };
  let acceptsSecrets = false;
  try {
    const configure = new providerpb.ConfigureRequest();
    configure.setArgs(struct(options.configure?.args ?? {}));
    for (const [k, v] of Object.entries(options.configure?.variables ?? {})) configure.getVariablesMap().set(k, v);
    configure.setAcceptsecrets(true);
    configure.setAcceptresources(false);
    const resp = await unary<any>("configure", configure, 60_000);
    acceptsSecrets = resp.getAcceptsecrets();
  } catch (e) {
    stop();
    throw e;
  }

  const at = (urn: string): PluginRequests => ({
    async check(olds, news) {
      const req = new providerpb.CheckRequest();
      req.setUrn(urn);
      req.setOlds(struct(olds));
      req.setNews(struct(news));
      const resp = await unary<any>("check", req, undefined, urn);
      return {
        inputs: resp.getInputs().toJavaScript(),
        failures: resp.getFailuresList().map((f: any) => ({ property: f.getProperty(), reason: f.getReason() })),
      };
    },
    async diff(id, olds, news) {
      const req = new providerpb.DiffRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setOlds(struct(olds));
      req.setNews(struct(news));
      const resp = await unary<any>("diff", req, undefined, urn);
      const kinds = providerpb.DiffResponse.DiffChanges;
      const c = resp.getChanges();
      return {
        changes: c === kinds.DIFF_NONE ? "none" : c === kinds.DIFF_SOME ? "some" : "unknown",
        replaces: resp.getReplacesList(),
        deleteBeforeReplace: resp.getDeletebeforereplace(),
      };
    },
    async create(props) {
      const req = new providerpb.CreateRequest();
      req.setUrn(urn);
      req.setProperties(struct(props));
      const resp = await unary<any>("create", req, undefined, urn);
      return { id: resp.getId(), properties: resp.getProperties().toJavaScript() };
    },
    async read(id, props, inputs) {
      const req = new providerpb.ReadRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setProperties(struct(props));
      if (inputs) req.setInputs(struct(inputs));
      const resp = await unary<any>("read", req, undefined, urn);
      return {
        id: resp.getId(),
        properties: resp.getProperties()?.toJavaScript() ?? {},
        inputs: resp.getInputs()?.toJavaScript() ?? {},
      };
    },
    async update(id, olds, news) {
      const req = new providerpb.UpdateRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setOlds(struct(olds));
      req.setNews(struct(news));
      const resp = await unary<any>("update", req, undefined, urn);
      return { properties: resp.getProperties().toJavaScript() };
    },
    async delete(id, props) {
      const req = new providerpb.DeleteRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setProperties(struct(props));
      await unary("delete", req, undefined, urn);
    },
  });

  return { ...at(defaultUrn), pid: child.pid!, at, stop, acceptsSecrets, logs: () => ({ stdout, stderr }) };
}
