import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AgentCallInput, AgentCallResult, ModelCallActivities } from '../contract/agent-call';
import type { AgentTask } from '../contract/agent-task';
import { segmentName } from '../contract/location';
import type { PayloadRef } from '../contract/payload-ref';
import { FailureType } from '../contract/failure-types';
import type { PricingDependencies } from '../pricing';
import { withCallCost } from '../answer-cache/call-cost';
import { StorageError, type PayloadStore } from '../store';
import type { ChatDependencies } from '../llm/send-chat';
import { sendTaskChat } from '../llm/send-task-chat';
import { promptWithDependencies, synthesisPrompt, type ResolvedOutput } from '../llm/prompt-context';

export interface StoreDependencies {
  /** The claim-check store for large prompts, outputs and context. */
  store: PayloadStore;
}

/** The run a payload belongs to: its objects live under `runs/<workflow id>/` so a run's data can be found and removed. */
export function runPrefix(): string {
  const workflowId = Context.current().info.workflowExecution?.workflowId ?? 'no-workflow';
  return `runs/${segmentName(workflowId)}`;
}

/**
 * Storage failures are retried by Temporal (the activity's bounded policy): a missing payload too (PayloadUnavailable,
 * as for a lane's item; a store may still be filling), except a reference that can never be valid.
 */
export function storageFailure(error: unknown, what: string): never {
  if (error instanceof StorageError) {
    throw ApplicationFailure.create({
      type:
        error.code === 'NotFound' || error.code === 'Invalid'
          ? FailureType.PayloadUnavailable
          : FailureType.StorageUnavailable,
      message: `${what}: ${error.message}${error.code === 'NotFound' ? ' (is FANOUT_STORE the same store for every worker and client?)' : ''}`,
      nonRetryable: error.code === 'Invalid',
    });
  }
  throw error;
}

async function readRef(store: PayloadStore, ref: PayloadRef, what: string): Promise<string> {
  try {
    return await store.get(ref);
  } catch (error) {
    return storageFailure(error, what);
  }
}

/** The task with its stored content and context read back: the prompt as the model will see it. */
export async function materialise(input: AgentCallInput, store: PayloadStore): Promise<AgentTask> {
  let task = input.task;
  if (task.contentRef) {
    const content = JSON.parse(await readRef(store, task.contentRef, `prompt of task "${task.id}"`)) as {
      system?: string;
      prompt: string;
    };
    const { contentRef: _ref, ...rest } = task;
    task = { ...rest, prompt: content.prompt, ...(content.system === undefined ? {} : { system: content.system }) };
  }
  if (input.dependencies && input.dependencies.length > 0) {
    const resolved: ResolvedOutput[] = await Promise.all(
      input.dependencies.map(async (dependency) => ({
        id: dependency.id,
        name: dependency.name,
        output: await readRef(store, dependency.outputRef, `output of dependency "${dependency.id}"`),
      })),
    );
    task = { ...task, prompt: promptWithDependencies(task.prompt, resolved) };
  }
  if (input.synthesis) {
    const sections: ResolvedOutput[] = await Promise.all(
      input.synthesis.map(async (section) => ({
        name: section.name,
        status: section.status,
        note: section.note,
        output: section.outputRef
          ? await readRef(store, section.outputRef, `output of "${section.name}"`)
          : section.output,
      })),
    );
    task = { ...task, prompt: synthesisPrompt(task.prompt, sections) };
  }
  return task;
}

/**
 * Runs one agent: resolves stored prompt and context, makes the chat completion (heartbeating, aborted on
 * cancellation), and puts a large answer in the store so the result in history is a reference.
 */
export function createModelCallActivities(
  dependencies: ChatDependencies & StoreDependencies & PricingDependencies,
): ModelCallActivities {
  return { callAgent };

  async function callAgent(request: AgentCallInput | AgentTask): Promise<AgentCallResult> {
    // Histories from before the payload store passed the task itself.
    const input: AgentCallInput =
      'task' in request ? request : { task: request, inlineOutputBytes: Number.MAX_SAFE_INTEGER };
    const task = await materialise(input, dependencies.store);
    // Priced here, on the worker: workflows cannot read the price table (FANOUT_PRICES, FANOUT_PRICES_FILE).
    const call = withCallCost(await sendTaskChat(task, dependencies), dependencies.prices);
    const output = call.output ?? '';
    const large = Buffer.byteLength(output, 'utf8') > input.inlineOutputBytes;
    if (!large && !input.storeOutput) return call;
    let outputRef: PayloadRef;
    try {
      outputRef = await dependencies.store.put(`${runPrefix()}/outputs/${segmentName(task.id)}`, output);
    } catch (error) {
      return storageFailure(error, `storing the output of task "${task.id}"`);
    }
    const { output: _output, ...rest } = call;
    return large ? { ...rest, outputRef } : { ...call, outputRef };
  }
}
