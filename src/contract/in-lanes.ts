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
): Promise<void> {
  const lane = async (): Promise<void> => {
    for (let item = take(); item !== undefined; item = take()) await run(item);
  };
  await Promise.all(Array.from({ length: width }, lane));
}
