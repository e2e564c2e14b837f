import { Context } from '@temporalio/activity';
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import type { ChatCompletion, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { FailureType } from '../contract/failure-types';
import { lostAttemptOf } from '../contract/lost-attempt';
import { priceOf } from '../pricing/price-of';
import { usageFromChat } from './token-usage';
import type { PriceTable } from '../pricing/price-table';
import {
  GenAiAttribute,
  capturesMessageContent,
  definedAttributes,
  failSpan,
  failureTypeOf,
  fanoutTracer,
  providerOf,
  startClientSpan,
} from '../telemetry/genai-spans';
import { recordGenAiCall } from '../telemetry/genai-metrics';

/** What the `chat {model}` span of one call needs to know besides the request. */
export interface ChatSpanContext {
  taskId: string;
  model: string;
  attempt?: number;
  runId?: string;
  /** The client's base URL: the provider and server the span names. */
  baseURL?: string;
  temperature?: number;
  maxTokens?: number;
  messages: readonly ChatCompletionMessageParam[];
  /** The worker's price table, for `fanout.cost_usd`. */
  prices?: PriceTable;
  /** False: no span (a batch item not sampled); the metrics still count the call. Default true. */
  traced?: boolean;
}

/** A message in the conventions' shape (`gen_ai.input.messages`): a role and its parts. */
function conventionMessage(message: ChatCompletionMessageParam): unknown {
  const parts: unknown[] = [];
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') parts.push({ type: 'text', content });
  else if (Array.isArray(content))
    for (const part of content as { type?: string; text?: string }[])
      if (part.type === 'text') parts.push({ type: 'text', content: part.text });
  if (message.role === 'assistant')
    for (const call of message.tool_calls ?? [])
      if (call.type === 'function')
        parts.push({ type: 'tool_call', id: call.id, name: call.function.name, arguments: call.function.arguments });
  if (message.role === 'tool')
    return { role: 'tool', parts: [{ type: 'tool_call_response', id: message.tool_call_id, response: content }] };
  return { role: message.role, parts };
}

/**
 * Runs one model call attempt inside a `chat {model}` span (GenAI conventions): request model, provider and server
 * at its start; response model, id, finish reasons, token usage (cached input tokens where the provider reports them)
 * and the call's cost at its end; status error with the product's failure type when it fails. Prompts and answers are
 * recorded only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. With tracing off the span is the API's
 * no-op one and nothing else is computed for it. Tracing on or off, the attempt goes into the GenAI client metrics
 * (genai-metrics.ts).
 */
export async function inChatSpan<T extends { completion: ChatCompletion; choice: ChatCompletion.Choice }>(
  chat: ChatSpanContext,
  send: () => Promise<T>,
): Promise<T> {
  const span = chat.traced === false ? undefined : startClientSpan(`chat ${chat.model}`, {});
  const recording = span?.isRecording() === true;
  if (span && recording) {
    describeRequest(span, chat);
    traceLostAttempt(chat);
  }
  const startedAt = Date.now();
  const provider = providerOf(chat.baseURL).provider;
  try {
    const answer = await send();
    if (span && recording) describeAnswer(span, chat, answer.completion, answer.choice);
    span?.end();
    recordGenAiCall({
      provider,
      requestModel: chat.model,
      responseModel: answer.completion.model ?? chat.model,
      seconds: (Date.now() - startedAt) / 1000,
      inputTokens: answer.completion.usage?.prompt_tokens,
      outputTokens: answer.completion.usage?.completion_tokens,
    });
    return answer;
  } catch (error) {
    if (span && recording) failSpan(span, error);
    else span?.end();
    recordGenAiCall({
      provider,
      requestModel: chat.model,
      seconds: (Date.now() - startedAt) / 1000,
      errorType: failureTypeOf(error),
    });
    throw error;
  }
}

/** The attempts whose lost predecessor was traced already (an agent step's activity sends one call; a lane many). */
const lostTraced = new Set<string>();

/**
 * The span of the attempt before this one when a peer judged its worker lost and failed it (the note it left in the
 * heartbeat details, src/contract/lost-attempt.ts): a killed worker exports nothing, so the retry writes the lost
 * attempt's `chat {model}` span, from its start to when it was judged lost, ended with error `WorkerLost`. Only for a
 * call whose attempt is its activity's (a batch lane's items keep attempts of their own).
 */
function traceLostAttempt(chat: ChatSpanContext): void {
  if (chat.attempt !== undefined) return;
  let info: Context['info'];
  try {
    info = Context.current().info;
  } catch {
    return;
  }
  const lost = lostAttemptOf(info.heartbeatDetails, info.attempt);
  const run = info.workflowExecution;
  if (!lost || !run) return;
  const key = `${run.workflowId}\u0000${run.runId}\u0000${info.activityId}\u0000${info.attempt}`;
  if (lostTraced.has(key)) return;
  if (lostTraced.size >= 1000) lostTraced.clear();
  lostTraced.add(key);
  const { provider, address, port } = providerOf(chat.baseURL);
  const span = fanoutTracer().startSpan(`chat ${chat.model}`, {
    kind: SpanKind.CLIENT,
    startTime: lost.startedAt ?? lost.lostAt,
    attributes: definedAttributes({
      [GenAiAttribute.operationName]: 'chat',
      [GenAiAttribute.providerName]: provider,
      [GenAiAttribute.requestModel]: chat.model,
      [GenAiAttribute.serverAddress]: address,
      [GenAiAttribute.serverPort]: port,
      [GenAiAttribute.taskId]: chat.taskId,
      [GenAiAttribute.attempt]: lost.attempt,
      [GenAiAttribute.runId]: chat.runId ?? run.workflowId,
      [GenAiAttribute.worker]: lost.worker,
      [GenAiAttribute.errorType]: FailureType.WorkerLost,
    }),
  });
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: `worker ${lost.worker} was lost during attempt ${lost.attempt}; attempt ${info.attempt} took the call over`,
  });
  span.end(lost.lostAt);
}

function describeRequest(span: Span, chat: ChatSpanContext): void {
  let info: Context['info'] | undefined;
  try {
    info = Context.current().info;
  } catch {
    info = undefined; // outside an activity (a test calling it directly)
  }
  const { provider, address, port } = providerOf(chat.baseURL);
  span.setAttributes(
    definedAttributes({
      [GenAiAttribute.operationName]: 'chat',
      [GenAiAttribute.providerName]: provider,
      [GenAiAttribute.requestModel]: chat.model,
      [GenAiAttribute.requestTemperature]: chat.temperature,
      [GenAiAttribute.requestMaxTokens]: chat.maxTokens,
      [GenAiAttribute.serverAddress]: address,
      [GenAiAttribute.serverPort]: port,
      [GenAiAttribute.taskId]: chat.taskId,
      [GenAiAttribute.attempt]: chat.attempt ?? info?.attempt,
      [GenAiAttribute.runId]: chat.runId ?? info?.workflowExecution?.workflowId,
    }),
  );
  if (capturesMessageContent())
    span.setAttribute(GenAiAttribute.inputMessages, JSON.stringify(chat.messages.map(conventionMessage)));
}

function describeAnswer(
  span: Span,
  chat: ChatSpanContext,
  completion: ChatCompletion,
  choice: ChatCompletion.Choice,
): void {
  const usage = completion.usage;
  const responseModel = completion.model ?? chat.model;
  const costUsd =
    usage && chat.prices
      ? priceOf(
          responseModel,
          usageFromChat(usage),
          chat.prices,
          // As the results price it (withCost): the tier the provider says it served.
          completion.service_tier === 'flex' ? 'flex' : 'standard',
        )
      : undefined;
  span.setAttributes(
    definedAttributes({
      [GenAiAttribute.responseModel]: responseModel,
      [GenAiAttribute.responseId]: completion.id,
      [GenAiAttribute.responseFinishReasons]: choice.finish_reason ? [choice.finish_reason] : undefined,
      [GenAiAttribute.inputTokens]: usage?.prompt_tokens,
      [GenAiAttribute.outputTokens]: usage?.completion_tokens,
      [GenAiAttribute.cacheReadInputTokens]: usage?.prompt_tokens_details?.cached_tokens,
      [GenAiAttribute.costUsd]: costUsd,
    }),
  );
  if (capturesMessageContent())
    span.setAttribute(
      GenAiAttribute.outputMessages,
      JSON.stringify([{ ...(conventionMessage(choice.message) as object), finish_reason: choice.finish_reason }]),
    );
}
