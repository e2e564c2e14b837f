import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from './failure-types';
import type { InvalidInputError } from './validation';

/**
 * The failure of input that can never succeed: non-retryable, its issues as details. Workflows and activities throw
 * the same one, so bad input fails at once wherever it is found, instead of being retried.
 */
export function invalidInputFailure(error: InvalidInputError): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.InvalidInput,
    message: error.message,
    nonRetryable: true,
    details: [error.issues],
  });
}
