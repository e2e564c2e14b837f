/**
 * What a worker that judges another lost leaves in the heartbeat details of each call it fails on the lost worker's
 * behalf (src/watchdog/lost-calls.ts). Temporal hands the last heartbeat details to the next attempt, so the retry
 * knows an attempt was lost, where and when: it traces that attempt (a SIGKILLed worker exports nothing of its own).
 */
export interface LostAttemptNote {
  lostAttempt: {
    /** The attempt that was lost. */
    attempt: number;
    /** The identity of the worker that was running it. */
    worker: string;
    /** When that attempt started (the server's last started time), epoch ms; absent when the server gave none. */
    startedAt?: number;
    /** When the worker was judged lost, epoch ms. */
    lostAt: number;
  };
}

/** The note in an attempt's heartbeat details, if the attempt before it was lost. */
export function lostAttemptOf(details: unknown, attempt: number): LostAttemptNote['lostAttempt'] | undefined {
  if (typeof details !== 'object' || details === null) return undefined;
  const note = (details as Partial<LostAttemptNote>).lostAttempt;
  if (typeof note !== 'object' || note === null) return undefined;
  if (note.attempt !== attempt - 1 || typeof note.lostAt !== 'number' || typeof note.worker !== 'string')
    return undefined;
  return note;
}
