import type { TokenUsage } from '../contract/token-usage';
import type { BatchPart, BatchProvider, ProviderBatchStatus } from '../contract/provider-batch';

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
   * the store) has none: a retry after a crash finds the batch its lost attempt created. Aborted by `signal` (the
   * activity cancelled), it creates nothing from then on.
   */
  submit(part: BatchPart, key: PartKey, signal?: AbortSignal): Promise<{ id: string; reused: boolean }>;
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
  /** The run's spool: a batch run again (a resume) has a new one, and must not take the earlier run's batches. */
  spool: string;
  part: number;
  /** The part's digest (BatchPart.digest). */
  digest: string;
  attempt: number;
  /** Unix seconds; provider batches created before it are not looked at (they cannot be this part's). */
  notBefore: number;
  /** Where a record of the submission may be kept (Anthropic batches carry no metadata). */
  recordUri: string;
}
