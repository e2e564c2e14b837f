import type { AnswerCacheSettings } from './answer-cache';
/*
 * What the batch workflows and their activities exchange: the activities' inputs and results, and the activities
 * themselves as the workflows call them (createBatchActivities and createBatchAgentItemActivities implement these).
 */
import type { BatchEntry, BatchResultLine } from './batch';
import type { AgentTask, ModelProvider, PromptCache } from './agent-task';
import type { AgentBatchItem, SavedPlace } from './agent-loop';
import type { PacingReport } from './pacing';
import type { RunCost, TokenCounts } from './metrics';

export interface ScanResult {
  /** Items this batch (or this resume) runs. */
  total: number;
  /** Items already ok in the sink when a resume began. */
  alreadyOk: number;
  /** The file the batch runs: the source, or a resume's copy of the task lines still to run. */
  file: string;
  /** Its size when scanned: a batch runs exactly that, and a file that changes size fails it (SourceChanged). */
  fileBytes: number;
  /** The file's first page, so the batch starts without reading it. */
  firstPage: BatchPage;
  /** How long this worker's recent calls of the first task's model took, ms (RecentCalls), if it made enough lately. */
  typicalCallMs?: number;
  /** The line of the file's first agent (a task with tools or an output schema): provider batches cannot run it. */
  firstAgentLine?: number;
  /** The file cut into stripes of about equal item counts, when the scan was asked for more than one. */
  stripes?: Stripe[];
}

/** The items a provider-batch route handed back to be sent sync (its `retry` file of ids and places in `source`). */
export interface HandBackInput {
  /** The file the batch ran (ScanResult.file). */
  source: string;
  retry: string;
  /** Where their task lines are copied: the file the sync windows then run, as they would any task file. */
  file: string;
  firstPageSize: number;
}

/**
 * The hand-back as a task file: its first page, not every entry (at tens of thousands of entries one result, or one
 * window's input, would pass Temporal's 2 MB payload limit).
 */
export interface HandBack {
  total: number;
  file: string;
  fileBytes: number;
  firstPage: BatchPage;
}

export interface BatchPage {
  entries: BatchEntry[];
  nextOffset: number;
  eof: boolean;
}

/** An item a lane could not finish in this attempt for a reason worth another (a retryable failure). */
export interface LaneRetry {
  entry: BatchEntry;
  /** Attempts made so far, this one included. */
  attempts: number;
}

/** What a lane reports. Its result lines are in its segment of the spool, never here. */
export interface LaneResult {
  succeeded: number;
  failed: number;
  tokens: TokenCounts;
  costUsd: number;
  unpricedCalls: number;
  /** See RunCost.cacheSavingsUsd. */
  cacheSavingsUsd?: number;
  /** Items to run again, each as a lane of its own, with the attempts they have left. */
  retry: LaneRetry[];
  /** Items not run because the lane was cancelled: a resume runs them. */
  notRun: number;
  /** The lane's calls' total duration and count, ms, for the batch's moving average. */
  callMsTotal: number;
  calls: number;
  /** The worker's pacing, when it moved or was last reported over 5 s ago (see AgentCallResult). */
  pacing?: PacingReport;
}

export interface LaneInput {
  /** The file the batch runs (ScanResult.file) and its scanned size. */
  file: string;
  fileBytes: number;
  spool: string;
  /** The lane's name (spool.laneName): its journal and segment. */
  lane: string;
  entries: BatchEntry[];
  /** Calls at once: 1 but for very wide batches. */
  parallel: number;
  /** Each call's budget, ms: its request deadline plus the rate-limit wait (agentTimeoutMs + RATE_LIMIT_WAIT_MS). */
  itemAttemptMs: number;
  /** Attempts an item retried on its own had before this lane (its header then says its real attempt). */
  priorAttempts?: number;
  /** The run's maximumAttempts, so a lane knows when an item has none left. */
  maximumAttempts: number;
  /** The batch's id, which the lane's calls name in `x-fanout-workflow-id`. */
  batchId: string;
  /** Fail-fast: the lane takes no item after one fails for good, and returns at once so the window stops the batch. */
  stopAtFailure?: boolean;
  /**
   * How the calls are sent: the flex tier (standard from `standardTierFromMs`), the Responses API, and the batch's
   * provider and prompt cache for items that set none, and the answer cache.
   */
  call?: {
    serviceTier?: 'flex';
    standardTierFromMs?: number;
    api?: 'chat' | 'responses';
    provider?: ModelProvider;
    promptCache?: PromptCache;
    cache?: AnswerCacheSettings;
  };
}

/** A part of the task file one chain of windows runs: its items start at `offset`, and there are `items` of them. */
export interface Stripe {
  offset: number;
  items: number;
}

/** The lanes a batch ran, window by window: the sink is assembled from exactly these. */
export interface LaneLedger {
  /** Lanes per window: lanes 0..n-1 of window k were started; -1 when the window's own count was lost (it failed). */
  windows: number[];
  /** Lanes that did not end sealed (cancelled before they ran, or stopped by a fatal error): their journals are read. */
  unsealed: string[];
}

/** What the sink holds from this batch (a resume's carried lines not counted). */
export interface SinkCounts {
  succeeded: number;
  failed: number;
  tokens: TokenCounts;
  cost: RunCost;
}

export interface AssembledSink {
  sinkBytes: number;
  counts: SinkCounts;
}

/** What a batch's scan reads and where it keeps what it finds. */
export interface ScanInput {
  source: string;
  sink: string;
  spool: string;
  resume: boolean;
  firstPageSize: number;
  /** Cut the file into this many stripes (ScanResult.stripes), when more than one. */
  stripes?: number;
}

/** A page of the file a batch runs: up to `limit` entries from `offset`, none at or past `end` (default its size). */
export interface PageInput {
  file: string;
  fileBytes: number;
  offset: number;
  limit: number;
  end?: number;
}

/** The activities of the batch workflows: scanning and paging the task file, running lanes, writing the sink. */
export interface BatchActivities {
  scanBatchSource(input: ScanInput): Promise<ScanResult>;
  readBatchPage(input: PageInput): Promise<BatchPage>;
  runBatchLane(input: LaneInput): Promise<LaneResult>;
  /** Runs of 0.2.0 only: the provider route's hand-back as entries, all in one result (HandBack replaced it). */
  readRetryEntries(input: { uri: string }): Promise<BatchEntry[]>;
  handBackTasks(input: HandBackInput): Promise<HandBack>;
  sealBatchLane(input: {
    spool: string;
    lane: string;
    entries: BatchEntry[];
    failure: { type: string; message: string };
    attempts: number;
  }): Promise<LaneResult>;
  finishBatch(input: {
    sink: string;
    spool: string;
    ledger: LaneLedger;
    extra?: string[];
    resumed: boolean;
  }): Promise<AssembledSink>;
}

/** The activities of a batch's agent items: an agent's saved place, and its result line sealed as its lane. */
export interface BatchAgentItemActivities {
  loadAgentPlace(input: {
    place: string;
    item?: AgentBatchItem;
    task?: AgentTask;
  }): Promise<{ task?: AgentTask; saved?: SavedPlace; fingerprint: string }>;
  saveAgentPlace(input: { place: string; saved: SavedPlace }): Promise<void>;
  sealAgentItem(input: { spool: string; lane: string; line: BatchResultLine; place?: string }): Promise<LaneResult>;
}
