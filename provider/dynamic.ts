import type * as pulumi from "@pulumi/pulumi";

/**
 * The provider object Pulumi serializes into state. It must stay thin: each
 * method only requires the installed ovslb at call time and forwards to
 * provider/handlers.ts, so refresh and destroy run the installed code and no
 * client, socket or class instance is captured. Its text is part of every
 * resource's state: change it only with care.
 */
export function dynamicProvider(kind: string): pulumi.dynamic.ResourceProvider {
  return {
    check: (olds, news) => require("ovslb/dist/provider/handlers").handle(kind, "check", [olds, news]),
    diff: (id, olds, news) => require("ovslb/dist/provider/handlers").handle(kind, "diff", [id, olds, news]),
    create: (inputs) => require("ovslb/dist/provider/handlers").handle(kind, "create", [inputs]),
    read: (id, props) => require("ovslb/dist/provider/handlers").handle(kind, "read", [id, props]),
    update: (id, olds, news) => require("ovslb/dist/provider/handlers").handle(kind, "update", [id, olds, news]),
    delete: (id, props) => require("ovslb/dist/provider/handlers").handle(kind, "delete", [id, props]),
  };
}
