import { createHash } from 'node:crypto';
import OpenAI, { toStreamingFile } from 'openai';
import type { Batch } from 'openai/resources/batches';
import type { ObjectStorage } from '../store';
import { providerFromEnvironment, OPENAI_BASE_URL } from '../llm/llm-client';
import { retryableStatus, textLines } from './response-lines';
import { usageFromChat, usageFromResponses } from '../llm/token-usage';
import type { TokenUsage } from '../contract/token-usage';
import type { BatchPart, ProviderBatchStatus } from '../contract/provider-batch';
import type { ItemOutcome, PartKey, ProviderBatchClient } from './types';

/**
 * The metadata that names a part's provider batch, so a retry finds the batch a lost attempt created: the fanout batch,
 * the run (its spool: a resume within the lookup's hour would otherwise take the cancelled batch of the run it resumes
 * for its own), the part, its attempt and its items.
 */
export function partMetadata(
  key: Pick<PartKey, 'batchId' | 'spool' | 'part' | 'attempt' | 'digest'>,
): Record<string, string> {
  return {
    fanout_batch: key.batchId.slice(0, 512),
    fanout_run: createHash('sha256').update(key.spool).digest('hex').slice(0, 32),
    fanout_part: String(key.part),
    fanout_attempt: String(key.attempt),
    fanout_digest: key.digest.slice(0, 32),
  };
}

function uploadName(key: Pick<PartKey, 'batchId' | 'part'>): string {
  return `fanout-${key.batchId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 120)}-part-${key.part}.jsonl`;
}

const RUNNING = new Set(['validating', 'in_progress', 'finalizing', 'cancelling']);

interface OutputLine {
  custom_id: string;
  response: { status_code: number; body: Record<string, unknown> } | null;
  error: { code?: string; message?: string } | null;
}

/** A chat completion's or a response's answer, from a 200 line's body. */
function answerOf(
  body: Record<string, unknown>,
  fallbackModel: string,
): { output: string; model: string; usage?: TokenUsage; finishReason: string | null } {
  const model = typeof body.model === 'string' ? body.model : fallbackModel;
  if (body.object === 'response') {
    const output = ((body.output ?? []) as { type?: string; content?: { type?: string; text?: string }[] }[])
      .filter((item) => item.type === 'message')
      .flatMap((item) => item.content ?? [])
      .filter((part) => part.type === 'output_text')
      .map((part) => part.text ?? '')
      .join('');
    return {
      output,
      model,
      usage: usageFromResponses(body.usage),
      finishReason: typeof body.status === 'string' ? body.status : null,
    };
  }
  const choice = (
    body.choices as { message?: { content?: string | null }; finish_reason?: string | null }[] | undefined
  )?.[0];
  return {
    output: choice?.message?.content ?? '',
    model,
    usage: usageFromChat(body.usage),
    finishReason: choice?.finish_reason ?? null,
  };
}

/** One line of an output or error file as an outcome. */
export function openAiOutcome(line: OutputLine, model: string): ItemOutcome {
  const customId = line.custom_id;
  if (line.response && line.response.status_code === 200)
    return { customId, kind: 'ok', ...answerOf(line.response.body, model) };
  if (line.response) {
    const error = (line.response.body?.error ?? {}) as { message?: string; type?: string };
    const status = line.response.status_code;
    return {
      customId,
      kind: 'error',
      type: `HTTP ${status}${error.type ? ` ${error.type}` : ''}`,
      message: error.message ?? `status ${status}`,
      retryable: retryableStatus(status),
    };
  }
  const code = line.error?.code ?? 'unknown';
  if (code === 'batch_expired') return { customId, kind: 'not-run', reason: 'expired' };
  if (code === 'batch_cancelled') return { customId, kind: 'not-run', reason: 'cancelled' };
  return { customId, kind: 'error', type: code, message: line.error?.message ?? code, retryable: true };
}

/**
 * OpenAI's Batch API through the `openai` package: the request file is uploaded from the store as a stream, and the
 * batch created with metadata naming its part; the client's own retries are off (Temporal retries the activities).
 * OPENAI_BASE_URL and OPENAI_API_KEY (or the fallback simulator) serve these endpoints as they do chat completions.
 */
export class OpenAiBatches implements ProviderBatchClient {
  readonly provider = 'openai' as const;

  constructor(
    private readonly storage: ObjectStorage,
    private readonly client: OpenAI = openAiFromEnvironment(),
  ) {}

  private async findBatch(key: PartKey): Promise<Batch | undefined> {
    const wanted = partMetadata(key);
    // Newest first: stop at batches older than the run, which cannot be this part's.
    for await (const batch of this.client.batches.list({ limit: 100 })) {
      if (batch.created_at < key.notBefore) return undefined;
      const metadata = batch.metadata ?? {};
      if (Object.entries(wanted).every(([name, value]) => metadata[name] === value)) return batch;
    }
    return undefined;
  }

  private async findUpload(part: BatchPart, key: PartKey): Promise<string | undefined> {
    const name = uploadName(key);
    for await (const file of this.client.files.list({ purpose: 'batch', limit: 100, order: 'desc' })) {
      if (file.created_at < key.notBefore) return undefined;
      if (file.filename === name && file.bytes === part.bytes) return file.id;
    }
    return undefined;
  }

  async find(key: PartKey): Promise<string | undefined> {
    return (await this.findBatch(key))?.id;
  }

  async submit(part: BatchPart, key: PartKey, signal?: AbortSignal): Promise<{ id: string; reused: boolean }> {
    const existing = await this.findBatch(key);
    if (existing) return { id: existing.id, reused: true };
    signal?.throwIfAborted();
    // An upload a lost attempt finished is used again rather than sent twice.
    const fileId =
      (await this.findUpload(part, key)) ??
      (
        await this.client.files.create({
          file: toStreamingFile(this.storage.readStream(part.requests), uploadName(key), { type: 'application/jsonl' }),
          purpose: 'batch',
        })
      ).id;
    // Cancelled while uploading: no batch is created that the cancelled run would never watch.
    signal?.throwIfAborted();
    const batch = await this.client.batches.create({
      input_file_id: fileId,
      endpoint: part.endpoint,
      completion_window: '24h',
      metadata: partMetadata(key),
    });
    return { id: batch.id, reused: false };
  }

  async status(id: string): Promise<ProviderBatchStatus> {
    const batch = await this.client.batches.retrieve(id);
    const counts = batch.request_counts ?? { total: 0, completed: 0, failed: 0 };
    const state = batch.status === 'failed' ? 'failed' : RUNNING.has(batch.status) ? 'running' : 'ended';
    const error = batch.errors?.data?.[0];
    return {
      state,
      providerStatus: batch.status,
      counts: {
        total: counts.total,
        succeeded: counts.completed,
        failed: counts.failed,
        processing: state === 'running' ? Math.max(0, counts.total - counts.completed - counts.failed) : 0,
      },
      ...(state === 'failed'
        ? { failure: { code: error?.code ?? 'failed', message: error?.message ?? 'the provider failed the batch' } }
        : {}),
    };
  }

  async cancel(id: string): Promise<void> {
    const batch = await this.client.batches.retrieve(id);
    if (RUNNING.has(batch.status) && batch.status !== 'cancelling') await this.client.batches.cancel(id);
  }

  async *results(id: string): AsyncIterable<ItemOutcome> {
    const batch = await this.client.batches.retrieve(id);
    const model = batch.model ?? 'unknown';
    for (const fileId of [batch.output_file_id, batch.error_file_id]) {
      if (!fileId) continue;
      const response = await this.client.files.content(fileId);
      if (!response.body) continue;
      for await (const text of textLines(response.body as unknown as AsyncIterable<Uint8Array>))
        yield openAiOutcome(JSON.parse(text) as OutputLine, model);
    }
  }
}

/** An OpenAI client for the batch endpoints, from the worker's environment, its own retries off. */
export function openAiFromEnvironment(): OpenAI {
  const provider = providerFromEnvironment();
  return new OpenAI({ apiKey: provider.apiKey, baseURL: provider.baseURL ?? OPENAI_BASE_URL, maxRetries: 0 });
}
