/** Calls older than this say nothing about the provider now. */
const FRESH_MS = 10 * 60_000;
/** So few calls say too little. */
const MIN_CALLS = 10;

/**
 * How long this worker's recent batch calls took, per model (a moving average). A new batch's scan reports it, so a batch
 * of short calls runs several items per activity from its first wave instead of first spending a wave of one activity
 * per item to learn how long its calls are. Only calls of the last ten minutes count, and only once ten have answered; a
 * worker that has not called the model lately reports nothing and the batch learns from its own first wave.
 */
export class RecentCalls {
  private readonly models = new Map<string, { ms: number; calls: number; at: number }>();

  constructor(private readonly clock: () => number) {}

  record(model: string, durationMs: number): void {
    const now = this.clock();
    const seen = this.models.get(model);
    if (seen === undefined || now - seen.at > FRESH_MS) this.models.set(model, { ms: durationMs, calls: 1, at: now });
    else this.models.set(model, { ms: seen.ms * 0.9 + durationMs * 0.1, calls: seen.calls + 1, at: now });
  }

  /** The typical duration of the model's recent calls, ms, or undefined when there were too few of late. */
  typicalMs(model: string): number | undefined {
    const seen = this.models.get(model);
    if (seen === undefined || seen.calls < MIN_CALLS || this.clock() - seen.at > FRESH_MS) return undefined;
    return Math.round(seen.ms);
  }
}
