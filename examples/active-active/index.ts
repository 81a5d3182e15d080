// One load balancer on two distributor devices: both hold the same group, so
// a 5-tuple picks the same amphora on either; the upstream router spreads the
// VIP over the devices' next hops by ECMP and drops a next hop that stops
// answering ARP (a dead device), with no controller in the path.
import * as pulumi from "@pulumi/pulumi";
import { ActiveActiveLoadBalancer, DistributorDevice, stackHost } from "../../index"; // in your project: from "ovslb"

interface Amphora {
  mac: string;
  hypervisor: string;
}

const config = new pulumi.Config();
const amphorae = config.requireObject<Amphora[]>("amphorae");
const vip = config.get("vip") ?? "10.0.0.215";
const nextHops: Record<string, string> = config.getObject("nextHops") ?? { dist1: "10.0.0.45", dist2: "10.0.0.46" };

const devices = Object.entries(nextHops).map(([name, nextHop]) => ({
  device: new DistributorDevice(name, { host: stackHost(name), deviceId: name, uplinkBridge: "br-seg" }),
  nextHop,
}));

const lb = new ActiveActiveLoadBalancer("lb-web", {
  devices,
  loadBalancerId: "lb-web",
  vip,
  // The lab's amphorae share one hypervisor, so placement is not given here;
  // give `hypervisor` in production and the N+1 rule refuses two on one.
  amphorae: amphorae.map((a, i) => ({ name: `amp-${i + 1}`, mac: a.mac, role: i < 2 ? "active" : "standby" })),
});

export const vipAddress = vip;
export const groupId = lb.groupId;
export const frontendMacs = lb.attachments.map((a) => a.frontendMac);
export const slots = lb.attachment.slots;
/** Per device: its attachments' ports and flows as read back. */
export const deviceHealth = Object.fromEntries(devices.map((d) => [d.nextHop, d.device.attachmentHealth]));
