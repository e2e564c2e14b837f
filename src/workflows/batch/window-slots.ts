import { CancellationScope, getExternalWorkflowHandle, setHandler } from '@temporalio/workflow';
import { slotsFreedSignal, slotsLentSignal, successorSignal } from './messages';

/** What a window's slots depend on: its concurrency and windowCalls, and the calls one lane runs at once. */
export interface WindowSlotsOptions {
  concurrency: number;
  windowCalls: number;
  parallel: number;
  /** Most lanes one window keeps in flight. */
  maxLanes: number;
}

/**
 * The call slots of one window (workflow code): its share of the batch's concurrency, less what its predecessor still
 * holds (`borrowed`, returned by slotsFreed as those calls end), plus what stripes that ran out of items lent it
 * (slotsLent). After its hand-over, the slots of its calls that end and what it is lent go on to its successor.
 */
export class WindowSlots {
  /** Calls its predecessor still holds of its room. */
  borrowed: number;
  /** Calls lent to it while running; they go on with its hand-over. */
  private lent: number;
  /** After the hand-over: calls lent since, for the successor, and those the successor (ended) could not take. */
  private lentOn = 0;
  private lentKept = 0;
  /** After the hand-over: calls of this window that ended, not yet returned to the successor. */
  private freed = 0;
  private successor: string | undefined;
  private handed = false;

  constructor(
    start: { borrowed: number; lent?: number },
    private readonly options: WindowSlotsOptions,
    wake: () => void,
  ) {
    this.borrowed = start.borrowed;
    this.lent = start.lent ?? 0;
    // Slots the predecessor returns. After the hand-over they were lent on to the successor with this window's own, so
    // they go on there.
    setHandler(slotsFreedSignal, (count) => {
      const back = Math.min(count, this.borrowed);
      this.borrowed -= back;
      if (this.handed) this.freed += back;
      wake();
    });
    setHandler(slotsLentSignal, (count) => {
      if (this.handed) this.lentOn += count;
      else this.lent += count;
      wake();
    });
    setHandler(successorSignal, (workflowId) => {
      this.successor = workflowId;
      wake();
    });
  }

  /**
   * Lent calls it runs: at most twice its windowCalls in all (a stripe's share is at most about windowCalls, and the
   * answers one window can take a second are what stripes are for). What it holds beyond goes on with it.
   */
  private usableLent(): number {
    const { concurrency, windowCalls, parallel, maxLanes } = this.options;
    return Math.min(this.lent, Math.max(0, Math.min(2 * windowCalls, maxLanes * parallel) - concurrency));
  }

  /** Calls it may start now, with `inFlight` of its own out. */
  room(inFlight: number): number {
    return this.options.concurrency + this.usableLent() - this.borrowed - inFlight;
  }

  /** Lanes it keeps in flight: `lanesWide`, widened by what it was lent (lanes shrink with it). */
  wide(lanesWide: number): number {
    return this.lent > 0
      ? Math.ceil((this.options.concurrency + this.usableLent()) / this.options.parallel)
      : lanesWide;
  }

  /** Whether the window has handed over (handingOver()). */
  get handedOver(): boolean {
    return this.handed;
  }

  /** The window stops starting lanes: from now on, slots its predecessor returns and lent calls are the successor's. */
  handingOver(): void {
    this.handed = true;
  }

  /** What the successor starts with, the window handing over with `inFlight` calls out. */
  handOver(inFlight: number): { inFlight: number; lent?: number } {
    // Slots returned since handingOver() are out of `borrowed` already, so the successor's room has them: passed on too,
    // they would be counted twice.
    this.freed = 0;
    // The successor starts with the room of every call still out: this window's and what its predecessor still holds.
    return { inFlight: inFlight + this.borrowed, ...(this.lent > 0 ? { lent: this.lent } : {}) };
  }

  /** Calls of this window that ended after its hand-over: their slots are the successor's. */
  ended(calls: number): void {
    this.freed += calls;
  }

  /** Takes one freed slot for a retry of this window's (it runs where its lane ran); false if none is free. */
  takeFreed(): boolean {
    if (this.freed === 0) return false;
    this.freed -= 1;
    return true;
  }

  /** Gives the successor, once known, the slots freed and lent since the hand-over. */
  async passOn(): Promise<void> {
    if (this.successor !== undefined && this.freed > 0) {
      const count = this.freed;
      this.freed = 0;
      await this.signal(this.successor, slotsFreedSignal, count);
    }
    if (this.successor !== undefined && this.lentOn > 0) {
      const count = this.lentOn;
      this.lentOn = 0;
      // Lent calls a successor that has ended cannot take go back to the batch with the result.
      if (!(await this.signal(this.successor, slotsLentSignal, count))) this.lentKept += count;
    }
  }

  /**
   * Whether a window that handed over may end: once its predecessor has given back all it lent, so that when the batch
   * tells the successor this window ended, every call out before the hand-over has ended.
   */
  settled(): boolean {
    return this.borrowed === 0 && (this.freed === 0 || this.successor === undefined);
  }

  /** Lent calls it did not pass on, for its result: to its successor (it handed over) or to the other stripes. */
  unpassed(): number {
    return this.handed ? this.lentOn + this.lentKept : this.lent;
  }

  /** False if the receiver has ended. */
  private signal(to: string, signal: typeof slotsFreedSignal, count: number): Promise<boolean> {
    return CancellationScope.nonCancellable(() => getExternalWorkflowHandle(to).signal(signal, count)).then(
      () => true,
      () => false,
    );
  }
}
