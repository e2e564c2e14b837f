import { CancellationScope, getExternalWorkflowHandle, setHandler } from '@temporalio/workflow';
import { slotsFreedSignal, slotsLentSignal, successorSignal } from './messages';
import type { WindowLedger } from './slot-ledger';

/**
 * The signals of a window's slots (workflow code): what its predecessor returns (slotsFreed), what stripes that ran out
 * of items lend it (slotsLent) and its successor's id go into its ledger (slot-ledger.ts, which holds every count and
 * the invariant); after its hand-over, what the ledger frees and is lent goes on to the successor.
 */
export class WindowSlots {
  private successor: string | undefined;

  constructor(
    private readonly ledger: WindowLedger,
    wake: () => void,
  ) {
    setHandler(slotsFreedSignal, (count) => {
      ledger.returned(count);
      wake();
    });
    setHandler(slotsLentSignal, (count) => {
      ledger.lentIn(count);
      wake();
    });
    setHandler(successorSignal, (workflowId) => {
      this.successor = workflowId;
      ledger.successorRuns();
      wake();
    });
  }

  /** Gives the successor, once known, the slots freed and lent since the hand-over. */
  async passOn(): Promise<void> {
    const freed = this.ledger.passFreed();
    if (this.successor !== undefined && freed > 0) await this.signal(this.successor, slotsFreedSignal, freed);
    const lent = this.ledger.passLent();
    // Lent calls a successor that has ended cannot take go back to the batch with the result.
    if (this.successor !== undefined && lent > 0 && !(await this.signal(this.successor, slotsLentSignal, lent)))
      this.ledger.notTaken(lent);
  }

  /** False if the receiver has ended. */
  private signal(to: string, signal: typeof slotsFreedSignal, count: number): Promise<boolean> {
    return CancellationScope.nonCancellable(() => getExternalWorkflowHandle(to).signal(signal, count)).then(
      () => true,
      () => false,
    );
  }
}
