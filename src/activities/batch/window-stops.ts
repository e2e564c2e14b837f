/**
 * The lanes of each batch window run on this worker, by the window's run. A window cancels its lanes together, never
 * one alone (they share its cancellation scope: a cancel, a fail-fast, a budget; src/workflows/batch/window.ts), so the
 * first lane here to hear of its cancel, by its heartbeat's answer or the watchdog's look at the run, stops every lane
 * of the window on this worker in the same turn: none starts a call the stop has already forbidden while its own
 * heartbeat's answer is on the way.
 */
export class WindowStops {
  private readonly windows = new Map<string, { stops: Set<() => void>; stopped: boolean }>();

  static key(workflowId: string, runId: string): string {
    return `${workflowId}\u0000${runId}`;
  }

  /** Adds a lane of window `key`, stopped by `stop` (at once if the window has stopped); returns how it leaves. */
  join(key: string, stop: () => void): () => void {
    let window = this.windows.get(key);
    if (!window) this.windows.set(key, (window = { stops: new Set(), stopped: false }));
    const lanes = window;
    if (lanes.stopped) stop();
    lanes.stops.add(stop);
    return () => {
      lanes.stops.delete(stop);
      if (lanes.stops.size === 0 && this.windows.get(key) === lanes) this.windows.delete(key);
    };
  }

  /** Window `key` cancelled its lanes: every one of them here stops now, and one that joins while any is left. */
  stop(key: string): void {
    const window = this.windows.get(key);
    if (!window || window.stopped) return;
    window.stopped = true;
    for (const stop of window.stops) stop();
  }
}
