import { slotsLentSignal } from './messages';
import { stripeConcurrency } from '../../contract/batch';

/** Adds `count` to a stripe's calls in `calls`. */
function add(calls: Map<number, number>, stripe: number, count: number): void {
  calls.set(stripe, (calls.get(stripe) ?? 0) + count);
}

/** A window as the lending needs it: something to signal. */
interface Signalable {
  signal(signal: typeof slotsLentSignal, count: number): Promise<void>;
}

/** What the lending needs of the batch. */
export interface LendingContext {
  concurrency: number;
  /** Stripes the batch runs. */
  width(): number;
  /** The newest window of a stripe still running, once started; undefined between two windows. */
  newestWindow(stripe: number): Promise<Signalable | undefined>;
  /** Whether a window of the stripe still runs. */
  hasWindow(stripe: number): boolean;
  /** The batch stops (cancelled, failed fast, out of budget, failed): nothing more is lent. */
  stopped(): boolean;
}

/**
 * The calls of stripes that ran out of items, lent to the stripes still running: a stripe whose last window has ended
 * would otherwise hold its share of the concurrency idle while another still has items to start. Each running stripe
 * gets an equal part, in its newest window (one that handed over passes them on), or, between two windows, in its next
 * one. An ended stripe's calls are lent once none of its windows runs (a predecessor of its last window may still be
 * draining): the batch never has more than its concurrency in flight. Workflow code (batch.ts).
 */
export class StripeLending {
  private readonly ended = new Set<number>();
  /** Calls lent to a stripe while it had no window to take them. */
  private readonly waiting = new Map<number, number>();
  /** Calls of an ended stripe still out in its draining windows (or lent to one of them), lent on once those end. */
  private readonly owed = new Map<number, number>();

  constructor(private readonly batch: LendingContext) {}

  /** Calls lent to stripe `stripe` that its next window starts with. */
  takeWaiting(stripe: number): number {
    const count = this.waiting.get(stripe) ?? 0;
    this.waiting.delete(stripe);
    return count;
  }

  /**
   * Gives calls to stripe `stripe`: to its newest window, else (between two windows, or that window just ended) to its
   * next one; for a stripe that ended, on to the others once none of its windows runs.
   */
  async give(stripe: number, count: number): Promise<void> {
    if (count <= 0) return;
    if (this.ended.has(stripe)) {
      add(this.owed, stripe, count);
      return this.release(stripe);
    }
    const window = this.batch.stopped() ? undefined : await this.batch.newestWindow(stripe);
    const given = window
      ? await window.signal(slotsLentSignal, count).then(
          () => true,
          () => false,
        )
      : false;
    if (!given) add(this.waiting, stripe, count);
  }

  /**
   * Stripe `stripe`'s chain ended (its last window, not handed over), holding `lent` calls lent to it: its share and those
   * calls are owed to the other stripes, lent once none of its windows runs (`release`; a predecessor of its last window
   * may still be draining).
   */
  stripeEnded(stripe: number, lent: number): void {
    const calls =
      stripeConcurrency(this.batch.concurrency, this.batch.width(), stripe) + lent + this.takeWaiting(stripe);
    this.ended.add(stripe);
    add(this.owed, stripe, calls);
  }

  /** Lends what an ended stripe still owed once none of its windows runs (call it as each window ends). */
  async release(stripe: number): Promise<void> {
    if (!this.ended.has(stripe) || this.batch.hasWindow(stripe)) return;
    const owed = this.owed.get(stripe) ?? 0;
    this.owed.delete(stripe);
    await this.lend(owed);
  }

  private async lend(calls: number): Promise<void> {
    const running = Array.from({ length: this.batch.width() }, (_, index) => index).filter(
      (index) => !this.ended.has(index),
    );
    if (calls <= 0 || running.length === 0 || this.batch.stopped()) return;
    for (const [position, to] of running.entries())
      await this.give(to, stripeConcurrency(calls, running.length, position));
  }
}
