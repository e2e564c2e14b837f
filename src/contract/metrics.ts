import type { AgentResult } from './agent-task';

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
  tokens: { prompt: number; completion: number; total: number };
  /**
   * US dollars of the answered calls whose model has a price, and how many answered calls have none (their cost is
   * unknown, not $0). Calls cancelled mid-flight report nothing, though a provider may bill what they generated.
   */
  cost: RunCost;
}

/** A run's spend: see RunMetrics.cost. */
export interface RunCost {
  usd: number;
  unpricedCalls: number;
  /** Calls answered from the answer cache (nothing sent, $0), when there were any. */
  cachedCalls?: number;
  /** What those calls would have cost, US dollars: the provider's bill when they were first answered. */
  savedUsd?: number;
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
  results: Iterable<{ costUsd?: number; unpriced?: boolean; cached?: boolean; savedUsd?: number }>,
): RunCost {
  let usd = 0;
  let unpricedCalls = 0;
  let cachedCalls = 0;
  let savedUsd = 0;
  for (const result of results) {
    usd += result.costUsd ?? 0;
    if (result.unpriced) unpricedCalls += 1;
    if (result.cached) cachedCalls += 1;
    savedUsd += result.savedUsd ?? 0;
  }
  return {
    usd: roundUsd(usd),
    unpricedCalls,
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
  const tokens = { prompt: 0, completion: 0, total: 0 };
  for (const result of results) {
    tokens.prompt += result.usage?.promptTokens ?? 0;
    tokens.completion += result.usage?.completionTokens ?? 0;
    tokens.total += result.usage?.totalTokens ?? 0;
  }
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
