import { MAX_IN_FLIGHT_PER_RUN } from './limits';
import type { ModelProvider, PromptCache } from './agent-task';
import type { ErrorPolicy, RetryOptions, RunOptions } from './run-options';

/*
 * The run options' defaults, apart from their schemas (run-options.ts): workflows that only resolve options they were
 * given, as an agent does, import this file and build no schema (see agent-task-rules.ts).
 */

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
