import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { chatReplyAsResponse, responsesRequestAsChat } from '../llm/responses-api';
import type { FaultKind, SimulatorConfig } from './config';
import { chooseFault, latencyFor, STATUS_MESSAGES } from './faults';
import { readBody, sendJson } from './http';
import { countTokens, quotedPrompt } from './prompt-text';
import { prefixChain, promptWords, type SimulatedPromptCache } from './prompt-cache';
import type { ProviderBatchesSimulator } from './provider-batches';
import { rateLimitTokens, type Admission, type RateLimitKind, type SimulatedRateLimiter } from './rate-limits';
import { roll } from './seeded-roll';
import { scriptedCompletion } from './tool-calls';
import { anthropicError, anthropicRateLimitHeaders, chatReplyAsMessage, messagesRequestAsChat } from './messages-api';
import { minimumCacheableTokens, type CacheUsage, type AnthropicPromptCache } from './anthropic-prompt-cache';
import { parseResetDuration } from '../pacing/rate-limit-headers';

/** One request the simulator received, as tests read it from GET /_sim/log. */
export interface SimulatedRequest {
  seq: number;
  /** The API the request came to: `/v1/chat/completions`, `/v1/responses` or Anthropic's `/v1/messages`. */
  api?: 'chat' | 'responses' | 'messages';
  taskId: string;
  workflowId: string;
  /** Temporal's attempt number, from the x-fanout-attempt header. */
  attempt: number;
  /** The workflow whose activity sent it when that is not `workflowId` (a batch lane's window), from x-fanout-caller. */
  caller?: string;
  /** The sending worker's identity, from the x-fanout-worker header, when it sent one. */
  worker?: string;
  /** How many requests for this task the simulator had seen, this one included. */
  taskRequest: number;
  arrivedAt: number;
  /** When the response was fully written. */
  respondedAt?: number;
  /** When the client closed the connection before the response was written (an abort). */
  clientClosedAt?: number;
  /** HTTP status answered, or the socket fault. */
  outcome?: number | 'reset' | 'hang' | 'malformed';
  latencyMs: number;
  fault?: FaultKind;
  /** Set when the request was refused by the simulated rate limits (429), naming the limit it hit. */
  rateLimited?: RateLimitKind;
  /** The request's `prompt_cache_key`, when it had one. */
  promptCacheKey?: string;
  /** The usage an answer reported (its `cached_tokens`: the prompt tokens served from the simulated prompt cache). */
  usage?: { prompt_tokens: number; completion_tokens: number; cached_tokens: number };
  /** Tokens the request was charged against the tokens-per-minute limit, once settled. */
  rateLimitTokens?: number;
  inFlightAtArrival: number;
  /** Anthropic's Messages API (`/v1/messages`): the breakpoints the request marked and what it read and wrote. */
  cache?: CacheUsage;
}

/** What the simulator keeps between requests; its chat completions read and count in it. */
export interface SimulatorState {
  config: SimulatorConfig;
  /** With rate limits configured: their buckets. */
  limiter: SimulatedRateLimiter | undefined;
  requests: SimulatedRequest[];
  requestsByTask: Map<string, number>;
  inFlight: number;
  maxInFlight: number;
  seq: number;
  /** Requests answered 429 by the rate limits. */
  rateLimited: number;
  providerBatches: ProviderBatchesSimulator;
  /** OpenAI's prompt caching (prompt-cache.ts), shared by chat completions and the Responses API. */
  promptCache: SimulatedPromptCache;
  /** Anthropic's prompt cache (anthropic-prompt-cache.ts), which `/v1/messages` requests read and write. */
  anthropicCache: AnthropicPromptCache;
}

interface ChatRequestBody {
  model?: string;
  service_tier?: string;
  messages?: { role?: string; content?: unknown }[];
  max_tokens?: number;
  max_completion_tokens?: number;
  tools?: unknown[];
  prompt_cache_key?: string;
}

function promptOf(body: ChatRequestBody): string {
  const user = [...(body.messages ?? [])].reverse().find((message) => message.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}

/** The echo, padded or cut to the configured answer length and to the request's max_tokens. */
function sizedOutput(
  config: SimulatorConfig,
  echo: string,
  taskId: string,
  maxTokens: number | undefined,
): { output: string; finishReason: string } {
  const words = echo.split(/\s+/).filter(Boolean);
  let wanted = words.length;
  if (config.completionTokens) {
    const { min, max } = config.completionTokens;
    wanted = Math.round(min + roll(config.seed, 'completion', taskId) * (max - min));
  }
  const capped = maxTokens !== undefined && maxTokens < wanted;
  const length = capped ? maxTokens : wanted;
  if (length === words.length) return { output: echo, finishReason: 'stop' };
  while (words.length < length) words.push('lorem');
  return { output: words.slice(0, length).join(' '), finishReason: capped ? 'length' : 'stop' };
}

/**
 * Answers a chat completion (or, `api: 'responses'`, a Responses API request): after its latency, with the fault or
 * rate-limit refusal it meets, else a simulated answer. Logs it in `state.requests`.
 */
export async function chatCompletion(
  state: SimulatorState,
  request: IncomingMessage,
  response: ServerResponse,
  api: 'chat' | 'responses' | 'messages' = 'chat',
): Promise<void> {
  const native = api === 'messages';
  // An error as the API's clients read it: OpenAI's `{ error }`, or Anthropic's `{ type: 'error', error }`.
  const refuse = (status: number, error: { message: string; type?: string; [field: string]: unknown }, headers = {}) =>
    sendJson(response, status, native ? anthropicError(status, error.message) : { error }, headers);
  const limitHeaders = (headers: Record<string, string>) =>
    native ? anthropicRateLimitHeaders(headers, parseResetDuration) : headers;
  const arrivedAt = Date.now();
  state.inFlight += 1;
  state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
  let open = true;
  const entry: SimulatedRequest = {
    seq: ++state.seq,
    api,
    taskId: String(request.headers['x-fanout-task-id'] ?? ''),
    workflowId: String(request.headers['x-fanout-workflow-id'] ?? ''),
    attempt: Number(request.headers['x-fanout-attempt'] ?? 0),
    ...(request.headers['x-fanout-worker'] ? { worker: String(request.headers['x-fanout-worker']) } : {}),
    ...(request.headers['x-fanout-caller'] ? { caller: String(request.headers['x-fanout-caller']) } : {}),
    taskRequest: 0,
    arrivedAt,
    latencyMs: 0,
    inFlightAtArrival: state.inFlight,
  };
  state.requests.push(entry);
  const pending: {
    timer?: NodeJS.Timeout;
    admission?: Extract<Admission, { admitted: true }>;
    promptTokens: number;
  } = { promptTokens: 0 };
  const settle = () => {
    if (!open) return;
    open = false;
    state.inFlight -= 1;
  };
  // The token charge is settled once: to what was used when a completion is written, else to the prompt alone.
  const settleTokens = (used: number) => {
    if (!pending.admission) return;
    pending.admission.settle(used);
    entry.rateLimitTokens = used;
    pending.admission = undefined;
  };
  response.on('close', () => {
    clearTimeout(pending.timer);
    settleTokens(pending.promptTokens);
    if (!response.writableFinished && entry.outcome !== 'reset') entry.clientClosedAt = Date.now();
    else entry.respondedAt = Date.now();
    settle();
  });

  const text = (await readBody(request)).toString('utf8');
  let body: ChatRequestBody;
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
    body = (
      api === 'responses' ? responsesRequestAsChat(raw) : native ? messagesRequestAsChat(raw) : raw
    ) as ChatRequestBody;
  } catch {
    entry.outcome = 400;
    refuse(400, { message: 'simulated: request body is not JSON', type: 'invalid_request_error' });
    return;
  }
  const prompt = promptOf(body);
  if (entry.taskId === '') entry.taskId = `prompt:${createHash('sha256').update(prompt).digest('hex').slice(0, 12)}`;
  entry.taskRequest = (state.requestsByTask.get(entry.taskId) ?? 0) + 1;
  state.requestsByTask.set(entry.taskId, entry.taskRequest);

  const apiKey = native ? `Bearer ${String(request.headers['x-api-key'] ?? '')}` : request.headers.authorization;
  if (state.config.requireApiKey !== undefined && apiKey !== `Bearer ${state.config.requireApiKey}`) {
    entry.outcome = 401;
    refuse(401, { message: STATUS_MESSAGES['401'], type: 'invalid_request_error' });
    return;
  }

  const model = body.model ?? 'sim-model';
  // Read and written when the answer is, and refused before anything else when it marks too many breakpoints.
  const useCache = () =>
    state.anthropicCache.use(
      `${apiKey ?? ''}\u0000${model}`,
      raw,
      minimumCacheableTokens(model, state.config.cacheMinimumTokens),
    );
  if (native) {
    const breakpoints = JSON.stringify(raw).split('"cache_control"').length - 1;
    if (breakpoints > 4 || typeof raw.max_tokens !== 'number') {
      entry.outcome = 400;
      refuse(400, {
        message:
          breakpoints > 4
            ? `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`
            : 'max_tokens: Field required',
      });
      return;
    }
  }
  if (state.limiter) {
    const messages = body.messages ?? [];
    pending.promptTokens = rateLimitTokens(messages, undefined);
    const admission = state.limiter.admit(
      `${apiKey ?? ''}\u0000${model}`,
      model,
      rateLimitTokens(messages, body.max_tokens ?? body.max_completion_tokens),
    );
    if (!admission.admitted) {
      state.rateLimited += 1;
      entry.outcome = 429;
      entry.rateLimited = admission.kind;
      refuse(
        429,
        { message: admission.message, type: admission.kind, param: null, code: 'rate_limit_exceeded' },
        {
          ...limitHeaders(admission.headers),
          'retry-after': String(Math.ceil(admission.retryAfterMs / 1000)),
          'retry-after-ms': String(admission.retryAfterMs),
        },
      );
      return;
    }
    pending.admission = admission;
  }
  const admitted = pending.admission;
  // Computed when the answer is written, after its charge is settled: what the client reads is current.
  const rateLimitHeaders = (): Record<string, string> => limitHeaders(admitted?.headers() ?? {});

  if (state.providerBatches.flexRefused(body, entry.taskId, prompt)) {
    entry.outcome = 429;
    settleTokens(pending.promptTokens);
    sendJson(
      response,
      429,
      {
        error: {
          message: 'simulated: Resource unavailable for the flex tier; retry later or use the default tier',
          type: 'rate_limit_error',
          param: null,
          code: 'resource_unavailable',
        },
      },
      rateLimitHeaders(),
    );
    return;
  }
  const fault = chooseFault(state.config, entry.taskId, entry.taskRequest, prompt);
  entry.fault = fault.kind;
  entry.latencyMs = latencyFor(state.config, entry.taskId, prompt);
  if (fault.kind === 'hang') {
    entry.outcome = 'hang';
    return; // never answers; the client's deadline or cancellation closes the connection
  }
  pending.timer = setTimeout(() => {
    if (!open) return;
    if (fault.kind === 'reset') {
      entry.outcome = 'reset';
      request.socket.destroy();
      return;
    }
    if (fault.kind === 'malformed') {
      entry.outcome = 'malformed';
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"id":"chatcmpl-sim","choices":[{"message":');
      return;
    }
    if (fault.kind !== undefined) {
      const status = Number(fault.kind);
      entry.outcome = status;
      settleTokens(pending.promptTokens);
      const headers: Record<string, string> =
        fault.retryAfterSeconds !== undefined && (status === 429 || status === 503)
          ? { 'retry-after': String(fault.retryAfterSeconds) }
          : {};
      // `error-bytes=N`: a message that long, as a gateway's HTML error page is.
      const message =
        fault.errorBytes === undefined
          ? STATUS_MESSAGES[fault.kind]
          : `${STATUS_MESSAGES[fault.kind]} <html>${'x'.repeat(Math.max(0, fault.errorBytes))}</html>`;
      refuse(status, { message, type: 'simulated_error' }, { ...rateLimitHeaders(), ...headers });
      return;
    }
    entry.outcome = 200;
    // The whole prompt is counted (tools and every message) and its cached prefix read as OpenAI would.
    if (body.prompt_cache_key !== undefined) entry.promptCacheKey = body.prompt_cache_key;
    const words = promptWords(body);
    const promptTokens = words.length;
    // Anthropic's requests read and write their own cache (anthropic-prompt-cache.ts), not OpenAI's.
    const cachedTokens = native
      ? 0
      : state.promptCache.serve(model, body.prompt_cache_key, prefixChain(words), Date.now());
    const usageOf = (completionTokens: number) => {
      entry.usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, cached_tokens: cachedTokens };
      return {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
        prompt_tokens_details: { cached_tokens: cachedTokens },
      };
    };
    // Tool calls and structured answers scripted by directives in the task's prompt (tool-calls.ts).
    const scripted = scriptedCompletion(body, entry.seq);
    const answer = (reply: Record<string, unknown>) => {
      if (api === 'responses') return chatReplyAsResponse(reply);
      if (!native) return reply;
      entry.cache = useCache();
      return chatReplyAsMessage(reply, entry.cache);
    };
    if (scripted) {
      settleTokens(pending.promptTokens + scripted.usage.completion_tokens);
      sendJson(
        response,
        200,
        answer({ ...scripted, usage: usageOf(scripted.usage.completion_tokens) }),
        rateLimitHeaders(),
      );
      return;
    }
    const system = (body.messages ?? []).find((message) => message.role === 'system')?.content;
    const persona = typeof system === 'string' && system !== '' ? ` as "${system.slice(0, 40)}"` : '';
    const echo = `[simulated]${persona} answer to: ${quotedPrompt(prompt)}`;
    const { output, finishReason } = sizedOutput(
      state.config,
      echo,
      entry.taskId,
      body.max_tokens ?? body.max_completion_tokens,
    );
    const completionTokens = countTokens(output);
    settleTokens(pending.promptTokens + completionTokens);
    const reply = {
      id: `chatcmpl-sim-${entry.seq}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? 'sim-model',
      system_fingerprint: 'simulated',
      service_tier: body.service_tier === 'flex' ? 'flex' : 'default',
      choices: [
        { index: 0, message: { role: 'assistant', content: output }, finish_reason: finishReason, logprobs: null },
      ],
      usage: usageOf(completionTokens),
    };
    sendJson(response, 200, answer(reply), rateLimitHeaders());
  }, entry.latencyMs);
}
