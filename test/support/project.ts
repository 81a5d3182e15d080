import { spawn } from "node:child_process";
import { unwrapSecrets } from "./provider-plugin";

/**
 * A Pulumi project as the engine treats it, without the CLI: the program
 * runs in its own Node process with the project root as its working
 * directory. Its plugin is startProviderPlugin({ projectRoot }) (in
 * ./provider-plugin), started the way the CLI's pulumi-resource-pulumi-nodejs
 * starts it, so `require` in a serialized provider resolves exactly as it
 * would under `pulumi up`.
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

export const urnOf = (r: Pick<Registration, "type" | "name">) => `urn:pulumi:stack::project::${r.type}::${r.name}`;
