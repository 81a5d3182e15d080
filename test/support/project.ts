import { spawn, type ChildProcess } from "node:child_process";
import { dirname, resolve } from "node:path";
import { unwrapSecrets } from "./provider-plugin";

/**
 * A Pulumi project as the engine treats it, without the CLI: the program
 * runs in its own Node process with the project root as its working
 * directory, and the dynamic-provider plugin is started the way the CLI's
 * pulumi-resource-pulumi-nodejs starts it (`node ./node_modules/@pulumi/pulumi/cmd/dynamic-provider`
 * in the project root, no NODE_PATH), so `require` in a serialized provider
 * resolves exactly as it would under `pulumi up`.
 */

type Props = Record<string, any>;

export interface Registration {
  type: string;
  name: string;
  /** What the engine receives: secrets unwrapped, `__provider` included. */
  inputs: Props;
}

/**
 * Runs `program` (a path relative to the project root, as Pulumi.yaml's
 * `main`) under pulumi.runtime.setMocks, with the project's own
 * @pulumi/pulumi, in a child process whose working directory is the project
 * root. Returns every resource it registered, once the runtime has drained its registrations.
 */
export function runProgram(projectRoot: string, program: string, env: Record<string, string> = {}): Promise<Registration[]> {
  const script = `
const pulumi = require(require.resolve("@pulumi/pulumi", { paths: [process.cwd()] }));
const seen = [];
pulumi.runtime.setMocks({
  newResource(a) { seen.push({ type: a.type, name: a.name, inputs: a.inputs }); return { id: a.name + "-id", state: a.inputs }; },
  call: (a) => a.inputs,
}, "project", "stack", false);
// As the language host runs a program (and as examples/local-engine.ts does): inside the root stack
// resource, done when the runtime's queue of registrations has drained (disconnect awaits it).
pulumi.runtime
  .runInPulumiStack(async () => require(require("node:path").resolve(${JSON.stringify(program)})))
  .then(() => pulumi.runtime.disconnect())
  .then(() => process.stdout.write(JSON.stringify(seen)), (e) => { console.error(e); process.exit(1); });
`;
  const { NODE_PATH: _ignored, ...base } = process.env;
  const child = spawn(process.execPath, ["-e", script], { cwd: projectRoot, env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((res, rej) => {
    child.once("exit", (code) => {
      if (code !== 0) return rej(new Error(`program exited ${code}: ${err}`));
      try {
        res((JSON.parse(out) as Registration[]).map((r) => ({ ...r, inputs: unwrapSecrets(r.inputs) })));
      } catch {
        rej(new Error(`program printed ${out.slice(0, 500)} ${err}`));
      }
    });
  });
}

export interface ProjectPlugin {
  check(urn: string, news: Props): Promise<{ inputs: Props; failures: { property: string; reason: string }[] }>;
  create(urn: string, props: Props): Promise<{ id: string; properties: Props }>;
  read(urn: string, id: string, props: Props): Promise<{ id: string; properties: Props; inputs: Props }>;
  delete(urn: string, id: string, props: Props): Promise<void>;
  stop(): void;
}

/** The dynamic-provider plugin of the project's own @pulumi/pulumi, started in the project root as the CLI starts it. */
export async function startPluginIn(projectRoot: string): Promise<ProjectPlugin> {
  const pulumiDir = dirname(require.resolve("@pulumi/pulumi/package.json", { paths: [projectRoot] }));
  const fromPulumi = (id: string) => require(require.resolve(id, { paths: [pulumiDir] }));
  const grpc = fromPulumi("@grpc/grpc-js");
  const structpb = fromPulumi("google-protobuf/google/protobuf/struct_pb");
  const providerpb = require(resolve(pulumiDir, "proto", "provider_pb"));
  const providerGrpc = require(resolve(pulumiDir, "proto", "provider_grpc_pb"));

  const { NODE_PATH: _ignored, ...env } = process.env;
  const child: ChildProcess = spawn(process.execPath, ["./node_modules/@pulumi/pulumi/cmd/dynamic-provider", "127.0.0.1:1"], {
    cwd: projectRoot,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const port = await new Promise<string>((res, rej) => {
    child.stdout!.once("data", (d: Buffer) => res(d.toString().trim()));
    child.once("exit", (code) => rej(new Error(`plugin exited ${code}: ${stderr}`)));
  });
  const client = new providerGrpc.ResourceProviderClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const unary = (method: string, req: unknown): Promise<any> =>
    new Promise((res, rej) => client[method](req, (err: Error | null, resp: any) => (err ? rej(err) : res(resp))));
  const struct = (o: Props) => structpb.Struct.fromJavaScript(o);
  const configure = new providerpb.ConfigureRequest();
  configure.setArgs(struct({}));
  configure.setAcceptsecrets(true);
  await unary("configure", configure);

  return {
    async check(urn, news) {
      const req = new providerpb.CheckRequest();
      req.setUrn(urn);
      req.setOlds(struct({}));
      req.setNews(struct(news));
      const resp = await unary("check", req);
      return {
        inputs: resp.getInputs().toJavaScript(),
        failures: resp.getFailuresList().map((f: any) => ({ property: f.getProperty(), reason: f.getReason() })),
      };
    },
    async create(urn, props) {
      const req = new providerpb.CreateRequest();
      req.setUrn(urn);
      req.setProperties(struct(props));
      const resp = await unary("create", req);
      return { id: resp.getId(), properties: resp.getProperties().toJavaScript() };
    },
    async read(urn, id, props) {
      const req = new providerpb.ReadRequest();
      req.setUrn(urn);
      req.setId(id);
      req.setProperties(struct(props));
      const resp = await unary("read", req);
      return { id: resp.getId(), properties: resp.getProperties()?.toJavaScript() ?? {}, inputs: resp.getInputs()?.toJavaScript() ?? {} };
    },
    async delete(urn, id, props) {
      const req = new providerpb.DeleteRequest();
      req.setUrn(urn);
      req.setId(id);
      req.setProperties(struct(props));
      await unary("delete", req);
    },
    stop() {
      client.close();
      child.kill();
    },
  };
}

export const urnOf = (r: Pick<Registration, "type" | "name">) => `urn:pulumi:stack::project::${r.type}::${r.name}`;
