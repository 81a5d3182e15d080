import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * The harness's state file: one JSON file per stack, the resources in the
 * order the engine would keep them (a resource after its parent and its
 * dependencies). Secrets stay secret in the file as the Pulumi engine keeps
 * them in a checkpoint: the same envelope, `{ [SECRET_SIG]: SECRET_VAL,
 * ciphertext }`, the value encrypted with AES-256-GCM under a key derived
 * (scrypt) from a passphrase (OVSLB_HARNESS_PASSPHRASE, else
 * PULUMI_CONFIG_PASSPHRASE, else the empty passphrase, which Pulumi's
 * passphrase provider accepts too) and the file's own random salt.
 */

export type Props = Record<string, any>;

export const SECRET_SIG = "4dabf18193072939515e22adb298388d";
export const SECRET_VAL = "1b47061264138c4ac30d75fd1eb44270";
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

export interface StateResource {
  urn: string;
  type: string;
  /** A custom resource (has a provider and an id) rather than a component or the stack. */
  custom: boolean;
  id?: string;
  parent?: string;
  dependencies: string[];
  propertyDependencies?: Record<string, string[]>;
  /** Inputs and outputs in the engine's form: secrets as `{ [SECRET_SIG]: SECRET_VAL, value }`. */
  inputs: Props;
  outputs: Props;
  additionalSecretOutputs?: string[];
  protect?: boolean;
  retainOnDelete?: boolean;
  deleteBeforeReplace?: boolean;
  /** Set when a create or update failed part-way: the provider's reasons (as the engine's initErrors). */
  initErrors?: string[];
  /** An old copy of a replaced resource, awaiting its delete (create-before-delete). */
  pendingDelete?: boolean;
}

export interface State {
  project: string;
  stack: string;
  resources: StateResource[];
}

interface StateFile {
  version: 1;
  project: string;
  stack: string;
  secrets: { cipher: "aes-256-gcm"; kdf: "scrypt"; salt: string; check: string };
  resources: StateResource[];
}

export const isSecret = (v: unknown): v is { value: unknown } => !!v && typeof v === "object" && !Array.isArray(v) && (v as Props)[SECRET_SIG] === SECRET_VAL;

export const secret = (v: unknown) => (isSecret(v) ? v : { [SECRET_SIG]: SECRET_VAL, value: v });

export function containsSecret(v: unknown): boolean {
  if (isSecret(v)) return true;
  if (Array.isArray(v)) return v.some(containsSecret);
  if (v && typeof v === "object") return Object.values(v).some(containsSecret);
  return false;
}

export function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(containsUnknown);
  if (v && typeof v === "object") return Object.values(v).some(containsUnknown);
  return false;
}

/** The value with every secret envelope removed (what a provider that does not accept secrets is sent). */
export function plain(v: any): any {
  if (isSecret(v)) return plain(v.value);
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** Where the secret envelopes are ("a.b[0]"). */
export function secretPaths(v: any, path = "", out: string[] = []): string[] {
  if (isSecret(v)) out.push(path);
  else if (Array.isArray(v)) v.forEach((x, i) => secretPaths(x, `${path}[${i}]`, out));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) secretPaths(x, path ? `${path}.${k}` : k, out);
  return out;
}

class Sealer {
  private readonly key: Buffer;
  constructor(
    passphrase: string,
    readonly salt: string,
  ) {
    this.key = scryptSync(passphrase, Buffer.from(salt, "base64"), 32);
  }
  seal(value: unknown): string {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key, iv);
    const body = Buffer.concat([c.update(JSON.stringify(value) ?? "null", "utf8"), c.final()]);
    return `v1:${iv.toString("base64")}:${c.getAuthTag().toString("base64")}:${body.toString("base64")}`;
  }
  open(ciphertext: string): unknown {
    const [v, iv, tag, body] = ciphertext.split(":");
    if (v !== "v1" || !iv || !tag || body === undefined) throw new Error("a secret in the state file is not in the v1 format");
    const d = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv, "base64"));
    d.setAuthTag(Buffer.from(tag, "base64"));
    return JSON.parse(Buffer.concat([d.update(Buffer.from(body, "base64")), d.final()]).toString("utf8"));
  }
}

function mapSecrets(v: any, f: (s: Props) => Props): any {
  if (v && typeof v === "object" && !Array.isArray(v) && v[SECRET_SIG] === SECRET_VAL) return f(v);
  if (Array.isArray(v)) return v.map((x) => mapSecrets(x, f));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapSecrets(x, f)]));
  return v;
}

export function defaultPassphrase(): string {
  return process.env.OVSLB_HARNESS_PASSPHRASE ?? process.env.PULUMI_CONFIG_PASSPHRASE ?? "";
}

/** A stack's state file, read and written whole (mode 0600, replaced atomically). */
export class StateStore {
  private sealer?: Sealer;
  private check?: string;

  constructor(
    readonly path: string,
    private readonly passphrase = defaultPassphrase(),
  ) {}

  load(project: string, stack: string): State {
    if (!existsSync(this.path)) return { project, stack, resources: [] };
    const file = JSON.parse(readFileSync(this.path, "utf8")) as StateFile;
    if (file.version !== 1) throw new Error(`${this.path}: state version ${JSON.stringify(file.version)} is not 1`);
    this.sealer = new Sealer(this.passphrase, file.secrets.salt);
    this.check = file.secrets.check;
    try {
      if (this.sealer.open(file.secrets.check) !== "ovslb-harness") throw new Error("mismatch");
    } catch {
      throw new Error(`${this.path}: the passphrase does not open this state's secrets (OVSLB_HARNESS_PASSPHRASE)`);
    }
    const sealer = this.sealer;
    const open = (v: Props) => mapSecrets(v, (s) => ({ [SECRET_SIG]: SECRET_VAL, value: sealer.open(s.ciphertext) }));
    return {
      project: file.project,
      stack: file.stack,
      resources: file.resources.map((r) => ({ ...r, inputs: open(r.inputs), outputs: open(r.outputs) })),
    };
  }

  save(state: State): void {
    if (!this.sealer) {
      this.sealer = new Sealer(this.passphrase, randomBytes(16).toString("base64"));
      this.check = this.sealer.seal("ovslb-harness");
    }
    const sealer = this.sealer;
    const seal = (v: Props) => mapSecrets(v, (s) => ({ [SECRET_SIG]: SECRET_VAL, ciphertext: sealer.seal(s.value) }));
    const file: StateFile = {
      version: 1,
      project: state.project,
      stack: state.stack,
      secrets: { cipher: "aes-256-gcm", kdf: "scrypt", salt: sealer.salt, check: this.check! },
      resources: state.resources.map((r) => ({ ...r, inputs: seal(r.inputs), outputs: seal(r.outputs) })),
    };
    mkdirSync(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(file, null, 2) + "\n", { mode: 0o600 });
    renameSync(tmp, this.path);
  }
}
