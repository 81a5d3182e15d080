import { describe, it, expect } from "vitest";
import { waitUntil } from "../support/wait";

describe("waitUntil", () => {
  it("returns the condition's value as soon as it holds, treating a throw as not yet", async () => {
    let calls = 0;
    const value = await waitUntil(
      () => {
        calls++;
        if (calls < 3) throw new Error("not yet");
        return calls === 4 ? "ready" : "";
      },
      { intervalMs: 1 },
    );
    expect(value).toBe("ready");
    expect(calls).toBe(4);
  });

  it("fails after the timeout, naming what it waited for and what it last saw", async () => {
    await expect(waitUntil(async () => 0, { what: "two echo requests", timeoutMs: 30, intervalMs: 5 })).rejects.toThrow(
      /waited 30 ms for two echo requests; last saw 0/,
    );
  });
});
