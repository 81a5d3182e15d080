import * as pulumi from "@pulumi/pulumi";
import { providerText } from "../dynamic";

/**
 * The base of ovslb's resources: a Pulumi dynamic resource, registered as
 * `pulumi-nodejs:dynamic/ovslb:<kind>` with its serialized provider in
 * `__provider`, which the SDK's dynamic-provider plugin evaluates and runs.
 * That is what pulumi.dynamic.Resource registers too; this base only takes
 * the provider's text from providerText (the build's, not the serializer's
 * in every program process). The type and the text are the state contract.
 */
export abstract class OvslbDynamicResource extends pulumi.CustomResource {
  protected constructor(kind: string, name: string, props: pulumi.Inputs, opts: pulumi.CustomResourceOptions) {
    super(`pulumi-nodejs:dynamic/ovslb:${kind}`, name, { ...props, __provider: providerText(kind) }, opts);
  }
}
