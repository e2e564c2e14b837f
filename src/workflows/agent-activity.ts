import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedRunOptions } from '../contract/run-options';

/**
 * The agent activity with a run's options applied. Cancellation waits for the activity to stop (the SDK's
 * default says so too, but it is set here on purpose: a cancelled run must leave nothing running).
 */
export function agentActivities(options: ResolvedRunOptions) {
  return proxyActivities<Activities>({
    startToCloseTimeout: options.agentTimeoutMs,
    heartbeatTimeout: options.heartbeatTimeoutMs,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: options.retry.maximumAttempts,
      initialInterval: options.retry.initialIntervalMs,
      backoffCoefficient: options.retry.backoffCoefficient,
      maximumInterval: options.retry.maximumIntervalMs,
    },
  });
}
