import type { AgentTask, ModelProvider, PromptCache } from './agent-task';

/*
 * What workflows read of a task, apart from its schema. agent-task.ts builds the zod schemas when it is loaded, and
 * Temporal loads a workflow's modules afresh for every run it starts (zod and the schemas cost some 12 ms of each
 * agent's first workflow task): the `agent` workflow imports this file, and the schemas only when it must validate.
 */

/** The provider a call goes to: the task's (or run's) `provider` if set, else by model name (`claude-*` Anthropic). */
export function providerOfCall(model: string, provider?: ModelProvider): ModelProvider {
  return provider ?? (model.startsWith('claude-') ? 'anthropic' : 'openai');
}

/** The task with its run's `provider` and `promptCache` where it sets none (the activity then reads the task alone). */
export function withCallDefaults<T extends { provider?: ModelProvider; promptCache?: PromptCache }>(
  task: T,
  defaults: { provider?: ModelProvider; promptCache?: PromptCache },
): T {
  const provider = task.provider ?? defaults.provider;
  const promptCache = task.promptCache ?? defaults.promptCache;
  if (provider === task.provider && promptCache === task.promptCache) return task;
  return {
    ...task,
    ...(provider === undefined ? {} : { provider }),
    ...(promptCache === undefined ? {} : { promptCache }),
  };
}

/** Model steps an agent with tools may take when its task sets no `maxSteps`. */
export const DEFAULT_MAX_STEPS = 20;

/** True when a task runs as a multi-step agent (the `agent` workflow) rather than as one call. */
export function runsAsAgent(task: Pick<AgentTask, 'tools' | 'output'>): boolean {
  return (task.tools !== undefined && task.tools.length > 0) || task.output !== undefined;
}

/**
 * Token counts reported by the provider. `promptTokens` counts every input token, cached or not (Anthropic's
 * `input_tokens` leaves its cache reads and writes out: they are added back here); the cache fields say how many of
 * them the provider served from its prompt cache or wrote to it, absent when it reported none.
 */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Of `promptTokens`, read from the provider's prompt cache (OpenAI `cached_tokens`, Anthropic `cache_read_input_tokens`). */
  cachedPromptTokens?: number;
  /** Of `promptTokens`, written to Anthropic's cache to live 5 minutes (`cache_creation.ephemeral_5m_input_tokens`). */
  cacheWrite5mTokens?: number;
  /** Of `promptTokens`, written to Anthropic's cache to live 1 hour (`cache_creation.ephemeral_1h_input_tokens`). */
  cacheWrite1hTokens?: number;
}

/** Two counts added, the prompt cache's included (a cache count is left out while neither has it). */
export function addUsage(first: TokenUsage, second: TokenUsage | undefined): TokenUsage {
  const sum: TokenUsage = {
    promptTokens: first.promptTokens + (second?.promptTokens ?? 0),
    completionTokens: first.completionTokens + (second?.completionTokens ?? 0),
    totalTokens: first.totalTokens + (second?.totalTokens ?? 0),
  };
  for (const key of ['cachedPromptTokens', 'cacheWrite5mTokens', 'cacheWrite1hTokens'] as const) {
    if (first[key] === undefined && second?.[key] === undefined) continue;
    sum[key] = (first[key] ?? 0) + (second?.[key] ?? 0);
  }
  return sum;
}
