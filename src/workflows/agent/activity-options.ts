import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { AgentLoopActivities } from '../../contract/agent-loop';
import type { BatchAgentItemActivities } from '../../contract/batch-activities';
import { NON_RETRYABLE_FAILURE_TYPES } from '../../contract/failure-types';
import { RATE_LIMIT_WAIT_MS, type ResolvedRunOptions } from '../../contract/run-option-defaults';

/** A tool call may run this long before Temporal times its attempt out (tools abort themselves at their own timeout). */
const TOOL_CALL_TIMEOUT_MS = 15 * 60_000;

/** The agent's activities: `agentStep` (one model call) and `toolCall` (one tool call), under the run's options. */
export function agentLoopActivities(options: ResolvedRunOptions) {
  const retry = {
    maximumAttempts: options.retry.maximumAttempts,
    initialInterval: options.retry.initialIntervalMs,
    backoffCoefficient: options.retry.backoffCoefficient,
    maximumInterval: options.retry.maximumIntervalMs,
  };
  // Both wait for their activity to stop when cancelled: a cancelled agent leaves no model or tool call running.
  const { agentStep } = proxyActivities<AgentLoopActivities>({
    startToCloseTimeout: options.agentTimeoutMs + RATE_LIMIT_WAIT_MS,
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeoutMs }),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
  const { toolCall } = proxyActivities<AgentLoopActivities>({
    startToCloseTimeout: TOOL_CALL_TIMEOUT_MS,
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeoutMs }),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // A tool's own failure is its result; what is retried here is the store, a lost worker, a timeout.
    retry: { ...retry, maximumAttempts: Math.min(retry.maximumAttempts, 3) },
  });
  return { agentStep, toolCall };
}

export type AgentActivities = ReturnType<typeof agentLoopActivities>;

/** An agent's place in a batch (loadAgentPlace, saveAgentPlace): storage calls, a failing store tried again for a while. */
export function placeActivities() {
  return proxyActivities<BatchAgentItemActivities>({
    startToCloseTimeout: '2 minutes',
    retry: {
      initialInterval: '1 second',
      maximumInterval: '15 seconds',
      maximumAttempts: 10,
      nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURE_TYPES],
    },
  });
}
