import { ServiceError, WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import { describeError } from '../src/cli/errors';

describe('the CLI’s one-line errors', () => {
  it('keeps the cause Temporal nests under "Failed to start Workflow"', () => {
    const error = new ServiceError('Failed to start Workflow', {
      cause: new Error('3 INVALID_ARGUMENT: Blob data size exceeds limit.'),
    });
    expect(describeError(error)).toBe('Failed to start Workflow: 3 INVALID_ARGUMENT: Blob data size exceeds limit.');
  });

  it('names the activity failure under a failed workflow, each message once', () => {
    const storage = ApplicationFailure.create({
      type: 'StorageUnavailable',
      message: 's3://b/out.jsonl.parts/x/seg-00000003.jsonl: connect ECONNREFUSED',
    });
    const activity = new ActivityFailure(
      'Activity task failed',
      'flushBatchResults',
      '7',
      RetryState.MAXIMUM_ATTEMPTS_REACHED,
      'worker',
      storage,
    );
    const error = new WorkflowFailedError('Workflow execution failed', activity, RetryState.NON_RETRYABLE_FAILURE);
    const line = describeError(error);
    expect(line).toBe(
      'Workflow execution failed: Activity task failed: s3://b/out.jsonl.parts/x/seg-00000003.jsonl: connect ECONNREFUSED',
    );
    expect(line).not.toContain('\n');
  });
});
