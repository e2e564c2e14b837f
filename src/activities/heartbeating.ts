import { Context } from '@temporalio/activity';

/**
 * How often storage activities heartbeat once they have run that long: their heartbeat timeout is 10 s (the batch's
 * storageActivities), which a slow store may well exceed for one seal or finish.
 */
export const STORAGE_HEARTBEAT_MS = 3000;

/**
 * Runs `work`, heartbeating every `everyMs` while it runs, so a worker that dies mid-way is noticed within the activity's
 * heartbeat timeout instead of its start-to-close timeout. The first heartbeat waits `everyMs` too: most storage
 * activities end sooner and cost no heartbeat (a billed action).
 */
export async function heartbeating<T>(everyMs: number, work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  const timer = setInterval(() => context.heartbeat(), everyMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
