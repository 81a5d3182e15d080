import * as pulumi from "@pulumi/pulumi";
import type { OvnNorthbound, OvsHost } from "../model/inputs.generated";
import { validateAgainstSchema, type CheckFailure } from "../model/validate";

/**
 * Hosts named once per stack, in Pulumi config under `ovslb:`, for the
 * program: `ovslb:hosts` (name -> OvsHost: address, host key, port,
 * ovsRundir) and `ovslb:northbound` (the OVN northbound). How to log in
 * (user, key, passphrase, timeouts, jump host) goes in `ovslb:ssh`, which
 * the provider applies itself (provider/stack-ssh.ts), so no key is ever
 * written into a resource's inputs. A host of another site names its login
 * by `connection.sshProfile` (a profile in `ovslb:ssh.profiles`): the name
 * is all a host says of it here.
 */

const NAMESPACE = "ovslb";

const HOSTS_SCHEMA = {
  type: "object",
  propertyNames: { $ref: "common.json#/definitions/resourceName" },
  additionalProperties: { $ref: "common.json#/definitions/ovsHost" },
};
const NORTHBOUND_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["connection", "socket"],
  properties: { connection: { $ref: "common.json#/definitions/sshConnection" }, socket: { $ref: "common.json#/definitions/absolutePath" } },
};

/** Refused stack config: names the config key (e.g. `ovslb:hosts.gw1.connection.host`) and why, never the value. */
export class StackConfigError extends Error {
  constructor(readonly failures: CheckFailure[]) {
    super(`ovslb stack config: ${failures.map((f) => `${f.property}: ${f.reason}`).join("; ")}`);
    this.name = "StackConfigError";
  }
}

function checked<T>(key: string, schema: object, value: unknown): T {
  const failures = validateAgainstSchema(schema, value).map((f) => ({
    property: `${NAMESPACE}:${key}${f.property ? `.${f.property}` : ""}`,
    reason: f.reason,
  }));
  if (failures.length > 0) throw new StackConfigError(failures);
  return value as T;
}

/** The OVS host `ovslb:hosts.<name>`. */
export function stackHost(name: string): OvsHost {
  const hosts = new pulumi.Config(NAMESPACE).getObject<Record<string, unknown>>("hosts") ?? {};
  if (hosts[name] === undefined) {
    const known = Object.keys(hosts).join(", ") || "none";
    throw new StackConfigError([{ property: `${NAMESPACE}:hosts.${name}`, reason: `is not set (the stack's hosts: ${known})` }]);
  }
  return checked<Record<string, OvsHost>>("hosts", HOSTS_SCHEMA, { [name]: hosts[name] })[name];
}

/** The OVN northbound `ovslb:northbound`. */
export function stackNorthbound(): OvnNorthbound {
  const nb = new pulumi.Config(NAMESPACE).getObject<unknown>("northbound");
  if (nb === undefined) throw new StackConfigError([{ property: `${NAMESPACE}:northbound`, reason: "is not set" }]);
  return checked<OvnNorthbound>("northbound", NORTHBOUND_SCHEMA, nb);
}
