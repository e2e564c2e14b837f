/**
 * The lanes of each batch window run on this worker, by the window's run. A window cancels its lanes together, never
 * one alone (they share its cancellation scope: a cancel, a fail-fast, a budget; src/workflows/batch/window.ts), so the
 * first lane here to hear of its cancel, by its heartbeat's answer or the watchdog's look at the run, stops every lane
 * of the window on this worker in the same turn: none starts a call the stop has already forbidden while its own
 * heartbeat's answer is on the way. A window's stop is final (its lanes' scope stays cancelled), so a stopped window is
 * remembered after its last lane here has left: a lane dispatched before the cancel and started after it (its task was
 * on its way to this worker) stops at once instead of starting a call until its own heartbeat's answer comes (a fault
 * schedule seed saw one start 104 ms after the stop had aborted its neighbours' calls).
 */
/** Stopped windows remembered once their lanes here have left (a key is about 100 bytes). */
const MAX_REMEMBERED = 10_000;

export class WindowStops {
  private readonly windows = new Map<string, { stops: Set<() => void>; stopped: boolean }>();
  /** Windows stopped whose lanes here have all left, the oldest first; at most MAX_REMEMBERED. */
  private readonly stopped = new Set<string>();

  static key(workflowId: string, runId: string): string {
    return `${workflowId}\u0000${runId}`;
  }

  /** Adds a lane of window `key`, stopped by `stop` (at once if the window has stopped); returns how it leaves. */
  join(key: string, stop: () => void): () => void {
    let window = this.windows.get(key);
    if (!window) this.windows.set(key, (window = { stops: new Set(), stopped: this.stopped.delete(key) }));
    const lanes = window;
    if (lanes.stopped) stop();
    lanes.stops.add(stop);
    return () => {
      lanes.stops.delete(stop);
      if (lanes.stops.size > 0 || this.windows.get(key) !== lanes) return;
      this.windows.delete(key);
      if (lanes.stopped) this.remember(key);
    };
  }

  /** Window `key` cancelled its lanes: every one of them here stops now, and one that joins while any is left. */
  stop(key: string): void {
    const window = this.windows.get(key);
    if (!window) return this.remember(key);
    if (window.stopped) return;
    window.stopped = true;
    for (const stop of window.stops) stop();
  }

  private remember(key: string): void {
    this.stopped.delete(key);
    this.stopped.add(key);
    if (this.stopped.size > MAX_REMEMBERED) this.stopped.delete(this.stopped.values().next().value as string);
  }
}
