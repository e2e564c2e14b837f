/** How `inLanes` ends when a run fails. */
export interface InLanesOptions {
  /**
   * On the first failure, no lane takes another item, `onFailure` is called (to stop the runs still going), and the
   * failure is thrown only once every lane has ended: nothing a lane started is still running when the caller cleans up.
   * Without it the first failure is thrown at once, the other lanes running on.
   */
  settle?: { onFailure?: (error: unknown) => void };
}

/**
 * Runs `width` lanes that share one cursor: each lane takes the next item (`take` returns undefined when there is none,
 * or when the caller stops) and runs it, one after another, until none is left. The one "at most `width` at once"
 * helper of workflows (fan-out's tasks, provider-batch parts) and activities (a batch lane's calls); sandbox-safe
 * (plain promises, no timers, no import). A batch window's room is not a fixed width: it is its slot ledger
 * (workflows/batch/slot-ledger.ts).
 *
 * Not p-limit: that queues a promise for every item up front, where a lane asks `take` only when it is free, so the
 * caller stops it by returning undefined and a worker running hundreds of lanes holds one promise per lane.
 */
export async function inLanes<T>(
  width: number,
  take: () => T | undefined,
  run: (item: T) => Promise<unknown>,
  options: InLanesOptions = {},
): Promise<void> {
  const { settle } = options;
  if (!settle) {
    const lane = async (): Promise<void> => {
      for (let item = take(); item !== undefined; item = take()) await run(item);
    };
    await Promise.all(Array.from({ length: width }, lane));
    return;
  }
  let failure: { error: unknown } | undefined;
  const next = (): T | undefined => (failure ? undefined : take());
  const lane = async (): Promise<void> => {
    try {
      for (let item = next(); item !== undefined; item = next()) await run(item);
    } catch (error) {
      if (failure) return;
      failure = { error };
      settle.onFailure?.(error);
    }
  };
  await Promise.all(Array.from({ length: width }, lane));
  if (failure) throw failure.error;
}
