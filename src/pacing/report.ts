import type { PacingReport } from '../contract/pacing';
import type { LimitChange } from './aimd';
import type { KeyPacer } from './key-pacer';

/** A workflow hears from a worker's pacer at least this often while its calls run (and at once when the limit moves). */
const REPORT_EVERY_MS = 5000;
/** Workflows remembered per process; the least recently reported goes first. */
const MAX_REMEMBERED = 2000;

/** A first report to a workflow carries the moves of this last minute. */
const FIRST_REPORT_MOVES_MS = 60_000;

const lastReported = new Map<string, { at: number; lastMove?: LimitChange }>();

/**
 * The report a call of `workflowId` carries back to its workflow, or undefined when there is nothing new to say: the
 * limit has not moved since this process last reported to that workflow, and that was less than 5 s ago. So a batch
 * of thousands of calls carries a few reports, not one per call, and never misses a move.
 */
export function pacingReport(
  workflowId: string,
  worker: string,
  pacer: KeyPacer,
  now = Date.now(),
): PacingReport | undefined {
  const { provider, model, keyId } = pacer.key;
  const id = `${workflowId}\u0000${provider}\u0000${model}\u0000${keyId}`;
  const previous = lastReported.get(id);
  // Most calls have nothing new to say: decided before the snapshot is built, since this runs on every call.
  if (previous !== undefined && pacer.lastChange === previous.lastMove && now - previous.at < REPORT_EVERY_MS)
    return undefined;
  const snapshot = pacer.snapshot();
  // The pacer keeps its last 20 moves (the same objects); those after the last one reported are new.
  const seen = previous?.lastMove === undefined ? -1 : snapshot.changes.indexOf(previous.lastMove);
  const moves =
    seen >= 0
      ? snapshot.changes.slice(seen + 1)
      : snapshot.changes.filter((change) => change.at >= (previous?.at ?? now - FIRST_REPORT_MOVES_MS));
  if (previous !== undefined && moves.length === 0 && now - previous.at < REPORT_EVERY_MS) return undefined;
  lastReported.delete(id);
  lastReported.set(id, { at: now, lastMove: snapshot.changes.at(-1) ?? previous?.lastMove });
  if (lastReported.size > MAX_REMEMBERED) lastReported.delete(lastReported.keys().next().value as string);
  const bucket = (value: { limitPerMinute: number; remaining: number } | undefined) =>
    value && { limitPerMinute: value.limitPerMinute, remaining: Math.max(0, Math.floor(value.remaining)) };
  const requests = bucket(snapshot.requests);
  const tokens = bucket(snapshot.tokens);
  return {
    worker,
    provider: snapshot.provider,
    model: snapshot.model,
    at: now,
    concurrencyLimit: snapshot.concurrencyLimit,
    inFlight: snapshot.inFlight,
    queued: snapshot.queued,
    ...(requests ? { requests } : {}),
    ...(tokens ? { tokens } : {}),
    rateLimited: snapshot.rateLimited,
    moves: moves.map(({ at, from, to, reason }) => ({ at, from, to, reason })),
  };
}
