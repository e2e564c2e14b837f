import type { PacingStatus } from './pacing';
import { z } from 'zod';
import type { AgentResult } from './agent-task';
import type { RunCost } from './metrics';
import { MAX_IN_FLIGHT_PER_RUN } from './limits';
import { parseLocation } from './location';
import { runOptionsSchema } from './run-options';

/**
 * Options of a batch: the run options (less `maxParallel` and `runTimeoutMs`) and the paging knobs. `tokenBudget` and
 * `costBudgetUsd` count the whole batch across its runs (continue-as-new) but not what a resumed batch spent before.
 */
/** Most items one activity may run at once. */
export const MAX_ITEMS_PER_ACTIVITY = 16;

export const batchOptionsSchema = runOptionsSchema.omit({ maxParallel: true, runTimeoutMs: true }).extend({
  /** Agent calls in flight at once across the whole batch (a sliding window). Default 50. */
  concurrency: z.number().int().min(1).max(MAX_IN_FLIGHT_PER_RUN).optional(),
  /** Items read per page of the task file. Default 200. */
  pageSize: z.number().int().min(1).max(1000).optional(),
  /** Results written to the sink per flush. Default 100. */
  flushEvery: z.number().int().min(1).max(1000).optional(),
  /**
   * Attempts of each read or write of the source, sink and spool before the batch gives up and ends FAILED with the
   * storage's error. Default 10 (about a minute and a half of retrying).
   */
  storageAttempts: z.number().int().min(1).max(100).optional(),
  /** Continue-as-new after this many pages (otherwise when Temporal suggests it, or the history budget is reached). */
  pagesPerRun: z.number().int().min(1).optional(),
  /**
   * Most items one activity runs at once (a chunk). Default: chosen from the calls' durations so far, 1 (an activity per
   * item) for calls of 2 s or more, up to 8 for calls of 250 ms or less. A chunk's items share one activity's overhead
   * and, on a lost worker, its retry. Set 1 to always run an activity per item.
   */
  itemsPerActivity: z.number().int().min(1).max(MAX_ITEMS_PER_ACTIVITY).optional(),
});
export type BatchOptions = z.infer<typeof batchOptionsSchema>;

/** A local absolute path (every worker must see it) or an `s3://bucket/key` URI (workers on any machine). */
const locationSchema = z
  .string()
  .min(1, 'must not be empty')
  .superRefine((value, context) => {
    const location = parseLocation(value);
    if ('error' in location) context.addIssue({ code: 'custom', message: location.error });
  });

/** The one argument of the `batch` workflow. */
export const batchInputSchema = z.strictObject({
  /** The batch's id; also its workflow id. */
  batchId: z.string().min(1).max(200),
  /** The JSONL task file: an absolute path or an s3:// URI. */
  source: locationSchema,
  /** The JSONL result sink (one line per task id): an absolute path or an s3:// URI. */
  sink: locationSchema,
  options: batchOptionsSchema.optional(),
  /** Re-run only the items that have no ok line in the sink (a resume of a finished or cancelled batch). */
  resume: z.boolean().optional(),
});
export type BatchInput = z.infer<typeof batchInputSchema>;

export interface ResolvedBatchOptions {
  concurrency: number;
  storageAttempts: number;
  pageSize: number;
  flushEvery: number;
  pagesPerRun: number | undefined;
  itemsPerActivity: number | undefined;
}

export function resolveBatchOptions(options: BatchOptions | undefined): ResolvedBatchOptions {
  return {
    concurrency: options?.concurrency ?? 50,
    storageAttempts: options?.storageAttempts ?? 10,
    pageSize: options?.pageSize ?? 200,
    flushEvery: options?.flushEvery ?? 100,
    pagesPerRun: options?.pagesPerRun,
    itemsPerActivity: options?.itemsPerActivity,
  };
}

/** Where an item sits in the task file: the workflow carries only this, never the prompt. */
export interface BatchEntry {
  id: string;
  name: string;
  /** Byte offset and length of its line in the source. */
  offset: number;
  length: number;
  line: number;
}

/** One line of the result sink: an agent's result without its display name, ok or failed (cancelled items are not written). */
export type BatchResultLine = Omit<AgentResult, 'name' | 'status' | 'finishReason'> & { status: 'ok' | 'failed' };

/** Counters carried from run to run across continue-as-new. */
export interface BatchState {
  /** Byte offset in the source of the next item to start. */
  cursor: number;
  /** Items this batch (or this resume) has to run. */
  total: number;
  /** Items already ok in the sink when a resume began. */
  alreadyOk: number;
  succeeded: number;
  failed: number;
  tokens: { prompt: number; completion: number; total: number };
  /** Spend of the items answered so far (absent in state carried by a run from before costs were tracked). */
  cost?: RunCost;
  /** The spool this chain of runs writes its segments to (see batch/result-sink.ts). */
  spool: string;
  /** Number of the next segment to write; segments 0..segments-1 are written. */
  segments: number;
  /** Bytes of results written so far. */
  sinkBytes: number;
  /** True for a resume: segment 0 holds the ok lines carried over, whose ids are skipped. */
  resumed: boolean;
  startedAtMs: number;
  runs: number;
  largestRunHistory: number;
  stoppedBy?: BatchStopReason;
  /** The workers' pacing as the items' results reported it (carried, so a status after a continue-as-new still shows it). */
  pacing?: PacingStatus;
  /** Moving average of the calls' durations, ms, which shapes chunks (absent before the first answer, and from older runs). */
  callMs?: number;
}

/** Why a batch stopped before running every item: a failure under fail-fast, or its token or cost budget reached. */
export type BatchStopReason = 'fail-fast' | 'budget';

/** Answer of the batch's `progress` query, on whichever run is current. */
export interface BatchProgress {
  batchId: string;
  state: 'scanning' | 'running' | 'draining' | 'finished' | 'cancelling';
  total: number;
  done: number;
  succeeded: number;
  failed: number;
  inFlight: number;
  pending: number;
  alreadyOk: number;
  callsPerSecond: number;
  etaSeconds: number | null;
  tokens: { prompt: number; completion: number; total: number };
  /** Spend of the items answered so far (absent from a batch whose workflow code predates costs). */
  cost?: RunCost;
  runs: number;
  historyLength: number;
  elapsedMs: number;
  /** The workers' pacing of the batch's calls: each worker's concurrency limit per model, and its last moves. */
  pacing?: PacingStatus;
}

/** What `batch` returns. Results are in the sink, not here. */
export interface BatchSummary {
  batchId: string;
  sink: string;
  total: number;
  succeeded: number;
  failed: number;
  alreadyOk: number;
  /** Items never run because the batch stopped early (fail-fast, budget). */
  notRun: number;
  tokens: { prompt: number; completion: number; total: number };
  /** Spend of the items this batch (or this resume) answered (absent from a batch whose workflow code predates costs). */
  cost?: RunCost;
  wallMs: number;
  runs: number;
  largestRunHistory: number;
  /** Size of the sink when the batch ended, bytes. */
  sinkBytes?: number;
  stoppedBy?: BatchStopReason;
  /** The workers' pacing of the batch's calls when it ended (see BatchProgress). */
  pacing?: PacingStatus;
}
