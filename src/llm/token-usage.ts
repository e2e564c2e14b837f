import type { TokenUsage } from '../contract/token-usage';

/**
 * Each provider's usage object as TokenUsage: the one place its cache counts are read. A count the provider left out
 * is absent (never guessed), so a provider that reports no cached tokens is billed every prompt token at full price.
 */

const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;

/** The cache fields that are above zero. */
function cacheFields(cached: number, write5m = 0, write1h = 0): Partial<TokenUsage> {
  return {
    ...(cached > 0 ? { cachedPromptTokens: cached } : {}),
    ...(write5m > 0 ? { cacheWrite5mTokens: write5m } : {}),
    ...(write1h > 0 ? { cacheWrite1hTokens: write1h } : {}),
  };
}

/**
 * Chat Completions' `usage` (sync calls and OpenAI batch lines): `prompt_tokens_details.cached_tokens` are part of
 * `prompt_tokens`. An Anthropic answer shaped as a chat completion (anthropic-messages.ts) carries its cache writes by
 * lifetime as `cache_write_5m_tokens` / `cache_write_1h_tokens`, also part of `prompt_tokens`.
 */
export function usageFromChat(usage: unknown): TokenUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const fields = usage as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    total_tokens?: unknown;
    prompt_tokens_details?: { cached_tokens?: unknown } | null;
    cache_write_5m_tokens?: unknown;
    cache_write_1h_tokens?: unknown;
  };
  const promptTokens = count(fields.prompt_tokens);
  const completionTokens = count(fields.completion_tokens);
  return {
    promptTokens,
    completionTokens,
    totalTokens: count(fields.total_tokens) || promptTokens + completionTokens,
    ...cacheFields(
      count(fields.prompt_tokens_details?.cached_tokens),
      count(fields.cache_write_5m_tokens),
      count(fields.cache_write_1h_tokens),
    ),
  };
}

/** The Responses API's `usage`: `input_tokens_details.cached_tokens` are part of `input_tokens`. */
export function usageFromResponses(usage: unknown): TokenUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const fields = usage as {
    input_tokens?: unknown;
    output_tokens?: unknown;
    total_tokens?: unknown;
    input_tokens_details?: { cached_tokens?: unknown } | null;
  };
  const promptTokens = count(fields.input_tokens);
  const completionTokens = count(fields.output_tokens);
  return {
    promptTokens,
    completionTokens,
    totalTokens: count(fields.total_tokens) || promptTokens + completionTokens,
    ...cacheFields(count(fields.input_tokens_details?.cached_tokens)),
  };
}

/**
 * Anthropic's `usage` (Messages API and Message Batches results). Its `input_tokens` leave out cache reads and writes,
 * so they are added back into promptTokens. Writes are split by lifetime from `cache_creation.ephemeral_{5m,1h}_input_tokens`;
 * without that breakdown `cache_creation_input_tokens` are 5-minute writes (the default lifetime).
 */
export function usageFromAnthropic(usage: unknown): TokenUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const fields = usage as {
    input_tokens?: unknown;
    output_tokens?: unknown;
    cache_read_input_tokens?: unknown;
    cache_creation_input_tokens?: unknown;
    cache_creation?: { ephemeral_5m_input_tokens?: unknown; ephemeral_1h_input_tokens?: unknown } | null;
  };
  const read = count(fields.cache_read_input_tokens);
  const created = count(fields.cache_creation_input_tokens);
  const split = fields.cache_creation;
  const write1h = split ? count(split.ephemeral_1h_input_tokens) : 0;
  const write5m = split ? count(split.ephemeral_5m_input_tokens) : created;
  // The total written, whichever way the provider counted it.
  const written = Math.max(created, write5m + write1h);
  const promptTokens = count(fields.input_tokens) + read + written;
  const completionTokens = count(fields.output_tokens);
  return {
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    ...cacheFields(read, written - write1h, write1h),
  };
}
