import {
  ApplicationFailure,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  executeChild,
} from '@temporalio/workflow';
import type { AgentCallInput, AgentCallResult } from '../../contract/agent-call';
import type { AgentResult, AgentTask } from '../../contract/agent-task';
import { FailureType } from '../../contract/failure-types';
import type { ResolvedRunOptions } from '../../contract/run-option-defaults';
import type { agent } from './agent';
import { childFailure } from './child-failure';
import type { AgentOutcome } from '../../contract/agent-loop';

/**
 * The child workflow id of a run's agent task: derived from the run's, so a retry or replay finds the same child. A `/`
 * of the task id is written `~` (which ids cannot hold): sub-agents are `<agent>/sub-…`, so task `lead/sub-1-1-1`
 * would otherwise get the id of task `lead`'s first sub-agent.
 */
export function agentWorkflowId(parentWorkflowId: string, taskId: string): string {
  return `${parentWorkflowId}/agent:${taskId.replaceAll('/', '~')}`;
}

/**
 * Runs a task that has tools (or an output schema) as an `agent` child workflow, in place of the one `callAgent`
 * activity of a plain task, and reports it as that activity would: an agent that stops on a budget fails
 * BudgetExhausted (its transcript kept, named in the message), a failed one fails with its own type. Cancelling the
 * caller's scope cancels the child and waits for it to stop.
 */
export async function runAgentChild(
  workflowId: string,
  task: AgentTask,
  options: ResolvedRunOptions,
  input: Omit<AgentCallInput, 'task'>,
  sharedBudget: { tokens?: number; costUsd?: number },
): Promise<AgentCallResult> {
  const startedAt = Date.now();
  let outcome: AgentOutcome;
  try {
    outcome = await executeChild<typeof agent>('agent', {
      workflowId,
      args: [
        {
          task,
          // Every caller's task passed its run's input validation (fanOut, dag, fanOutFanIn).
          taskValidated: true,
          options: {
            retry: options.retry,
            agentTimeoutMs: options.agentTimeoutMs,
            ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeoutMs: options.heartbeatTimeoutMs }),
          },
          inlineOutputBytes: input.inlineOutputBytes,
          ...(input.storeOutput ? { storeOutput: true } : {}),
          ...(input.dependencies ? { dependencies: input.dependencies } : {}),
          ...(input.synthesis ? { synthesis: input.synthesis } : {}),
          sharedBudget,
        },
      ],
      cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      staticSummary: `agent ${task.name ?? task.id}`,
    });
  } catch (error) {
    const failure = childFailure(error);
    throw failure.cancelled ? error : failure.cause;
  }
  if (outcome.status === 'stopped') {
    throw ApplicationFailure.create({
      type: FailureType.BudgetExhausted,
      message: outcome.message ?? `agent "${task.id}" stopped on a budget`,
      nonRetryable: true,
      details: [
        {
          attempt: 1,
          steps: outcome.steps,
          transcriptRef: outcome.transcript,
          spend: { usage: outcome.usage, costUsd: outcome.costUsd, ...(outcome.unpriced ? { unpriced: true } : {}) },
        },
      ],
    });
  }
  return {
    ...(outcome.output === undefined ? {} : { output: outcome.output }),
    ...(outcome.outputRef === undefined ? {} : { outputRef: outcome.outputRef }),
    finishReason: outcome.finishReason,
    model: outcome.model ?? task.model ?? '',
    usage: outcome.usage,
    attempt: 1,
    durationMs: Date.now() - startedAt,
    ...(outcome.unpriced
      ? { unpriced: true }
      : {
          costUsd: outcome.costUsd,
          ...(outcome.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: outcome.cacheSavingsUsd }),
        }),
    steps: outcome.steps,
    ...(outcome.transcript === undefined ? {} : { transcriptRef: outcome.transcript }),
  };
}

/** The agent's steps and transcript on its result (the plain task's mapping does not know them). */
export function withAgentFields(result: AgentResult, call: AgentCallResult): AgentResult {
  if (call.steps === undefined) return result;
  return {
    ...result,
    steps: call.steps,
    ...(call.transcriptRef === undefined ? {} : { transcriptRef: call.transcriptRef }),
  };
}
