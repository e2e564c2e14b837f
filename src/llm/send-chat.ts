import { hostname } from 'node:os';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type OpenAI from 'openai';
import type { APIError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { RequestOptions } from 'openai/internal/request-options';
import { responsesAsChat } from './responses-api';
import { anthropicAsChat, type MessagesClient } from './anthropic-messages';
import type { ModelProvider, PromptCache } from '../contract/agent-task';
import { providerOfCall } from '../contract/agent-task-rules';
import { promptCacheKeyOf, stableMessages, stableTools } from './stable-request';
import { inChatSpan } from './chat-span';
import type { PriceTable } from '../pricing/price-table';
import { FailureType } from '../contract/failure-types';
import { RATE_LIMIT_WAIT_MS } from '../contract/run-option-defaults';
import { integerFromEnvironment } from '../config/environment';
import type { PacedOutcome, Permit } from '../pacing/key-pacer';
import { defaultPacer, type Pacer } from '../pacing/pacer';
import { pacerKeyOf } from '../pacing/provider-key';
import type { PacingReport } from '../contract/pacing';
import { pacingReport } from '../pacing/report';
import { estimateRequestTokens } from '../pacing/token-estimate';
import { abortableDelay, CallSignal } from './abort-signals';
import { deadlineSignal, watchForCancellation } from './cancellation';
import type { ChatClient } from './llm-client';
import { isRateLimit, rateLimitWaitExceeded, retryAfterMs, toAgentFailure } from './provider-errors';
import type { AnswerCacheSettings } from '../contract/answer-cache';
import { defaultAnswerCache, type AnswerCache } from '../answer-cache/answer-cache';
import { requestKey } from '../answer-cache/request-key';

/** What sending a chat request needs from the worker. */
export interface ChatDependencies {
  /** The OpenAI-compatible client; created once per worker. */
  llm: ChatClient;
  /**
   * The Anthropic client calls to `claude-*` models (or of `provider: "anthropic"`) go through, natively: its Messages
   * API. Default: none, and such a call fails non-retryable, naming what to set.
   */
  anthropic?: MessagesClient;
  /** Model used when a task names none. */
  defaultModel: string;
  /** Monotonic-enough clock for durations, ms. */
  clock: () => number;
  /**
   * Heartbeat cadence while a request is in flight, ms, where heartbeats are still sent: when the run set a heartbeat
   * timeout (then at least 40% of it), or when there is no worker client to watch for cancellation with.
   */
  heartbeatIntervalMs: number;
  /** The worker's price table: the cost a call's span reports. Default none (no cost on the span). */
  prices?: PriceTable;
  /** Paces calls at the provider's limits. Default: the process's pacer (FANOUT_PACING=off sends calls unpaced). */
  pacer?: Pacer;
  /**
   * Longest wait for the rate limit within one attempt, ms; at most RATE_LIMIT_WAIT_MS. Env FANOUT_RATE_LIMIT_WAIT_MS;
   * default RATE_LIMIT_WAIT_MS.
   */
  rateLimitWaitMs?: number;
  /** The answer cache across runs, used by calls whose run turned it on. Default: the process's (on FANOUT_STORE). */
  answerCache?: AnswerCache;
}

/** How one call inside the current activity differs from the activity's own (a batch lane runs several items per activity). */
export interface ChatCallOptions {
  /** The call's own start-to-close budget, ms (its request deadline plus rate-limit waits). Default: the activity's. */
  attemptMs?: number;
  /** The item's real attempt: sent as `x-fanout-attempt`, named in failures and returned. Default: the activity's. */
  attempt?: number;
  /** Aborts the call too (besides the activity's cancellation); the call then throws this signal's reason. */
  signal?: AbortSignal;
  /** The run the call belongs to, sent as `x-fanout-workflow-id`. Default: the activity's workflow (a batch's lanes say the batch). */
  runId?: string;
  /**
   * `flex`: OpenAI's flex tier (batch prices, slower; a 429 `resource_unavailable` when capacity is short, waited out with
   * backoff inside the attempt). Default: the provider's standard tier.
   */
  serviceTier?: 'flex';
  /** Epoch ms from which a flex call is sent at the standard tier instead: the batch's deadline is near. */
  standardTierFromMs?: number;
  /** `responses`: the call goes to /v1/responses (responses-api.ts). Default `chat`: /v1/chat/completions. */
  api?: 'chat' | 'responses';
  /** Whether the call gets a `chat {model}` span where tracing is on (a batch samples its items). Default true. */
  traced?: boolean;
  /** The run's answer cache (README, "Answer cache"). Default: none, every call is sent. */
  cache?: AnswerCacheSettings;
  /** The provider of a request that names none (a batch's). Default: by model name. */
  provider?: ModelProvider;
  /** Anthropic's prompt cache of a request that sets none (a batch's). Default `5m`. */
  promptCache?: PromptCache;
}

/**
 * Headers that let a simulator or proxy correlate requests with tasks, and with the worker that sent them (its Temporal
 * identity, so a fault judge can tell a killed worker's calls from the others'); real providers ignore them.
 */
function correlationHeaders(taskId: string, attempt: number, context: Context, runId?: string): Record<string, string> {
  const worker = workerIdentityOf(context);
  const caller = context.info.workflowExecution?.workflowId;
  return {
    'x-fanout-task-id': taskId,
    'x-fanout-attempt': String(attempt),
    'x-fanout-workflow-id': runId ?? caller ?? '',
    ...(worker ? { 'x-fanout-worker': worker } : {}),
    // A batch lane's calls name the batch above; this names the window that runs the lane (its cancel reaches the
    // lanes of one window on one worker at once, which is what a fault judge can hold a cancel to).
    ...(runId !== undefined && caller !== undefined && caller !== runId ? { 'x-fanout-caller': caller } : {}),
  };
}

function workerIdentityOf(context: Context): string | undefined {
  try {
    return context.client.options.identity;
  } catch {
    return undefined; // a MockActivityEnvironment has no client
  }
}

/**
 * Splits an attempt's start-to-close timeout into the request's deadline and the rate-limit wait budget: workflows
 * schedule agent calls with agentTimeoutMs + RATE_LIMIT_WAIT_MS. An attempt scheduled with less (by a workflow from
 * before the budget existed, or a test) gives it all to the request and waits for no rate limit.
 */
export function attemptBudget(
  startToCloseMs: number,
  workerWaitMs: number,
): { requestTimeoutMs: number; rateLimitWaitMs: number } {
  if (startToCloseMs > RATE_LIMIT_WAIT_MS) {
    return {
      requestTimeoutMs: startToCloseMs - RATE_LIMIT_WAIT_MS,
      rateLimitWaitMs: Math.min(workerWaitMs, RATE_LIMIT_WAIT_MS),
    };
  }
  return { requestTimeoutMs: startToCloseMs, rateLimitWaitMs: 0 };
}

/** The worker's identity (what `batch status` names a pacer by). */
function workerIdentity(context: Context): string {
  try {
    return context.client.options.identity ?? `${process.pid}@${hostname()}`;
  } catch {
    return `${process.pid}@${hostname()}`; // a test environment without a worker
  }
}

/** How far past our own request deadline the HTTP client's timeout is set, so ours always fires first. */
const CLIENT_TIMEOUT_MARGIN_MS = 5000;

/** One chat request: a plain task's prompt, or an agent step's transcript and tools. */
export interface ChatRequest {
  /** The task the request is for: sent as `x-fanout-task-id` and named in failures. */
  taskId: string;
  /** How failures name the call. Default `agent "<taskId>"`. */
  label?: string;
  model: string;
  messages: ChatCompletionCreateParamsNonStreaming['messages'];
  /** The tools the model is offered (an agent step's). Default none. */
  tools?: ChatCompletionTool[];
  temperature?: number;
  maxTokens?: number;
  /**
   * OpenAI's `prompt_cache_key`: requests with the same key and prefix share the provider's prompt cache. Default: a
   * digest of the stable prefix (tools and system prompt; promptCacheKeyOf), none without one.
   */
  promptCacheKey?: string;
  /** Headers sent besides the correlation headers (an agent step's `x-fanout-step`). Default none. */
  headers?: Record<string, string>;
  /** The API the call speaks. Default: by model name (`providerOfCall`). */
  provider?: ModelProvider;
  /** Anthropic's prompt cache for the call (anthropic-messages.ts places the breakpoints). Default `5m`. */
  promptCache?: PromptCache;
}

type ProviderClient = { provider: 'openai'; client: ChatClient } | { provider: 'anthropic'; client: MessagesClient };

/** The client a request goes through: the OpenAI-compatible one, or Anthropic's where the call is Claude's. */
function clientOf(chat: ChatRequest, dependencies: ChatDependencies, call: ChatCallOptions): ProviderClient {
  if (providerOfCall(chat.model, chat.provider ?? call.provider) === 'openai')
    return { provider: 'openai', client: dependencies.llm };
  if (dependencies.anthropic) return { provider: 'anthropic', client: dependencies.anthropic };
  throw ApplicationFailure.create({
    type: FailureType.InvalidInput,
    nonRetryable: true,
    message: `${chat.label ?? `agent "${chat.taskId}"`}: model "${chat.model}" goes to Anthropic's Messages API, and the worker has no Anthropic client; set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint), or give the task provider: "openai" to send it to OPENAI_BASE_URL`,
  });
}

/** What the provider answered one request. */
export interface ChatAnswer {
  completion: ChatCompletion;
  /** The first choice, checked to hold a message. */
  choice: ChatCompletion.Choice;
  /** The attempt the answer came on. */
  attempt: number;
  /** Duration of the request that answered, ms. */
  durationMs: number;
  pacing?: PacingReport;
  /** The answer came from the answer cache, or from an identical request in flight on this worker: nothing was sent. */
  cached?: true;
}

/**
 * The one way a model is called, by plain tasks, batch items and agent steps alike (sendTaskChat is the plain task's
 * shape of it): paced, 429s waited out within the attempt's rate-limit budget, the request given the attempt's
 * own deadline (`attemptMs`, by default the activity's start-to-close less the rate-limit budget) rather than the HTTP
 * client's 600 s, and aborted by the activity's cancellation, the caller's signal or the watchdog.
 */
export async function sendChat(
  chat: ChatRequest,
  dependencies: ChatDependencies,
  call: ChatCallOptions = {},
): Promise<ChatAnswer> {
  const target = clientOf(chat, dependencies, call);
  const llm = target.client;
  const baseURL = 'baseURL' in llm && typeof llm.baseURL === 'string' ? llm.baseURL : undefined;
  const send = () =>
    inChatSpan(
      {
        taskId: chat.taskId,
        model: chat.model,
        attempt: call.attempt,
        runId: call.runId,
        baseURL,
        temperature: chat.temperature,
        maxTokens: chat.maxTokens,
        messages: chat.messages,
        prices: dependencies.prices,
        traced: call.traced,
      },
      () => sendChatAttempt(chat, dependencies, call, target),
    );
  if (call.cache === undefined || call.cache.mode === 'off') return send();
  // The one hook of the answer cache: a request it holds is answered without being sent.
  const api = target.provider === 'anthropic' ? 'anthropic-messages' : (call.api ?? 'chat');
  const key = requestKey({ baseUrl: baseURL ?? '', api, params: requestParams(chat) });
  let sent: ChatAnswer | undefined;
  const { value: completion, cached } = await (dependencies.answerCache ?? defaultAnswerCache()).through(
    call.cache,
    key,
    {
      taskId: chat.taskId,
      label: chat.label ?? `agent "${chat.taskId}"`,
      signals: [Context.current().cancellationSignal, call.signal],
    },
    async () => {
      sent = await send();
      return sent.completion;
    },
    isCompletion,
  );
  if (!cached && sent) return sent;
  return {
    completion,
    choice: completion.choices[0],
    attempt: call.attempt ?? Context.current().info.attempt,
    durationMs: 0,
    cached: true,
  };
}

/** A stored value that can be handed back as an answer: a completion whose first choice holds a message. */
function isCompletion(value: unknown): value is ChatCompletion {
  const choices = (value as Partial<ChatCompletion> | null)?.choices;
  return Array.isArray(choices) && typeof choices[0]?.message === 'object' && choices[0].message !== null;
}

/** The request's body, less the tier: what decides its answer, and what is sent (with the tier added). */
function requestParams(chat: ChatRequest): ChatCompletionCreateParamsNonStreaming {
  // Byte-stable (stable-request.ts): the same conversation and tools are the same bytes at every step and on every
  // worker, so the provider's prompt cache sees the same prefix and the answer cache the same key.
  return {
    model: chat.model,
    messages: stableMessages(chat.messages),
    ...(chat.tools === undefined || chat.tools.length === 0 ? {} : { tools: stableTools(chat.tools) }),
    ...(chat.temperature === undefined ? {} : { temperature: chat.temperature }),
    ...(chat.maxTokens === undefined ? {} : { max_tokens: chat.maxTokens }),
  };
}

/** sendChat without its span and metrics. */
async function sendChatAttempt(
  chat: ChatRequest,
  dependencies: ChatDependencies,
  call: ChatCallOptions,
  target: ProviderClient,
): Promise<ChatAnswer> {
  const context = Context.current();
  const { info } = context;
  const attempt = call.attempt ?? info.attempt;
  const failureContext = { taskId: chat.taskId, attempt };
  const label = chat.label ?? `agent "${chat.taskId}"`;
  const model = chat.model;
  const pacer = dependencies.pacer ?? defaultPacer();
  const keyPacer = pacer.options.enabled ? pacer.forKey(pacerKeyOf(target.client, model)) : undefined;
  const workerWaitMs =
    dependencies.rateLimitWaitMs ?? integerFromEnvironment('FANOUT_RATE_LIMIT_WAIT_MS') ?? RATE_LIMIT_WAIT_MS;
  // A lane's items share its activity, whose timeout covers all of them: each item gets a single call's (`attemptMs`).
  const attemptMs = call.attemptMs ?? info.startToCloseTimeoutMs;
  const { requestTimeoutMs, rateLimitWaitMs } = attemptBudget(attemptMs, workerWaitMs);
  const attemptStartedAt = dependencies.clock();
  const attemptEndsAt = attemptStartedAt + attemptMs;
  // Whatever ends the call: the activity's cancellation, the caller's signal, or the watchdog (a cut-off worker); and
  // each request's deadline. Linked after the settings above are read (a bad FANOUT_RATE_LIMIT_WAIT_MS throws): the
  // caller's signal may outlive this call by far, and only the finally below removes the listener. Linked by hand and
  // unlinked when the call ends, not combined with `AbortSignal.any`: that keeps every combined signal with a listener
  // in a process-wide set until one of its sources aborts, and the openai client listens on the signal it is given.
  const callSignal = new CallSignal([context.cancellationSignal, call.signal]);
  // Rate-limit waits (admission and 429s) end at the wait budget, counted from here. Made only when a call has to wait:
  // most are admitted at once.
  const waitBudgetStartedAt = Date.now();
  let waitBudget: ReturnType<typeof deadlineSignal> | undefined;
  const waitSignal = () =>
    (waitBudget ??= deadlineSignal(callSignal.signal, Math.max(1, waitBudgetStartedAt + rateLimitWaitMs - Date.now())))
      .signal;
  /** Throws the cancel's reason if the call was cancelled, seen at once (`callSignal.signal` aborts two turns later). */
  const throwIfCancelled = () => {
    const cancel = callSignal.cancelled();
    if (cancel) throw cancel.reason;
  };

  // Byte-stable (stable-request.ts): the provider's prompt cache matches prefixes byte for byte.
  const messages = stableMessages(chat.messages);
  const tools = chat.tools === undefined || chat.tools.length === 0 ? undefined : stableTools(chat.tools);
  // FANOUT_PROMPT_CACHE_KEY=off: only a task's own key is sent (an OpenAI-compatible server that refuses unknown fields).
  const promptCacheKey =
    chat.promptCacheKey ??
    (process.env.FANOUT_PROMPT_CACHE_KEY?.trim() === 'off' ? undefined : promptCacheKeyOf(messages, tools));
  const { promptTokens, reservedTokens } = estimateRequestTokens(
    messages,
    chat.maxTokens,
    pacer.options.defaultCompletionTokens,
  );
  const stopWatching = watchForCancellation(
    dependencies.heartbeatIntervalMs,
    (reason) => callSignal.abort(reason),
    context,
  );
  let rateLimitedResponses = 0;
  const outOfWaitBudget = (cause: unknown) =>
    rateLimitWaitExceeded(failureContext, dependencies.clock() - attemptStartedAt, rateLimitedResponses, cause);
  try {
    for (;;) {
      let permit: Permit | undefined;
      try {
        // An attempt without a wait budget is not held back (it could not wait), but still teaches the pacer. The first
        // request of a call that is not cancelled takes a free slot without a wait signal.
        if (keyPacer) {
          if (rateLimitWaitMs <= 0) permit = keyPacer.admitNow(reservedTokens);
          else {
            if (rateLimitedResponses === 0 && callSignal.cancelled() === undefined)
              permit = keyPacer.admitIfFree(reservedTokens);
            permit ??= await keyPacer.acquire(reservedTokens, waitSignal());
          }
        }
      } catch (error) {
        throwIfCancelled();
        throw outOfWaitBudget(error);
      }
      const release = (outcome: PacedOutcome) => permit?.release(outcome);
      // A cancel seen while the permit came: `callSignal.signal` aborts two turns later, so the request would go out
      // and be aborted at once. Not sent at all.
      if (callSignal.cancelled()) {
        release({ kind: 'abandoned' });
        throwIfCancelled();
      }
      // Our own deadline, so a hung request is closed and reported as a Timeout by us rather than however the HTTP
      // stack words it; never past the attempt's own end.
      const deadlineMs = Math.max(1, Math.min(requestTimeoutMs, attemptEndsAt - dependencies.clock()));
      callSignal.startDeadline(Math.ceil(deadlineMs));
      const startedAt = dependencies.clock();
      const flex =
        call.serviceTier === 'flex' && (call.standardTierFromMs === undefined || Date.now() < call.standardTierFromMs);
      try {
        // The byte-stable messages and tools made once above (requestParams makes the same for the answer cache's key).
        const params = {
          model,
          messages,
          ...(tools === undefined ? {} : { tools }),
          ...(chat.temperature === undefined ? {} : { temperature: chat.temperature }),
          ...(chat.maxTokens === undefined ? {} : { max_tokens: chat.maxTokens }),
          ...(flex ? { service_tier: 'flex' as const } : {}),
          // OpenAI's cache routing key (Anthropic's cache is marked in the request by anthropic-messages.ts instead).
          ...(promptCacheKey === undefined || target.provider !== 'openai' ? {} : { prompt_cache_key: promptCacheKey }),
        };
        const { data: completion, response } = await sendRequest(
          target,
          call.api,
          chat.promptCache ?? call.promptCache ?? '5m',
          params,
          {
            signal: callSignal.signal,
            headers: { ...correlationHeaders(chat.taskId, attempt, context, call.runId), ...chat.headers },
            // The request's deadline is ours: the client's own timeout (600 s by default) would cut a longer
            // agentTimeoutMs short, so it is set past ours. Its retries stay off whoever built the client.
            timeout: Math.ceil(deadlineMs) + CLIENT_TIMEOUT_MARGIN_MS,
            maxRetries: 0,
          },
        );
        const choice = completion?.choices?.[0];
        if (!choice || typeof choice.message !== 'object' || choice.message === null) {
          release({ kind: 'failed', headers: response.headers });
          throw ApplicationFailure.create({
            type: FailureType.MalformedResponse,
            message: `${label} attempt ${attempt}: the response has no choices`,
            details: [failureContext],
          });
        }
        release({
          kind: 'answered',
          headers: response.headers,
          usedTokens: promptTokens + (completion.usage?.completion_tokens ?? 0),
        });
        const pacing =
          keyPacer && info.workflowExecution
            ? pacingReport(info.workflowExecution.workflowId, workerIdentity(context), keyPacer)
            : undefined;
        return {
          completion,
          choice,
          attempt,
          durationMs: Math.round(dependencies.clock() - startedAt),
          ...(pacing ? { pacing } : {}),
        };
      } catch (error) {
        if (error instanceof ApplicationFailure) throw error;
        const headers = (error as Partial<APIError>).headers;
        // Cancellation must surface as the SDK's CancelledFailure, or the attempt is reported failed, not cancelled.
        const cancel = callSignal.cancelled();
        if (cancel) {
          release({ kind: 'abandoned' });
          throw cancel.reason;
        }
        if (callSignal.timedOut()) {
          release({ kind: 'abandoned' });
          throw ApplicationFailure.create({
            type: FailureType.Timeout,
            message: `${label} attempt ${attempt}: no response within ${Math.round(deadlineMs)} ms (agentTimeoutMs)`,
            details: [failureContext],
          });
        }
        if (!isRateLimit(error)) {
          release({ kind: 'failed', headers });
          throw toAgentFailure(error, failureContext);
        }
        rateLimitedResponses += 1;
        const retryAfter = retryAfterMs(error.headers);
        // Flex capacity running short is not the key's rate limit: the pacer is not taught it, the call backs off here.
        const flexRefused = flex && isFlexUnavailable(error);
        release(
          flexRefused
            ? { kind: 'abandoned' }
            : { kind: 'rate-limited', headers: error.headers, retryAfterMs: retryAfter },
        );
        // Without a budget (an old schedule), the 429 goes back to Temporal's retry policy as it always did.
        if (rateLimitWaitMs === 0) throw toAgentFailure(error, failureContext);
        // Paced, the key is now paused for the Retry-After and the next acquire waits; unpaced, wait here.
        if (!keyPacer || flexRefused) {
          const backoff = Math.max(
            100,
            retryAfter ?? Math.min(30_000, 1000 * 2 ** Math.min(rateLimitedResponses - 1, 5)),
          );
          try {
            await abortableDelay(backoff, waitSignal());
          } catch (waitError) {
            throwIfCancelled();
            throw outOfWaitBudget(waitError);
          }
        }
      } finally {
        callSignal.stopDeadline();
      }
    }
  } finally {
    waitBudget?.clear();
    stopWatching();
    callSignal.clear();
  }
}

/**
 * Sends the request to chat completions, to the Responses API, or to Anthropic's Messages API (either answer shaped as
 * a chat completion).
 */
function sendRequest(
  target: ProviderClient,
  api: ChatCallOptions['api'],
  promptCache: PromptCache,
  params: ChatCompletionCreateParamsNonStreaming,
  options: RequestOptions,
) {
  if (target.provider === 'anthropic') return anthropicAsChat(target.client, params, promptCache, options);
  const llm = target.client;
  if (api !== 'responses') return llm.chat.completions.create(params, options).withResponse();
  if (!('responses' in llm))
    throw ApplicationFailure.nonRetryable(
      'the worker\'s LLM client has no Responses API (api: "responses")',
      FailureType.InvalidInput,
    );
  return responsesAsChat(llm as Pick<OpenAI, 'responses'>, params, options);
}

/** OpenAI's 429 when flex capacity is short (`resource_unavailable`), as against a rate limit. */
function isFlexUnavailable(error: APIError): boolean {
  const body = error.error as { code?: unknown } | undefined;
  return error.code === 'resource_unavailable' || body?.code === 'resource_unavailable';
}
