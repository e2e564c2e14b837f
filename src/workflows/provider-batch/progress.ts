import type { PartCollected } from '../../contract/provider-batch';
import { roundUsd } from '../../contract/metrics';
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
  return {
    tokens: parts.reduce(
      (sum, part) => ({
        prompt: sum.prompt + part.tokens.prompt,
        completion: sum.completion + part.tokens.completion,
        total: sum.total + part.tokens.total,
      }),
      { prompt: 0, completion: 0, total: 0 },
    ),
    cost: {
      usd: roundUsd(parts.reduce((sum, part) => sum + part.cost.usd, 0)),
      unpricedCalls: parts.reduce((sum, part) => sum + part.cost.unpricedCalls, 0),
    },
  };
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
