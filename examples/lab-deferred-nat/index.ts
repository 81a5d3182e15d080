// The Pulumi program (Pulumi.yaml points here): `pulumi up` with the Pulumi CLI.
import { labService } from "./program";

const service = labService();
export const groupIds = service.loadBalancer.groupIds;
export const bucketIds = service.loadBalancer.bucketIds;
