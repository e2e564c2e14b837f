import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { ModelCallActivities } from '../contract/agent-call';
import { RATE_LIMIT_WAIT_MS, type ResolvedRunOptions } from '../contract/run-option-defaults';

/**
 * The model-call activity (`callAgent`) with a run's options applied. Cancellation waits for the activity to stop (the SDK's
 * default says so too, but it is set here on purpose: a cancelled run must leave nothing running).
 *
 * An attempt may run for its request's deadline plus the rate-limit wait budget: 429s are waited out inside the
 * attempt and use no attempt. No heartbeat timeout unless the run asks for one: workers learn of cancellation and of
 * lost peers without billed heartbeats (src/watchdog/).
 *
 * Eager dispatch (the calls handed back to the worker that scheduled them, with its workflow task's completion) suits a
 * fan-out's or DAG's burst of calls; a batch turns it off, or every call of a long batch would run on the one worker
 * that runs its workflow.
 */
export function modelCallActivity(
  options: ResolvedRunOptions,
  { allowEagerDispatch = true }: { allowEagerDispatch?: boolean } = {},
) {
  return proxyActivities<ModelCallActivities>({
    allowEagerDispatch,
    startToCloseTimeout: options.agentTimeoutMs + RATE_LIMIT_WAIT_MS,
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeoutMs }),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: options.retry.maximumAttempts,
      initialInterval: options.retry.initialIntervalMs,
      backoffCoefficient: options.retry.backoffCoefficient,
      maximumInterval: options.retry.maximumIntervalMs,
    },
  });
}
