import type { LimitReading } from './rate-limit-headers';

export interface BucketSnapshot {
  /** The provider's per-minute limit. */
  limitPerMinute: number;
  /** What the pacer estimates is left now. */
  remaining: number;
  /** How much the provider's bucket holds (the per-minute limit, or less when enforced over a shorter window). */
  capacity: number;
  /** Estimated use by other clients of the same key (other workers), per minute. */
  othersPerMinute: number;
}

/**
 * A request admitted less than this long ago may not have reached the provider when it wrote the headers we read
 * next, so its cost is kept against the new reading. Counting one twice for a moment only makes the pacer careful.
 */
const TRANSIT_MS = 100;
/**
 * Half-life of the estimate of other clients' use while no reading confirms it, ms. A wrong estimate cannot hold a key
 * back for long: it fades unless new readings renew it.
 */
const OTHERS_HALF_LIFE_MS = 5000;
const OTHERS_DECAY_PER_MS = Math.LN2 / OTHERS_HALF_LIFE_MS;

/**
 * A provider's request or token bucket as one process believes it is: the last reading of the provider's headers, refilled
 * since at the provider's rate less other clients' estimated use, less what this process admitted since.
 */
export class BucketMirror {
  private base: number;
  private baseAt: number;
  private debits = 0;
  private recent: { at: number; amount: number }[] = [];
  private othersPerMs = 0;
  capacity: number;
  limitPerMinute: number;

  constructor(reading: LimitReading, now: number) {
    this.limitPerMinute = reading.limit;
    this.capacity = BucketMirror.capacityOf(reading);
    this.base = reading.remaining;
    this.baseAt = now;
  }

  private static capacityOf(reading: LimitReading): number {
    const refilled =
      reading.resetMs === undefined ? reading.limit : reading.remaining + (reading.resetMs * reading.limit) / 60_000;
    return Math.max(1, Math.min(reading.limit, Math.max(reading.remaining, refilled)));
  }

  private get refillPerMs(): number {
    return this.limitPerMinute / 60_000;
  }

  /** Other clients' use now: the estimate at the last reading, fading since. */
  private othersAt(now: number): number {
    return this.othersPerMs * Math.exp(-OTHERS_DECAY_PER_MS * Math.max(0, now - this.baseAt));
  }

  level(now: number): number {
    const elapsed = Math.max(0, now - this.baseAt);
    // Refill since the reading, less the (fading) use of others: the integral of refill - others * e^(-kt).
    const othersUsed = (this.othersPerMs * (1 - Math.exp(-OTHERS_DECAY_PER_MS * elapsed))) / OTHERS_DECAY_PER_MS;
    return Math.min(this.capacity, this.base + elapsed * this.refillPerMs - othersUsed) - this.debits;
  }

  /** Takes an admitted request's cost out. Returns a handle to tell the mirror when the request was answered. */
  take(amount: number, now: number): object {
    const debit = { at: now, amount };
    this.debits += amount;
    this.recent.push(debit);
    return debit;
  }

  /** The request of `debit` was answered: the provider had counted it by then, so readings from now on include it. */
  arrived(debit: object): void {
    const index = this.recent.indexOf(debit as { at: number; amount: number });
    if (index >= 0) this.recent.splice(index, 1);
  }

  give(amount: number): void {
    this.debits -= amount;
  }

  /**
   * A response's reading replaces the estimate. The gap between what this process alone would have left and what the
   * provider says is left is other clients' use, averaged into the refill estimate.
   */
  observe(reading: LimitReading, now: number): void {
    const elapsed = now - this.baseAt;
    if (elapsed >= 50) {
      const alone = Math.min(this.capacity, this.base + elapsed * this.refillPerMs) - this.debits;
      // Headers count whole units: what is left may be up to one more than they say (which matters in a small bucket).
      const sample = Math.max(0, alone - reading.remaining - 1) / elapsed;
      this.othersPerMs = 0.7 * this.othersAt(now) + 0.3 * Math.min(sample, this.refillPerMs);
    }
    this.limitPerMinute = reading.limit;
    this.capacity = BucketMirror.capacityOf(reading);
    this.base = reading.remaining;
    this.baseAt = now;
    this.recent = this.recent.filter((debit) => now - debit.at < TRANSIT_MS);
    this.debits = this.recent.reduce((sum, debit) => sum + debit.amount, 0);
  }

  /** What must stay in the bucket after admitting `cost`. */
  private reserve(cost: number, headroom: number): number {
    return Math.max(0, Math.min(headroom * this.capacity, this.capacity - cost));
  }

  /** Milliseconds until `cost` can be admitted (0: now). A cost bigger than the bucket waits for a full bucket. */
  msUntil(cost: number, headroom: number, now: number): number {
    const needed = Math.min(cost, this.capacity) + this.reserve(cost, headroom);
    const deficit = needed - this.level(now);
    // At today's net refill: an upper bound, as others' estimated use fades (callers look again soon anyway).
    return deficit <= 0 ? 0 : deficit / Math.max(this.refillPerMs * 0.05, this.refillPerMs - this.othersAt(now));
  }

  snapshot(now: number): BucketSnapshot {
    return {
      limitPerMinute: this.limitPerMinute,
      remaining: Math.max(0, Math.floor(this.level(now))),
      capacity: Math.round(this.capacity),
      othersPerMinute: Math.round(this.othersAt(now) * 60_000),
    };
  }
}
