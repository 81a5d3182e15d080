import { relative } from "node:path";
import { afterAll, beforeAll, expect, inject } from "vitest";
import { lockLab } from "./lab";

/**
 * Every file of the shared lab's lanes holds the lab lock while it runs:
 * shared, so the two lanes' files run side by side, or exclusive for the
 * files that disrupt the shared hosts for everyone (vitest.config.mts,
 * WHOLE_LAB: they restart a gateway's ovs-vswitchd), which then run alone.
 * It is taken before the file's own hooks (and their locks on shares of the
 * lab), always in that order, and released after them.
 */
let release: (() => void) | undefined;

beforeAll(async () => {
  const file = relative(process.cwd(), expect.getState().testPath ?? "");
  release = await lockLab("lab", { shared: !inject("wholeLab").includes(file), timeoutMs: 600_000 });
}, 600_000);

afterAll(() => release?.());

declare module "vitest" {
  export interface ProvidedContext {
    /** Lab files that run while no other lab file does. */
    wholeLab: string[];
  }
}
