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
