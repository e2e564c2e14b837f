import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletion, type SimulatedRequest, type SimulatorState } from './chat-completion';
import { simulatorConfigSchema, type SimulatorConfig, type SimulatorConfigInput } from './config';
import { readBody, sendJson } from './http';
import { createProviderBatches, type ProviderBatchStats } from './provider-batches';
import { AnthropicPromptCache, minimumCacheableTokens } from './anthropic-prompt-cache';
import { SimulatedRateLimiter, type RateLimiterSnapshot } from './rate-limits';
import { cacheIdleMs } from './config';
import { SimulatedPromptCache } from './prompt-cache';

export type { SimulatedRequest } from './chat-completion';

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
  /** Base URL for ANTHROPIC_BASE_URL (Anthropic's client adds /v1 itself): its Messages API is `/v1/messages`. */
  readonly anthropicBaseUrl: string;
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

/**
 * Starts an OpenAI-compatible simulator: POST /v1/chat/completions, GET /v1/models, with latency and faults
 * from its configuration, and a log of every request at GET /_sim/log. Every completion it returns says it
 * is simulated.
 */
export async function startSimulator(
  input: SimulatorConfigInput = {},
  listen: { port?: number; host?: string } = {},
): Promise<Simulator> {
  const limiterFor = (config: SimulatorConfig) =>
    config.rateLimits ? new SimulatedRateLimiter(config.rateLimits) : undefined;
  const initial = simulatorConfigSchema.parse(input);
  const state: SimulatorState = {
    config: initial,
    limiter: limiterFor(initial),
    requests: [],
    requestsByTask: new Map(),
    inFlight: 0,
    maxInFlight: 0,
    seq: 0,
    rateLimited: 0,
    anthropicCache: new AnthropicPromptCache(),
    providerBatches: createProviderBatches({
      config: () => state.config.providerBatches,
      seed: () => state.config.seed,
      promptCache: () => ({
        cache: state.anthropicCache,
        minimumTokens: (model) => minimumCacheableTokens(model, state.config.cacheMinimumTokens),
      }),
      cacheIdleMs: () => cacheIdleMs(state.config),
    }),
    promptCache: new SimulatedPromptCache(() => cacheIdleMs(state.config)),
  };

  /** Counters and log are kept; rate-limit buckets start full. */
  function useConfig(config: SimulatorConfig): void {
    state.config = config;
    state.limiter = limiterFor(config);
  }

  async function admin(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    if (request.method === 'GET' && path === '/_sim/log') return sendJson(response, 200, { requests: state.requests });
    if (request.method === 'GET' && path === '/_sim/stats') return sendJson(response, 200, stats());
    if (request.method === 'POST' && path === '/_sim/reset') {
      reset();
      return sendJson(response, 200, { ok: true });
    }
    if (request.method === 'PUT' && path === '/_sim/config') {
      const parsed = simulatorConfigSchema.safeParse(JSON.parse((await readBody(request)).toString('utf8')));
      if (!parsed.success) return sendJson(response, 400, { error: parsed.error.message });
      useConfig(parsed.data);
      return sendJson(response, 200, { ok: true });
    }
    sendJson(response, 404, { error: `no such simulator endpoint: ${request.method} ${path}` });
  }

  function stats(): SimulatorStats {
    const base = { total: state.requests.length, inFlight: state.inFlight, maxInFlight: state.maxInFlight };
    return state.limiter ? { ...base, rateLimited: state.rateLimited, rateLimits: state.limiter.snapshot() } : base;
  }

  function reset(): void {
    state.requests = [];
    state.requestsByTask = new Map();
    state.maxInFlight = state.inFlight;
    state.seq = 0;
    state.rateLimited = 0;
    state.limiter = limiterFor(state.config);
    state.providerBatches.reset();
    state.promptCache.clear();
    state.anthropicCache.clear();
  }

  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const handle = async () => {
      if (request.method === 'POST' && path === '/v1/chat/completions') return chatCompletion(state, request, response);
      if (request.method === 'POST' && path === '/v1/messages')
        return chatCompletion(state, request, response, 'messages');
      if (request.method === 'POST' && path === '/v1/responses')
        return chatCompletion(state, request, response, 'responses');
      if (await state.providerBatches.handle(request, response, path)) return;
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
    anthropicBaseUrl: `http://${host}:${port}`,
    port,
    log: () => state.requests.map((request) => ({ ...request })),
    stats,
    configure: (next) => useConfig(simulatorConfigSchema.parse(next)),
    reset,
    batchStats: () => state.providerBatches.stats(),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
