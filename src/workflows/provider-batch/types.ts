import type { PartCollected } from '../../contract/provider-batch';
import type { RunCost, TokenCounts } from '../../contract/metrics';
import type { PromptCache } from '../../contract/agent-task';
import type { BatchEndpoint, BatchPart, BatchProvider, ProviderBatchStatus } from '../../contract/provider-batch';

/** How the provider-batch route runs. Every duration is in ms. */
export interface ProviderBatchRouteOptions {
  /**
   * When the answers are needed, from the workflow's start. A provider batch still running then is cancelled, what it
   * answered is kept, and the rest is handed back in `retry` to be sent sync. Default 24 h (the providers' window).
   */
  deadlineMs?: number;
  /** The deadline as a time (epoch ms), e.g. the whole batch's when the route runs as its child; wins over `deadlineMs`. */
  deadlineAtMs?: number;
  /** Provider of every task; default by model name (`claude-*` is Anthropic, the rest OpenAI). */
  provider?: BatchProvider;
  /** Anthropic's prompt cache of requests whose task sets none: a breakpoint after the system prompt. Default `1h`. */
  promptCache?: PromptCache;
  /** OpenAI endpoint the requests target. Default `/v1/chat/completions`. */
  endpoint?: BatchEndpoint;
  /** Model of tasks that name none. Default the worker's FANOUT_MODEL. */
  model?: string;
  /** First wait between polls of a provider batch (durable timers, no activity waits). Default 60 s. */
  pollIntervalMs?: number;
  /** Longest wait between polls; the wait grows by half each poll up to it. Default 10 min. */
  maxPollIntervalMs?: number;
  /** Most requests per provider batch, under the provider's own limit (50,000 OpenAI, 100,000 Anthropic). */
  maxRequestsPerPart?: number;
  /** Most bytes per provider batch's requests, under the provider's own limit (200 MB OpenAI, 256 MB Anthropic). */
  maxBytesPerPart?: number;
  /**
   * Provider batches in flight at once; the next part is submitted as one finishes (the enqueued-token limit per model
   * is the provider's; a batch refused with `token_limit_exceeded` waits and is submitted again). Default 4.
   */
  maxActiveParts?: number;
  /**
   * Rounds of new provider batches for the items a round hands back (expired, cancelled, retryable errors), each taken
   * only while the deadline leaves at least twice the time the round before took (its slowest part, submit to end): one
   * round's worth for the new batches, and as much again in reserve for the sync path should they fall short too.
   * What is left after the last round goes back in `retry`, to be sent sync. Default 1; 0 sends every such item sync.
   */
  retryRounds?: number;
  /**
   * Polls one run makes before it continues as new (its parts' state carried over), so that a long wait keeps its
   * history small; a run also continues as new when Temporal suggests it. Default 300 (about 3,500 events).
   */
  maxPollsPerRun?: number;
  /**
   * A part the provider refuses (HTTP 4xx when it is uploaded or created, e.g. a model not available for batch): its
   * items end as failed lines naming the provider's error (false, the default), or go back in `retry` to be sent sync
   * (true: a batch whose route is `auto`). Either way the other parts run on.
   */
  refusedPartsSync?: boolean;
}

/** The one argument of `providerBatch`. */
export interface ProviderBatchInput {
  /** The fanout batch's id: provider batches carry it in their metadata, so a retried submit finds its batch. */
  batchId: string;
  /** The JSONL task file (absolute path or s3:// URI). */
  source: string;
  /** A store location (directory or s3:// prefix) this workflow writes its parts, segments and retry file under. */
  spool: string;
  options?: ProviderBatchRouteOptions;
  /** A JSONL of result lines (a sink) whose ok ids are not sent (a resume). */
  skipIds?: string;
  /** Set by the workflow itself when it continues as new: what the earlier runs did. Never set it when starting one. */
  carried?: ProviderBatchCarried;
}

/** What a run of `providerBatch` hands to the next when it continues as new. */
export interface ProviderBatchCarried {
  /** The first run's start (epoch ms): the deadline, the lookups' bound and the durations count from it. */
  startedAt: number;
  deadline: number;
  /** The round of provider batches under way (0: the parts planned from the source). */
  round: number;
  parts: CarriedPart[];
  providerBatches: ProviderBatchInfo[];
  /** Runs so far, this one included. */
  runs: number;
}

/** A part's state as one run hands it on (see PartState). */
export interface CarriedPart {
  part: BatchPart;
  round: number;
  attempt: number;
  id?: string;
  submittedAt?: number;
  collected?: PartCollected;
  endedAt?: number;
  resubmitted?: boolean;
  deadlineCancelled?: boolean;
  pollWaitMs?: number;
}

/** One provider batch as `batch status` shows it. */
export interface ProviderBatchInfo {
  provider: BatchProvider;
  id: string;
  /** The provider's status word (`in_progress`, `completed`, `ended`, `failed` ...). */
  status: string;
  counts: ProviderBatchStatus['counts'];
  part: number;
  attempt: number;
}

export interface ProviderBatchResult {
  /** Store URIs of every segment of result lines written (one line per id; ok or failed for good), in any order. */
  segments: string[];
  succeeded: number;
  failed: number;
  tokens: TokenCounts;
  /** At the batch price. */
  cost: RunCost;
  providerBatches: ProviderBatchInfo[];
  /** What the answered items would have cost at the standard price, less what they cost. */
  savingsUsd: number;
  /** A JSONL of `{ id, offset, length, reason }` of the items to send again sync (expired, retryable errors), or undefined. */
  retry?: string;
  /** Runs the workflow took (it continues as new during long waits); absent when run inline. */
  runs?: number;
}

/** The route's state while it runs. */
export interface ProviderBatchProgress {
  parts: number;
  collected: number;
  succeeded: number;
  failed: number;
  retried: number;
  providerBatches: ProviderBatchInfo[];
  savingsUsd: number;
  /** Tokens and cost (at the batch price) of the parts collected so far; absent from runs of older code. */
  tokens?: TokenCounts;
  cost?: RunCost;
}

/** Called as the route's state changes; a batch workflow running the route inline shows it in its own status. */
export interface ProviderBatchHooks {
  onProgress?(progress: ProviderBatchProgress): void;
  /**
   * Called when the run's history should be handed on (its polls reached `maxPollsPerRun`, or Temporal suggests it),
   * once no activity is running; it must not return (the `providerBatch` workflow continues as new). Without it the
   * run never hands over.
   */
  handOver?(carried: ProviderBatchCarried): Promise<never>;
}
