import type { RunCost, TokenCounts } from './metrics';
/*
 * What the providerBatch workflow and its activities exchange, and the activities as the workflow calls them
 * (createProviderBatchActivities implements them). Prompts never travel here: parts are files in the store.
 */
import type { PromptCache } from './agent-task';

/** Which provider batch API a part goes to. */
export type BatchProvider = 'openai' | 'anthropic';

/** The OpenAI endpoint a part's requests target (Anthropic's is always its Messages API). */
export type BatchEndpoint = '/v1/chat/completions' | '/v1/responses';

/** One provider batch's worth of requests, written to the store by `planParts`. History carries this, never prompts. */
export interface BatchPart {
  /** 0-based; fixes the names of everything written for the part. */
  index: number;
  provider: BatchProvider;
  model: string;
  endpoint: BatchEndpoint;
  /** Requests in the part. */
  count: number;
  /** Bytes of the request file. */
  bytes: number;
  /** The request file (JSONL in the provider's batch input format). */
  requests: string;
  /** The part's map, one `{ c: customId, id, o: offset, l: length }` line per item. */
  map: string;
  /** sha256 of the map (its ids, in order): a provider batch is this part's only if it was made from the same items. */
  digest: string;
}

/** One line of a part's map: the custom_id sent for a task id, and where the task is in the source. */
export interface PartMapLine {
  c: string;
  id: string;
  o: number;
  l: number;
}

/** A provider batch as the workflow sees it. */
export interface ProviderBatchStatus {
  /** running: wait and poll again; ended: results can be collected; failed: nothing ran (see `failure`). */
  state: 'running' | 'ended' | 'failed';
  /** The provider's own status word. */
  providerStatus: string;
  counts: { total: number; succeeded: number; failed: number; processing: number };
  /** Why the provider refused the whole batch (OpenAI's `errors.data[0]`). */
  failure?: { code: string; message: string };
}

/** How the route splits and addresses the work (ProviderBatchRouteOptions less what only the workflow uses). */
export interface PlanInput {
  batchId: string;
  source: string;
  spool: string;
  /** A JSONL of result lines whose ok ids are not sent again (a resume). */
  skipIds?: string;
  provider?: BatchProvider;
  endpoint?: BatchEndpoint;
  model?: string;
  maxRequestsPerPart?: number;
  maxBytesPerPart?: number;
  /** Anthropic's prompt cache of requests whose task sets none. Default `1h`. */
  promptCache?: PromptCache;
  /** Retry files of earlier parts: only their items are planned (a new round of provider batches). */
  retries?: string[];
  /** Number of the first part planned (a new round's follow the earlier rounds'). Default 0. */
  firstIndex?: number;
}

/** What one part's collection wrote and counted. */
export interface PartCollected {
  /** The part's segment of result lines (absent when no line was written). */
  segment?: string;
  /** The part's items to send again (ids and byte offsets), absent when none. */
  retry?: string;
  succeeded: number;
  failed: number;
  retried: number;
  tokens: TokenCounts;
  cost: RunCost;
  /** What the answered items would have cost at the standard price. */
  standardUsd: number;
}

/** One line of a retry file: an item the route sends again, and where it is in the source. */
export interface RetryLine {
  id: string;
  offset: number;
  length: number;
  reason: string;
}

/** The input naming one part's provider batch (its key: the batch, the part, the attempt). */
export interface PartAttempt {
  batchId: string;
  spool: string;
  part: BatchPart;
  attempt: number;
  notBefore: number;
}

/** The activities of the `providerBatch` workflow: plan, submit, poll, cancel and collect provider batches. */
export interface ProviderBatchActivities {
  planProviderBatch(input: PlanInput): Promise<{ parts: BatchPart[] }>;
  submitProviderBatch(input: PartAttempt): Promise<{ id: string; reused: boolean }>;
  findProviderBatch(input: PartAttempt): Promise<string | null>;
  pollProviderBatch(input: { provider: BatchProvider; id: string }): Promise<ProviderBatchStatus>;
  cancelProviderBatch(input: { provider: BatchProvider; id: string }): Promise<void>;
  collectProviderBatch(input: {
    spool: string;
    part: BatchPart;
    id?: string;
    durationMs: number;
    round?: number;
    /** The provider refused the part (no `id`): each of its items ends as a failed line with this error. */
    refused?: { type: string; message: string };
  }): Promise<PartCollected>;
  joinProviderBatchRetries(input: { spool: string; retries: string[] }): Promise<string>;
}
