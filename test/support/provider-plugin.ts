import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import * as pulumi from "@pulumi/pulumi";

/**
 * The engine's side of the dynamic-provider boundary, without the Pulumi CLI:
 * the real plugin (@pulumi/pulumi/cmd/dynamic-provider) in its own process,
 * driven over gRPC with the generated ResourceProvider stubs, with the
 * provider serialized exactly as a program serializes it.
 */

const repoRoot = resolve(__dirname, "..", "..");
const pulumiDir = dirname(require.resolve("@pulumi/pulumi/package.json"));
// The stubs must share @pulumi/pulumi's own grpc-js and protobuf instances.
const fromPulumi = (id: string) => require(require.resolve(id, { paths: [pulumiDir] }));
const grpc = fromPulumi("@grpc/grpc-js");
const structpb = fromPulumi("google-protobuf/google/protobuf/struct_pb");
const providerpb = require("@pulumi/pulumi/proto/provider_pb");
const providerGrpc = require("@pulumi/pulumi/proto/provider_grpc_pb");

// Tests read deep into properties: loosely typed on purpose.
type Props = Record<string, any>;

const SECRET_SIG = "4dabf18193072939515e22adb298388d";

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
 * serialized provider text).
 */
export async function registeredInputs(type: string, program: () => void): Promise<Props> {
  let captured: Props | undefined;
  pulumi.runtime.setMocks(
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
  program();
  // Registration is asynchronous: wait until the mock has seen it.
  for (let i = 0; i < 200 && !captured; i++) await new Promise((r) => setTimeout(r, 10));
  if (!captured) throw new Error(`no resource of type ${type} was registered`);
  return captured;
}

export interface PluginCall {
  check(olds: Props, news: Props): Promise<{ inputs: Props; failures: { property: string; reason: string }[] }>;
  diff(id: string, olds: Props, news: Props): Promise<{ changes: "none" | "some" | "unknown"; replaces: string[] }>;
  create(props: Props): Promise<{ id: string; properties: Props }>;
  read(id: string, props: Props, inputs?: Props): Promise<{ id: string; properties: Props; inputs: Props }>;
  update(id: string, olds: Props, news: Props): Promise<{ properties: Props }>;
  delete(id: string, props: Props): Promise<void>;
  stop(): void;
}

/**
 * Starts the dynamic-provider plugin. `ovslb` resolves to this checkout
 * (built into dist/) through NODE_PATH, as it resolves to node_modules/ovslb
 * in a user's project.
 */
export async function startProviderPlugin(urn = "urn:pulumi:stack::project::pulumi-nodejs:dynamic/ovslb:Test::t"): Promise<PluginCall> {
  const modules = join(mkdtempSync(join(tmpdir(), "ovslb-plugin-")), "node_modules");
  mkdirSync(modules);
  symlinkSync(repoRoot, join(modules, "ovslb"));
  const child: ChildProcess = spawn(
    process.execPath,
    [join(pulumiDir, "cmd", "dynamic-provider", "index.js"), "127.0.0.1:1"],
    { env: { ...process.env, NODE_PATH: modules }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const port = await new Promise<string>((resolvePort, reject) => {
    child.stdout!.once("data", (d: Buffer) => resolvePort(d.toString().trim()));
    child.once("exit", (code) => reject(new Error(`plugin exited ${code}: ${stderr}`)));
  });
  const client = new providerGrpc.ResourceProviderClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const unary = <T>(method: string, req: unknown): Promise<T> =>
    new Promise((res, rej) => client[method](req, (err: Error | null, resp: T) => (err ? rej(err) : res(resp))));
  const struct = (o: Props) => structpb.Struct.fromJavaScript(o);

  const configure = new providerpb.ConfigureRequest();
  configure.setArgs(struct({}));
  configure.setAcceptsecrets(true);
  await unary("configure", configure);

  return {
    async check(olds, news) {
      const req = new providerpb.CheckRequest();
      req.setUrn(urn);
      req.setOlds(struct(olds));
      req.setNews(struct(news));
      const resp = await unary<any>("check", req);
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
      const resp = await unary<any>("diff", req);
      const kinds = providerpb.DiffResponse.DiffChanges;
      const c = resp.getChanges();
      return {
        changes: c === kinds.DIFF_NONE ? "none" : c === kinds.DIFF_SOME ? "some" : "unknown",
        replaces: resp.getReplacesList(),
      };
    },
    async create(props) {
      const req = new providerpb.CreateRequest();
      req.setUrn(urn);
      req.setProperties(struct(props));
      const resp = await unary<any>("create", req);
      return { id: resp.getId(), properties: resp.getProperties().toJavaScript() };
    },
    async read(id, props, inputs) {
      const req = new providerpb.ReadRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setProperties(struct(props));
      if (inputs) req.setInputs(struct(inputs));
      const resp = await unary<any>("read", req);
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
      const resp = await unary<any>("update", req);
      return { properties: resp.getProperties().toJavaScript() };
    },
    async delete(id, props) {
      const req = new providerpb.DeleteRequest();
      req.setId(id);
      req.setUrn(urn);
      req.setProperties(struct(props));
      await unary("delete", req);
    },
    stop() {
      client.close();
      child.kill();
    },
  };
}
