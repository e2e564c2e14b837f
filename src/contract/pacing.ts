/**
 * What a worker's pacer tells the workflow it paces calls for (src/pacing/report.ts), so `batch status`, `status` and
 * the run's events show the concurrency limit and how it moved. Workflow-safe: types and pure helpers only.
 */
export interface PacingLimitMove {
  /** Worker time, ms since the epoch. */
  at: number;
  from: number;
  to: number;
  /** "slow start", "additive increase", or the 429 that halved it. */
  reason: string;
}

export interface PacingReport {
  /** The worker process that paces (its identity). */
  worker: string;
  /** The provider's base URL and the model: a limit is per provider + model + API key. */
  provider: string;
  model: string;
  /** When the report was taken, worker time, ms since the epoch. */
  at: number;
  /** Requests that worker lets run at once for the key now. */
  concurrencyLimit: number;
  inFlight: number;
  /** Calls waiting for admission. */
  queued: number;
  /** The provider's limits per minute and what the pacer estimates is left, when the provider sends `x-ratelimit-*`. */
  requests?: { limitPerMinute: number; remaining: number };
  tokens?: { limitPerMinute: number; remaining: number };
  /** 429s answered to that worker for the key, since it started. */
  rateLimited: number;
  /** Moves of the limit since that worker's previous report to this workflow, oldest first. */
  moves: PacingLimitMove[];
}

/** A limit move, with the worker and model it belongs to. */
export interface PacingMove extends PacingLimitMove {
  worker: string;
  model: string;
}

/** Pacing as a workflow shows it: the latest report per worker + key, and the last moves of any of them. */
export interface PacingStatus {
  keys: PacingReport[];
  moves: PacingMove[];
}

/** Reports a workflow keeps, and moves. */
const MAX_KEYS = 16;
const MAX_MOVES = 20;

/** Folds one report into a workflow's pacing status (in place); returns the moves it added. */
export function recordPacing(status: PacingStatus, report: PacingReport): PacingMove[] {
  const { moves, ...latest } = report;
  const index = status.keys.findIndex(
    (key) => key.worker === report.worker && key.provider === report.provider && key.model === report.model,
  );
  if (index >= 0) status.keys.splice(index, 1);
  status.keys.push({ ...latest, moves: [] });
  if (status.keys.length > MAX_KEYS) status.keys.shift();
  const added = moves.map((move) => ({ ...move, worker: report.worker, model: report.model }));
  status.moves.push(...added);
  if (status.moves.length > MAX_MOVES) status.moves.splice(0, status.moves.length - MAX_MOVES);
  return added;
}

/** "gpt-4o-mini 32 → 16 (429 from the provider)" */
export function describeMove(move: PacingMove): string {
  return `${move.model} concurrency limit ${move.from} → ${move.to} (${move.reason}) on ${move.worker}`;
}
