import type { PacingStatus } from './pacing';
import { z } from 'zod';
import type { AgentResult, PromptCache } from './agent-task';
import type { RunCost, TokenCounts } from './metrics';
import { parseLocation } from './location';
import { runOptionsSchema } from './run-options';
import { routeOptionsSchema } from './route-options';

/** Most items one activity (a lane) may run. */
export const MAX_ITEMS_PER_ACTIVITY = 100;
/** Most calls a batch keeps in flight. */
export const MAX_BATCH_CONCURRENCY = 5000;
/** Most stripes (chains of windows side by side) one batch runs. */
export const MAX_STRIPES = 32;

/**
 * Options of a batch: the run options (less `maxParallel` and `runTimeoutMs`) and the paging knobs. `tokenBudget` and
 * `costBudgetUsd` count the whole batch across its runs but not what a resumed batch spent before.
 */
export const batchOptionsSchema = runOptionsSchema.omit({ maxParallel: true, runTimeoutMs: true }).extend({
  ...routeOptionsSchema.shape,
  /** Seconds between polls of a provider batch, to begin with (it grows to 10 minutes). Default 60. For tests and demos. */
  providerPollSeconds: z.number().min(0.01).max(600).optional(),
  /** Agent calls in flight at once across the whole batch (a sliding window). Default 50. */
  concurrency: z.number().int().min(1).max(MAX_BATCH_CONCURRENCY).optional(),
  /** Items read per page of the task file. Default 200. */
  pageSize: z.number().int().min(1).max(1000).optional(),
  /**
   * Attempts of each read or write of the source, sink and spool before the batch gives up and ends FAILED with the
   * storage's error. Default 10 (about a minute and a half of retrying).
   */
  storageAttempts: z.number().int().min(1).max(100).optional(),
  /**
   * Hand over to a new window workflow after this many pages (otherwise when Temporal suggests it, or the history budget
   * is reached). The new window starts at once; the old one's calls run on, so the window never drains.
   */
  pagesPerRun: z.number().int().min(1).optional(),
  /**
   * Most items one activity (a lane) runs, one after another. Default: chosen by the batch (about 45 s of calls, fewer
   * as the batch nears its end, at most 100). Each answer is recorded as it comes, so a lane's depth costs nothing on a
   * crash. Set 1 to run an activity per item.
   */
  itemsPerActivity: z.number().int().min(1).max(MAX_ITEMS_PER_ACTIVITY).optional(),
  /**
   * Most calls one window workflow keeps in flight. A wider batch cuts its task file into stripes (at most MAX_STRIPES),
   * each run by its own chain of windows side by side. Default 200: every answer adds two events to a window's history,
   * and Temporal fails a workflow task that more than 100 events arrived behind, so one workflow cannot take hundreds of
   * answers a second. Ignored (one window) with a token or dollar budget, which one window keeps.
   */
  windowCalls: z.number().int().min(1).max(MAX_BATCH_CONCURRENCY).optional(),
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
  pagesPerRun: number | undefined;
  itemsPerActivity: number | undefined;
  windowCalls: number;
}

/**
 * Entries a page read asks for: the batch's pageSize, but at least two per call slot (so a wide batch's first wave starts
 * at full width from the scan's page), unless pagesPerRun counts pages (then pages are exactly pageSize).
 */
export function pageLimit(options: ResolvedBatchOptions): number {
  return options.pagesPerRun === undefined
    ? Math.max(options.pageSize, Math.min(4000, options.concurrency * 2))
    : options.pageSize;
}

/** A batch's defaults: the workflow, the client's summary and the CLI's help read them here. */
/** Anthropic's prompt cache of a batch's sync calls that set none: an hour, as its items' shared prefix may be minutes apart. */
export const BATCH_PROMPT_CACHE: PromptCache = '1h';

export const BATCH_DEFAULTS = { concurrency: 50, storageAttempts: 10, pageSize: 200, windowCalls: 200 } as const;

export function resolveBatchOptions(options: BatchOptions | undefined): ResolvedBatchOptions {
  return {
    concurrency: options?.concurrency ?? BATCH_DEFAULTS.concurrency,
    storageAttempts: options?.storageAttempts ?? BATCH_DEFAULTS.storageAttempts,
    pageSize: options?.pageSize ?? BATCH_DEFAULTS.pageSize,
    pagesPerRun: options?.pagesPerRun,
    itemsPerActivity: options?.itemsPerActivity,
    windowCalls: options?.windowCalls ?? BATCH_DEFAULTS.windowCalls,
  };
}

/** Where an item sits in the task file: the workflow carries only this, never the prompt. */
export interface BatchEntry {
  id: string;
  /** Byte offset and length of its line in the file the batch runs. */
  offset: number;
  length: number;
  /** The task has tools or an output schema: it runs as an `agent` child workflow of the window, not in a lane. */
  agent?: true;
}

/** One line of the result sink: an agent's result without its display name, ok or failed (cancelled items are not written). */
export type BatchResultLine = Omit<AgentResult, 'name' | 'status' | 'finishReason'> & { status: 'ok' | 'failed' };

/** What a batch's items have come to so far. */
export interface BatchCounters {
  succeeded: number;
  failed: number;
  tokens: TokenCounts;
  cost: RunCost;
}

export function emptyCounters(): BatchCounters {
  return {
    succeeded: 0,
    failed: 0,
    tokens: { prompt: 0, completion: 0, total: 0 },
    cost: { usd: 0, unpricedCalls: 0 },
  };
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
  tokens: TokenCounts;
  /** Spend of the items answered so far (absent from a batch whose workflow code predates costs). */
  cost?: RunCost;
  runs: number;
  historyLength: number;
  elapsedMs: number;
  /** The workers' pacing of the batch's calls: each worker's concurrency limit per model, and its last moves. */
  pacing?: PacingStatus;
  /** Workflow ids of the batch's windows that are running; the client adds their progress to the batch's. */
  runningWindows?: string[];
  /** Workflow ids of the batch's agent items running now (the client fills it in from its windows). */
  runningAgents?: string[];
  /** How the items are sent (an `auto` batch says which it chose); absent from a batch whose code predates routes. */
  route?: 'sync' | 'flex' | 'provider-batch';
  /**
   * Workflow id of the provider-batch route's child while it runs; the client adds its `providerBatchProgress` (each
   * provider batch, its counts, the savings) to the batch's.
   */
  providerBatchWorkflow?: string;
  /** The provider batches of a provider-batch route: id, status and counts of each (as in the summary). */
  providerBatches?: BatchSummary['providerBatches'];
  /** What the route has saved so far against the standard price, US dollars. */
  savingsUsd?: number;
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
  tokens: TokenCounts;
  /** Spend of the items this batch (or this resume) answered (absent from a batch whose workflow code predates costs). */
  cost?: RunCost;
  wallMs: number;
  runs: number;
  largestRunHistory: number;
  /** Size of the sink when the batch ended, bytes. */
  sinkBytes?: number;
  stoppedBy?: BatchStopReason;
  /** How the items were sent: `sync`, `flex` or `provider-batch` (an `auto` batch says which it chose). */
  route?: 'sync' | 'flex' | 'provider-batch';
  /** The provider batches of a provider-batch route: id, status and counts of each. */
  providerBatches?: {
    provider: string;
    id: string;
    status: string;
    counts: { total: number; succeeded: number; failed: number; processing: number };
  }[];
  /** What the route saved against the standard price, US dollars. */
  savingsUsd?: number;
  /** The workers' pacing of the batch's calls when it ended (see BatchProgress). */
  pacing?: PacingStatus;
}

/**
 * Stripes a batch asks its scan for: enough that no window keeps more than `windowCalls` calls in flight, at most
 * MAX_STRIPES. One for a batch with a token or dollar budget (one window counts it) or sent as a provider batch (its
 * windows only run what the provider handed back). Read by the batch and by the client (which looks for a stopped batch's windows).
 */
export function stripesWanted(options: BatchOptions | undefined): number {
  if (options?.tokenBudget !== undefined || options?.costBudgetUsd !== undefined) return 1;
  if (options?.route === 'provider-batch') return 1;
  const { concurrency, windowCalls } = resolveBatchOptions(options);
  return Math.max(1, Math.min(MAX_STRIPES, Math.ceil(concurrency / windowCalls)));
}

/** The calls in flight stripe `stripe` of `stripes` keeps: the batch's concurrency shared out, the first ones one more. */
export function stripeConcurrency(concurrency: number, stripes: number, stripe: number): number {
  return Math.floor(concurrency / stripes) + (stripe < concurrency % stripes ? 1 : 0);
}

/** The workflow id of a batch's provider-batch route (its child `providerBatch`). */
export function providerBatchWorkflowId(batchId: string, firstRunId: string): string {
  return `${batchId}/${firstRunId}/provider-batch`;
}

/** The workflow id of a batch's window `window` (its windows are numbered from 0 across all its stripes). */
export function windowWorkflowId(batchId: string, firstRunId: string, window: number): string {
  return `${batchId}/${firstRunId}/window-${window}`;
}
