import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  parsePromptMarker,
  simulatorConfigSchema,
  type FaultKind,
  type ScriptedFault,
  type SimulatorConfig,
  type SimulatorConfigInput,
} from './config';
import { scriptedCompletion } from './tool-calls';
import { chatReplyAsResponse, responsesRequestAsChat } from '../provider-batch/responses-api';
import { createProviderBatches, type ProviderBatchStats } from './provider-batches';
import {
  rateLimitTokens,
  SimulatedRateLimiter,
  type Admission,
  type RateLimitKind,
  type RateLimiterSnapshot,
} from './rate-limits';

/** One request the simulator received, as tests read it from GET /_sim/log. */
export interface SimulatedRequest {
  seq: number;
  taskId: string;
  workflowId: string;
  /** Temporal's attempt number, from the x-fanout-attempt header. */
  attempt: number;
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
  /** Tokens the request was charged against the tokens-per-minute limit, once settled. */
  rateLimitTokens?: number;
  inFlightAtArrival: number;
}

export interface SimulatorStats {
  total: number;
  inFlight: number;
  maxInFlight: number;
  /** With rate limits configured: requests answered 429 by them (injected 429 faults not included). */
  rateLimited?: number;
  /** With rate limits configured: what is left in each key's buckets now. */
  rateLimits?: RateLimiterSnapshot[];
}

export interface Simulator {
  /** Base URL for OPENAI_BASE_URL, ending in /v1. */
  readonly baseUrl: string;
  readonly port: number;
  log(): SimulatedRequest[];
  stats(): SimulatorStats;
  /** Replaces the configuration (counters and log are kept; rate-limit buckets start full). */
  configure(config: SimulatorConfigInput): void;
  /** Clears the log and the counters. */
  reset(): void;
  /** The provider batch APIs' counters: batches created, items answered (provider-batches.ts). */
  batchStats(): ProviderBatchStats;
  close(): Promise<void>;
}

/** A number in [0, 1) fixed by the seed and the parts: the same inputs always give the same value. */
function roll(seed: string | number, ...parts: (string | number)[]): number {
  const digest = createHash('sha256')
    .update([seed, ...parts].join('\u0000'))
    .digest();
  return digest.readUInt32BE(0) / 2 ** 32;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

interface ChatRequestBody {
  model?: string;
  service_tier?: string;
  messages?: { role?: string; content?: unknown }[];
  max_tokens?: number;
  max_completion_tokens?: number;
}

function promptOf(body: ChatRequestBody): string {
  const user = [...(body.messages ?? [])].reverse().find((message) => message.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}

function countTokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

const STATUS_MESSAGES: Record<string, string> = {
  '400': 'simulated bad request',
  '401': 'simulated: incorrect API key provided',
  '403': 'simulated: permission denied',
  '404': 'simulated: the model does not exist',
  '422': 'simulated: unprocessable request',
  '429': 'simulated: rate limit reached',
  '500': 'simulated: internal server error',
  '503': 'simulated: service unavailable',
};

/**
 * Starts an OpenAI-compatible simulator: POST /v1/chat/completions, GET /v1/models, with latency and faults
 * from its configuration, and a log of every request at GET /_sim/log. Every completion it returns says it
 * is simulated.
 */
export async function startSimulator(
  input: SimulatorConfigInput = {},
  listen: { port?: number; host?: string } = {},
): Promise<Simulator> {
  let config: SimulatorConfig = simulatorConfigSchema.parse(input);
  let requests: SimulatedRequest[] = [];
  let requestsByTask = new Map<string, number>();
  let inFlight = 0;
  let maxInFlight = 0;
  let seq = 0;
  let rateLimited = 0;
  const limiterFor = (current: SimulatorConfig) =>
    current.rateLimits ? new SimulatedRateLimiter(current.rateLimits) : undefined;
  let limiter = limiterFor(config);
  const providerBatches = createProviderBatches({ config: () => config.providerBatches, seed: () => config.seed });

  function scriptedFault(taskId: string, prompt: string): ScriptedFault | undefined {
    return config.faultsByTask[taskId] ?? parsePromptMarker(prompt)?.fault;
  }

  function chooseFault(
    taskId: string,
    taskRequest: number,
    prompt: string,
  ): { kind?: FaultKind; retryAfterSeconds?: number; errorBytes?: number } {
    const scripted = scriptedFault(taskId, prompt);
    if (scripted && (scripted.times === undefined || taskRequest <= scripted.times)) {
      return { kind: scripted.kind, retryAfterSeconds: scripted.retryAfterSeconds, errorBytes: scripted.errorBytes };
    }
    if (scripted) return {};
    const value = roll(config.seed, 'fault', taskId, taskRequest);
    let threshold = 0;
    for (const [kind, rate] of Object.entries(config.faultRates) as [FaultKind, number][]) {
      threshold += rate;
      if (value < threshold) return { kind, retryAfterSeconds: config.retryAfterSeconds };
    }
    return {};
  }

  /** The echo, padded or cut to the configured answer length and to the request's max_tokens. */
  function sizedOutput(
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

  function latencyFor(taskId: string, prompt: string): number {
    const marked = parsePromptMarker(prompt)?.latencyMs;
    if (marked !== undefined) return marked;
    const byTask = config.latencyByTask[taskId];
    if (byTask !== undefined) return byTask;
    const { minMs, maxMs } = config.latency;
    return Math.round(minMs + roll(config.seed, 'latency', taskId) * (maxMs - minMs));
  }

  async function chatCompletion(
    request: IncomingMessage,
    response: ServerResponse,
    api: 'chat' | 'responses' = 'chat',
  ): Promise<void> {
    const arrivedAt = Date.now();
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let open = true;
    const entry: SimulatedRequest = {
      seq: ++seq,
      taskId: String(request.headers['x-fanout-task-id'] ?? ''),
      workflowId: String(request.headers['x-fanout-workflow-id'] ?? ''),
      attempt: Number(request.headers['x-fanout-attempt'] ?? 0),
      taskRequest: 0,
      arrivedAt,
      latencyMs: 0,
      inFlightAtArrival: inFlight,
    };
    requests.push(entry);
    const pending: {
      timer?: NodeJS.Timeout;
      admission?: Extract<Admission, { admitted: true }>;
      promptTokens: number;
    } = { promptTokens: 0 };
    const settle = () => {
      if (!open) return;
      open = false;
      inFlight -= 1;
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

    const text = await readBody(request);
    let body: ChatRequestBody;
    try {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      body = (api === 'responses' ? responsesRequestAsChat(parsed) : parsed) as ChatRequestBody;
    } catch {
      entry.outcome = 400;
      sendJson(response, 400, {
        error: { message: 'simulated: request body is not JSON', type: 'invalid_request_error' },
      });
      return;
    }
    const prompt = promptOf(body);
    if (entry.taskId === '') entry.taskId = `prompt:${createHash('sha256').update(prompt).digest('hex').slice(0, 12)}`;
    entry.taskRequest = (requestsByTask.get(entry.taskId) ?? 0) + 1;
    requestsByTask.set(entry.taskId, entry.taskRequest);

    if (config.requireApiKey !== undefined && request.headers.authorization !== `Bearer ${config.requireApiKey}`) {
      entry.outcome = 401;
      sendJson(response, 401, { error: { message: STATUS_MESSAGES['401'], type: 'invalid_request_error' } });
      return;
    }

    const model = body.model ?? 'sim-model';
    if (limiter) {
      const messages = body.messages ?? [];
      pending.promptTokens = rateLimitTokens(messages, undefined);
      const admission = limiter.admit(
        `${request.headers.authorization ?? ''}\u0000${model}`,
        model,
        rateLimitTokens(messages, body.max_tokens ?? body.max_completion_tokens),
      );
      if (!admission.admitted) {
        rateLimited += 1;
        entry.outcome = 429;
        entry.rateLimited = admission.kind;
        sendJson(
          response,
          429,
          { error: { message: admission.message, type: admission.kind, param: null, code: 'rate_limit_exceeded' } },
          {
            ...admission.headers,
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
    const rateLimitHeaders = (): Record<string, string> => admitted?.headers() ?? {};

    if (providerBatches.flexRefused(body, entry.taskId, prompt)) {
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
    const fault = chooseFault(entry.taskId, entry.taskRequest, prompt);
    entry.fault = fault.kind;
    entry.latencyMs = latencyFor(entry.taskId, prompt);
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
        sendJson(
          response,
          status,
          { error: { message, type: 'simulated_error' } },
          { ...rateLimitHeaders(), ...headers },
        );
        return;
      }
      entry.outcome = 200;
      // Tool calls and structured answers scripted by directives in the task's prompt (tool-calls.ts).
      const scripted = scriptedCompletion(body, entry.seq);
      if (scripted) {
        settleTokens(pending.promptTokens + scripted.usage.completion_tokens);
        sendJson(response, 200, scripted, rateLimitHeaders());
        return;
      }
      const system = (body.messages ?? []).find((message) => message.role === 'system')?.content;
      const persona = typeof system === 'string' && system !== '' ? ` as "${system.slice(0, 40)}"` : '';
      const echo = `[simulated]${persona} answer to: ${prompt
        .replace(/\[sim(?:\s+[a-z-]+=[^\s\]]+)+\s*\]/g, '')
        .trim()
        .slice(0, 80)}`;
      const { output, finishReason } = sizedOutput(echo, entry.taskId, body.max_tokens ?? body.max_completion_tokens);
      const promptTokens = countTokens(prompt) + (typeof system === 'string' ? countTokens(system) : 0);
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
        usage: {
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
        },
      };
      sendJson(response, 200, api === 'responses' ? chatReplyAsResponse(reply) : reply, rateLimitHeaders());
    }, entry.latencyMs);
  }

  async function admin(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    if (request.method === 'GET' && path === '/_sim/log') return sendJson(response, 200, { requests });
    if (request.method === 'GET' && path === '/_sim/stats') return sendJson(response, 200, stats());
    if (request.method === 'POST' && path === '/_sim/reset') {
      reset();
      return sendJson(response, 200, { ok: true });
    }
    if (request.method === 'PUT' && path === '/_sim/config') {
      const parsed = simulatorConfigSchema.safeParse(JSON.parse(await readBody(request)));
      if (!parsed.success) return sendJson(response, 400, { error: parsed.error.message });
      config = parsed.data;
      limiter = limiterFor(config);
      return sendJson(response, 200, { ok: true });
    }
    sendJson(response, 404, { error: `no such simulator endpoint: ${request.method} ${path}` });
  }

  function stats(): SimulatorStats {
    const base = { total: requests.length, inFlight, maxInFlight };
    return limiter ? { ...base, rateLimited, rateLimits: limiter.snapshot() } : base;
  }

  function reset(): void {
    requests = [];
    requestsByTask = new Map();
    maxInFlight = inFlight;
    seq = 0;
    rateLimited = 0;
    limiter = limiterFor(config);
    providerBatches.reset();
  }

  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const handle = async () => {
      if (request.method === 'POST' && path === '/v1/chat/completions') return chatCompletion(request, response);
      if (request.method === 'POST' && path === '/v1/responses') return chatCompletion(request, response, 'responses');
      if (await providerBatches.handle(request, response, path)) return;
      if (request.method === 'GET' && path === '/v1/models') {
        return sendJson(response, 200, {
          object: 'list',
          data: ['gpt-4o-mini', 'gpt-4o', 'sim-model'].map((id) => ({
            id,
            object: 'model',
            created: 0,
            owned_by: 'simulator',
          })),
        });
      }
      if (path.startsWith('/_sim/')) return admin(request, response, path);
      sendJson(response, 404, { error: { message: `simulated: no route ${request.method} ${path}` } });
    };
    handle().catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: { message: `simulator error: ${String(error)}` } });
    });
  });
  server.keepAliveTimeout = 30_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port ?? 0, listen.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = listen.host ?? '127.0.0.1';

  return {
    baseUrl: `http://${host}:${port}/v1`,
    port,
    log: () => requests.map((request) => ({ ...request })),
    stats,
    configure: (next) => {
      config = simulatorConfigSchema.parse(next);
      limiter = limiterFor(config);
    },
    reset,
    batchStats: () => providerBatches.stats(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
