import { countTokens, quotedPrompt } from './prompt-text';
import { anthropicUsageOf, type CacheUsage } from './anthropic-prompt-cache';

/** A simulated batch item's end: answered, never run before the window closed, or answered with an error. */
export type ItemFate = 'ok' | 'expired' | 'error-500' | 'error-400';

export interface SimItem {
  customId: string;
  model: string;
  body: Record<string, unknown>;
  finishAt: number;
  fate: ItemFate;
  promptTokens: number;
  /** An OpenAI item's cacheable prefixes (prompt-cache.ts) and `prompt_cache_key`. */
  prefixes?: string[];
  cacheKey?: string;
  /** Set when its batch ends: prompt tokens served from the batch's prompt cache. */
  cachedTokens?: number;
}

export type BatchEndStatus = 'completed' | 'expired' | 'cancelled';

export interface SimBatch {
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
    status: BatchEndStatus;
    at: number;
    outputFileId?: string;
    errorFileId?: string;
    results?: string;
  };
}

/** Simulated seconds since the batch was created. */
export const elapsed = (batch: SimBatch) => ((Date.now() - batch.createdAtMs) / 1000) * batch.speed;

/** An item is answered (or errored) once the batch's clock passes its finish time; expiring ones never are. */
export const isDone = (item: SimItem, at: number) => item.fate !== 'expired' && item.finishAt <= at;

/** Answered with a success by simulated second `at`. */
export const isAnswered = (item: SimItem, at: number) => isDone(item, at) && item.fate === 'ok';

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
export function promptOf(body: Record<string, unknown>): string {
  if (typeof body.input === 'string') return body.input;
  const messages = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as {
    role?: string;
    content?: unknown;
  }[];
  const user = [...messages].reverse().find((message) => message.role === 'user');
  return textOf(user?.content);
}

/** The item's simulated answer and its token counts. */
function answerOf(item: SimItem): {
  output: string;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
} {
  const output = `[simulated batch] answer to: ${quotedPrompt(promptOf(item.body))}`;
  return {
    output,
    promptTokens: item.promptTokens,
    completionTokens: countTokens(output),
    cachedTokens: item.cachedTokens ?? 0,
  };
}

/** The body of an answered item's response, as the batch's endpoint (chat completions or responses) writes it. */
export function openAiBody(batch: SimBatch, item: SimItem): Record<string, unknown> {
  const { output, promptTokens, completionTokens, cachedTokens } = answerOf(item);
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
        input_tokens_details: { cached_tokens: cachedTokens },
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
      prompt_tokens_details: { cached_tokens: cachedTokens },
    },
  };
}

/** An OpenAI output file's line for an answered item. */
export function openAiOutputLine(batch: SimBatch, item: SimItem): Record<string, unknown> {
  return {
    id: `batch_req_${item.customId}`,
    custom_id: item.customId,
    response: { status_code: 200, request_id: `req_${batch.id}_${item.customId}`, body: openAiBody(batch, item) },
    error: null,
  };
}

/** An OpenAI error file's line for an item that errored, or was not run before the batch ended with `status`. */
export function openAiErrorLine(item: SimItem, at: number, status: BatchEndStatus): Record<string, unknown> {
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

/** An Anthropic results line for the item, the batch having ended with `status` at simulated second `at`. */
export function anthropicResult(
  batch: SimBatch,
  item: SimItem,
  at: number,
  status: BatchEndStatus,
  cache?: CacheUsage,
): Record<string, unknown> {
  if (isAnswered(item, at)) {
    const { output, promptTokens, completionTokens } = answerOf(item);
    const usage = cache
      ? anthropicUsageOf(cache, completionTokens)
      : { input_tokens: promptTokens, output_tokens: completionTokens };
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
          usage,
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
