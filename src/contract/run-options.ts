import { z } from 'zod';
import { MAX_IN_FLIGHT_PER_RUN } from './limits';
import { answerCacheSchema } from './answer-cache';
import { modelProviderSchema, promptCacheSchema, type ModelProvider, type PromptCache } from './agent-task';

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

/** Run options with every default applied. */
export interface ResolvedRunOptions {
  maxParallel: number;
  errorPolicy: ErrorPolicy;
  retry: Required<RetryOptions>;
  agentTimeoutMs: number;
  heartbeatTimeoutMs: number | undefined;
  runTimeoutMs: number | undefined;
  tokenBudget: number | undefined;
  costBudgetUsd: number | undefined;
  provider: ModelProvider | undefined;
  promptCache: PromptCache | undefined;
}

/**
 * How long one attempt may wait for the provider's rate limit (pacing and 429s) on top of `agentTimeoutMs`, ms. A 429
 * is waited out inside the attempt, so it uses no attempt; only after this long without getting through does the call
 * fail, RateLimitWaitExceeded. The workflow adds it to the start-to-close timeout, and the activity takes it off again
 * to find the request's own deadline, which is why it is one constant rather than a run option (a worker can wait
 * less: FANOUT_RATE_LIMIT_WAIT_MS).
 */
export const RATE_LIMIT_WAIT_MS = 10 * 60_000;

/**
 * The defaults of the run options (the others have none). The workflows apply them, so a new value changes what runs
 * do: gate it with `patched()` where it changes their commands (CONTRIBUTING.md).
 */
export const RUN_OPTION_DEFAULTS: Readonly<
  Pick<ResolvedRunOptions, 'maxParallel' | 'errorPolicy' | 'retry' | 'agentTimeoutMs'>
> = {
  maxParallel: MAX_IN_FLIGHT_PER_RUN,
  errorPolicy: 'continue',
  retry: {
    maximumAttempts: 5,
    initialIntervalMs: 1000,
    backoffCoefficient: 2,
    maximumIntervalMs: 30_000,
  },
  agentTimeoutMs: 120_000,
};

export function resolveRunOptions(options: RunOptions | undefined): ResolvedRunOptions {
  return {
    maxParallel: options?.maxParallel ?? RUN_OPTION_DEFAULTS.maxParallel,
    errorPolicy: options?.errorPolicy ?? RUN_OPTION_DEFAULTS.errorPolicy,
    retry: {
      maximumAttempts: options?.retry?.maximumAttempts ?? RUN_OPTION_DEFAULTS.retry.maximumAttempts,
      initialIntervalMs: options?.retry?.initialIntervalMs ?? RUN_OPTION_DEFAULTS.retry.initialIntervalMs,
      backoffCoefficient: options?.retry?.backoffCoefficient ?? RUN_OPTION_DEFAULTS.retry.backoffCoefficient,
      maximumIntervalMs: options?.retry?.maximumIntervalMs ?? RUN_OPTION_DEFAULTS.retry.maximumIntervalMs,
    },
    agentTimeoutMs: options?.agentTimeoutMs ?? RUN_OPTION_DEFAULTS.agentTimeoutMs,
    heartbeatTimeoutMs: options?.heartbeatTimeoutMs,
    runTimeoutMs: options?.runTimeoutMs,
    tokenBudget: options?.tokenBudget,
    costBudgetUsd: options?.costBudgetUsd,
    provider: options?.provider,
    promptCache: options?.promptCache,
  };
}
