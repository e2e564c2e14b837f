import { ActivityFailure, ApplicationFailure, TimeoutFailure, isCancellation } from '@temporalio/workflow';
import type { AgentCallResult } from '../contract/agent-call';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import { FailureType } from '../contract/failure-types';

/** Reads the attempt number an agent activity attached to its failure, if it did. */
function attemptFromDetails(failure: ApplicationFailure): number | undefined {
  const detail = failure.details?.[0];
  if (typeof detail === 'object' && detail !== null && 'attempt' in detail && typeof detail.attempt === 'number') {
    return detail.attempt;
  }
  return undefined;
}

export function succeeded(task: AgentTask, call: AgentCallResult, durationMs: number): AgentResult {
  return {
    id: task.id,
    name: task.name ?? task.id,
    status: 'ok',
    ...(call.output === undefined ? {} : { output: call.output }),
    ...(call.outputRef === undefined ? {} : { outputRef: call.outputRef }),
    attempts: call.attempt,
    durationMs,
    usage: call.usage,
    ...(call.costUsd === undefined ? {} : { costUsd: call.costUsd }),
    ...(call.unpriced ? { unpriced: true } : {}),
    ...(call.cached ? { cached: true } : {}),
    ...(call.savedUsd === undefined ? {} : { savedUsd: call.savedUsd }),
    ...(call.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: call.cacheSavingsUsd }),
    model: call.model,
    finishReason: call.finishReason,
  };
}

/** The result of a task whose activity threw: cancelled or failed, with the error's stable type. */
export function failed(task: AgentTask, error: unknown, durationMs: number, maximumAttempts: number): AgentResult {
  const base = { id: task.id, name: task.name ?? task.id, durationMs };
  if (isCancellation(error)) {
    return {
      ...base,
      status: 'cancelled',
      attempts: 1,
      error: { type: FailureType.Cancelled, message: `agent "${task.id}" was cancelled while running` },
    };
  }
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure) {
    return {
      ...base,
      status: 'failed',
      attempts: attemptFromDetails(cause) ?? 1,
      error: { type: cause.type ?? FailureType.Unknown, message: cause.message },
    };
  }
  if (cause instanceof TimeoutFailure) {
    const exhausted = error instanceof ActivityFailure && error.retryState === 'MAXIMUM_ATTEMPTS_REACHED';
    return {
      ...base,
      status: 'failed',
      attempts: exhausted ? maximumAttempts : 1,
      error: {
        type: FailureType.ActivityTimeout,
        message: `agent "${task.id}" timed out (${cause.timeoutType ?? 'timeout'})`,
      },
    };
  }
  const message = cause instanceof Error ? cause.message : String(cause);
  return { ...base, status: 'failed', attempts: 1, error: { type: FailureType.Unknown, message } };
}

/** The result of a task that never ran: no attempt, no time. */
function unrun(
  task: Pick<AgentTask, 'id' | 'name'>,
  status: 'cancelled' | 'skipped',
  error: { type: string; message: string },
): AgentResult {
  return { id: task.id, name: task.name ?? task.id, status, attempts: 0, durationMs: 0, error };
}

/** The result of a task the run never started because it stopped first. */
export function notStarted(task: AgentTask, why: string): AgentResult {
  return unrun(task, 'cancelled', {
    type: FailureType.NotStarted,
    message: `agent "${task.id}" was not started: ${why}`,
  });
}

/** The result of a task that was deliberately not run (token budget spent, a dependency failed). */
export function skipped(task: Pick<AgentTask, 'id' | 'name'>, type: string, message: string): AgentResult {
  return unrun(task, 'skipped', { type, message });
}
