/**
 * The workflows of bench/agents.ts: the product's `agent`, and `inlineAgent`, the same loop with the transcript passed
 * inline in every step's input and result, the way integrations that copy the conversation into each model call do.
 * The comparison's baseline only; not part of the product.
 */
import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../../src/activities';
import type { AgentTask } from '../../src/contract/agent-task';

export { agent } from '../../src/workflows/agent/agent';

const PLACEHOLDER = { uri: 'inline', bytes: 0, sha256: '0'.repeat(64) };

interface InlineToolCall {
  id: string;
  function: { name: string; arguments: string };
}

export async function inlineAgent(input: {
  task: AgentTask;
  inlineOutputBytes: number;
}): Promise<{ steps: number; output?: string }> {
  const { agentStep, toolCall } = proxyActivities<Activities>({
    startToCloseTimeout: '10 minutes',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { maximumAttempts: 3 },
  });
  const { task } = input;
  let messages: unknown[] = [];
  for (let step = 1; step <= (task.maxSteps ?? 20); step += 1) {
    const result = await agentStep.executeWithOptions({ activityId: `step:${step}`, summary: `step ${step}` }, [
      { task, step, inlineMessages: messages, inlineOutputBytes: input.inlineOutputBytes },
    ]);
    messages = result.inlineMessages ?? [];
    if (result.next !== 'tools')
      return {
        steps: step,
        ...(result.next === 'answer' && result.output !== undefined ? { output: result.output } : {}),
      };
    const asked = (messages[messages.length - 1] as { tool_calls?: InlineToolCall[] }).tool_calls ?? [];
    const results = await Promise.all(
      result.calls.map((call, index) =>
        toolCall.executeWithOptions(
          { activityId: `tool:${step}:${index + 1}`, summary: `step ${step}: ${call.summary}` },
          [
            {
              taskId: task.id,
              step,
              assistant: PLACEHOLDER,
              index,
              inlineCall: { id: call.id, name: call.name, arguments: asked[index].function.arguments },
              inlineResult: true,
            },
          ],
        ),
      ),
    );
    messages = [...messages, ...results.map((done) => done.inlineMessage)];
  }
  return { steps: task.maxSteps ?? 20 };
}
