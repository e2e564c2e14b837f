/** Something that happened in a run, for live watching (`events` query). */
export interface RunEvent {
  /** 1, 2, 3 … in the order they happened; the cursor. */
  seq: number;
  /** Workflow time, ms since the epoch. */
  at: number;
  type:
    | 'run-started'
    | 'agent-started'
    | 'agent-finished'
    | 'agent-failed'
    | 'agent-retried'
    | 'agent-cancelled'
    | 'agent-skipped'
    | 'pacing'
    | 'run-finished';
  taskId?: string;
  /** Short human detail: attempts, error type, why skipped, how a worker's concurrency limit moved. */
  detail?: string;
}

/** Answer of the `events` query: the events after the cursor given. */
export interface RunEventPage {
  events: RunEvent[];
  /** Pass it back as the next cursor. */
  nextCursor: number;
  /** Events dropped because the log is bounded (the oldest go first). */
  dropped: number;
}

/** Most events one run keeps; older ones are dropped (and counted). */
export const MAX_RUN_EVENTS = 2000;
