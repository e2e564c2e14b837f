import { z } from 'zod';
import { MAX_IN_FLIGHT_PER_RUN } from './limits';
import { answerCacheSchema } from './answer-cache';

import { modelProviderSchema, promptCacheSchema } from './agent-task';

/** Retry policy for agent calls. Temporal owns retries; the HTTP client never retries on its own. */
export const retryOptionsSchema = z.strictObject({
  /** Attempts in all, the first included. Default 5. */
  maximumAttempts: z.number().int().min(1).max(100).optional(),
  /** Delay before the second attempt, ms. Default 1000. */
  initialIntervalMs: z.number().int().min(1).max(3_600_000).optional(),
  /** Growth of the delay between attempts. Default 2. */
  backoffCoefficient: z.number().min(1).max(10).optional(),
  /** Longest delay between attempts, ms. Default 30000. */
  maximumIntervalMs: z.number().int().min(1).max(3_600_000).optional(),
});

export type RetryOptions = z.infer<typeof retryOptionsSchema>;

export const errorPolicySchema = z.enum(['continue', 'fail-fast']);
/** 'continue': a failed agent is reported and the others run on. 'fail-fast': the first failure that will not be retried cancels the rest. */
export type ErrorPolicy = z.infer<typeof errorPolicySchema>;

/** Options shared by every run shape (fan-out, fan-in, DAG). */
export const runOptionsSchema = z.strictObject({
  /** Most agents in flight at once. Default and maximum: 500 (one run's bound). */
  maxParallel: z.number().int().min(1).max(MAX_IN_FLIGHT_PER_RUN).optional(),
  /** Default 'continue'. */
  errorPolicy: errorPolicySchema.optional(),
  /** Overrides of the default retry policy. */
  retry: retryOptionsSchema.optional(),
  /** Deadline of one attempt's request to the model, ms (waits for the provider's rate limit come on top). Default 120000. */
  agentTimeoutMs: z.number().int().min(100).max(86_400_000).optional(),
  /**
   * Opt in to Temporal's own lost-worker detection: calls heartbeat and a worker that stops for this long is presumed
   * lost, ms. Each heartbeat that reaches the server is a billed action on Temporal Cloud. Default: none; workers
   * watch for cancellation and lost peers without heartbeats (docs/ARCHITECTURE.md, "Economics").
   */
  heartbeatTimeoutMs: z.number().int().min(1000).max(600_000).optional(),
  /** Deadline of the whole run, ms; agents still running then are cancelled. Default: none. */
  runTimeoutMs: z
    .number()
    .int()
    .min(100)
    .max(30 * 86_400_000)
    .optional(),
  /**
   * Once the run's answered calls have used this many tokens, no new agent starts and the ones in flight are cancelled:
   * those are reported cancelled and the rest skipped, both BudgetExhausted. Default: none.
   */
  tokenBudget: z.number().int().min(1).optional(),
  /**
   * The same in US dollars, priced by the worker's table (README, "Costs"). Calls are priced when they answer, so the
   * run can end a few in-flight answers over. Calls of unpriced models do not count toward it. Default: none.
   */
  costBudgetUsd: z.number().positive().max(1_000_000_000).optional(),
  /**
   * The answer cache across runs (README, "Answer cache"): `{ mode: 'read-write' | 'read-only' | 'replay' | 'off',
   * location?, ttlMs? }`. The client fills it from FANOUT_CACHE, FANOUT_CACHE_STORE and FANOUT_CACHE_TTL where the
   * run sets none, checks it, and gives it to every call. Default: off.
   */
  cache: answerCacheSchema.optional(),
  /** The API its tasks' calls speak, for tasks that set no `provider`. Default: by model name (`claude-*` Anthropic). */
  provider: modelProviderSchema.optional(),
  /**
   * Anthropic's prompt cache for tasks that set no `promptCache`: `5m`, `1h` or `off`. Default `5m`; a batch's sync
   * calls `1h` (its items share their system prompt and tools over longer than 5 minutes).
   */
  promptCache: promptCacheSchema.optional(),
});

export type RunOptions = z.infer<typeof runOptionsSchema>;
