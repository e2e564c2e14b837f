/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The one signal of a model call, and its one timer: aborted when a source aborts or `abort` is called (cancellation, the
 * caller's signal, the watchdog), with that reason, or when the request's deadline passes (a TimeoutError, as
 * `AbortSignal.timeout` gives). A call used to hold a controller linked to its sources, one for its rate-limit wait
 * budget and one per request with its own timer: with hundreds of calls in flight each controller, listener and timer is
 * live heap that the capped worker keeps twice over (docs/BENCHMARKS.md, "Worker memory").
 *
 * A source's abort reaches `signal` two event-loop turns late, so an answer already in the socket when the cancel came
 * is read first (deadlineSignal's `afterArrived`, in src/llm/cancellation.ts, says why); `cancelled()` sees it at once,
 * for the call's own decisions. `clear()` unhooks the sources and stops the timer, so nothing outlives the call.
 */
export class CallSignal {
  private readonly controller = new AbortController();
  private readonly listeners: [AbortSignal, () => void][] = [];
  private cancel: { reason: unknown } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadlinePassed = false;

  constructor(sources: readonly (AbortSignal | undefined)[]) {
    for (const source of sources) {
      if (!source) continue;
      if (source.aborted) {
        this.cancel = { reason: source.reason };
        this.controller.abort(source.reason);
        break;
      }
      const onAbort = () => this.abort(source.reason);
      source.addEventListener('abort', onAbort, { once: true });
      this.listeners.push([source, onAbort]);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The reason the call was cancelled (a source aborted, or `abort` was called), seen at once; undefined if it was not. */
  cancelled(): { reason: unknown } | undefined {
    return this.cancel;
  }

  /** Cancels the call: `cancelled()` at once, `signal` two event-loop turns later. */
  abort(reason: unknown): void {
    if (this.cancel) return;
    this.cancel = { reason };
    setImmediate(() => setImmediate(() => this.controller.abort(reason)));
  }

  /** Aborts `signal` with a TimeoutError after `ms`, unless `stopDeadline` comes first. */
  startDeadline(ms: number): void {
    this.stopDeadline();
    this.timer = setTimeout(() => {
      this.deadlinePassed = true;
      this.controller.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError'));
    }, ms);
    this.timer.unref();
  }

  stopDeadline(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Whether the deadline ended the call (and not a cancel). */
  timedOut(): boolean {
    return this.deadlinePassed && this.cancel === undefined;
  }

  clear(): void {
    this.stopDeadline();
    for (const [source, onAbort] of this.listeners) source.removeEventListener('abort', onAbort);
    this.listeners.length = 0;
  }
}
