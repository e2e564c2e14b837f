import type { BatchPage, LaneInput, LaneRetry } from '../../contract/batch-activities';
import type { BatchOptions, BatchStopReason, emptyCounters } from '../../contract/batch';
import type { PacingStatus } from '../../contract/pacing';

/** What a window starts from. */
export interface WindowInput {
  batchId: string;
  /** The batch workflow's id, which the window reports a hand-over to. */
  batchWorkflowId: string;
  window: number;
  file: string;
  fileBytes: number;
  spool: string;
  options: BatchOptions | undefined;
  /** Byte offset of the first item this window may start. */
  cursor: number;
  /** Byte offset its stripe of the file ends at (its chain's windows start nothing from there on); default fileBytes. */
  end?: number;
  firstPage?: BatchPage;
  retries: LaneRetry[];
  /** Calls the predecessor still has in flight. */
  borrowed: number;
  /** Calls lent to this window's stripe, beyond its share of the concurrency, by stripes that ran out of items. */
  lent?: number;
  unstarted: number;
  callMs?: number;
  spent: { tokens: number; usd: number };
  /** How lanes send their calls (flex, the Responses API). */
  call?: LaneInput['call'];
  /**
   * The lane share rule (lane-shape.ts) this window uses. Versioned by input rather than by a patch: a window's input is in
   * its history, so a window started before it (no field) replays with the old share, and the change costs no marker.
   */
  laneShare?: number;
  /** Where the batch's agent items keep their places (AgentInput.place), one directory per item below it. */
  agentPlaces?: string;
  /**
   * The batch's only window (its whole file in the scan's first page, one stripe, sent sync): run to its end, it writes no
   * memo of its own, since the batch writes its memo moments later. Versioned by input like `laneShare`: a window
   * started before it has no field and writes its memo on replay as it did.
   */
  sole?: boolean;
}

/** What a window reports when its last lane has ended. */
export interface WindowResult {
  /** Lanes started: lanes 0..lanes-1 of this window. */
  lanes: number;
  /** Lanes that did not seal their segment (cancelled before they ran, or stopped by a fatal error). */
  unsealed: string[];
  counters: ReturnType<typeof emptyCounters>;
  stoppedBy?: BatchStopReason;
  /** A failure that ends the batch (the task file changed, the store failing past its retries). */
  fatal?: { type: string; message: string };
  handedOver: boolean;
  /** Calls lent to the window it did not pass on: to its successor (it handed over) or to the other stripes (it did not). */
  lent?: number;
  /** Events in the window's history when it ended. */
  historyLength: number;
  callMs?: number;
  pacing?: PacingStatus;
}

/** Where a window starts in the batch: its input less what every window of the batch shares. */
export type WindowStart = Omit<
  WindowInput,
  | 'batchId'
  | 'batchWorkflowId'
  | 'window'
  | 'file'
  | 'fileBytes'
  | 'spool'
  | 'options'
  | 'laneShare'
  | 'agentPlaces'
  | 'sole'
>;
