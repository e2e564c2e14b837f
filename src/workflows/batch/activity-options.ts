import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { BatchActivities, BatchAgentItemActivities } from '../../contract/batch-activities';
import { NON_RETRYABLE_FAILURE_TYPES } from '../../contract/failure-types';
import type { ResolvedRunOptions } from '../../contract/run-option-defaults';

/** A lane lost to a worker is retried within this (its heartbeats come every 15 s once it has run that long). */
const LANE_HEARTBEAT_TIMEOUT_MS = 45_000;

/** The batch's storage activities (scanning, pages, sealing, the sink), a failing store retried `storageAttempts` times. */
export function storageActivities(storageAttempts: number) {
  return proxyActivities<BatchActivities & BatchAgentItemActivities>({
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: '10 seconds',
    retry: {
      initialInterval: '1 second',
      maximumInterval: '15 seconds',
      maximumAttempts: storageAttempts,
      nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURE_TYPES],
    },
  });
}

/**
 * The lanes' activities, by the attempts a lane has and the items it runs: `parallel` calls at once, each within
 * `itemAttemptMs`.
 */
export function laneActivities(runOptions: ResolvedRunOptions, parallel: number, itemAttemptMs: number) {
  const heartbeatTimeout = Math.min(
    LANE_HEARTBEAT_TIMEOUT_MS,
    runOptions.heartbeatTimeoutMs ?? LANE_HEARTBEAT_TIMEOUT_MS,
  );
  return (maximumAttempts: number, items: number) =>
    proxyActivities<BatchActivities>({
      startToCloseTimeout: Math.ceil(items / parallel) * itemAttemptMs,
      heartbeatTimeout,
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: {
        maximumAttempts,
        initialInterval: runOptions.retry.initialIntervalMs,
        backoffCoefficient: runOptions.retry.backoffCoefficient,
        maximumInterval: runOptions.retry.maximumIntervalMs,
        nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURE_TYPES],
      },
    });
}
