import type Anthropic from '@anthropic-ai/sdk';
import type { ObjectStorage } from '../store';
import { linesOf } from '../spool/lines';
import { usageFromAnthropic } from '../llm/token-usage';
import type { BatchPart, ProviderBatchStatus } from '../contract/provider-batch';
import type { ItemOutcome, PartKey, ProviderBatchClient } from './types';

const RETRYABLE_ERRORS = new Set(['api_error', 'overloaded_error', 'rate_limit_error', 'timeout_error']);

/**
 * A part's submission, kept in the store at `PartKey.recordUri`. Written twice: before the create request (no `id`
 * yet: the intent, saying what to look for) and after it (with the batch's id).
 */
interface SubmissionRecord {
  /** The created batch's id; absent while only the intent is recorded. */
  id?: string;
  batchId: string;
  part: number;
  attempt: number;
  /** Requests in the part: the batch's total in `request_counts`. */
  count?: number;
  /** The newest batch of the workspace when the intent was written (null: none): every batch listed before it is newer. */
  newestBefore?: string | null;
  /** When the intent was written (epoch ms, the worker's clock). */
  intentAt?: number;
}

/** Slack for the clocks of the worker and the provider when the intent's time bounds a lookup. */
const CLOCK_SLACK_MS = 5 * 60 * 1000;

function totalOf(batch: Anthropic.Messages.Batches.MessageBatch): number {
  const counts = batch.request_counts;
  return counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired;
}

/**
 * Anthropic's Message Batches through `@anthropic-ai/sdk` (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; its retries off).
 *
 * Its batches carry no metadata, take no idempotency key, and say nothing of their requests until they end (a batch
 * shows only its id, times and request counts), so a lost create cannot be found by a marker as OpenAI's can. Instead
 * the part's intent is recorded in the store *before* the create request: the part's request count and the newest
 * batch the workspace had. A retry that finds an intent without an id lists the batches newer than that one and takes
 * the one with the part's request count that no other part of this spool has recorded; it creates only when there is
 * none. That is sound because the workflow sends one Anthropic create at a time (a part's submit ends, its record
 * written, before the next part's starts), so at most one of our batches is ever unrecorded. What it cannot tell apart
 * is another client of the same workspace creating a batch of exactly the same size in those seconds: two such
 * candidates make it create rather than guess (paying twice rather than taking a stranger's answers).
 *
 * The create request's body is a JSON array the SDK builds in memory, so a part is held whole while it is sent
 * (bounded by the part limits, which a route can set lower).
 */
export class AnthropicBatches implements ProviderBatchClient {
  readonly provider = 'anthropic' as const;

  constructor(
    private readonly storage: ObjectStorage,
    // The SDK is loaded when the first Anthropic batch client is made, not with every worker.
    private readonly client: Anthropic = new (
      require('@anthropic-ai/sdk') as typeof import('@anthropic-ai/sdk')
    ).default({
      maxRetries: 0,
    }),
  ) {}

  private async record(key: PartKey): Promise<SubmissionRecord | undefined> {
    if ((await this.storage.size(key.recordUri)) === undefined) return undefined;
    return JSON.parse((await this.storage.read(key.recordUri)).toString('utf8')) as SubmissionRecord;
  }

  /** Ids of the batches every part of this spool has recorded: none of them can be another part's lost create. */
  private async claimed(key: PartKey): Promise<Set<string>> {
    const folder = key.recordUri.slice(0, key.recordUri.lastIndexOf('/'));
    const ids = new Set<string>();
    for (const name of await this.storage.list(folder)) {
      if (!/\.anthropic-[0-9a-f]+-a\d+\.json$/.test(name)) continue;
      const record = JSON.parse((await this.storage.read(`${folder}/${name}`)).toString('utf8')) as SubmissionRecord;
      if (record.id !== undefined) ids.add(record.id);
    }
    return ids;
  }

  /** The batch a create after `intent` made, if the provider has exactly one that can be it (see the class). */
  private async lostCreate(key: PartKey, intent: SubmissionRecord): Promise<string | undefined> {
    if (intent.count === undefined) return undefined;
    const claimed = await this.claimed(key);
    const oldest = Math.max(key.notBefore * 1000, (intent.intentAt ?? 0) - CLOCK_SLACK_MS);
    const candidates: string[] = [];
    // Newest first: stop at the batch that was newest before the intent, or at anything older than it can be.
    for await (const batch of this.client.messages.batches.list({ limit: 100 })) {
      if (batch.id === intent.newestBefore || Date.parse(batch.created_at) < oldest) break;
      if (totalOf(batch) === intent.count && !claimed.has(batch.id)) candidates.push(batch.id);
    }
    return candidates.length === 1 ? candidates[0] : undefined;
  }

  async find(key: PartKey): Promise<string | undefined> {
    const record = await this.record(key);
    if (!record) return undefined;
    if (record.id !== undefined) return record.id;
    const found = await this.lostCreate(key, record);
    if (found !== undefined)
      await this.storage.write(key.recordUri, JSON.stringify({ ...record, id: found } satisfies SubmissionRecord));
    return found;
  }

  async submit(part: BatchPart, key: PartKey, signal?: AbortSignal): Promise<{ id: string; reused: boolean }> {
    const recorded = await this.find(key);
    if (recorded !== undefined) return { id: recorded, reused: true };
    signal?.throwIfAborted();
    const requests: Anthropic.Messages.Batches.BatchCreateParams.Request[] = [];
    for await (const line of linesOf(this.storage, part.requests)) {
      if (line.text) requests.push(JSON.parse(line.text) as Anthropic.Messages.Batches.BatchCreateParams.Request);
    }
    // The intent first: a worker killed between the create and the record below leaves what finds the batch it made.
    let newestBefore: string | null = null;
    for await (const batch of this.client.messages.batches.list({ limit: 1 })) {
      newestBefore = batch.id;
      break;
    }
    const intent: SubmissionRecord = {
      batchId: key.batchId,
      part: key.part,
      attempt: key.attempt,
      count: part.count,
      newestBefore,
      intentAt: Date.now(),
    };
    await this.storage.write(key.recordUri, JSON.stringify(intent));
    // Cancelled while reading the part: no batch is created that the cancelled run would never watch.
    signal?.throwIfAborted();
    const batch = await this.client.messages.batches.create({ requests });
    // A stale attempt (its worker judged lost while it ran) must not replace the batch a later attempt recorded, which
    // the run watches: its own is a duplicate, cancelled at once, and the recorded one is the part's.
    const now = await this.record(key);
    if (now?.id !== undefined && now.id !== batch.id) {
      await this.client.messages.batches.cancel(batch.id);
      return { id: now.id, reused: true };
    }
    await this.storage.write(key.recordUri, JSON.stringify({ ...intent, id: batch.id } satisfies SubmissionRecord));
    return { id: batch.id, reused: false };
  }

  async status(id: string): Promise<ProviderBatchStatus> {
    const batch = await this.client.messages.batches.retrieve(id);
    const counts = batch.request_counts;
    return {
      state: batch.processing_status === 'ended' ? 'ended' : 'running',
      providerStatus: batch.processing_status,
      counts: {
        total: totalOf(batch),
        succeeded: counts.succeeded,
        failed: counts.errored + counts.canceled + counts.expired,
        processing: counts.processing,
      },
    };
  }

  async cancel(id: string): Promise<void> {
    const batch = await this.client.messages.batches.retrieve(id);
    if (batch.processing_status === 'in_progress') await this.client.messages.batches.cancel(id);
  }

  async *results(id: string): AsyncIterable<ItemOutcome> {
    for await (const entry of await this.client.messages.batches.results(id)) {
      const customId = entry.custom_id;
      const result = entry.result;
      if (result.type === 'succeeded') {
        const message = result.message;
        const output = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
        yield {
          customId,
          kind: 'ok',
          output,
          model: message.model,
          // Anthropic's input_tokens leaves out cache reads and writes: promptTokens counts them (token-usage.ts).
          usage: usageFromAnthropic(message.usage),
          finishReason: message.stop_reason ?? null,
        };
      } else if (result.type === 'errored') {
        const type = result.error.error.type;
        yield {
          customId,
          kind: 'error',
          type,
          message: result.error.error.message,
          retryable: RETRYABLE_ERRORS.has(type),
        };
      } else yield { customId, kind: 'not-run', reason: result.type === 'canceled' ? 'cancelled' : 'expired' };
    }
  }
}
