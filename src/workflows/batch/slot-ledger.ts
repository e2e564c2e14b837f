import { stripeConcurrency } from '../../contract/batch';

/**
 * The ledger of a batch's concurrency: where each of its `concurrency` call slots is. Pure (no Temporal import): the
 * workflows drive it (window.ts and window-slots.ts a window's, batch.ts the lending) and carry its messages as
 * signals, and test/slot-ledger.test.ts drives it through random interleavings of every event.
 *
 * The slots are cut into one share per stripe (stripeConcurrency). A stripe's share belongs to its chain of windows:
 * the newest window holds it, less what its draining predecessors still hold (`borrowed`); a stripe that ran out of
 * items lends its share to the stripes still running (`lent`). A slot is always in exactly one place: a call in flight,
 * room of its stripe's newest window, a draining window's slot on its way to the successor (`freed`, `lentOn`), a
 * signal, or the batch (lent to a stripe between two windows, owed by an ended stripe, or `returned` for good).
 *
 * Invariant:
 * 1. Never more than `concurrency` calls in flight across the batch: a window starts calls only within its `room()`
 *    (its share and the lent slots it may use, less what it borrowed and has in flight), a stripe's share is lent
 *    only once none of its windows runs, and nothing is lent once the batch stops.
 * 2. Every slot is given back exactly once, across hand-overs, lending, stops and ends. A call's slot goes back to its
 *    window when the call ends; after the window's hand-over, on to its successor (slotsFreed), which started with it
 *    borrowed. The hand-over's count is taken after the window stopped starting calls, so what came back before it is
 *    in neither that count nor `freed` (once, not twice). A draining window's borrowed slots are its successor's as they
 *    come back. A window that ends holds nothing: the batch gives its successor all it borrowed, and a successor started
 *    after it ended borrows none (batch.ts). When a stripe's last window ends, its share and what it was lent go to the batch, which lends them to
 *    the stripes still running once none of the stripe's windows runs; with none running, or the batch stopped, they
 *    are `returned`. A batch that ran to its end without a stop has returned exactly its concurrency.
 *
 * A lane of `parallel` calls takes `parallel` slots when the room is above zero: past 1,000 lanes per window (parallel
 * above 1) a window can be up to parallel - 1 calls over its share.
 */

/** What a window's slots depend on: its share of the concurrency, windowCalls, and the calls one lane runs at once. */
export interface WindowShape {
  concurrency: number;
  windowCalls: number;
  parallel: number;
  /** Most lanes one window keeps in flight. */
  maxLanes: number;
}

/**
 * One window's part of the ledger. Running, it starts calls within `room()`. Handing over (`handingOver()`), it starts
 * none; its hand-over (`handOver()`) gives its successor the room of every call still out as borrowed, and from then
 * on the slots of its calls that end and of what its predecessor returns are `freed`, and what it is lent is `lentOn`,
 * both passed on once the successor runs (`passFreed`, `passLent`).
 */
export class WindowLedger {
  private calls = 0;
  private borrowedCalls: number;
  /** Calls lent to it while running; they go on with its hand-over. */
  private lent: number;
  /** After the hand-over began: calls lent since, for the successor, and those the successor (ended) could not take. */
  private lentOn = 0;
  private lentKept = 0;
  /** After the hand-over: slots of calls that ended (its own, its predecessor's), not yet passed to the successor. */
  private freed = 0;
  private phase: 'running' | 'handing' | 'handed' = 'running';
  private successor = false;

  constructor(
    start: { borrowed: number; lent?: number },
    private readonly shape: WindowShape,
  ) {
    this.borrowedCalls = start.borrowed;
    this.lent = start.lent ?? 0;
  }

  /** Its own calls in flight. */
  get inFlight(): number {
    return this.calls;
  }

  /** Calls its predecessor still holds of its room. */
  get borrowed(): number {
    return this.borrowedCalls;
  }

  /** Whether the window has begun to hand over (it starts nothing more but retries in freed slots). */
  get handedOver(): boolean {
    return this.phase !== 'running';
  }

  /**
   * Lent calls it runs: at most twice its windowCalls in all (a stripe's share is at most about windowCalls, and the
   * answers one window can take a second are what stripes are for). What it holds beyond goes on with it.
   */
  private usableLent(): number {
    const { concurrency, windowCalls, parallel, maxLanes } = this.shape;
    return Math.min(this.lent, Math.max(0, Math.min(2 * windowCalls, maxLanes * parallel) - concurrency));
  }

  /** Calls it may start now. */
  room(): number {
    return this.shape.concurrency + this.usableLent() - this.borrowedCalls - this.calls;
  }

  /** Lanes it keeps in flight: `lanesWide`, widened by what it was lent (lanes shrink with it). */
  wide(lanesWide: number): number {
    return this.lent > 0 ? Math.ceil((this.shape.concurrency + this.usableLent()) / this.shape.parallel) : lanesWide;
  }

  /** `count` calls of its own started. */
  started(count: number): void {
    this.calls += count;
  }

  /** `count` calls of its own ended: after the hand-over, their slots are the successor's. */
  ended(count: number): void {
    this.calls -= count;
    if (this.phase === 'handed') this.freed += count;
  }

  /** Its predecessor returned `count` slots (slotsFreed; more than it borrowed means all). */
  returned(count: number): void {
    const back = Math.min(count, this.borrowedCalls);
    this.borrowedCalls -= back;
    if (this.phase === 'handed') this.freed += back;
  }

  /** `count` calls lent to it (slotsLent): its own while running, its successor's once it hands over. */
  lentIn(count: number): void {
    if (this.phase === 'running') this.lent += count;
    else this.lentOn += count;
  }

  /** The window stops starting calls: from now on what it is lent is its successor's. */
  handingOver(): void {
    this.phase = 'handing';
  }

  /**
   * What the successor starts with: as borrowed, every call still out (its own and what its predecessor still holds);
   * what it was lent. Slots that came back since handingOver() are in neither count, so the successor has them once.
   */
  handOver(): { inFlight: number; lent?: number } {
    this.phase = 'handed';
    return { inFlight: this.calls + this.borrowedCalls, ...(this.lent > 0 ? { lent: this.lent } : {}) };
  }

  /** The successor runs (successorSignal): freed and lent slots can go there. */
  successorRuns(): void {
    this.successor = true;
  }

  /** Takes one freed slot for a retry of this window's (it runs where its lane ran); false if none is free. */
  takeFreed(): boolean {
    if (this.freed === 0) return false;
    this.freed -= 1;
    return true;
  }

  /** The freed slots to send the successor now (none before it runs); they are no longer this window's. */
  passFreed(): number {
    if (!this.successor) return 0;
    const count = this.freed;
    this.freed = 0;
    return count;
  }

  /** The lent calls to send the successor now (none before it runs). */
  passLent(): number {
    if (!this.successor) return 0;
    const count = this.lentOn;
    this.lentOn = 0;
    return count;
  }

  /** Lent calls the successor (ended) could not take: they go back to the batch with the result. */
  notTaken(count: number): void {
    this.lentKept += count;
  }

  /**
   * Whether a window that handed over may end: once its predecessor has given back all it lent, so that when the batch
   * tells the successor this window ended, every call out before the hand-over has ended.
   */
  settled(): boolean {
    return this.borrowedCalls === 0 && (this.freed === 0 || !this.successor);
  }

  /** Lent calls it did not pass on, for its result: to its successor (it handed over) or to the other stripes. */
  unpassed(): number {
    return this.handedOver ? this.lentOn + this.lentKept : this.lent;
  }

  /** Slots of its calls that ended after the hand-over, not passed on yet (the property test's accounting). */
  get freedHeld(): number {
    return this.freed;
  }

  /** Lent calls it holds, not in its hand-over or passed on yet (the property test's accounting). */
  get lentHeld(): number {
    return (this.phase === 'handed' ? 0 : this.lent) + (this.phase === 'running' ? 0 : this.lentOn + this.lentKept);
  }
}

/** A window to lend calls to (batch.ts: a slotsLent signal to it); rejects if it has ended. */
export interface Lendable {
  lend(count: number): Promise<void>;
}

/** What the lending needs of the batch. */
export interface LendingContext {
  concurrency: number;
  /** Stripes the batch runs. */
  width(): number;
  /** The newest window of a stripe still running, once started; undefined between two windows. */
  newestWindow(stripe: number): Promise<Lendable | undefined>;
  /** Whether a window of the stripe still runs. */
  hasWindow(stripe: number): boolean;
  /** The batch stops (cancelled, failed fast, out of budget, failed): nothing more is lent. */
  stopped(): boolean;
}

/** Adds `count` to a stripe's calls in `calls`. */
function add(calls: Map<number, number>, stripe: number, count: number): void {
  calls.set(stripe, (calls.get(stripe) ?? 0) + count);
}

/**
 * The batch's part of the ledger: the calls of stripes that ran out of items, lent to the stripes still running (a
 * stripe whose last window has ended would otherwise hold its share idle while another still has items to start). Each
 * running stripe gets an equal part, in its newest window (one that handed over passes them on), or, between two
 * windows, in its next one. An ended stripe's calls are lent once none of its windows runs (a predecessor of its last
 * window may still be draining).
 */
export class StripeLending {
  private readonly ended = new Set<number>();
  /** Calls lent to a stripe while it had no window to take them. */
  private readonly waiting = new Map<number, number>();
  /** Calls of an ended stripe still out in its draining windows (or lent to one of them), lent on once those end. */
  private readonly owed = new Map<number, number>();
  /** Calls back for good: no stripe was left running to lend them to, or the batch had stopped. */
  private returnedCalls = 0;

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
      ? await window.lend(count).then(
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

  /** Calls back for good (invariant 2). */
  get returned(): number {
    return this.returnedCalls;
  }

  /** Calls the batch holds: lent to a stripe between two windows, or owed by an ended one (for the property test). */
  held(): number {
    return [...this.waiting.values(), ...this.owed.values()].reduce((sum, count) => sum + count, 0);
  }

  private async lend(calls: number): Promise<void> {
    const running = Array.from({ length: this.batch.width() }, (_, index) => index).filter(
      (index) => !this.ended.has(index),
    );
    if (calls <= 0) return;
    if (running.length === 0 || this.batch.stopped()) {
      this.returnedCalls += calls;
      return;
    }
    for (const [position, to] of running.entries())
      await this.give(to, stripeConcurrency(calls, running.length, position));
  }
}
