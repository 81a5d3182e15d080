import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import { handle } from "../provider/handlers";

/**
 * A stand-in for `pulumi up|preview|refresh|destroy` where the Pulumi CLI is
 * not installed (the lab): the program runs under pulumi.runtime.setMocks to
 * collect the ovslb resources it declares, and each is checked, diffed and
 * created/updated/deleted through the provider's own entry point, in
 * declaration order (reverse for deletes). State is a JSON file. Real stacks
 * use the Pulumi CLI; nothing here is needed there.
 */

type Props = Record<string, any>;
interface Declared {
  urn: string;
  kind: string;
  inputs: Props;
}
interface StateEntry {
  kind: string;
  id: string;
  outputs: Props;
}
type State = Record<string, StateEntry>;

const DYNAMIC_PREFIX = "pulumi-nodejs:dynamic/ovslb:";
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** The engine hands a provider that does not accept secrets plain values. */
function plain(v: any): any {
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    if (v[SECRET_SIG] !== undefined) return plain(v.value);
    return Object.fromEntries(Object.entries(v).filter(([k]) => k !== "__provider").map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

/** Runs the program to completion and returns the ovslb resources it declared, in order. Once per process (it ends the runtime's connection). */
export async function declaredResources(program: () => unknown): Promise<Declared[]> {
  const declared: Declared[] = [];
  pulumi.runtime.setMocks(
    {
      newResource(args) {
        if (args.type.startsWith(DYNAMIC_PREFIX)) {
          declared.push({ urn: `${args.type}::${args.name}`, kind: args.type.slice(DYNAMIC_PREFIX.length), inputs: plain(args.inputs) });
        }
        return { id: `${args.name}-preview`, state: args.inputs };
      },
      call: (args) => args.inputs,
    },
    "lab",
    "lab",
    false,
  );
  // As the Pulumi CLI's language host runs a program: inside the root stack
  // resource, and done when the runtime's queue of outstanding registrations
  // (and anything they start, e.g. resources made inside an apply) has
  // drained, which disconnect() awaits before it closes the (mock) monitor.
  await pulumi.runtime.runInPulumiStack(async () => program());
  await pulumi.runtime.disconnect();
  return declared;
}

async function call<T>(kind: string, method: Parameters<typeof handle>[1], args: unknown[]): Promise<T> {
  return (await handle(kind, method, args)) as T;
}

async function checked(d: Declared): Promise<Props> {
  const { inputs, failures } = await call<{ inputs: Props; failures: { property: string; reason: string }[] }>(d.kind, "check", [{}, d.inputs]);
  if (failures.length > 0) {
    throw new Error(`${d.urn}: invalid inputs:\n${failures.map((f) => `  ${f.property}: ${f.reason}`).join("\n")}`);
  }
  return inputs;
}

export async function run(command: string, program: () => unknown, statePath: string): Promise<void> {
  const state: State = existsSync(statePath) ? JSON.parse(readFileSync(statePath, "utf8")) : {};
  const save = () => writeFileSync(statePath, JSON.stringify(state, null, 2), { mode: 0o600 });
  const declared = command === "destroy" ? [] : await declaredResources(program);
  const wanted = new Set(declared.map((d) => d.urn));

  if (command === "refresh") {
    for (const [urn, entry] of Object.entries(state)) {
      const r = await call<{ id: string; props: Props }>(entry.kind, "read", [entry.id, entry.outputs]);
      if (!r.id) {
        console.log(`- ${urn}: gone from its hosts`);
        delete state[urn];
      } else {
        const drift: string[] = r.props.drift ?? [];
        console.log(`${drift.length ? "~" : "="} ${urn}${drift.map((f) => `\n    ${f}`).join("")}`);
        state[urn] = { ...entry, outputs: r.props };
      }
      save();
    }
    return;
  }

  for (const d of declared) {
    const inputs = await checked(d);
    const old = state[d.urn];
    if (!old) {
      console.log(`+ ${d.urn}`);
      if (command !== "up") continue;
      const r = await call<{ id: string; outs: Props }>(d.kind, "create", [inputs]);
      state[d.urn] = { kind: d.kind, id: r.id, outputs: r.outs };
    } else {
      const diff = await call<{ changes: boolean; replaces?: string[] }>(d.kind, "diff", [old.id, old.outputs, inputs]);
      if (!diff.changes) {
        console.log(`= ${d.urn}`);
        continue;
      }
      const replace = (diff.replaces ?? []).length > 0;
      console.log(`${replace ? "+-" : "~"} ${d.urn}${replace ? ` (replace: ${diff.replaces!.join(", ")})` : ""}`);
      if (command !== "up") continue;
      if (replace) {
        await call(d.kind, "delete", [old.id, old.outputs]);
        const r = await call<{ id: string; outs: Props }>(d.kind, "create", [inputs]);
        state[d.urn] = { kind: d.kind, id: r.id, outputs: r.outs };
      } else {
        const r = await call<{ outs: Props }>(d.kind, "update", [old.id, old.outputs, inputs]);
        state[d.urn] = { ...old, outputs: r.outs };
      }
    }
    save();
  }
  for (const urn of Object.keys(state).reverse()) {
    if (wanted.has(urn)) continue;
    console.log(`- ${urn}`);
    if (command !== "up" && command !== "destroy") continue;
    await call(state[urn].kind, "delete", [state[urn].id, state[urn].outputs]);
    delete state[urn];
    save();
  }
}
