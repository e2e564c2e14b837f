/**
 * The baseline's workflows: what a Temporal engineer writes in an afternoon with the SDK's own idioms, no helper
 * library. Only `import type` from the activities, as the sandbox wants.
 */
import { condition, continueAsNew, executeChild, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type {
  JournaledAgentActivities,
  PlainActivities,
  PlainAgentActivities,
  PlainMessage,
  PlainTask,
} from './activities';

const { callModel } = proxyActivities<PlainActivities>({
  startToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 },
});

/** Every task at once; results in input order. */
export async function plainFanOut(tasks: PlainTask[]): Promise<string[]> {
  return Promise.all(tasks.map((task) => callModel(task)));
}

export interface PlainBatchInput {
  count: number;
  concurrency: number;
  /** Carried across continue-as-new. */
  next?: number;
  succeeded?: number;
  failed?: number;
}

export interface PlainBatchResult {
  succeeded: number;
  failed: number;
}

/**
 * `count` items through a sliding window of `concurrency` activities, one activity per item. Results are not kept:
 * history grows with every item, so the run continues-as-new when the server suggests it, after draining the window
 * (continue-as-new cannot carry in-flight activities).
 */
export async function plainBatch(input: PlainBatchInput): Promise<PlainBatchResult> {
  let next = input.next ?? 0;
  let succeeded = input.succeeded ?? 0;
  let failed = input.failed ?? 0;
  let inFlight = 0;
  while (next < input.count && !workflowInfo().continueAsNewSuggested) {
    await condition(() => inFlight < input.concurrency);
    const index = next;
    next += 1;
    inFlight += 1;
    void callModel({ id: `item-${index}`, prompt: `batch item ${index}` }).then(
      () => {
        succeeded += 1;
        inFlight -= 1;
      },
      () => {
        failed += 1;
        inFlight -= 1;
      },
    );
  }
  await condition(() => inFlight === 0);
  if (next < input.count) return continueAsNew<typeof plainBatch>({ ...input, next, succeeded, failed });
  return { succeeded, failed };
}

const { invokeModel, runTool } = proxyActivities<PlainAgentActivities>({
  startToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 },
});

export interface PlainAgentResult {
  steps: number;
  toolCalls: number;
  answer: string;
}

/**
 * An agent loop on the plain SDK: the transcript in workflow state, each model call an activity given the whole
 * transcript, the tool calls it asks for run as activities side by side, until the model answers.
 */
export async function plainAgent(input: { prompt: string; maxSteps: number }): Promise<PlainAgentResult> {
  const messages: PlainMessage[] = [{ role: 'user', content: input.prompt }];
  let toolCalls = 0;
  for (let step = 1; step <= input.maxSteps; step += 1) {
    const reply = await invokeModel(messages);
    messages.push(reply);
    if (!reply.tool_calls?.length) return { steps: step, toolCalls, answer: reply.content ?? '' };
    const results = await Promise.all(reply.tool_calls.map((call) => runTool(call.function)));
    toolCalls += results.length;
    reply.tool_calls.forEach((call, index) =>
      messages.push({ role: 'tool', tool_call_id: call.id, content: results[index] }),
    );
  }
  throw new Error(`no answer after ${input.maxSteps} steps`);
}

/** Every agent at once as a child workflow, as a plain project fans agents out; results in input order. */
export async function plainAgents(input: { prompts: string[]; maxSteps: number }): Promise<PlainAgentResult[]> {
  const parent = workflowInfo().workflowId;
  return Promise.all(
    input.prompts.map((prompt, index) =>
      executeChild(plainAgent, {
        workflowId: `${parent}-agent-${index}`,
        args: [{ prompt, maxSteps: input.maxSteps }],
      }),
    ),
  );
}

const { journaledAgent } = proxyActivities<JournaledAgentActivities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 },
});

/**
 * The design probe (createJournaledAgentActivities): every agent at once, each its whole loop in one journaled activity
 * of this one workflow; results in input order.
 */
export async function journaledAgents(input: { prompts: string[]; maxSteps: number }): Promise<PlainAgentResult[]> {
  return Promise.all(input.prompts.map((prompt) => journaledAgent({ prompt, maxSteps: input.maxSteps })));
}
