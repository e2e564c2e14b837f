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
  };
}
