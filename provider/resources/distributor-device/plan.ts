import type { DistributorDeviceInputs } from "../../model/inputs.generated";
import { checkConnection, type CheckFailure } from "../../model/validate";
import { DISTRIBUTOR_DEVICE_KEY, ownerOf, type OpenVSwitchRow } from "../../ovsdb";

/**
 * DistributorDevice as pure data. The device's identity is written once to
 * the host's Open_vSwitch row (external_ids `ovslb:distributor-device`); its
 * attachments mark their bridges with `ovslb:device`, which is how a delete
 * finds that the device is still in use.
 */

export const deviceResourceId = (i: Pick<DistributorDeviceInputs, "deviceId">) => `distributor-device/${i.deviceId}`;

export const withDefaults = (inputs: DistributorDeviceInputs): DistributorDeviceInputs => ({ ...inputs });

export const checkRules = (inputs: DistributorDeviceInputs): CheckFailure[] => checkConnection(inputs.host.connection, "host.connection");

export function stringMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value instanceof Map) for (const [k, v] of value) out[String(k)] = String(v);
  return out;
}

/** The device id the host is registered to (its root row's mark), if any. */
export const registeredDevice = (root: Pick<OpenVSwitchRow, "external_ids"> | undefined) => (root ? ownerOf(root, DISTRIBUTOR_DEVICE_KEY) : undefined);

/** Why a device may not be deleted now, or undefined when it may. */
export function deleteRefusal(deviceId: string, attachments: readonly string[]): string | undefined {
  if (attachments.length === 0) return undefined;
  return `distributor device ${deviceId} still has ${attachments.length} attachment(s) (${attachments.join(", ")}); delete them first`;
}
