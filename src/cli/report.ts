import { describeMove, type PacingStatus } from '../contract/pacing';
import type { AgentResult } from '../contract/agent-task';
import type { FanOutResult } from '../contract/fan-out';
import type { RunCost } from '../contract/metrics';

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)}s`;
}

/** Dollars to the cent from $1, else to the millionth (single calls of small models cost fractions of a cent). */
export function formatUsd(usd: number): string {
  if (usd >= 1) return `$${usd.toFixed(2)}`;
  if (usd > 0 && usd < 0.000001) return '<$0.000001';
  return `$${usd.toFixed(6)}`;
}

/** A run's spend in words; unpriced calls are named as such, never counted as $0. Absent from runs before costs. */
export function formatCost(cost: RunCost | undefined): string {
  if (cost === undefined) return 'not recorded';
  const cached = cost.cachedCalls
    ? `; ${cost.cachedCalls} answered from the answer cache (${formatUsd(cost.savedUsd ?? 0)} saved)`
    : '';
  const saved = cost.cacheSavingsUsd === undefined ? '' : ` (prompt caching saved ${formatUsd(cost.cacheSavingsUsd)})`;
  if (cost.unpricedCalls === 0) return `${formatUsd(cost.usd)}${saved}${cached}`;
  const unpriced = `${cost.unpricedCalls} unpriced call${cost.unpricedCalls === 1 ? '' : 's'}`;
  return `${cost.usd > 0 ? `${formatUsd(cost.usd)} + ${unpriced} (cost unknown)${saved}` : `unknown (${unpriced})`}${cached}`;
}

/** Tokens in words: the total, and the prompt tokens served from a provider's cache when there were any. */
export function formatTokens(tokens: { total: number; cached?: number }): string {
  return tokens.cached === undefined ? `${tokens.total}` : `${tokens.total} (${tokens.cached} prompt tokens cached)`;
}

function agentCost(agent: AgentResult): string {
  if (agent.cached) return 'cached';
  if (agent.costUsd !== undefined) return formatUsd(agent.costUsd);
  return agent.unpriced ? 'unpriced' : '';
}

function truncate(text: string, width: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= width ? flat : `${flat.slice(0, width - 1)}…`;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The human report of a finished run: one row per agent in input order, then the metrics. */
export function formatRunReport(result: FanOutResult, options: { outputWidth?: number } = {}): string {
  const width = options.outputWidth ?? 60;
  const rows = [['#', 'agent', 'status', 'tries', 'time', 'cost', 'output / error']];
  result.results.forEach((agent, index) => {
    const detail =
      agent.status === 'ok' ? (agent.output ?? '') : `${agent.error?.type ?? ''}: ${agent.error?.message ?? ''}`;
    rows.push([
      String(index + 1),
      agent.name,
      agent.status,
      String(agent.attempts),
      seconds(agent.durationMs),
      agentCost(agent),
      truncate(detail, width),
    ]);
  });
  const m = result.metrics;
  const lines = [
    table(rows),
    '',
    `agents: ${m.total}  ok: ${m.succeeded}  failed: ${m.failed}  cancelled: ${m.cancelled}${m.skipped ? `  skipped: ${m.skipped}` : ''}  success rate: ${(m.successRate * 100).toFixed(1)}%`,
    `wall: ${seconds(m.wallMs)}  slowest agent: ${seconds(m.slowestTaskMs)}  sum of agents: ${seconds(m.sumTaskMs)}  parallelism efficiency: ${m.parallelismEfficiency.toFixed(2)}x`,
    `task time: mean ${seconds(m.meanTaskMs)}  p50 ${seconds(m.p50TaskMs)}  p95 ${seconds(m.p95TaskMs)}  tokens: ${m.tokens.total} (prompt ${m.tokens.prompt}${m.tokens.cached === undefined ? '' : `, of which cached ${m.tokens.cached}`}, completion ${m.tokens.completion})`,
    `cost: ${formatCost(m.cost)}`,
  ];
  if (result.stoppedBy) lines.push(`stopped early: ${result.stoppedBy}`);
  return lines.join('\n');
}

/** A workflow's pacing in lines: each worker's limit per model, then its last moves (empty when nothing was paced). */
export function formatPacing(pacing: PacingStatus | undefined, indent = ''): string[] {
  if (!pacing || pacing.keys.length === 0) return [];
  const left = (bucket: { limitPerMinute: number; remaining: number } | undefined, what: string) =>
    bucket ? `, ${what} ${bucket.limitPerMinute}/min (about ${bucket.remaining} left now)` : '';
  const lines = [`${indent}pacing:`];
  for (const key of pacing.keys) {
    lines.push(
      `${indent}  ${key.model} on ${key.worker}: concurrency limit ${key.concurrencyLimit} (in flight ${key.inFlight}, queued ${key.queued})` +
        `${left(key.requests, 'requests')}${left(key.tokens, 'tokens')}, 429s ${key.rateLimited}`,
    );
  }
  for (const move of pacing.moves.slice(-5)) {
    lines.push(`${indent}  ${new Date(move.at).toISOString().slice(11, 19)} ${describeMove(move)}`);
  }
  return lines;
}
