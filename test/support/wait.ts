/**
 * Waiting for a condition instead of sleeping for a guess: the condition is
 * checked now and again every `intervalMs` until it holds (its value is
 * returned) or `timeoutMs` has passed (then it fails, saying what it waited
 * for and the last value or error seen). A condition that throws counts as
 * "not yet".
 */

export interface WaitOptions {
  /** What is awaited, for the error (default "condition"). */
  what?: string;
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Check again after this long (default 50 ms). */
  intervalMs?: number;
}

export async function waitUntil<T>(condition: () => T | Promise<T>, opts: WaitOptions = {}): Promise<NonNullable<T>> {
  const { what = "condition", timeoutMs = 10_000, intervalMs = 50 } = opts;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
      last = value;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`waited ${timeoutMs} ms for ${what}; last saw ${seen}`);
    }
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}
