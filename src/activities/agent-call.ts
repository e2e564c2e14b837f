import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AgentCallResult, AgentTask } from '../contract/agent-task';
import { FailureType } from '../contract/failure-types';
import type { ChatClient } from './llm-client';
import { toAgentFailure } from './provider-errors';

export interface AgentCallDependencies {
  /** The OpenAI-compatible client; created once per worker. */
  llm: ChatClient;
  /** Model used when a task names none. */
  defaultModel: string;
  /** Monotonic-enough clock for durations, ms. */
  clock: () => number;
  /** How often to heartbeat while a request is in flight, ms (the SDK throttles what reaches the server). */
  heartbeatIntervalMs: number;
}

/** Headers that let a simulator or proxy correlate requests with tasks; real providers ignore them. */
function correlationHeaders(task: AgentTask, info: Context['info']): Record<string, string> {
  return {
    'x-fanout-task-id': task.id,
    'x-fanout-attempt': String(info.attempt),
    'x-fanout-workflow-id': info.workflowExecution?.workflowId ?? '',
  };
}

/**
 * One chat completion for a task inside the current activity: heartbeats while in flight, is aborted by the
 * activity's cancellation or its attempt deadline, and maps failures to Temporal failures.
 */
export async function completeTask(task: AgentTask, dependencies: AgentCallDependencies): Promise<AgentCallResult> {
  const context = Context.current();
  const { attempt } = context.info;
  const signal = context.cancellationSignal;
  // Our own deadline at start-to-close, so a hung request is closed and reported as a Timeout by us
  // rather than however the HTTP stack happens to word it.
  const timeoutMs = context.info.startToCloseTimeoutMs;
  const deadline = timeoutMs > 0 ? AbortSignal.timeout(Math.ceil(timeoutMs)) : undefined;
  const heartbeat = setInterval(() => context.heartbeat(), dependencies.heartbeatIntervalMs);
  context.heartbeat();
  const startedAt = dependencies.clock();
  try {
    const completion = await dependencies.llm.chat.completions.create(
      {
        model: task.model ?? dependencies.defaultModel,
        messages: [
          ...(task.system === undefined ? [] : [{ role: 'system' as const, content: task.system }]),
          { role: 'user' as const, content: task.prompt },
        ],
        ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
        ...(task.maxTokens === undefined ? {} : { max_tokens: task.maxTokens }),
      },
      {
        signal: deadline ? AbortSignal.any([signal, deadline]) : signal,
        headers: correlationHeaders(task, context.info),
      },
    );
    const choice = completion?.choices?.[0];
    if (!choice || typeof choice.message !== 'object' || choice.message === null) {
      throw ApplicationFailure.create({
        type: FailureType.MalformedResponse,
        message: `agent "${task.id}" attempt ${attempt}: the response has no choices`,
        details: [{ taskId: task.id, attempt }],
      });
    }
    const usage = completion.usage;
    return {
      output: choice.message.content ?? '',
      finishReason: choice.finish_reason ?? null,
      model: completion.model ?? task.model ?? dependencies.defaultModel,
      usage: usage
        ? {
            promptTokens: usage.prompt_tokens ?? 0,
            completionTokens: usage.completion_tokens ?? 0,
            totalTokens: usage.total_tokens ?? 0,
          }
        : undefined,
      attempt,
      durationMs: Math.round(dependencies.clock() - startedAt),
    };
  } catch (error) {
    // Cancellation must surface as the SDK's CancelledFailure, or the attempt is reported failed, not cancelled.
    if (signal.aborted) throw signal.reason;
    if (deadline?.aborted) {
      throw ApplicationFailure.create({
        type: FailureType.Timeout,
        message: `agent "${task.id}" attempt ${attempt}: no response within ${timeoutMs} ms (agentTimeoutMs)`,
        details: [{ taskId: task.id, attempt }],
      });
    }
    throw toAgentFailure(error, { taskId: task.id, attempt });
  } finally {
    clearInterval(heartbeat);
  }
}
