import path from 'node:path';
import type { WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { AgentTask } from '../../src/contract/agent-task';
import type { SimulatedRequest, Simulator } from '../../src/sim/simulator';
import type { Tool } from '../../src/tools/define-tool';
import type { AgentInput } from '../../src/contract/agent-loop';
import { decodePayload } from './history';
import { runsNatively } from './native-anthropic';
import { useTestStack, type TestServersOptions } from './suite-stack';
import type { TestWorker } from './test-stack';

/**
 * The model calls (steps) the simulator saw for one agent task: requests sent with its task id. When the suite runs
 * through Anthropic natively (`./native-anthropic`), every one of them must have come to `/v1/messages`.
 */
export function modelCalls(simulator: Simulator, taskId: string): SimulatedRequest[] {
  const calls = simulator.log().filter((request) => request.taskId === taskId);
  if (runsNatively()) expect(calls.filter((call) => call.api !== 'messages')).toEqual([]);
  return calls;
}

/** The tool calls the simulator saw (the test tools report each call there as `tool:<name>:<call id>`). */
export function toolCalls(simulator: Simulator, name?: string): SimulatedRequest[] {
  return simulator.log().filter((request) => request.taskId.startsWith(name === undefined ? 'tool:' : `tool:${name}:`));
}

/** Every activity a workflow scheduled, in order: type and summary. */
export async function scheduledActivities(
  workflow: WorkflowHandle,
): Promise<{ type: string; summary: unknown; id: string }[]> {
  const history = await workflow.fetchHistory();
  return (history.events ?? []).flatMap((event) => {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (!scheduled) return [];
    return [
      {
        type: scheduled.activityType?.name ?? '',
        id: scheduled.activityId ?? '',
        summary: decodePayload(event.userMetadata?.summary),
      },
    ];
  });
}

/** The inputs of every activity a workflow scheduled, decoded to text and joined: what a test searches for what steps carry. */
export async function activityInputText(workflow: WorkflowHandle): Promise<string> {
  const history = await workflow.fetchHistory();
  return (history.events ?? [])
    .flatMap((event) => event.activityTaskScheduledEventAttributes?.input?.payloads ?? [])
    .map((payload) => JSON.stringify(decodePayload(payload)))
    .join('\n');
}

/** The shared test tools (`agent-tools.js`), as an in-process worker registers them. */
export function sharedTestTools(): Tool[] {
  return Object.values(require(path.join(__dirname, 'agent-tools.js')) as Record<string, Tool>);
}

/**
 * `useTestStack` for agents: a simulator answering in 20 ms, and a worker with the shared test tools (and `tools`).
 * The tools report each call to this simulator, so a test counts tool calls where it counts model calls.
 */
export function useAgentStack(options: { server?: TestServersOptions['server']; tools?: Tool[] } = {}) {
  return useTestStack({
    simulator: { latency: { minMs: 20, maxMs: 20 } },
    server: options.server,
    worker: (servers) => {
      // agent-tools.js reads it at each call.
      process.env.FANOUT_TEST_SIM_URL = servers.simulator.baseUrl;
      return { tools: [...sharedTestTools(), ...(options.tools ?? [])] };
    },
  });
}

/** Starts the `agent` workflow on its own (not as a run's child) on the stack's queue, its output inline up to 16 KB. */
export function startAgent(
  stack: TestWorker,
  workflowId: string,
  task: AgentTask,
  input: Omit<Partial<AgentInput>, 'task'> = {},
): Promise<WorkflowHandleWithFirstExecutionRunId> {
  const args: [AgentInput] = [{ task, inlineOutputBytes: 16_384, ...input }];
  return stack.client.client.workflow.start('agent', { taskQueue: stack.taskQueue, workflowId, args });
}
