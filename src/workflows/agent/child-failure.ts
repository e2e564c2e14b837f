import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowFailure,
  TemporalFailure,
  isCancellation,
  sleep,
} from '@temporalio/workflow';
import type { TokenUsage } from '../../contract/token-usage';
import type { SpendBefore } from '../../contract/agent-loop';
import { FailureType } from '../../contract/failure-types';

/** What a failed agent child workflow says: whether it was cancelled, and its failure's type and message. */
export function childFailure(error: unknown): { cancelled: boolean; type: string; message: string; cause: unknown } {
  if (isCancellation(error))
    return { cancelled: true, type: FailureType.Cancelled, message: 'cancelled', cause: error };
  // Through the child's failure and any activity or child failure it failed with (an agent whose place could not be
  // read fails with its activity's failure): the type is the innermost application failure's.
  let cause = error;
  while ((cause instanceof ChildWorkflowFailure || cause instanceof ActivityFailure) && cause.cause)
    cause = cause.cause;
  if (cause instanceof ApplicationFailure)
    return { cancelled: false, type: cause.type ?? FailureType.Unknown, message: cause.message, cause };
  return {
    cancelled: false,
    type: FailureType.Unknown,
    message: cause instanceof Error ? cause.message : String(cause),
    cause,
  };
}

/**
 * What an agent had spent when it failed or stopped on a budget. It travels in the failure's first detail (`spend`,
 * beside `attempt`), so the run, or the parent agent, adds to its totals the model steps it paid for though the agent
 * never answered.
 */
export interface FailureSpend {
  usage: TokenUsage;
  costUsd: number;
  /** Some of its steps were of a model without a price. */
  unpriced?: boolean;
  /** What of it the agent spent in a batch's earlier runs (AgentState.before). */
  before?: SpendBefore;
}

/**
 * An agent's failure as its caller will read it: an ApplicationFailure of the same type and message (an activity's
 * failure unwrapped, as `failed()` in task-outcome.ts reads it) whose details carry its attempt and its spend. A
 * cancellation, and anything that is not a Temporal failure (a bug, which must fail the workflow task and be retried,
 * not end the agent), is returned as it is.
 */
export function failureWithSpend(
  error: unknown,
  described: { type: string; message: string; attempts: number },
  spend: FailureSpend,
): unknown {
  if (!(error instanceof TemporalFailure) || isCancellation(error)) return error;
  return ApplicationFailure.create({
    type: described.type,
    message: described.message,
    nonRetryable: true,
    details: [{ attempt: described.attempts, spend }],
    cause: error instanceof ApplicationFailure ? error.cause : error,
  });
}

/** The spend a failed agent reported on its failure (see failureWithSpend), through the activity or child failure around it. */
export function spendOfFailure(error: unknown): FailureSpend | undefined {
  let cause = error;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const detail = cause.details?.[0];
  if (typeof detail !== 'object' || detail === null || !('spend' in detail)) return undefined;
  const spend = (detail as { spend?: Partial<FailureSpend> }).spend;
  if (typeof spend?.usage?.totalTokens !== 'number' || typeof spend.costUsd !== 'number') return undefined;
  return {
    usage: spend.usage,
    costUsd: spend.costUsd,
    ...(spend.unpriced ? { unpriced: true } : {}),
    ...(spend.before ? { before: spend.before } : {}),
  };
}

/** Waits for an agent of the same id still ending (a batch resumed right after it was terminated): about a minute. */
const START_TRIES = 30;
const START_RETRY_MS = 2000;

/**
 * Starts the agent, waiting while one of the same id still runs: a batch terminated and resumed at once finds its old
 * agents still cancelling (they save their places as they go), and must not take their places from under them.
 */
export async function startOnceFree<T>(start: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    try {
      return await start();
    } catch (error) {
      const running = error instanceof Error && error.name === 'WorkflowExecutionAlreadyStartedError';
      if (!running || tries >= START_TRIES) throw error;
      await sleep(START_RETRY_MS);
    }
  }
}
