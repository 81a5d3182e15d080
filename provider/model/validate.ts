import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import common from "../../schema/common.json";
import type { SshConnection } from "./inputs.generated";

/** A refused input: the property path (dotted, as Pulumi shows it) and why. */
export interface CheckFailure {
  property: string;
  reason: string;
}

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, useDefaults: false });
ajv.addSchema(common, "common.json");
const compiled = new Map<object, ValidateFunction>();

/** "/gateways/0/connection/host" -> "gateways[0].connection.host" */
function propertyPath(pointer: string, extra?: string): string {
  const parts = pointer.split("/").slice(1).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) parts.push(extra);
  let path = "";
  for (const p of parts) path += /^\d+$/.test(p) ? `[${p}]` : path ? `.${p}` : p;
  return path;
}

/** Reasons say what was expected, from the schema's own description; the value itself is never echoed (it may be a secret). */
function toFailure(e: ErrorObject): CheckFailure {
  const described = (e.parentSchema as { description?: string } | undefined)?.description;
  switch (e.keyword) {
    case "required":
      return { property: propertyPath(e.instancePath, (e.params as { missingProperty: string }).missingProperty), reason: "is required" };
    case "additionalProperties":
      return {
        property: propertyPath(e.instancePath, (e.params as { additionalProperty: string }).additionalProperty),
        reason: "is not a known property",
      };
    case "pattern":
    case "type":
    case "minimum":
    case "maximum":
    case "maxLength":
    case "minLength":
      return { property: propertyPath(e.instancePath), reason: described ? `must be ${described}` : `${e.message}` };
    case "enum":
      return {
        property: propertyPath(e.instancePath),
        reason: `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(", ")}`,
      };
    default:
      return { property: propertyPath(e.instancePath), reason: e.message ?? "is invalid" };
  }
}

/** Validates inputs against a resource schema; one failure per problem, deduplicated. */
export function validateAgainstSchema(schema: object, inputs: unknown): CheckFailure[] {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (validate(inputs)) return [];
  const failures = (validate.errors ?? []).filter((e) => e.keyword !== "if").map(toFailure);
  const seen = new Set<string>();
  return failures.filter((f) => {
    const key = `${f.property}\0${f.reason}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** Rules on a connection that JSON Schema draft-07 cannot say plainly. */
export function checkConnection(c: SshConnection, at: string): CheckFailure[] {
  const failures: CheckFailure[] = [];
  if (!c.hostKey && !c.knownHosts) {
    failures.push({ property: `${at}.hostKey`, reason: "give hostKey or knownHosts: host keys are always verified" });
  }
  if (!c.privateKey && !c.privateKeyPath && !c.agent) {
    failures.push({ property: `${at}.privateKey`, reason: "give privateKey, privateKeyPath or agent: only key authentication is used" });
  }
  if (c.jumpHost) failures.push(...checkConnection(c.jumpHost, `${at}.jumpHost`));
  return failures;
}
