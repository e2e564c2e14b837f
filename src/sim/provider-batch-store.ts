import { createHash } from 'node:crypto';
import type { ProviderBatchSimConfig } from './provider-batch-config';
import { countTokens } from './prompt-text';
import { prefixChain, promptWords, SimulatedPromptCache } from './prompt-cache';
import { responsesRequestAsChat } from '../llm/responses-api';
import { roll } from './seeded-roll';
import type { AnthropicPromptCache, CacheUsage } from './anthropic-prompt-cache';
import {
  anthropicResult,
  elapsed,
  isAnswered,
  isDone,
  openAiErrorLine,
  openAiOutputLine,
  promptOf,
  type BatchEndStatus,
  type ItemFate,
  type SimBatch,
  type SimItem,
} from './simulated-batch';

/** What tests read: how many batches were created and items answered, per provider. */
export interface ProviderBatchStats {
  filesUploaded: number;
  batchesCreated: number;
  /** Items submitted in created batches. */
  itemsSubmitted: number;
  /** Items answered (a success line in an output file or a results file), counted once per batch when it ends. */
  itemsAnswered: number;
  cancelled: number;
  /** Requests for an output, error or results file, counted when they arrive. */
  downloadsStarted: number;
  byProvider: Record<'openai' | 'anthropic', { batchesCreated: number; itemsAnswered: number }>;
  /** Every batch created, in order: id, provider, metadata and item count. */
  batches: {
    id: string;
    provider: 'openai' | 'anthropic';
    metadata: Record<string, string>;
    items: number;
    status: string;
    /** The custom_ids the batch answered (a success line), once it has ended. */
    answered?: string[];
  }[];
}

export interface StoredFile {
  id: string;
  filename: string;
  purpose: string;
  data: Buffer;
  createdAt: number;
}

const BATCH_MARKER =
  /\[sim(?:\s+[a-z-]+=[^\s\]]+)*\s+batch=(expired|error-500|error-400)(-once)?(?:\s+[a-z-]+=[^\s\]]+)*\s*\]/;

function emptyStats(): ProviderBatchStats {
  return {
    filesUploaded: 0,
    batchesCreated: 0,
    itemsSubmitted: 0,
    itemsAnswered: 0,
    cancelled: 0,
    downloadsStarted: 0,
    byProvider: {
      openai: { batchesCreated: 0, itemsAnswered: 0 },
      anthropic: { batchesCreated: 0, itemsAnswered: 0 },
    },
    batches: [],
  };
}

/** One JSON record a line, each line ended, as batch files and results are. */
const jsonLines = (records: Record<string, unknown>[]) =>
  records.map((record) => `${JSON.stringify(record)}\n`).join('');

const speedOf = (config: ProviderBatchSimConfig) => config.speed ?? (Number(process.env.FANOUT_SIM_BATCH_SPEED) || 1);

/**
 * The batch APIs' files, batches and counters, kept for the simulator's lifetime. A batch ends when a request first
 * looks at it after its time has come. `config` is read on each call (it may be replaced).
 */
export class ProviderBatchStore {
  files = new Map<string, StoredFile>();
  batches = new Map<string, SimBatch>();
  stats = emptyStats();
  /** Batches each marked prompt was sent in, for the `-once` markers. */
  private promptsSent = new Map<string, number>();
  private counter = 0;

  constructor(
    private readonly options: {
      config: () => ProviderBatchSimConfig;
      seed: () => string | number;
      /** Anthropic's prompt cache, which Message Batches items read and write (in the order they finish). */
      promptCache?: () => { cache: AnthropicPromptCache; minimumTokens: (model: string) => number };
      cacheIdleMs: () => number;
    },
  ) {}

  /** Forgets every file, batch and counter; ids stay unique. */
  reset(): void {
    this.files = new Map();
    this.batches = new Map();
    this.promptsSent = new Map();
    this.stats = emptyStats();
  }

  nextId(prefix: string): string {
    this.counter += 1;
    return `${prefix}${this.counter.toString(36).padStart(6, '0')}${createHash('sha256').update(`${Date.now()}${this.counter}`).digest('hex').slice(0, 10)}`;
  }

  storeFile(filename: string, purpose: string, data: Buffer): StoredFile {
    const file = { id: this.nextId('file-'), filename, purpose, data, createdAt: Math.floor(Date.now() / 1000) };
    this.files.set(file.id, file);
    return file;
  }

  /** The status tests read in `stats().batches`. */
  recordStatus(batch: SimBatch, status: string): void {
    const record = this.stats.batches.find((entry) => entry.id === batch.id);
    if (record) record.status = status;
  }

  private fateOf(customId: string, prompt: string): ItemFate {
    const marker = BATCH_MARKER.exec(prompt);
    if (marker) {
      const sent = (this.promptsSent.get(prompt) ?? 0) + 1;
      this.promptsSent.set(prompt, sent);
      if (marker[2] === undefined || sent === 1) return marker[1] as ItemFate;
      return 'ok';
    }
    const config = this.options.config();
    const value = roll(this.options.seed(), 'batch-fate', customId);
    if (value < config.expiredRate) return 'expired';
    if (value < config.expiredRate + config.errorRate) return 'error-500';
    return 'ok';
  }

  newBatch(
    provider: SimBatch['provider'],
    endpoint: string,
    inputFileId: string,
    metadata: Record<string, string>,
    requests: { customId: string; body: Record<string, unknown> }[],
  ): SimBatch {
    const config = this.options.config();
    const id = this.nextId(provider === 'openai' ? 'batch_' : 'msgbatch_');
    const { min, max } = config.processingSeconds;
    const processingSeconds = min + roll(this.options.seed(), 'batch-length', id) * (max - min);
    const items = requests.map(({ customId, body }): SimItem => {
      const prompt = promptOf(body);
      const base = {
        customId,
        body,
        model: typeof body.model === 'string' ? body.model : 'sim-model',
        finishAt: roll(this.options.seed(), 'batch-finish', customId) * processingSeconds,
        fate: this.fateOf(customId, prompt),
      };
      if (provider !== 'openai') return { ...base, promptTokens: countTokens(prompt) };
      // An OpenAI item's whole prompt is counted (system, tools, every message), as a sync call's is, and its
      // prefixes kept (not its words) for the batch's prompt cache.
      const words = promptWords(endpoint === '/v1/responses' ? responsesRequestAsChat(body) : body);
      const cacheKey = typeof body.prompt_cache_key === 'string' ? body.prompt_cache_key : undefined;
      return { ...base, promptTokens: words.length, prefixes: prefixChain(words), ...(cacheKey ? { cacheKey } : {}) };
    });
    const batch: SimBatch = {
      id,
      provider,
      endpoint,
      inputFileId,
      metadata,
      items,
      createdAtMs: Date.now(),
      speed: speedOf(config),
      processingSeconds,
      expiresAfterSeconds: config.expiresAfterSeconds,
    };
    this.batches.set(id, batch);
    this.stats.batchesCreated += 1;
    this.stats.byProvider[provider].batchesCreated += 1;
    this.stats.itemsSubmitted += items.length;
    this.stats.batches.push({ id, provider, metadata, items: items.length, status: 'in_progress' });
    return batch;
  }

  /** Ends the batch when its time has come: writes its output and error files once and counts what it answered. */
  advance(batch: SimBatch): void {
    if (batch.ended || batch.failed) return;
    const now = elapsed(batch);
    let ending: BatchEndStatus | undefined;
    let at = now;
    if (batch.cancelledAt !== undefined) {
      ending = 'cancelled';
      at = batch.cancelledAt;
    } else if (batch.items.every((item) => isDone(item, now))) ending = 'completed';
    else if (now >= batch.expiresAfterSeconds) {
      ending = 'expired';
      at = batch.expiresAfterSeconds;
    }
    if (!ending) return;
    const status = ending;
    const answered = batch.items.filter((item) => isAnswered(item, at));
    this.stats.itemsAnswered += answered.length;
    this.stats.byProvider[batch.provider].itemsAnswered += answered.length;
    this.recordStatus(batch, status);
    const record = this.stats.batches.find((entry) => entry.id === batch.id);
    if (record) record.answered = answered.map((item) => item.customId);
    batch.ended = { status, at };
    if (batch.provider === 'anthropic') {
      const caching = this.options.promptCache?.();
      const usage = new Map<SimItem, CacheUsage>();
      // Items read what the items that finished before them wrote, as a provider's cache would (best effort there).
      if (caching)
        for (const item of [...batch.items].sort((first, second) => first.finishAt - second.finishAt))
          if (isAnswered(item, at))
            usage.set(
              item,
              caching.cache.use(`batch\u0000${item.model}`, item.body, caching.minimumTokens(item.model), Date.now()),
            );
      batch.ended.results = jsonLines(
        batch.items.map((item) => anthropicResult(batch, item, at, status, usage.get(item))),
      );
      return;
    }
    this.servePromptCache(answered);
    batch.ended.outputFileId = this.storeOutputFile(
      `${batch.id}_output.jsonl`,
      answered.map((item) => openAiOutputLine(batch, item)),
    );
    batch.ended.errorFileId = this.storeOutputFile(
      `${batch.id}_error.jsonl`,
      batch.items.filter((item) => !isAnswered(item, at)).map((item) => openAiErrorLine(item, at, status)),
    );
  }

  /**
   * The cached tokens of a batch's answered OpenAI items: a cache of the batch's own, its items served in the order
   * they finished, on the batch's simulated clock.
   */
  private servePromptCache(answered: SimItem[]): void {
    const cache = new SimulatedPromptCache(this.options.cacheIdleMs);
    for (const item of [...answered].sort((a, b) => a.finishAt - b.finishAt))
      item.cachedTokens = cache.serve(item.model, item.cacheKey, item.prefixes ?? [], item.finishAt * 1000);
  }

  /** Stores the records as a JSONL file of purpose `batch_output` and returns its id; none when there are none. */
  private storeOutputFile(filename: string, records: Record<string, unknown>[]): string | undefined {
    if (records.length === 0) return undefined;
    return this.storeFile(filename, 'batch_output', Buffer.from(jsonLines(records))).id;
  }

  /** Cancels a batch that is still running; it ends (`cancelled`) when next looked at. */
  cancel(batch: SimBatch): void {
    this.advance(batch);
    if (batch.ended || batch.failed || batch.cancelledAt !== undefined) return;
    batch.cancelledAt = elapsed(batch);
    this.stats.cancelled += 1;
  }

  /** Prompt tokens of a model's unfinished OpenAI batches: what OpenAI's enqueued-token limit counts. */
  enqueuedTokens(model: string): number {
    let total = 0;
    for (const batch of this.batches.values()) {
      this.advance(batch);
      if (batch.provider !== 'openai' || batch.ended || batch.failed) continue;
      for (const item of batch.items) if (item.model === model) total += item.promptTokens;
    }
    return total;
  }
}
