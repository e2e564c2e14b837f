import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';

/**
 * The simulator's provider batch APIs: OpenAI's `/v1/files` and `/v1/batches`, and Anthropic's `/v1/messages/batches`.
 * Time runs `speed` times faster than real: a batch that would take an hour takes 3.6 s at speed 1000. Each item's
 * finish time, and whether it expires or errors, is rolled from the seed and its custom_id, or scripted by a marker in
 * its prompt (`[sim batch=expired]`, `[sim batch=error-500]`, `[sim batch=error-400]`; `expired-once` and
 * `error-500-once` do so in the first batch the prompt is sent in, and answer it in later ones). Answers say they are
 * simulated.
 */
export const providerBatchSimSchema = z.strictObject({
  /** Simulated seconds per real second. Default: env FANOUT_SIM_BATCH_SPEED, else 1. */
  speed: z.number().positive().optional(),
  /** Simulated seconds a batch takes to answer all its items (each item finishes at a seeded point within it). */
  processingSeconds: z.strictObject({ min: z.number().min(0), max: z.number().min(0) }).default({ min: 60, max: 600 }),
  /** Simulated seconds until a batch that has not finished expires (the 24h completion window). */
  expiresAfterSeconds: z.number().positive().default(86_400),
  /** Probability per item of expiring (never answered within the window), rolled from the seed. */
  expiredRate: z.number().min(0).max(1).default(0),
  /** Probability per item of a retryable error (500), rolled from the seed. */
  errorRate: z.number().min(0).max(1).default(0),
  /** Most prompt tokens (words) of one model enqueued in unfinished OpenAI batches; over it a new batch fails `token_limit_exceeded`. */
  enqueuedTokenLimit: z.number().int().min(1).optional(),
  /**
   * Probability per chat completion sent with `service_tier: "flex"` of a 429 `resource_unavailable` (OpenAI's answer
   * when flex capacity is short), rolled from the seed per task and request. A prompt marker `[sim flex-busy=N]` refuses
   * the first N flex requests of its task instead. Standard-tier requests are never refused this way.
   */
  flexUnavailableRate: z.number().min(0).max(1).default(0),
  /** Real ms each request of a phase waits before it is answered (the work is done on arrival): for crash tests. */
  latencyMs: z
    .strictObject({
      upload: z.number().min(0).default(0),
      create: z.number().min(0).default(0),
      download: z.number().min(0).default(0),
    })
    .default({ upload: 0, create: 0, download: 0 }),
});
export type ProviderBatchSimConfig = z.infer<typeof providerBatchSimSchema>;

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
  }[];
}

interface StoredFile {
  id: string;
  filename: string;
  purpose: string;
  data: Buffer;
  createdAt: number;
}

type ItemFate = 'ok' | 'expired' | 'error-500' | 'error-400';

interface SimItem {
  customId: string;
  model: string;
  body: Record<string, unknown>;
  finishAt: number;
  fate: ItemFate;
  promptTokens: number;
}

interface SimBatch {
  id: string;
  provider: 'openai' | 'anthropic';
  endpoint: string;
  inputFileId: string;
  metadata: Record<string, string>;
  items: SimItem[];
  createdAtMs: number;
  speed: number;
  processingSeconds: number;
  expiresAfterSeconds: number;
  /** Simulated seconds since creation when it was cancelled. */
  cancelledAt?: number;
  failed?: { code: string; message: string };
  ended?: {
    status: 'completed' | 'expired' | 'cancelled';
    at: number;
    outputFileId?: string;
    errorFileId?: string;
    results?: string;
  };
}

function roll(seed: string | number, ...parts: (string | number)[]): number {
  const digest = createHash('sha256')
    .update([seed, ...parts].join('\u0000'))
    .digest();
  return digest.readUInt32BE(0) / 2 ** 32;
}

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function readRaw(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

function delay(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

/** The parts of a multipart/form-data body: name, filename and bytes of each. */
function multipartParts(body: Buffer, contentType: string): { name: string; filename?: string; data: Buffer }[] {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  if (!boundary) return [];
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts: { name: string; filename?: string; data: Buffer }[] = [];
  let start = body.indexOf(delimiter);
  while (start !== -1) {
    const next = body.indexOf(delimiter, start + delimiter.length);
    if (next === -1) break;
    const part = body.subarray(start + delimiter.length + 2, next - 2); // after CRLF, before CRLF
    const headerEnd = part.indexOf('\r\n\r\n');
    if (headerEnd !== -1) {
      const headers = part.subarray(0, headerEnd).toString('utf8');
      const name = /name="([^"]*)"/.exec(headers)?.[1] ?? '';
      const filename = /filename="([^"]*)"/.exec(headers)?.[1];
      parts.push({ name, filename, data: part.subarray(headerEnd + 4) });
    }
    start = next;
  }
  return parts;
}

const BATCH_MARKER =
  /\[sim(?:\s+[a-z-]+=[^\s\]]+)*\s+batch=(expired|error-500|error-400)(-once)?(?:\s+[a-z-]+=[^\s\]]+)*\s*\]/;
const ANY_MARKER = /\[sim(?:\s+[a-z-]+=[^\s\]]+)+\s*\]/g;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((part) =>
        typeof part === 'object' && part !== null && 'text' in part ? String((part as { text: unknown }).text) : '',
      )
      .join(' ');
  return '';
}

/** The last user text of a chat, responses or messages request body. */
function promptOf(body: Record<string, unknown>): string {
  if (typeof body.input === 'string') return body.input;
  const messages = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as {
    role?: string;
    content?: unknown;
  }[];
  const user = [...messages].reverse().find((message) => message.role === 'user');
  return textOf(user?.content);
}

function words(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function answerTo(prompt: string): string {
  return `[simulated batch] answer to: ${prompt.replace(ANY_MARKER, '').trim().slice(0, 80)}`;
}

const ANTHROPIC_CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

const FLEX_MARKER = /\[sim(?:\s+[a-z-]+=[^\s\]]+)*\s+flex-busy=(\d+)(?:\s+[a-z-]+=[^\s\]]+)*\s*\]/;

export interface ProviderBatchesSimulator {
  /**
   * For a chat completion: true when it asked for the flex tier and flex capacity is "short" for it (marker or rate);
   * the simulator then answers 429 resource_unavailable. Counts flex requests per task.
   */
  flexRefused(body: { service_tier?: unknown }, taskId: string, prompt: string): boolean;
  /** Answers the request when its path is one of the batch APIs; false otherwise. */
  handle(request: IncomingMessage, response: ServerResponse, path: string): Promise<boolean>;
  stats(): ProviderBatchStats;
  reset(): void;
}

/** The batch APIs' state, kept for the simulator's lifetime. `config` is read on each request (it may be replaced). */
export function createProviderBatches(options: {
  config: () => ProviderBatchSimConfig;
  seed: () => string | number;
}): ProviderBatchesSimulator {
  let files = new Map<string, StoredFile>();
  let batches = new Map<string, SimBatch>();
  let counter = 0;
  let stats = emptyStats();
  /** Batches each marked prompt was sent in, for the `-once` markers. */
  let promptsSent = new Map<string, number>();

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

  const nextId = (prefix: string) =>
    `${prefix}${(++counter).toString(36).padStart(6, '0')}${createHash('sha256').update(`${Date.now()}${counter}`).digest('hex').slice(0, 10)}`;
  const speedOf = (config: ProviderBatchSimConfig) => config.speed ?? (Number(process.env.FANOUT_SIM_BATCH_SPEED) || 1);
  const elapsed = (batch: SimBatch) => ((Date.now() - batch.createdAtMs) / 1000) * batch.speed;

  function fateOf(customId: string, prompt: string): ItemFate {
    const marker = BATCH_MARKER.exec(prompt);
    if (marker) {
      const sent = (promptsSent.get(prompt) ?? 0) + 1;
      promptsSent.set(prompt, sent);
      if (marker[2] === undefined || sent === 1) return marker[1] as ItemFate;
      return 'ok';
    }
    const config = options.config();
    const value = roll(options.seed(), 'batch-fate', customId);
    if (value < config.expiredRate) return 'expired';
    if (value < config.expiredRate + config.errorRate) return 'error-500';
    return 'ok';
  }

  function newBatch(
    provider: SimBatch['provider'],
    endpoint: string,
    inputFileId: string,
    metadata: Record<string, string>,
    requests: { customId: string; body: Record<string, unknown> }[],
  ): SimBatch {
    const config = options.config();
    const id = nextId(provider === 'openai' ? 'batch_' : 'msgbatch_');
    const { min, max } = config.processingSeconds;
    const processingSeconds = min + roll(options.seed(), 'batch-length', id) * (max - min);
    const items = requests.map(({ customId, body }) => {
      const prompt = promptOf(body);
      return {
        customId,
        body,
        model: typeof body.model === 'string' ? body.model : 'sim-model',
        finishAt: roll(options.seed(), 'batch-finish', customId) * processingSeconds,
        fate: fateOf(customId, prompt),
        promptTokens: words(prompt),
      };
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
    batches.set(id, batch);
    stats.batchesCreated += 1;
    stats.byProvider[provider].batchesCreated += 1;
    stats.itemsSubmitted += items.length;
    stats.batches.push({ id, provider, metadata, items: items.length, status: 'in_progress' });
    return batch;
  }

  /** An item is answered (or errored) once the batch's clock passes its finish time; expiring ones never are. */
  const isDone = (item: SimItem, at: number) => item.fate !== 'expired' && item.finishAt <= at;

  /** Ends the batch when its time has come: writes its output and error files once and counts what it answered. */
  function advance(batch: SimBatch): void {
    if (batch.ended || batch.failed) return;
    const now = elapsed(batch);
    let status: 'completed' | 'expired' | 'cancelled' | undefined;
    let at = now;
    if (batch.cancelledAt !== undefined) {
      status = 'cancelled';
      at = batch.cancelledAt;
    } else if (batch.items.every((item) => isDone(item, now))) status = 'completed';
    else if (now >= batch.expiresAfterSeconds) {
      status = 'expired';
      at = batch.expiresAfterSeconds;
    }
    if (!status) return;
    const answered = batch.items.filter((item) => isDone(item, at) && item.fate === 'ok');
    stats.itemsAnswered += answered.length;
    stats.byProvider[batch.provider].itemsAnswered += answered.length;
    const record = stats.batches.find((entry) => entry.id === batch.id);
    if (record) record.status = status;
    batch.ended = { status, at };
    if (batch.provider === 'anthropic') {
      batch.ended.results = batch.items
        .map((item) => `${JSON.stringify(anthropicResult(batch, item, at, status))}\n`)
        .join('');
      return;
    }
    const outputs = answered.map(
      (item) =>
        `${JSON.stringify({ id: `batch_req_${item.customId}`, custom_id: item.customId, response: { status_code: 200, request_id: `req_${batch.id}_${item.customId}`, body: openAiBody(batch, item) }, error: null })}\n`,
    );
    const errors = batch.items
      .filter((item) => !(isDone(item, at) && item.fate === 'ok'))
      .map((item) => `${JSON.stringify(openAiError(item, at, status))}\n`);
    if (outputs.length > 0)
      batch.ended.outputFileId = storeFile(
        `${batch.id}_output.jsonl`,
        'batch_output',
        Buffer.from(outputs.join('')),
      ).id;
    if (errors.length > 0)
      batch.ended.errorFileId = storeFile(`${batch.id}_error.jsonl`, 'batch_output', Buffer.from(errors.join(''))).id;
  }

  function usageOf(item: SimItem, output: string) {
    return { promptTokens: item.promptTokens, completionTokens: words(output) };
  }

  function openAiBody(batch: SimBatch, item: SimItem): Record<string, unknown> {
    const output = answerTo(promptOf(item.body));
    const { promptTokens, completionTokens } = usageOf(item, output);
    if (batch.endpoint === '/v1/responses') {
      return {
        id: `resp_${batch.id}_${item.customId}`,
        object: 'response',
        status: 'completed',
        model: item.model,
        output: [
          {
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: output, annotations: [] }],
          },
        ],
        usage: {
          input_tokens: promptTokens,
          output_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
        },
      };
    }
    return {
      id: `chatcmpl-${batch.id}-${item.customId}`,
      object: 'chat.completion',
      created: Math.floor(batch.createdAtMs / 1000),
      model: item.model,
      choices: [{ index: 0, message: { role: 'assistant', content: output }, finish_reason: 'stop', logprobs: null }],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
    };
  }

  function openAiError(item: SimItem, at: number, status: string): Record<string, unknown> {
    const base = { id: `batch_req_${item.customId}`, custom_id: item.customId };
    if (isDone(item, at) && item.fate !== 'ok') {
      const code = item.fate === 'error-400' ? 400 : 500;
      const message = code === 400 ? 'simulated: invalid request' : 'simulated: the server had an error';
      return {
        ...base,
        response: {
          status_code: code,
          request_id: `req_${item.customId}`,
          body: { error: { message, type: code === 400 ? 'invalid_request_error' : 'server_error' } },
        },
        error: null,
      };
    }
    const code = status === 'cancelled' ? 'batch_cancelled' : 'batch_expired';
    return {
      ...base,
      response: null,
      error: { code, message: `simulated: this request was not run before the batch was ${status}` },
    };
  }

  function anthropicResult(batch: SimBatch, item: SimItem, at: number, status: string): Record<string, unknown> {
    if (isDone(item, at) && item.fate === 'ok') {
      const output = answerTo(promptOf(item.body));
      const { promptTokens, completionTokens } = usageOf(item, output);
      return {
        custom_id: item.customId,
        result: {
          type: 'succeeded',
          message: {
            id: `msg_${batch.id}_${item.customId}`,
            type: 'message',
            role: 'assistant',
            model: item.model,
            content: [{ type: 'text', text: output }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: promptTokens, output_tokens: completionTokens },
          },
        },
      };
    }
    if (isDone(item, at)) {
      const type = item.fate === 'error-400' ? 'invalid_request_error' : 'api_error';
      return {
        custom_id: item.customId,
        result: { type: 'errored', error: { type: 'error', error: { type, message: `simulated: ${type}` } } },
      };
    }
    return { custom_id: item.customId, result: { type: status === 'cancelled' ? 'canceled' : 'expired' } };
  }

  function storeFile(filename: string, purpose: string, data: Buffer): StoredFile {
    const file = { id: nextId('file-'), filename, purpose, data, createdAt: Math.floor(Date.now() / 1000) };
    files.set(file.id, file);
    return file;
  }

  const fileObject = (file: StoredFile) => ({
    id: file.id,
    object: 'file',
    bytes: file.data.length,
    created_at: file.createdAt,
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed',
  });

  function openAiStatus(batch: SimBatch): string {
    if (batch.failed) return 'failed';
    if (batch.ended) return batch.ended.status;
    return batch.cancelledAt !== undefined ? 'cancelling' : 'in_progress';
  }

  /** The batch as OpenAI shows it; the answer to a cancel shows it `cancelling`, as OpenAI's does, and ends it later. */
  function openAiBatch(batch: SimBatch, settle = true): Record<string, unknown> {
    if (settle) advance(batch);
    const at = batch.ended?.at ?? batch.cancelledAt ?? elapsed(batch);
    const completed = batch.failed ? 0 : batch.items.filter((item) => isDone(item, at) && item.fate === 'ok').length;
    const failed = batch.failed
      ? 0
      : batch.ended
        ? batch.items.length - completed
        : batch.items.filter((item) => isDone(item, at) && item.fate !== 'ok').length;
    const created = Math.floor(batch.createdAtMs / 1000);
    return {
      id: batch.id,
      object: 'batch',
      endpoint: batch.endpoint,
      input_file_id: batch.inputFileId,
      completion_window: '24h',
      status: openAiStatus(batch),
      created_at: created,
      expires_at: created + 86_400,
      metadata: batch.metadata,
      model: batch.items[0]?.model,
      output_file_id: batch.ended?.outputFileId,
      error_file_id: batch.ended?.errorFileId,
      errors: batch.failed
        ? {
            object: 'list',
            data: [{ code: batch.failed.code, message: batch.failed.message, line: null, param: null }],
          }
        : undefined,
      request_counts: { total: batch.items.length, completed, failed },
    };
  }

  function anthropicBatch(batch: SimBatch, baseUrl: string, settle = true): Record<string, unknown> {
    if (settle) advance(batch);
    const at = batch.ended?.at ?? elapsed(batch);
    const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
    for (const item of batch.items) {
      if (!batch.ended) counts.processing += 1;
      else if (isDone(item, at)) counts[item.fate === 'ok' ? 'succeeded' : 'errored'] += 1;
      else counts[batch.ended.status === 'cancelled' ? 'canceled' : 'expired'] += 1;
    }
    const iso = (ms: number) => new Date(ms).toISOString();
    return {
      id: batch.id,
      type: 'message_batch',
      processing_status: batch.ended ? 'ended' : batch.cancelledAt !== undefined ? 'canceling' : 'in_progress',
      request_counts: counts,
      created_at: iso(batch.createdAtMs),
      expires_at: iso(batch.createdAtMs + (batch.expiresAfterSeconds * 1000) / batch.speed),
      ended_at: batch.ended ? iso(Date.now()) : null,
      cancel_initiated_at: batch.cancelledAt === undefined ? null : iso(Date.now()),
      archived_at: null,
      results_url: batch.ended ? `${baseUrl}/v1/messages/batches/${batch.id}/results` : null,
    };
  }

  /** Prompt tokens of a model's unfinished OpenAI batches: what OpenAI's enqueued-token limit counts. */
  function enqueuedTokens(model: string): number {
    let total = 0;
    for (const batch of batches.values()) {
      advance(batch);
      if (batch.provider !== 'openai' || batch.ended || batch.failed) continue;
      for (const item of batch.items) if (item.model === model) total += item.promptTokens;
    }
    return total;
  }

  function list<T extends { id: string }>(all: T[], url: URL): { data: T[]; has_more: boolean } {
    const limit = Number(url.searchParams.get('limit') ?? 20);
    const after = url.searchParams.get('after') ?? url.searchParams.get('after_id');
    const start = after ? all.findIndex((entry) => entry.id === after) + 1 : 0;
    const data = all.slice(start, start + limit);
    return { data, has_more: start + limit < all.length };
  }

  async function openAiFiles(
    request: IncomingMessage,
    response: ServerResponse,
    path: string,
    url: URL,
  ): Promise<void> {
    const config = options.config();
    if (request.method === 'POST' && path === '/v1/files') {
      const parts = multipartParts(await readRaw(request), String(request.headers['content-type'] ?? ''));
      const purpose = parts.find((part) => part.name === 'purpose')?.data.toString('utf8');
      const file = parts.find((part) => part.name === 'file');
      if (!file || !purpose)
        return send(response, 400, {
          error: { message: 'simulated: a file and a purpose are required', type: 'invalid_request_error' },
        });
      const stored = storeFile(file.filename ?? 'upload.jsonl', purpose, Buffer.from(file.data));
      stats.filesUploaded += 1;
      await delay(config.latencyMs.upload);
      return send(response, 200, fileObject(stored));
    }
    if (request.method === 'GET' && path === '/v1/files') {
      const purpose = url.searchParams.get('purpose');
      const all = [...files.values()].reverse().filter((file) => !purpose || file.purpose === purpose);
      const page = list(all.map(fileObject), url);
      return send(response, 200, { object: 'list', ...page });
    }
    const match = /^\/v1\/files\/([^/]+)(\/content)?$/.exec(path);
    const file = match ? files.get(match[1]) : undefined;
    if (!match || !file)
      return send(response, 404, {
        error: { message: `simulated: no such file ${match?.[1] ?? ''}`, type: 'invalid_request_error' },
      });
    if (request.method === 'DELETE') {
      files.delete(file.id);
      return send(response, 200, { id: file.id, object: 'file', deleted: true });
    }
    if (!match[2]) return send(response, 200, fileObject(file));
    stats.downloadsStarted += 1;
    await delay(config.latencyMs.download);
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.data.length });
    response.end(file.data);
  }

  async function openAiBatches(
    request: IncomingMessage,
    response: ServerResponse,
    path: string,
    url: URL,
  ): Promise<void> {
    const config = options.config();
    if (request.method === 'POST' && path === '/v1/batches') {
      const body = JSON.parse((await readRaw(request)).toString('utf8') || '{}') as {
        input_file_id?: string;
        endpoint?: string;
        completion_window?: string;
        metadata?: Record<string, string>;
      };
      const file = body.input_file_id ? files.get(body.input_file_id) : undefined;
      if (!file || file.purpose !== 'batch')
        return send(response, 400, {
          error: {
            message: `simulated: no batch input file ${body.input_file_id ?? ''}`,
            type: 'invalid_request_error',
          },
        });
      if (body.completion_window !== '24h')
        return send(response, 400, {
          error: { message: 'simulated: completion_window must be 24h', type: 'invalid_request_error' },
        });
      if (body.endpoint !== '/v1/chat/completions' && body.endpoint !== '/v1/responses')
        return send(response, 400, {
          error: { message: `simulated: unsupported endpoint ${body.endpoint ?? ''}`, type: 'invalid_request_error' },
        });
      const requests = file.data
        .toString('utf8')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map(
          (line) =>
            JSON.parse(line) as { custom_id: string; method: string; url: string; body: Record<string, unknown> },
        );
      const batch = newBatch(
        'openai',
        body.endpoint,
        file.id,
        body.metadata ?? {},
        requests.map((entry) => ({ customId: entry.custom_id, body: entry.body })),
      );
      const models = new Set(batch.items.map((item) => item.model));
      const ids = new Set(batch.items.map((item) => item.customId));
      if (models.size > 1)
        batch.failed = { code: 'mixed_models', message: 'simulated: every request of a batch must use the same model' };
      else if (ids.size !== batch.items.length)
        batch.failed = { code: 'duplicate_custom_id', message: 'simulated: custom_id values must be unique' };
      else if (requests.some((entry) => entry.url !== body.endpoint))
        batch.failed = { code: 'invalid_url', message: `simulated: every request's url must be ${body.endpoint}` };
      else if (config.enqueuedTokenLimit !== undefined) {
        const model = batch.items[0]?.model ?? '';
        const mine = batch.items.reduce((sum, item) => sum + item.promptTokens, 0);
        // The new batch is counted among the unfinished ones.
        if (enqueuedTokens(model) > config.enqueuedTokenLimit) {
          batch.failed = {
            code: 'token_limit_exceeded',
            message: `simulated: enqueued token limit reached for ${model} (limit ${config.enqueuedTokenLimit}, this batch ${mine})`,
          };
        }
      }
      if (batch.failed) {
        const record = stats.batches.find((entry) => entry.id === batch.id);
        if (record) record.status = 'failed';
      }
      await delay(config.latencyMs.create);
      return send(response, 200, openAiBatch(batch));
    }
    if (request.method === 'GET' && path === '/v1/batches') {
      const all = [...batches.values()].filter((batch) => batch.provider === 'openai').reverse();
      const page = list(all, url);
      return send(response, 200, {
        object: 'list',
        data: page.data.map((batch) => openAiBatch(batch)),
        has_more: page.has_more,
        first_id: page.data[0]?.id,
        last_id: page.data.at(-1)?.id,
      });
    }
    const match = /^\/v1\/batches\/([^/]+)(\/cancel)?$/.exec(path);
    const batch = match ? batches.get(match[1]) : undefined;
    if (!match || !batch || batch.provider !== 'openai')
      return send(response, 404, {
        error: { message: `simulated: no such batch ${match?.[1] ?? ''}`, type: 'invalid_request_error' },
      });
    if (match[2] && request.method === 'POST') {
      cancel(batch);
      return send(response, 200, openAiBatch(batch, false));
    }
    return send(response, 200, openAiBatch(batch));
  }

  function cancel(batch: SimBatch): void {
    advance(batch);
    if (batch.ended || batch.failed || batch.cancelledAt !== undefined) return;
    batch.cancelledAt = elapsed(batch);
    stats.cancelled += 1;
  }

  async function anthropicBatches(
    request: IncomingMessage,
    response: ServerResponse,
    path: string,
    url: URL,
  ): Promise<void> {
    const config = options.config();
    const baseUrl = `http://${request.headers.host ?? '127.0.0.1'}`;
    if (request.method === 'POST' && path === '/v1/messages/batches') {
      const body = JSON.parse((await readRaw(request)).toString('utf8') || '{}') as {
        requests?: { custom_id: string; params: Record<string, unknown> }[];
      };
      const requests = body.requests ?? [];
      const refused = requests.find(
        (entry) => !ANTHROPIC_CUSTOM_ID.test(entry.custom_id) || typeof entry.params?.max_tokens !== 'number',
      );
      if (requests.length === 0 || refused) {
        return send(response, 400, {
          type: 'error',
          error: {
            type: 'invalid_request_error',
            message: `simulated: invalid request ${refused?.custom_id ?? '(none)'}: custom_id must match ^[a-zA-Z0-9_-]{1,64}$ and max_tokens is required`,
          },
        });
      }
      if (new Set(requests.map((entry) => entry.custom_id)).size !== requests.length) {
        return send(response, 400, {
          type: 'error',
          error: { type: 'invalid_request_error', message: 'simulated: custom_id values must be unique' },
        });
      }
      const batch = newBatch(
        'anthropic',
        '/v1/messages',
        '',
        {},
        requests.map((entry) => ({ customId: entry.custom_id, body: entry.params })),
      );
      await delay(config.latencyMs.create);
      return send(response, 200, anthropicBatch(batch, baseUrl));
    }
    if (request.method === 'GET' && path === '/v1/messages/batches') {
      const all = [...batches.values()].filter((batch) => batch.provider === 'anthropic').reverse();
      const page = list(all, url);
      return send(response, 200, {
        data: page.data.map((batch) => anthropicBatch(batch, baseUrl)),
        has_more: page.has_more,
        first_id: page.data[0]?.id ?? null,
        last_id: page.data.at(-1)?.id ?? null,
      });
    }
    const match = /^\/v1\/messages\/batches\/([^/]+)(\/cancel|\/results)?$/.exec(path);
    const batch = match ? batches.get(match[1]) : undefined;
    if (!match || !batch || batch.provider !== 'anthropic')
      return send(response, 404, {
        type: 'error',
        error: { type: 'not_found_error', message: `simulated: no such batch ${match?.[1] ?? ''}` },
      });
    if (match[2] === '/cancel' && request.method === 'POST') {
      cancel(batch);
      return send(response, 200, anthropicBatch(batch, baseUrl, false));
    }
    if (match[2] === '/results') {
      advance(batch);
      if (!batch.ended?.results)
        return send(response, 400, {
          type: 'error',
          error: { type: 'invalid_request_error', message: 'simulated: the batch has not ended' },
        });
      stats.downloadsStarted += 1;
      await delay(config.latencyMs.download);
      response.writeHead(200, {
        'content-type': 'application/binary',
        'content-length': Buffer.byteLength(batch.ended.results),
      });
      response.end(batch.ended.results);
      return;
    }
    return send(response, 200, anthropicBatch(batch, baseUrl));
  }

  let flexRequests = new Map<string, number>();

  return {
    flexRefused(body, taskId, prompt) {
      if (body.service_tier !== 'flex') return false;
      const count = (flexRequests.get(taskId) ?? 0) + 1;
      flexRequests.set(taskId, count);
      const marked = FLEX_MARKER.exec(prompt)?.[1];
      if (marked !== undefined) return count <= Number(marked);
      return roll(options.seed(), 'flex', taskId, count) < options.config().flexUnavailableRate;
    },
    async handle(request, response, path) {
      const url = new URL(request.url ?? '/', 'http://simulator');
      if (path === '/v1/files' || path.startsWith('/v1/files/')) await openAiFiles(request, response, path, url);
      else if (path === '/v1/batches' || path.startsWith('/v1/batches/'))
        await openAiBatches(request, response, path, url);
      else if (path === '/v1/messages/batches' || path.startsWith('/v1/messages/batches/'))
        await anthropicBatches(request, response, path, url);
      else return false;
      return true;
    },
    stats: () => {
      for (const batch of batches.values()) advance(batch);
      return structuredClone(stats);
    },
    reset: () => {
      files = new Map();
      batches = new Map();
      flexRequests = new Map();
      promptsSent = new Map();
      stats = emptyStats();
    },
  };
}
