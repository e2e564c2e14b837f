import type { PartCollected } from '../../contract/provider-batch';
import { addCacheSavings, addTokens, roundUsd, type RunCost, type TokenCounts } from '../../contract/metrics';
import type { BatchPart } from '../../contract/provider-batch';
import type { ProviderBatchInfo, ProviderBatchProgress, ProviderBatchResult } from './types';

/** A part's state while the route runs (what a hand-over carries of it: CarriedPart). */
export interface PartState {
  part: BatchPart;
  /** 0 for the parts planned from the source; n for the parts of the n-th round of handed-back items. */
  round: number;
  attempt: number;
  id?: string;
  submittedAt?: number;
  info?: ProviderBatchInfo;
  collected?: PartCollected;
  /** When its results were collected (workflow time). */
  endedAt?: number;
  /** Its handed-back items went into a later round's parts: they are not in the route's retry file. */
  resubmitted?: boolean;
  /** Its provider batch was cancelled at the deadline (and is still ending). */
  deadlineCancelled?: boolean;
  /** The wait before its next poll, carried across a hand-over. */
  pollWaitMs?: number;
}

/** Tokens and cost (at the batch price) of collected parts: the route's progress and its result count them alike. */
export function usageOf(parts: PartCollected[]): Pick<ProviderBatchResult, 'tokens' | 'cost'> {
  const tokens: TokenCounts = { prompt: 0, completion: 0, total: 0 };
  const cost: RunCost = { usd: 0, unpricedCalls: 0 };
  for (const part of parts) {
    addTokens(tokens, part.tokens);
    cost.usd += part.cost.usd;
    cost.unpricedCalls += part.cost.unpricedCalls;
    addCacheSavings(cost, part.cost.cacheSavingsUsd);
  }
  return { tokens, cost: { ...cost, usd: roundUsd(cost.usd) } };
}

/** The route's progress: its parts so far, what the collected ones answered, and every provider batch it made. */
export function progressOf(states: PartState[], history: ProviderBatchInfo[]): ProviderBatchProgress {
  const done = states.filter((state) => state.collected).map((state) => state.collected as PartCollected);
  return {
    parts: states.length,
    collected: done.length,
    succeeded: done.reduce((sum, part) => sum + part.succeeded, 0),
    failed: done.reduce((sum, part) => sum + part.failed, 0),
    retried: states.reduce(
      (sum, state) => sum + (state.collected && !state.resubmitted ? state.collected.retried : 0),
      0,
    ),
    providerBatches: history,
    savingsUsd: roundUsd(done.reduce((sum, part) => sum + part.standardUsd - part.cost.usd, 0)),
    ...usageOf(done),
  };
}
