import { UNKNOWN, isSecret, type Props } from "./state";

/**
 * A step's property diff as `pulumi preview --diff` prints it for a dynamic
 * resource: the engine's own diff of the old and new checked inputs (a
 * dynamic provider returns no detailed diff), objects by key and lists by
 * index, printed with the CLI's signs and indentation, colours left out.
 * Follows pkg/engine/diff.go (GetResourcePropertiesDetails, PrintObjectDiff,
 * printPropertyValueDiff) and sdk/go/common/resource/properties_diff.go
 * (PropertyMap.Diff, PropertyValue.Diff) of pulumi/pulumi.
 *
 * `summary` leaves out what did not change (the CLI prints it unsigned).
 */

type Value = unknown;

type ValueDiff =
  | { kind: "object"; diff: ObjectDiff }
  | { kind: "array"; adds: Map<number, Value>; deletes: Map<number, Value>; updates: Map<number, ValueDiff>; sames: Map<number, Value>; length: number }
  | { kind: "value"; old: Value; new: Value };

interface ObjectDiff {
  adds: Map<string, Value>;
  deletes: Map<string, Value>;
  updates: Map<string, ValueDiff>;
  sames: Map<string, Value>;
}

const isObject = (v: Value): v is Props => v !== null && typeof v === "object" && !Array.isArray(v) && !isSecret(v);
const hasValue = (v: Value) => v !== null && v !== undefined;
/** Keys the engine keeps to itself (`__provider`, ...). */
const internal = (k: string) => k.startsWith("__");

function deepEqual(a: Value, b: Value): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

function sorted(v: Value): Value {
  if (Array.isArray(v)) return v.map(sorted);
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sorted((v as Props)[k])]),
    );
  return v;
}

function diffObjects(olds: Props, news: Props): ObjectDiff | undefined {
  const d: ObjectDiff = { adds: new Map(), deletes: new Map(), updates: new Map(), sames: new Map() };
  for (const [k, old] of Object.entries(olds)) {
    if (internal(k)) continue;
    if (k in news) {
      const now = news[k];
      const vd = diffValues(old, now);
      if (!vd) d.sames.set(k, old);
      else if (!hasValue(old)) d.adds.set(k, now);
      else if (!hasValue(now)) d.deletes.set(k, old);
      else d.updates.set(k, vd);
    } else if (hasValue(old)) d.deletes.set(k, old);
  }
  for (const [k, now] of Object.entries(news)) if (!internal(k) && !(k in olds) && hasValue(now)) d.adds.set(k, now);
  return d.adds.size + d.deletes.size + d.updates.size === 0 ? undefined : d;
}

function diffValues(old: Value, now: Value): ValueDiff | undefined {
  if (Array.isArray(old) && Array.isArray(now)) {
    const adds = new Map<number, Value>();
    const deletes = new Map<number, Value>();
    const updates = new Map<number, ValueDiff>();
    const sames = new Map<number, Value>();
    for (let i = old.length; i < now.length; i++) adds.set(i, now[i]);
    for (let i = now.length; i < old.length; i++) deletes.set(i, old[i]);
    for (let i = 0; i < Math.min(old.length, now.length); i++) {
      const vd = diffValues(old[i], now[i]);
      if (vd) updates.set(i, vd);
      else sames.set(i, old[i]);
    }
    if (adds.size + deletes.size + updates.size === 0) return undefined;
    return { kind: "array", adds, deletes, updates, sames, length: Math.max(old.length, now.length) };
  }
  if (isObject(old) && isObject(now)) {
    const diff = diffObjects(old, now);
    return diff && { kind: "object", diff };
  }
  return deepEqual(old, now) ? undefined : { kind: "value", old, new: now };
}

type Op = "create" | "delete" | "update" | "same";
const PREFIX: Record<Op, string> = { create: "+ ", delete: "- ", update: "~ ", same: "  " };

const indentOf = (indent: number, op: Op, prefix: boolean) => {
  const spaces = "    ".repeat(indent);
  return prefix && spaces ? spaces.slice(0, -2) + PREFIX[op] : spaces;
};

const printable = (v: Value) =>
  !(v === null || v === undefined || v === "" || (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0));

function primitive(v: Value): string {
  if (v === null || v === undefined) return "<null>";
  if (v === UNKNOWN) return "output<string>";
  if (isSecret(v)) return "[secret]";
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

const isPrimitive = (v: Value) => v === null || v === undefined || typeof v !== "object" || isSecret(v);

class Printer {
  text = "";
  constructor(private readonly summary: boolean) {}

  private title(key: string, width: number, indent: number, op: Op, prefix: boolean) {
    this.text += `${indentOf(indent, op, prefix)}${key.padEnd(width)}: `;
  }

  value(v: Value, indent: number, op: Op, prefix: boolean) {
    if (isPrimitive(v)) this.text += primitive(v);
    else if (Array.isArray(v)) {
      if (v.length === 0) this.text += "[]";
      else {
        this.text += "[\n";
        v.forEach((e, i) => {
          this.text += `${indentOf(indent, op, prefix)}    [${i}]: `;
          this.value(e, indent + 1, op, prefix);
        });
        this.text += `${indentOf(indent, op, false)}]`;
      }
    } else {
      const obj = v as Props;
      if (Object.keys(obj).length === 0) this.text += "{}";
      else {
        this.text += "{\n";
        this.object(obj, indent + 1, op, prefix);
        this.text += `${indentOf(indent, op, false)}}`;
      }
    }
    this.text += "\n";
  }

  object(props: Props, indent: number, op: Op, prefix: boolean) {
    const keys = Object.keys(props).filter((k) => !internal(k) && printable(props[k]));
    const width = Math.max(0, ...keys.map((k) => k.length));
    for (const k of keys.sort()) {
      this.title(k, width, indent, op, prefix);
      this.value(props[k], indent, op, prefix);
    }
  }

  objectDiff(d: ObjectDiff, indent: number) {
    const keys = [...new Set([...d.adds.keys(), ...d.deletes.keys(), ...d.updates.keys(), ...d.sames.keys()])].sort();
    const width = Math.max(0, ...keys.map((k) => k.length));
    for (const k of keys) {
      const title = (op: Op, prefix: boolean) => this.title(k, width, indent, op, prefix);
      if (d.adds.has(k)) this.signed("create", d.adds.get(k), title, indent);
      else if (d.deletes.has(k)) this.signed("delete", d.deletes.get(k), title, indent);
      else if (d.updates.has(k)) this.valueDiff(d.updates.get(k)!, title, indent);
      else if (!this.summary && printable(d.sames.get(k))) {
        title("same", false);
        this.value(d.sames.get(k), indent, "same", false);
      }
    }
  }

  private signed(op: "create" | "delete", v: Value, title: (op: Op, prefix: boolean) => void, indent: number) {
    title(op, true);
    this.value(v, indent, op, true);
  }

  private valueDiff(d: ValueDiff, title: (op: Op, prefix: boolean) => void, indent: number) {
    if (d.kind === "array") {
      title("update", true);
      this.text += "[\n";
      for (let i = 0; i < d.length; i++) {
        const elem = (op: Op, prefix: boolean) => (this.text += `${indentOf(indent + 1, op, prefix)}[${i}]: `);
        if (d.adds.has(i)) this.signed("create", d.adds.get(i), elem, indent + 2);
        else if (d.deletes.has(i)) this.signed("delete", d.deletes.get(i), elem, indent + 2);
        else if (d.updates.has(i)) this.valueDiff(d.updates.get(i)!, elem, indent + 2);
        else if (!this.summary) {
          elem("same", false);
          this.value(d.sames.get(i), indent + 2, "same", false);
        }
      }
      this.text += `${indentOf(indent, "update", false)}]\n`;
    } else if (d.kind === "object") {
      title("update", true);
      this.text += "{\n";
      this.objectDiff(d.diff, indent + 1);
      this.text += `${indentOf(indent, "update", false)}}\n`;
    } else {
      const [printOld, printNew] = [printable(d.old), printable(d.new)];
      if (printOld && printNew && isPrimitive(d.old) && isPrimitive(d.new)) {
        title("update", true);
        this.text += `${primitive(d.old)} => ${primitive(d.new)}\n`;
        return;
      }
      if (printOld) this.signed("delete", d.old, title, indent);
      if (printNew) this.signed("create", d.new, title, indent);
    }
  }
}

/** The property lines of an update or replace of `olds` to `news` (checked inputs), as the CLI prints them under the resource. */
export function propertyDiffText(olds: Props, news: Props, opts: { summary?: boolean } = {}): string {
  const p = new Printer(opts.summary ?? true);
  const d = diffObjects(olds, news);
  // The CLI indents a resource's properties one level (it adds one to the resource's own indent, 0 at the top).
  if (d) p.objectDiff(d, 1);
  return p.text;
}
