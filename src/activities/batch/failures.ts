import { ApplicationFailure } from '@temporalio/common';
import { SegmentMissing } from '../../spool';
import { SourceChanged } from '../../spool/task-source';
import { FailureType, isRetryableFailure } from '../../contract/failure-types';
import { invalidInputFailure } from '../../contract/invalid-input-failure';
import { InvalidInputError } from '../../contract/validation';
import { StorageError } from '../../store';

/** Longest error message kept in a result line: a gateway's HTML error page must not fill the sink or a payload. */
export const MAX_ERROR_MESSAGE_CHARS = 1000;

/** The message, cut to MAX_ERROR_MESSAGE_CHARS with its full length said. */
export function clipped(message: string): string {
  return message.length <= MAX_ERROR_MESSAGE_CHARS
    ? message
    : `${message.slice(0, MAX_ERROR_MESSAGE_CHARS)}… (${message.length} characters)`;
}

/** Maps what batch I/O throws to failures with stable types: bad input, changed files and lost results are never retried. */
export async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asFailure(error);
  }
}

/** What batch I/O threw, as the failure Temporal sees; an error of none of these kinds as it is. */
export function asFailure(error: unknown): unknown {
  // A stream's own error (a missing segment) comes back wrapped by the store that was writing it.
  if (error instanceof StorageError && error.cause instanceof SegmentMissing) return asFailure(error.cause);
  if (error instanceof InvalidInputError) return invalidInputFailure(error);
  if (error instanceof SourceChanged)
    return ApplicationFailure.create({ type: FailureType.SourceChanged, message: error.message, nonRetryable: true });
  if (error instanceof SegmentMissing)
    return ApplicationFailure.create({ type: FailureType.ResultsMissing, message: error.message, nonRetryable: true });
  if (error instanceof StorageError) {
    return ApplicationFailure.create({
      type: error.code === 'Unavailable' ? FailureType.StorageUnavailable : FailureType.PayloadUnavailable,
      message: error.message,
      // A missing object or a refused permission is worth a few retries (a store being set up); the policy bounds them.
      nonRetryable: error.code === 'Invalid',
    });
  }
  return error;
}

/** An item's failed call as its result line says it, and whether another attempt may help. */
export function failureOf(error: unknown): { type: string; message: string; retryable: boolean } {
  const failure = error instanceof ApplicationFailure ? error : undefined;
  const type = failure?.type ?? FailureType.Unknown;
  return {
    type,
    message: clipped(error instanceof Error ? error.message : String(error)),
    retryable: isRetryableFailure(type, failure?.nonRetryable ?? false),
  };
}
