import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { BatchPage, LaneRetry } from '../../contract/batch-activities';
import type { BatchCounters } from '../../contract/batch';
import type { PacingStatus } from '../../contract/pacing';

/** A window that reached its history budget hands the rest of the batch to a successor: where to go on from. */
export interface HandOver {
  window: number;
  /** Byte offset of the next item no window has started. */
  cursor: number;
  /** Where the window's stripe of the file ends, when the batch runs in stripes. */
  end?: number;
  /** Entries from `cursor` on the window had read: the successor's first lanes start without a page read. */
  firstPage?: BatchPage;
  /** Items waiting to run again. */
  retries: LaneRetry[];
  /** Calls the window still has in flight: its successor starts with that much less room, and gets it back as they end. */
  inFlight: number;
  /** Calls lent to the window's stripe by stripes that ran out of items: its successor keeps them. */
  lent?: number;
  /** Items of the batch not started yet (the retries excluded). */
  unstarted: number;
  callMs?: number;
  /** What the batch has spent so far, as this window knows it (for the budget). */
  spent: { tokens: number; usd: number };
}

/** Window → batch: the window stops starting lanes; start its successor. */
export const handOverSignal = defineSignal<[HandOver]>('handOver');
/** Batch → window: its successor runs, under this workflow id; the window returns its slots there as its lanes end. */
export const successorSignal = defineSignal<[string]>('successor');
/** Window → successor: this many of the calls its predecessor held have ended. */
export const slotsFreedSignal = defineSignal<[number]>('slotsFreed');
/**
 * Batch → window, or window → successor: this many more calls in flight, the share of a stripe that ran out of items (the
 * window passes on what it is lent after it handed over).
 */
export const slotsLentSignal = defineSignal<[number]>('slotsLent');

/** A window's share of the batch's progress (the batch's `progress` query adds the windows' shares up). */
export interface WindowProgress {
  window: number;
  counters: BatchCounters;
  inFlight: number;
  lanes: number;
  historyLength: number;
  /** running: starting lanes; draining: handed over, its lanes ending; stopping: cancelled. */
  mode: 'running' | 'draining' | 'stopping';
  /** Calls its predecessor still holds of its room. */
  borrowed: number;
  pacing?: PacingStatus;
  /** Workflow ids of its agent items running now (`fanout status` and `approve` look for waiting calls there). */
  agents?: string[];
}

export const windowProgressQuery = defineQuery<WindowProgress>('windowProgress');
