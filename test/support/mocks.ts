import * as pulumi from "@pulumi/pulumi";

/** A resource a program registered under mocks, with the inputs it was given. */
export interface Registered {
  type: string;
  name: string;
  inputs: Record<string, any>;
}

/**
 * Pulumi's mocks for a unit test of a program or component: every resource
 * registered is recorded, in order, in the returned list; its state is its
 * inputs and its id `<name>-id`. `preview`: values from other resources'
 * outputs may be unknown, as in `pulumi preview`.
 */
export async function mockResources(preview = false): Promise<Registered[]> {
  const registered: Registered[] = [];
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        return { id: `${args.name}-id`, state: args.inputs };
      },
      call: (args) => args.inputs,
    },
    "project",
    "stack",
    preview,
  );
  return registered;
}
