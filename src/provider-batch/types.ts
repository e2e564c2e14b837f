import type { TokenUsage } from '../contract/agent-task';

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

/** What came back for one request. */
export type ItemOutcome =
  | { customId: string; kind: 'ok'; output: string; model: string; usage?: TokenUsage; finishReason: string | null }
  | { customId: string; kind: 'error'; type: string; message: string; retryable: boolean }
  /** Never run: the batch expired or was cancelled first. */
  | { customId: string; kind: 'not-run'; reason: 'expired' | 'cancelled' };

/** The provider side of one route: submit a part (idempotently), watch it, cancel it, read its results. */
export interface ProviderBatchClient {
  readonly provider: BatchProvider;
  /**
   * Returns the provider batch of `key`, creating it only when the provider (or, for Anthropic, the part's record in
   * the store) has none: a retry after a crash finds the batch its lost attempt created.
   */
  submit(part: BatchPart, key: PartKey): Promise<{ id: string; reused: boolean }>;
  /** The provider batch of `key` if one was created, without creating one (used when cancelling). */
  find(key: PartKey): Promise<string | undefined>;
  status(id: string): Promise<ProviderBatchStatus>;
  cancel(id: string): Promise<void>;
  /** Every outcome of an ended batch, streamed from its output and error files. */
  results(id: string): AsyncIterable<ItemOutcome>;
}

/** What makes a submission unique: the fanout batch, the part and the attempt (a new one after `token_limit_exceeded`). */
export interface PartKey {
  batchId: string;
  part: number;
  /** The part's digest (BatchPart.digest). */
  digest: string;
  attempt: number;
  /** Unix seconds; provider batches created before it are not looked at (they cannot be this part's). */
  notBefore: number;
  /** Where a record of the submission may be kept (Anthropic batches carry no metadata). */
  recordUri: string;
}
