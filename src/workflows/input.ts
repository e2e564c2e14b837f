import { invalidInputFailure } from '../contract/invalid-input-failure';
import { InvalidInputError } from '../contract/validation';

/**
 * Runs a validator and turns its InvalidInputError into a non-retryable failure of the workflow, so bad
 * input from any client fails the run at once instead of retrying the workflow task forever.
 */
export function validateOrFail<T>(validate: (input: unknown) => T, input: unknown): T {
  try {
    return validate(input);
  } catch (error) {
    if (error instanceof InvalidInputError) throw invalidInputFailure(error);
    throw error;
  }
}
