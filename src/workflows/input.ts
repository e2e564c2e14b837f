import { ApplicationFailure } from '@temporalio/workflow';
import { FailureType } from '../contract/failure-types';
import { InvalidInputError } from '../contract/validation';

/**
 * Runs a validator and turns its InvalidInputError into a non-retryable failure of the workflow, so bad
 * input from any client fails the run at once instead of retrying the workflow task forever.
 */
export function validateOrFail<T>(validate: (input: unknown) => T, input: unknown): T {
  try {
    return validate(input);
  } catch (error) {
    if (error instanceof InvalidInputError) {
      throw ApplicationFailure.create({
        type: FailureType.InvalidInput,
        message: error.message,
        nonRetryable: true,
        details: [error.issues],
      });
    }
    throw error;
  }
}
