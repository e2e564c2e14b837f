import type { Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { CallStatus, TokenCounts } from './agent-metrics';

/** What an agent activity's input says about the call before it runs. */
export interface CallRequest {
  /** The model the task asks for; undefined when the input does not say (a batch item reads its task later). */
  model?: string;
}

/** What the metrics take from an agent activity's result. */
export interface CallAnswer {
  model?: string;
  usage?: TokenCounts;
  /** From the worker's price table; absent for a model without a price (`unpriced`). */
  costUsd?: number;
  cacheSavingsUsd?: number;
  unpriced?: boolean;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function stringField(record: Record<string, unknown>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The model named by a `callAgent` input: `{ task: { model } }`, or the bare task that histories from before the
 * payload store passed. A `runBatchItem` input holds only the item's offset, so it names none.
 */
export function requestOf(input: unknown): CallRequest {
  if (!isRecord(input)) return {};
  const task = isRecord(input.task) ? input.task : 'prompt' in input ? input : undefined;
  const model = task === undefined ? undefined : stringField(task, 'model');
  return model === undefined ? {} : { model };
}

/**
 * Model, token usage and cost of a result: `callAgent` returns `{ model, usage, costUsd | unpriced }`; `runBatchItem`
 * returns the same less the model, which is inside its result line when the line travels inline.
 */
export function answerOf(result: unknown): CallAnswer {
  if (!isRecord(result)) return {};
  const model = stringField(result, 'model') ?? (isRecord(result.line) ? stringField(result.line, 'model') : undefined);
  const usage = isRecord(result.usage) ? result.usage : undefined;
  const count = (key: string) => {
    const value = usage?.[key];
    return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
  };
  const costUsd =
    typeof result.costUsd === 'number' && Number.isFinite(result.costUsd) && result.costUsd >= 0
      ? result.costUsd
      : undefined;
  return {
    ...(model === undefined ? {} : { model }),
    ...(usage === undefined
      ? {}
      : {
          usage: {
            promptTokens: count('promptTokens'),
            completionTokens: count('completionTokens'),
            ...(count('cachedPromptTokens') > 0 ? { cachedPromptTokens: count('cachedPromptTokens') } : {}),
          },
        }),
    ...(costUsd === undefined ? {} : { costUsd }),
    ...(typeof result.cacheSavingsUsd === 'number' && Number.isFinite(result.cacheSavingsUsd)
      ? { cacheSavingsUsd: result.cacheSavingsUsd }
      : {}),
    ...(result.unpriced === true ? { unpriced: true } : {}),
  };
}

/**
 * How a failed attempt ends, from the error and the attempt's retry policy: `failed` when Temporal will not try
 * again (a non-retryable failure, a type the policy lists as non-retryable, or the last allowed attempt), else
 * `retrying`. The policy's schedule-to-close limit is not visible here, so an attempt it cuts short counts as retrying.
 */
export function failureOf(
  error: unknown,
  info: Pick<Info, 'attempt' | 'retryPolicy'>,
  cancelled: boolean,
): { status: CallStatus; failureType: string } {
  if (cancelled || error instanceof CancelledFailure) return { status: 'cancelled', failureType: 'Cancelled' };
  const failureType =
    error instanceof ApplicationFailure ? (error.type ?? 'Error') : error instanceof Error ? error.name : 'Error';
  const policy = info.retryPolicy;
  const maximumAttempts = policy?.maximumAttempts ?? 0;
  const final =
    (error instanceof ApplicationFailure && error.nonRetryable) ||
    (policy?.nonRetryableErrorTypes ?? []).includes(failureType) ||
    (maximumAttempts > 0 && info.attempt >= maximumAttempts);
  return { status: final ? 'failed' : 'retrying', failureType };
}
