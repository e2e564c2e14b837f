import { createHash } from 'node:crypto';
import { SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { Environment } from '../config/environment';

/**
 * fanout's spans, named and attributed as the OpenTelemetry GenAI semantic conventions say (`chat {model}`,
 * `execute_tool {name}`, `invoke_agent {id}`), plus the product's own figures under `fanout.*`. Only
 * `@opentelemetry/api` is loaded here: with no tracer provider registered every span is the API's no-op one, so the
 * call path pays a few property reads when tracing is off.
 */

/** The instrumentation scope of fanout's own spans. */
export const TRACER_NAME = 'temporal-fanout';

/** Attribute names of the GenAI conventions this project sets, and its own. */
export const GenAiAttribute = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestTemperature: 'gen_ai.request.temperature',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  toolCallArguments: 'gen_ai.tool.call.arguments',
  toolCallResult: 'gen_ai.tool.call.result',
  agentId: 'gen_ai.agent.id',
  agentName: 'gen_ai.agent.name',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  /** The call's cost in US dollars from the worker's price table (absent when the model has no price). */
  costUsd: 'fanout.cost_usd',
  /** The Temporal attempt of the call (an item's own attempt in a batch lane). */
  attempt: 'fanout.attempt',
  taskId: 'fanout.task_id',
  /** The run the call belongs to: its workflow id (a batch's id for its lanes). */
  runId: 'fanout.run_id',
  /** 429 answers waited out inside the attempt before it was answered. */
  rateLimited: 'fanout.rate_limited_responses',
  /** The identity of the worker an attempt ran on (a lost attempt's span, which its retry writes). */
  worker: 'fanout.worker',
  /** A provider batch's id at its provider, the part of the run it carried, and how it ended. */
  providerBatchId: 'fanout.provider_batch.id',
  providerBatchPart: 'fanout.provider_batch.part',
  providerBatchOutcome: 'fanout.provider_batch.outcome',
  providerBatchRequests: 'fanout.provider_batch.requests',
  providerBatchSucceeded: 'fanout.provider_batch.succeeded',
  providerBatchFailed: 'fanout.provider_batch.failed',
  providerBatchRetried: 'fanout.provider_batch.retried',
  /** How a tool call's wait for approval ended: approved, denied or timed-out. */
  approvalOutcome: 'fanout.approval.outcome',
  /** The MCP server a tool call went to. */
  mcpServer: 'fanout.mcp.server',
} as const;

/** fanout's tracer: the registered provider's, else the API's no-op one. */
export function fanoutTracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/**
 * Prompts, answers, tool arguments and tool results go into spans only when the user opts in, as the conventions
 * say: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. Keys and headers never do.
 */
export function capturesMessageContent(environment: Environment = process.env): boolean {
  return environment.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === 'true';
}

/**
 * The share of a batch's items whose model calls get a `chat` span (FANOUT_OTEL_BATCH_ITEM_RATIO, 0 to 1; default
 * 0.01): a batch of 100,000 items would otherwise send 100,000 spans. Its windows and lanes are always traced.
 */
export const DEFAULT_BATCH_ITEM_RATIO = 0.01;

/**
 * FANOUT_OTEL_BATCH_ITEM_RATIO as a share from 0 to 1; a value that is not one gives the default (a tracing setting
 * never fails a call).
 */
function batchItemRatio(environment: Environment): number {
  const raw = environment.FANOUT_OTEL_BATCH_ITEM_RATIO?.trim();
  if (raw === undefined || raw === '') return DEFAULT_BATCH_ITEM_RATIO;
  const ratio = Number(raw);
  return Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : DEFAULT_BATCH_ITEM_RATIO;
}

/** Whether a batch item's calls are traced: decided by its id, so every attempt of an item is traced or none is. */
export function batchItemSampled(itemId: string, environment: Environment = process.env): boolean {
  const ratio = batchItemRatio(environment);
  if (ratio >= 1) return true;
  if (ratio <= 0) return false;
  return createHash('sha1').update(itemId).digest().readUInt32BE(0) / 0x1_0000_0000 < ratio;
}

/** A provider as spans and metrics name it. */
export interface ProviderName {
  provider: string;
  address?: string;
  port?: number;
}

const providers = new Map<string, ProviderName>();

/** The conventions' provider name for an OpenAI-compatible base URL, and the server it names (parsed once per URL). */
export function providerOf(baseURL: string | undefined): ProviderName {
  if (!baseURL) return { provider: 'openai' };
  let known = providers.get(baseURL);
  if (!known) {
    known = parseProvider(baseURL);
    if (providers.size < 100) providers.set(baseURL, known);
  }
  return known;
}

function parseProvider(baseURL: string): ProviderName {
  let url: URL;
  try {
    url = new URL(baseURL);
  } catch {
    return { provider: 'openai' };
  }
  const host = url.hostname;
  const provider = host.endsWith('anthropic.com')
    ? 'anthropic'
    : host.endsWith('.openai.azure.com')
      ? 'azure.ai.openai'
      : host.endsWith('googleapis.com')
        ? 'gcp.gemini'
        : host.endsWith('mistral.ai')
          ? 'mistral_ai'
          : host.endsWith('groq.com')
            ? 'groq'
            : host.endsWith('deepseek.com')
              ? 'deepseek'
              : host.endsWith('x.ai')
                ? 'x_ai'
                : // Any other server speaks OpenAI's API (the simulator, a proxy, vLLM): server.address says which.
                  'openai';
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { provider, address: host, port };
}

/** Attributes without the undefined ones (the API drops them, but a reader of the code should not have to know it). */
export function definedAttributes(attributes: Record<string, Attributes[string] | undefined>): Attributes {
  return Object.fromEntries(Object.entries(attributes).filter(([, value]) => value !== undefined)) as Attributes;
}

/** Ends a span as failed: status error with the product's failure type (`error.type`) and the message. */
export function failSpan(span: Span, error: unknown): void {
  const type = failureTypeOf(error);
  span.setAttribute(GenAiAttribute.errorType, type);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}

/** The product's failure type of an error: an ApplicationFailure's `type`, a cancellation, else the error's name. */
export function failureTypeOf(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const { type, name } = error as { type?: unknown; name?: unknown };
    if (typeof type === 'string' && type !== '') return type;
    if (name === 'CancelledFailure' || name === 'AbortError') return 'Cancelled';
    if (typeof name === 'string' && name !== '') return name;
  }
  return '_OTHER';
}

/** Starts a client span of fanout's tracer under the active context. */
export function startClientSpan(name: string, attributes: Attributes): Span {
  return fanoutTracer().startSpan(name, { kind: SpanKind.CLIENT, attributes });
}

/** Starts an internal span of fanout's tracer under the active context. */
export function startInternalSpan(name: string, attributes: Attributes): Span {
  return fanoutTracer().startSpan(name, { kind: SpanKind.INTERNAL, attributes });
}

/** A tool call as its `execute_tool {name}` span describes it. */
export interface ToolSpanContext {
  name: string;
  callId: string;
  /** The arguments as the model wrote them: recorded only with the opt-in. */
  arguments: string;
  /** The MCP server the tool is on; none for a tool defined on the worker. */
  mcpServer?: string;
  taskId: string;
}

/**
 * Runs a tool inside an `execute_tool {name}` span (GenAI conventions): the tool's name, call id and type, the MCP
 * server where there is one; status error with the error's type when the tool throws (which the agent then reads as
 * `error: ...`). Arguments and result only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
 */
export async function inToolSpan(tool: ToolSpanContext, run: () => Promise<string>): Promise<string> {
  const span = startInternalSpan(`execute_tool ${tool.name}`, {});
  if (!span.isRecording()) {
    try {
      return await run();
    } finally {
      span.end();
    }
  }
  const capture = capturesMessageContent();
  span.setAttributes(
    definedAttributes({
      [GenAiAttribute.operationName]: 'execute_tool',
      [GenAiAttribute.toolName]: tool.name,
      [GenAiAttribute.toolCallId]: tool.callId,
      [GenAiAttribute.toolType]: tool.mcpServer === undefined ? 'function' : 'extension',
      [GenAiAttribute.mcpServer]: tool.mcpServer,
      [GenAiAttribute.taskId]: tool.taskId,
      [GenAiAttribute.toolCallArguments]: capture ? tool.arguments : undefined,
    }),
  );
  try {
    const result = await run();
    if (capture) span.setAttribute(GenAiAttribute.toolCallResult, result);
    span.end();
    return result;
  } catch (error) {
    failSpan(span, error);
    throw error;
  }
}

/** A tool call's wait for approval, as `await_approval {tool}` records it. */
export interface ApprovalSpanContext {
  tool: string;
  callId: string;
  taskId: string;
  askedAt: number;
  answeredAt: number;
  outcome: 'approved' | 'denied' | 'timed-out';
}

/**
 * Records the wait of a tool call for a person's approval as a span of its own, `await_approval {tool}`, from when the
 * agent asked to when it was answered (the workflow's times, which its toolCall activity carries), with the outcome:
 * `approved`, `denied` or `timed-out` (status error: no one answered). Written by the activity that runs or refuses
 * the call, under its span: workflow code waits on a durable timer and has no span to time.
 */
export function traceApprovalWait(wait: ApprovalSpanContext): void {
  const span = fanoutTracer().startSpan(`await_approval ${wait.tool}`, {
    kind: SpanKind.INTERNAL,
    startTime: wait.askedAt,
    attributes: {
      [GenAiAttribute.toolName]: wait.tool,
      [GenAiAttribute.toolCallId]: wait.callId,
      [GenAiAttribute.taskId]: wait.taskId,
      [GenAiAttribute.approvalOutcome]: wait.outcome,
    },
  });
  if (wait.outcome === 'timed-out') {
    span.setAttribute(GenAiAttribute.errorType, 'ApprovalTimedOut');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'no one answered the approval in time' });
  }
  span.end(wait.answeredAt);
}

/** One provider batch, as `provider_batch {model}` records it once its results are collected. */
export interface ProviderBatchSpanContext {
  provider: string;
  model: string;
  /** The provider's batch id; none when no batch could be made or the provider refused it whole. */
  id?: string;
  part: number;
  requests: number;
  /** From submission to the end of collecting, ms. */
  durationMs: number;
  succeeded: number;
  failed: number;
  retried: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  runId: string;
}

/**
 * Records a provider batch (one part of a run on the provider-batch route) as a span from its submission to the end
 * of its collection, with its outcome: `ended` (every request answered or failed for good), `partial` (some to send
 * again) or `failed` (the provider refused or failed the whole batch: status error). Written by the collect activity,
 * under its span: the workflow's wait between polls has no span of its own.
 */
export function traceProviderBatch(batch: ProviderBatchSpanContext): void {
  const end = Date.now();
  const outcome = batch.id === undefined ? 'failed' : batch.retried > 0 ? 'partial' : 'ended';
  const span = fanoutTracer().startSpan(`provider_batch ${batch.model}`, {
    kind: SpanKind.CLIENT,
    startTime: end - batch.durationMs,
    attributes: definedAttributes({
      [GenAiAttribute.operationName]: 'chat',
      [GenAiAttribute.providerName]: batch.provider,
      [GenAiAttribute.requestModel]: batch.model,
      [GenAiAttribute.providerBatchId]: batch.id,
      [GenAiAttribute.providerBatchPart]: batch.part,
      [GenAiAttribute.providerBatchOutcome]: outcome,
      [GenAiAttribute.providerBatchRequests]: batch.requests,
      [GenAiAttribute.providerBatchSucceeded]: batch.succeeded,
      [GenAiAttribute.providerBatchFailed]: batch.failed,
      [GenAiAttribute.providerBatchRetried]: batch.retried,
      [GenAiAttribute.inputTokens]: batch.inputTokens,
      [GenAiAttribute.outputTokens]: batch.outputTokens,
      [GenAiAttribute.costUsd]: batch.costUsd,
      [GenAiAttribute.runId]: batch.runId,
    }),
  });
  if (outcome === 'failed') {
    span.setAttribute(GenAiAttribute.errorType, 'ProviderBatchFailed');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the provider ran none of the batch' });
  }
  span.end(end);
}
