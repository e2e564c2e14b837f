import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import { FailureType, isRetryableFailure } from '../../contract/failure-types';

/** Failures that end the batch itself, not an item: what the lane says can never be fixed by running it again. */
export const FATAL_TYPES: readonly string[] = [
  FailureType.SourceChanged,
  FailureType.ResultsMissing,
  FailureType.InvalidInput,
  FailureType.StorageUnavailable,
  FailureType.PayloadUnavailable,
];

/** An error's message with its causes': a child's failure says only "Child Workflow execution failed" itself. */
export function messageChain(error: unknown): string {
  const parts: string[] = [];
  for (let current: unknown = error; current instanceof Error && parts.length < 4; current = current.cause)
    parts.push(current.message);
  return parts.join(': ') || String(error);
}

/** What an activity's failure says: its type, its message, and whether running it again may help. */
export function failureOf(error: unknown): { type: string; message: string; retryable: boolean } {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure) {
    return {
      type: cause.type ?? FailureType.Unknown,
      message: cause.message,
      retryable: isRetryableFailure(cause.type ?? undefined, cause.nonRetryable ?? false),
    };
  }
  const timeout = cause instanceof Error && cause.name === 'TimeoutFailure';
  return {
    type: timeout ? FailureType.ActivityTimeout : FailureType.Unknown,
    message: cause instanceof Error ? cause.message : String(cause),
    retryable: true,
  };
}
