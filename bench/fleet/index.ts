// A fleet of services, each with its hypervisor flows on one hypervisor: the
// stack bench/fleet-preview.ts previews, refreshes and changes. Its hosts come
// from `ovslb:hosts` and the login from `ovslb:ssh`, as in any stack.
import * as pulumi from "@pulumi/pulumi";
import { DsrHypervisorFlows, stackHost } from "../../index"; // in your project: from "ovslb"
import { fleetService } from "./services";

const config = new pulumi.Config();
const hypervisors = config.requireObject<string[]>("hypervisors");
const services = config.requireNumber("services");
// The one service whose backend moved (the benchmark's one-resource change).
const moved = config.getNumber("movedService");

for (let i = 0; i < services; i++) {
  const s = fleetService(i, hypervisors, i === moved);
  new DsrHypervisorFlows(s.name, {
    name: s.name,
    host: stackHost(s.hypervisor),
    bridge: "br-seg",
    vips: [{ address: s.vip, port: 80, protocol: "tcp", backends: [s.backend] }],
  });
}

export const serviceCount = services;
