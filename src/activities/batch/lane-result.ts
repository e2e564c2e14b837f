import type { BatchResultLine } from '../../contract/batch';
import type { LaneResult } from '../../contract/batch-activities';
import { addCacheSavings, addTokens, tokenCountsOf } from '../../contract/metrics';

/** What a lane reports before it has tallied anything. */
export function emptyResult(): LaneResult {
  return {
    succeeded: 0,
    failed: 0,
    tokens: { prompt: 0, completion: 0, total: 0 },
    costUsd: 0,
    unpricedCalls: 0,
    retry: [],
    notRun: 0,
    callMsTotal: 0,
    calls: 0,
  };
}

/** Counts a result line, as written in the journal or a segment, in the lane's report. */
export function tally(result: LaneResult, text: string): void {
  tallyLine(result, JSON.parse(text) as BatchResultLine);
}

/** Counts a result line in the lane's report. */
export function tallyLine(result: LaneResult, line: BatchResultLine): void {
  if (line.status === 'ok') result.succeeded += 1;
  else result.failed += 1;
  addTokens(result.tokens, tokenCountsOf(line.usage));
  result.costUsd += line.costUsd ?? 0;
  if (line.unpriced) result.unpricedCalls += 1;
  addCacheSavings(result, line.cacheSavingsUsd);
}

/** The result line of an item that failed with no attempt left (or no retry worth one). */
export function failedLine(
  id: string,
  error: { type: string; message: string },
  attempts: number,
  durationMs: number,
): BatchResultLine {
  return { id, status: 'failed', error: { type: error.type, message: error.message }, attempts, durationMs };
}
