/** The call watchdog's settings (see CallWatchdog for what each one governs). */
export interface CallWatchdogOptions {
  /**
   * How often a workflow with calls of this worker in flight is described, ms, when its workflow tasks run on another
   * worker. Env FANOUT_WATCH_INTERVAL_MS; default 1000.
   */
  watchIntervalMs: number;
  /**
   * The same for a workflow whose workflow tasks run on this worker, which notices its cancels as they happen (the
   * call-notices sink); the looks are for what no notice says (a terminated run, a timed-out attempt, a lost worker's
   * calls). Default 10 x `watchIntervalMs`.
   */
  hostedWatchIntervalMs?: number;
  /** A worker that has not polled for this long is lost, ms. Env FANOUT_LOST_WORKER_MS; default 15000. */
  lostAfterMs: number;
  /** How often the task queue's running workflows are swept for calls of lost workers, ms. Env FANOUT_SWEEP_INTERVAL_MS; default 10000. */
  sweepIntervalMs: number;
  /** Describe calls in flight at once during a sweep. Default 4. */
  sweepConcurrency: number;
  /** After the last call of a watched workflow ends, how long presence keeps polling (lazily created watchdogs), ms. Default 60000. */
  idleMs: number;
}

/** Where the watchdog reports (the worker's logger). */
export interface WatchdogLogger {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}
