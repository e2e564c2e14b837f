/**
 * Runs `width` lanes that share one cursor: each lane takes the next item (`take` returns undefined when there is none,
 * or when the caller stops) and runs it, one after another, until none is left. The workflows' one way to keep at most
 * `width` things going at once; sandbox-safe (plain promises, no timers).
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
