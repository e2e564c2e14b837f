import type { LaneResult } from '../../contract/batch-activities';
import type { BatchCounters } from '../../contract/batch';
import { addCacheSavings, addTokens, roundUsd } from '../../contract/metrics';

/** Adds what a window or the provider-batch route counted to the batch's counters. */
export function addCounters(total: BatchCounters, part: BatchCounters): void {
  total.succeeded += part.succeeded;
  total.failed += part.failed;
  addTokens(total.tokens, part.tokens);
  total.cost.usd = roundUsd(total.cost.usd + part.cost.usd);
  total.cost.unpricedCalls += part.cost.unpricedCalls;
  addCacheSavings(total.cost, part.cost.cacheSavingsUsd);
}

/** Adds what a lane reported to its window's counters. */
export function addLaneCounts(counters: BatchCounters, result: LaneResult): void {
  addCounters(counters, {
    succeeded: result.succeeded,
    failed: result.failed,
    tokens: result.tokens,
    cost: {
      usd: result.costUsd,
      unpricedCalls: result.unpricedCalls,
      ...(result.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: result.cacheSavingsUsd }),
    },
  });
}
