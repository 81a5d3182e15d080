import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockLab, lockLabAll } from "../support/lab";

/**
 * The lab's locks (flock(1) on files in the lab's directory; here a directory
 * of the test's own, so no lab is needed): lockLabAll takes several without
 * ever holding one while it waits for another.
 */

let dir: string;
let before: string | undefined;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ovslb-locks-"));
  before = process.env.OVSLB_LAB_DIR;
  process.env.OVSLB_LAB_DIR = dir;
});

afterAll(() => {
  if (before === undefined) delete process.env.OVSLB_LAB_DIR;
  else process.env.OVSLB_LAB_DIR = before;
  rmSync(dir, { recursive: true, force: true });
});

describe("lockLabAll", () => {
  it("while one of its locks is held elsewhere, it holds none of the others; it takes them all once that one is let go", async () => {
    const other = await lockLab("second");
    let all: (() => void) | undefined;
    const taking = lockLabAll(["first", "second"], 20_000).then((u) => (all = u));
    // It took "first", found "second" held and let "first" go again: another may take it meanwhile.
    await new Promise((r) => setTimeout(r, 300));
    const first = await lockLab("first", 5_000);
    first();
    expect(all).toBeUndefined();
    other();
    await taking;
    expect(all).toBeDefined();
    // Now it holds both: neither can be taken until it lets them go.
    await expect(lockLab("first", 1)).rejects.toThrow(/lab lock first: not taken within 1 ms/);
    await expect(lockLab("second", 1)).rejects.toThrow(/lab lock second: not taken within 1 ms/);
    all!();
    (await lockLab("first", 5_000))();
    (await lockLab("second", 5_000))();
  });

  it("gives up at its deadline, naming the locks", async () => {
    const other = await lockLab("held");
    try {
      await expect(lockLabAll(["free", "held"], 1_500)).rejects.toThrow(/lab lock held: not taken within|lab locks free, held: not all taken within 1500 ms/);
    } finally {
      other();
    }
  });
});
