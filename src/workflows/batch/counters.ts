import type { LaneResult } from '../../contract/batch-activities';
import type { BatchCounters } from '../../contract/batch';
import { roundUsd } from '../../contract/metrics';

/** Adds what a window or the provider-batch route counted to the batch's counters. */
export function addCounters(total: BatchCounters, part: BatchCounters): void {
  total.succeeded += part.succeeded;
  total.failed += part.failed;
  total.tokens.prompt += part.tokens.prompt;
  total.tokens.completion += part.tokens.completion;
  total.tokens.total += part.tokens.total;
  total.cost.usd = roundUsd(total.cost.usd + part.cost.usd);
  total.cost.unpricedCalls += part.cost.unpricedCalls;
}

/** Adds what a lane reported to its window's counters. */
export function addLaneCounts(counters: BatchCounters, result: LaneResult): void {
  addCounters(counters, {
    succeeded: result.succeeded,
    failed: result.failed,
    tokens: result.tokens,
    cost: { usd: result.costUsd, unpricedCalls: result.unpricedCalls },
  });
}
