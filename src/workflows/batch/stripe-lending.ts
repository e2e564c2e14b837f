import { patched } from '@temporalio/workflow';
import { slotsLentSignal } from './messages';
import { stripeConcurrency } from './stripe-plan';

/**
 * Lending between stripes (gated: the signals are new commands of the batch, and a batch from before it replays without
 * them; asked only when there is something to lend, so a batch of one stripe pays no marker).
 */
export const LENDING_PATCH = 'stripe-lending';

/** A window as the lending needs it: something to signal. */
interface Signalable {
  signal(signal: typeof slotsLentSignal, count: number): Promise<void>;
}

/**
 * The calls of stripes that ran out of items, lent to the stripes still running: a stripe whose last window has ended
 * would otherwise hold its share of the concurrency idle while another still has items to start. Each running stripe
 * gets an equal part, in its newest window (one that handed over passes them on), or, between two windows, in its next
 * one. A call still out in an ended stripe (a predecessor of its last window still draining) is lent once it ends: the
 * batch never has more than its concurrency in flight. Workflow code (batch.ts).
 */
export class StripeLending {
  private readonly ended = new Set<number>();
  /** Calls lent to a stripe while it had no window to take them. */
  private readonly waiting = new Map<number, number>();
  /** Calls of an ended stripe still out in its draining windows (or lent to one of them), lent on once those end. */
  private readonly owed = new Map<number, number>();

  constructor(
    private readonly concurrency: number,
    private readonly width: () => number,
    /** The newest window of a stripe still running, once started; undefined between two windows. */
    private readonly newestWindow: (stripe: number) => Promise<Signalable | undefined>,
  ) {}

  /** Calls lent to stripe `stripe` that its next window starts with. */
  takeWaiting(stripe: number): number {
    const count = this.waiting.get(stripe) ?? 0;
    this.waiting.delete(stripe);
    return count;
  }

  /** Keeps calls lent to a stripe whose window could not take them: for its next window, or, ended, to lend on. */
  keep(stripe: number, count: number): void {
    if (count <= 0) return;
    const into = this.ended.has(stripe) ? this.owed : this.waiting;
    into.set(stripe, (into.get(stripe) ?? 0) + count);
  }

  /**
   * Stripe `stripe`'s chain ended (its last window, not handed over), holding `lent` calls lent to it, with `stillOut`
   * calls of its predecessors still in flight: the rest of its share and of those calls is lent on now.
   */
  async stripeEnded(stripe: number, lent: number, stillOut: number): Promise<void> {
    const calls = stripeConcurrency(this.concurrency, this.width(), stripe) + lent + this.takeWaiting(stripe);
    this.ended.add(stripe);
    this.keep(stripe, Math.min(stillOut, calls));
    await this.lend(calls - Math.min(stillOut, calls));
  }

  /** A window of stripe `stripe` ended; `last` when no other window of the stripe still runs. */
  async windowEnded(stripe: number, last: boolean): Promise<void> {
    if (!last || !this.ended.has(stripe)) return;
    const owed = this.owed.get(stripe) ?? 0;
    this.owed.delete(stripe);
    await this.lend(owed);
  }

  private async lend(calls: number): Promise<void> {
    const running = Array.from({ length: this.width() }, (_, index) => index).filter((index) => !this.ended.has(index));
    if (calls <= 0 || running.length === 0 || !patched(LENDING_PATCH)) return;
    for (const [position, to] of running.entries()) {
      const part = stripeConcurrency(calls, running.length, position);
      if (part === 0) continue;
      const window = await this.newestWindow(to);
      if (!window) this.keep(to, part);
      else await window.signal(slotsLentSignal, part).catch(() => this.keep(to, part));
    }
  }
}
