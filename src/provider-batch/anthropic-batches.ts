import Anthropic from '@anthropic-ai/sdk';
import type { ObjectStorage } from '../store';
import { linesOf } from '../batch/lines';
import type { BatchPart, ItemOutcome, PartKey, ProviderBatchClient, ProviderBatchStatus } from './types';

const RETRYABLE_ERRORS = new Set(['api_error', 'overloaded_error', 'rate_limit_error', 'timeout_error']);

interface SubmissionRecord {
  id: string;
  batchId: string;
  part: number;
  attempt: number;
}

/**
 * Anthropic's Message Batches through `@anthropic-ai/sdk` (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; its retries off).
 * Its batches carry no metadata, so a part's submission is recorded in the store the moment the batch is created, and a
 * retry reads the record before creating. The create request's body is a JSON array the SDK builds in memory, so a
 * part is held whole while it is sent (bounded by the part limits, which a route can set lower).
 */
export class AnthropicBatches implements ProviderBatchClient {
  readonly provider = 'anthropic' as const;

  constructor(
    private readonly storage: ObjectStorage,
    private readonly client: Anthropic = new Anthropic({ maxRetries: 0 }),
  ) {}

  async find(key: PartKey): Promise<string | undefined> {
    if ((await this.storage.size(key.recordUri)) === undefined) return undefined;
    return (JSON.parse((await this.storage.read(key.recordUri)).toString('utf8')) as SubmissionRecord).id;
  }

  async submit(part: BatchPart, key: PartKey): Promise<{ id: string; reused: boolean }> {
    const recorded = await this.find(key);
    if (recorded !== undefined) return { id: recorded, reused: true };
    const requests: Anthropic.Messages.Batches.BatchCreateParams.Request[] = [];
    for await (const line of linesOf(this.storage, part.requests)) {
      if (line.text) requests.push(JSON.parse(line.text) as Anthropic.Messages.Batches.BatchCreateParams.Request);
    }
    const batch = await this.client.messages.batches.create({ requests });
    const record: SubmissionRecord = { id: batch.id, batchId: key.batchId, part: key.part, attempt: key.attempt };
    await this.storage.write(key.recordUri, JSON.stringify(record));
    return { id: batch.id, reused: false };
  }

  async status(id: string): Promise<ProviderBatchStatus> {
    const batch = await this.client.messages.batches.retrieve(id);
    const counts = batch.request_counts;
    return {
      state: batch.processing_status === 'ended' ? 'ended' : 'running',
      providerStatus: batch.processing_status,
      counts: {
        total: counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired,
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
        const { input_tokens: promptTokens, output_tokens: completionTokens } = message.usage;
        yield { customId, kind: 'ok', output, model: message.model, usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }, finishReason: message.stop_reason ?? null };
      } else if (result.type === 'errored') {
        const type = result.error.error.type;
        yield { customId, kind: 'error', type, message: result.error.error.message, retryable: RETRYABLE_ERRORS.has(type) };
      } else yield { customId, kind: 'not-run', reason: result.type === 'canceled' ? 'cancelled' : 'expired' };
    }
  }
}
