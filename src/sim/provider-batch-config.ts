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
  /**
   * Models whose OpenAI batches the simulated provider refuses (HTTP 400, `invalid_request_error`): `create` refuses to
   * create a batch of them ("model not available for batch"); `retrieve` refuses every later look at one (a batch the
   * provider lost track of). Read on each request, so a test can refuse a model half-way.
   */
  refusedModels: z
    .strictObject({
      create: z.array(z.string()).default([]),
      retrieve: z.array(z.string()).default([]),
    })
    .default({ create: [], retrieve: [] }),
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
