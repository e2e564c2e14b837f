import { z } from 'zod';
import { providerBatchSimSchema } from './provider-batches';
import { DEFAULT_CACHE_IDLE_MS } from './prompt-cache';

/** Faults the simulator can inject. Status codes answer with that status; the rest misbehave at the socket. */
export const faultKinds = [
  '429',
  '500',
  '503',
  '400',
  '401',
  '403',
  '404',
  '422',
  'reset',
  'hang',
  'malformed',
] as const;
export type FaultKind = (typeof faultKinds)[number];

const faultKindSchema = z.enum(faultKinds);

/** A fault for the first `times` requests of one task (every request when `times` is absent). */
const scriptedFaultSchema = z.strictObject({
  kind: faultKindSchema,
  times: z.number().int().min(1).optional(),
  /** Retry-After (seconds) sent with a 429 or 503. */
  retryAfterSeconds: z.number().min(0).optional(),
  /** The error message this long, about (a gateway's HTML page), bytes. */
  errorBytes: z.number().int().min(0).optional(),
});
export type ScriptedFault = z.infer<typeof scriptedFaultSchema>;

export const simulatorConfigSchema = z.strictObject({
  /** Seed of every random choice (latency spread, fault rolls); the same seed gives the same run. */
  seed: z.union([z.string(), z.number()]).default(1),
  /** Latency of each response, ms: fixed when min equals max, else spread per task between them. */
  latency: z
    .strictObject({ minMs: z.number().min(0), maxMs: z.number().min(0) })
    .refine((value) => value.maxMs >= value.minMs, 'maxMs must be at least minMs')
    .default({ minMs: 50, maxMs: 50 }),
  /** Latency per task id (the x-fanout-task-id header), ms; wins over `latency`. */
  latencyByTask: z.record(z.string(), z.number().min(0)).default({}),
  /** Probability per request of each fault, 0 to 1, rolled from the seed. */
  faultRates: z.partialRecord(faultKindSchema, z.number().min(0).max(1)).default({}),
  /** Retry-After (seconds) sent with rate-rolled 429s and 503s; none when absent. */
  retryAfterSeconds: z.number().min(0).optional(),
  /** Scripted faults per task id; win over the rates. */
  faultsByTask: z.record(z.string(), scriptedFaultSchema).default({}),
  /** When set, requests whose bearer token differs get 401. */
  requireApiKey: z.string().optional(),
  /**
   * The minimum cacheable prompt length of Anthropic's prompt cache (`/v1/messages`), tokens: a breakpoint on a shorter
   * prefix writes nothing. Default by model, as Anthropic's: 2048 for Haiku models, 1024 for the rest.
   */
  cacheMinimumTokens: z.number().int().min(1).optional(),
  /**
   * Provider rate limits per API key and model, enforced like OpenAI's (see rate-limits.ts): every response carries
   * `x-ratelimit-*` headers, and a request over a limit gets 429 with Retry-After. None when absent.
   */
  rateLimits: z
    .strictObject({
      requestsPerMinute: z.number().int().min(1).optional(),
      tokensPerMinute: z.number().int().min(1).optional(),
      /** Seconds of refill each bucket holds; 60 lets a whole minute's budget go at once. Default 60. */
      burstSeconds: z.number().min(0.1).max(60).default(60),
    })
    .optional(),
  /**
   * Length of each answer in tokens (words), spread per task between min and max and capped by the request's
   * `max_tokens` (then finish_reason is "length"). Default: a short echo of the prompt.
   */
  completionTokens: z
    .strictObject({ min: z.number().int().min(1), max: z.number().int().min(1) })
    .refine((value) => value.max >= value.min, 'max must be at least min')
    .optional(),
  /**
   * OpenAI's prompt caching (prompt-cache.ts): prefixes of 1,024 tokens and every 128 more, per model and
   * `prompt_cache_key`, reported as `cached_tokens` in every usage. `idleMs`: how long a prefix lives unused (0 caches
   * nothing). Default: env FANOUT_SIM_PROMPT_CACHE_IDLE_MS, else 5 minutes.
   */
  promptCache: z.strictObject({ idleMs: z.number().int().min(0).optional() }).default({}),
  /** The provider batch APIs (OpenAI files and batches, Anthropic message batches): time speed, expiry, errors. */
  providerBatches: providerBatchSimSchema.prefault({}),
});

export type SimulatorConfig = z.infer<typeof simulatorConfigSchema>;
export type SimulatorConfigInput = z.input<typeof simulatorConfigSchema>;

/**
 * A marker in a prompt that scripts one task, e.g. `[sim latency=800 fault=429 times=2 retry-after=2]`.
 * Tests use it to drive one request from the task's own text.
 */
export interface PromptMarker {
  latencyMs?: number;
  fault?: ScriptedFault;
}

const MARKER = /\[sim((?:\s+[a-z-]+=[^\s\]]+)+)\s*\]/;

export function parsePromptMarker(prompt: string): PromptMarker | undefined {
  const match = MARKER.exec(prompt);
  if (!match) return undefined;
  const fields = new Map<string, string>();
  for (const pair of match[1].trim().split(/\s+/)) {
    const [key, value] = pair.split('=');
    fields.set(key, value);
  }
  const marker: PromptMarker = {};
  const latency = fields.get('latency');
  if (latency !== undefined) marker.latencyMs = Number(latency);
  const kind = fields.get('fault');
  if (kind !== undefined) {
    const parsedKind = faultKindSchema.parse(kind);
    const times = fields.get('times');
    const retryAfter = fields.get('retry-after');
    const errorBytes = fields.get('error-bytes');
    marker.fault = {
      kind: parsedKind,
      times: times === undefined ? undefined : Number(times),
      retryAfterSeconds: retryAfter === undefined ? undefined : Number(retryAfter),
      ...(errorBytes === undefined ? {} : { errorBytes: Number(errorBytes) }),
    };
  }
  return marker;
}

/** How long a simulated cached prefix lives unused, ms: the configuration's, else FANOUT_SIM_PROMPT_CACHE_IDLE_MS, else 5 minutes. */
export function cacheIdleMs(config: SimulatorConfig): number {
  if (config.promptCache.idleMs !== undefined) return config.promptCache.idleMs;
  const fromEnvironment = Number(process.env.FANOUT_SIM_PROMPT_CACHE_IDLE_MS);
  return process.env.FANOUT_SIM_PROMPT_CACHE_IDLE_MS?.trim() && Number.isFinite(fromEnvironment) && fromEnvironment >= 0
    ? fromEnvironment
    : DEFAULT_CACHE_IDLE_MS;
}
