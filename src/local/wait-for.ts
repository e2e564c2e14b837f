/** Thrown inside a `waitFor` check to stop waiting: the condition can no longer come true. */
export class FatalWaitError extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
    this.name = 'FatalWaitError';
  }
}

/**
 * Polls `check` until it returns a value other than undefined or false, and returns that value; fails after `timeoutMs`
 * naming `what` and the last error `check` threw. A check that throws a `FatalWaitError` stops the wait at once (a
 * process that exited will not recover). Used by the local servers and by the tests.
 *
 * @example
 * const address = await waitFor('the dev stack', () => /TEMPORAL_ADDRESS=(\S+)/.exec(output)?.[1], { timeoutMs: 60_000 });
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 30_000, intervalMs = 100 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      if (error instanceof FatalWaitError) throw error.cause;
      last = error;
    }
    if (Date.now() > deadline) {
      const detail =
        last === undefined
          ? ''
          : ` (last error: ${last instanceof Error ? last.message.split('\n')[0] : String(last)})`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
