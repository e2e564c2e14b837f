import type { AgentResult } from './agent-task';
import type { TokenUsage } from './token-usage';

/** Figures every run reports on its result. */
export interface RunMetrics {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  skipped: number;
  /** succeeded / total (0 for an empty run). */
  successRate: number;
  /** Wall-clock time of the run, ms. */
  wallMs: number;
  /** Sum of every started task's duration, ms. */
  sumTaskMs: number;
  slowestTaskMs: number;
  meanTaskMs: number;
  p50TaskMs: number;
  p95TaskMs: number;
  /** sumTaskMs / wallMs: how many agents' worth of work ran at once, on average (1 = sequential). */
  parallelismEfficiency: number;
  tokens: TokenCounts;
  /**
   * US dollars of the answered calls whose model has a price, and how many answered calls have none (their cost is
   * unknown, not $0). Calls cancelled mid-flight report nothing, though a provider may bill what they generated.
   */
  cost: RunCost;
}

/** Tokens a run or batch used; `cached`, present once a provider reported any, is the part of `prompt` read from its prompt cache. */
export interface TokenCounts {
  prompt: number;
  completion: number;
  total: number;
  cached?: number;
}

/** A run's spend: see RunMetrics.cost. */
export interface RunCost {
  usd: number;
  unpricedCalls: number;
  /** Calls answered from the answer cache (nothing sent, $0), when there were any. */
  cachedCalls?: number;
  /** What those calls would have cost, US dollars: the provider's bill when they were first answered. */
  savedUsd?: number;
  /**
   * What providers' prompt caches saved against the same tokens billed as uncached input, US dollars (less what
   * Anthropic's cache writes cost above input); present once a priced call reported cache tokens. `usd` is already net of it.
   */
  cacheSavingsUsd?: number;
}

/** Adds a call's (or a part's) tokens to a count; `cached` appears once there are any. */
export function addTokens(
  tokens: TokenCounts,
  usage: { prompt: number; completion: number; total: number; cached?: number } | undefined,
): void {
  if (usage === undefined) return;
  tokens.prompt += usage.prompt;
  tokens.completion += usage.completion;
  tokens.total += usage.total;
  if ((usage.cached ?? 0) > 0) tokens.cached = (tokens.cached ?? 0) + (usage.cached ?? 0);
}

/** A provider's usage as the counts a run adds up. */
export function tokenCountsOf(usage: TokenUsage | undefined): TokenCounts | undefined {
  if (usage === undefined) return undefined;
  return {
    prompt: usage.promptTokens,
    completion: usage.completionTokens,
    total: usage.totalTokens,
    ...((usage.cachedPromptTokens ?? 0) > 0 ? { cached: usage.cachedPromptTokens } : {}),
  };
}

/** Adds a call's (or a part's) savings to a cost; the field appears once there are any. */
export function addCacheSavings(cost: { cacheSavingsUsd?: number }, usd: number | undefined): void {
  if (usd === undefined || usd === 0) return;
  cost.cacheSavingsUsd = roundUsd((cost.cacheSavingsUsd ?? 0) + usd);
}

/**
 * Rounds to a ten-billionth of a dollar, so sums of many small costs print cleanly and do not depend on the order they
 * were added in (floating point makes 0.1 + 0.2 differ from 0.3).
 */
export function roundUsd(usd: number): number {
  return Math.round(usd * 1e10) / 1e10;
}

/** Sums the cost of results (or of batch items). */
export function sumCost(
  results: Iterable<{
    costUsd?: number;
    unpriced?: boolean;
    cached?: boolean;
    savedUsd?: number;
    cacheSavingsUsd?: number;
  }>,
): RunCost {
  let usd = 0;
  let unpricedCalls = 0;
  let cachedCalls = 0;
  let savedUsd = 0;
  const saved: { cacheSavingsUsd?: number } = {};
  for (const result of results) {
    usd += result.costUsd ?? 0;
    if (result.unpriced) unpricedCalls += 1;
    if (result.cached) cachedCalls += 1;
    savedUsd += result.savedUsd ?? 0;
    addCacheSavings(saved, result.cacheSavingsUsd);
  }
  return {
    usd: roundUsd(usd),
    unpricedCalls,
    ...saved,
    ...(cachedCalls > 0 ? { cachedCalls, savedUsd: roundUsd(savedUsd) } : {}),
  };
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil(fraction * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** Computes the metrics of a finished run from its results and its wall-clock time. */
export function computeMetrics(results: readonly AgentResult[], wallMs: number): RunMetrics {
  const count = (status: AgentResult['status']) => results.filter((result) => result.status === status).length;
  const durations = results
    .filter((result) => result.attempts > 0)
    .map((result) => result.durationMs)
    .sort((a, b) => a - b);
  const sumTaskMs = durations.reduce((sum, value) => sum + value, 0);
  const tokens: TokenCounts = { prompt: 0, completion: 0, total: 0 };
  for (const result of results) addTokens(tokens, tokenCountsOf(result.usage));
  const succeeded = count('ok');
  return {
    total: results.length,
    succeeded,
    failed: count('failed'),
    cancelled: count('cancelled'),
    skipped: count('skipped'),
    successRate: results.length === 0 ? 0 : succeeded / results.length,
    wallMs,
    sumTaskMs,
    slowestTaskMs: durations.length === 0 ? 0 : durations[durations.length - 1],
    meanTaskMs: durations.length === 0 ? 0 : sumTaskMs / durations.length,
    p50TaskMs: percentile(durations, 0.5),
    p95TaskMs: percentile(durations, 0.95),
    parallelismEfficiency: wallMs > 0 ? sumTaskMs / wallMs : 0,
    tokens,
    cost: sumCost(results),
  };
}
