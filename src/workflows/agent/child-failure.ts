import { ApplicationFailure, ChildWorkflowFailure, isCancellation } from '@temporalio/workflow';
import { FailureType } from '../../contract/failure-types';

/** What a failed agent child workflow says: whether it was cancelled, and its failure's type and message. */
export function childFailure(error: unknown): { cancelled: boolean; type: string; message: string; cause: unknown } {
  if (isCancellation(error)) return { cancelled: true, type: FailureType.Cancelled, message: 'cancelled', cause: error };
  const cause = error instanceof ChildWorkflowFailure && error.cause ? error.cause : error;
  if (cause instanceof ApplicationFailure) return { cancelled: false, type: cause.type ?? FailureType.Unknown, message: cause.message, cause };
  return { cancelled: false, type: FailureType.Unknown, message: cause instanceof Error ? cause.message : String(cause), cause };
}
