import type { ChatCompletion } from 'openai/resources/chat/completions';
import type { TokenUsage } from '../contract/agent-task';
import type { CacheWriteUsage } from './anthropic-messages';

/**
 * A chat completion's usage as the run reports it. Reads what every sync answer carries, OpenAI's own and Anthropic's
 * as anthropic-messages.ts shapes it: the prompt cache's reads (`prompt_tokens_details.cached_tokens`) and Anthropic's
 * writes by time to live; a count the provider did not report (or reported as 0) is left out.
 */
export function tokenUsageOf(usage: (ChatCompletion['usage'] & CacheWriteUsage) | undefined): TokenUsage | undefined {
  if (!usage) return undefined;
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const write5m = usage.cache_write_5m_tokens ?? 0;
  const write1h = usage.cache_write_1h_tokens ?? 0;
  return {
    promptTokens: usage.prompt_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    totalTokens: usage.total_tokens ?? 0,
    ...(cached > 0 ? { cachedPromptTokens: cached } : {}),
    ...(write5m > 0 ? { cacheWrite5mTokens: write5m } : {}),
    ...(write1h > 0 ? { cacheWrite1hTokens: write1h } : {}),
  };
}
