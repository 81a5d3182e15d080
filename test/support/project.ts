import { spawn } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { unwrapSecrets, type PluginCall } from "./provider-plugin";

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
 * `projectName` is the namespace of the program's own config keys (Pulumi.yaml's name).
 */
export function runProgram(projectRoot: string, program: string, env: Record<string, string> = {}, projectName = "project"): Promise<Registration[]> {
  const script = `
const pulumi = require(require.resolve("@pulumi/pulumi", { paths: [process.cwd()] }));
const seen = [];
pulumi.runtime.setMocks({
  newResource(a) { seen.push({ type: a.type, name: a.name, inputs: a.inputs }); return { id: a.name + "-id", state: a.inputs }; },
  call: (a) => a.inputs,
}, ${JSON.stringify(projectName)}, "stack", false);
// As the language host runs a program: inside the root stack
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
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((res, rej) => {
    child.once("close", (code) => {
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

/**
 * Temp Pulumi projects that use this checkout's built ovslb the way a user's
 * project would (nested-dependency and npm-workspace tests). `npm run build`
 * first: the copy is of dist/.
 */
const repo = resolve(__dirname, "..", "..");

/** What a package manager hoists to the project's node_modules: the SDK and ovslb's own dependencies (symlinks to this checkout's). */
export function hoistDependencies(modules: string): void {
  mkdirSync(join(modules, "@pulumi"), { recursive: true });
  symlinkSync(join(repo, "node_modules", "@pulumi", "pulumi"), join(modules, "@pulumi", "pulumi"));
  const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
  for (const dep of Object.keys(manifest.dependencies)) {
    mkdirSync(dirname(join(modules, dep)), { recursive: true });
    symlinkSync(join(repo, "node_modules", dep), join(modules, dep));
  }
}

/** A copy of what the ovslb package ships, at `dir`. */
export function copyPackagedOvslb(dir: string): void {
  mkdirSync(dir, { recursive: true });
  cpSync(join(repo, "package.json"), join(dir, "package.json"));
  for (const part of ["index.js", "provider", "components", "schema"]) cpSync(join(repo, "dist", part), join(dir, "dist", part), { recursive: true });
}

/** A component library `lib` at `dir` that depends on ovslb and wraps one OvsBridge (LabBridge). */
export function writeBridgeLibrary(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "lib", version: "1.0.0", main: "index.js", dependencies: { ovslb: "0.1.0" } }));
  writeFileSync(
    join(dir, "index.js"),
    `const pulumi = require("@pulumi/pulumi");
const { OvsBridge } = require("ovslb");
class LabBridge extends pulumi.ComponentResource {
  constructor(name, args, opts) {
    super("lib:index:LabBridge", name, {}, opts);
    this.bridge = new OvsBridge(name + "-bridge", args, { parent: this });
    this.registerOutputs({});
  }
}
module.exports = { LabBridge };
`,
  );
}

/** Deletes the bridge a project's program declared (when a test stopped half-way), stops its plugin and removes the project. */
export async function removeBridgeProject(
  project: string | undefined,
  plugin: PluginCall | undefined,
  bridge: Registration | undefined,
  id: string,
): Promise<void> {
  if (plugin && bridge) {
    const at = plugin.at(urnOf(bridge));
    const checked = await at.check({}, bridge.inputs).catch(() => undefined);
    if (checked) await at.delete(id, checked.inputs).catch(() => undefined);
  }
  plugin?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
}
