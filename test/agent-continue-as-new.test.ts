import type { WorkflowHandle } from '@temporalio/client';
import { modelCalls, startAgent, toolCalls, useAgentStack } from './support/agents';
import { uniqueName } from './support/test-stack';

/** Temporal suggests continue-as-new once a run's history holds this many events (4,096 by default). */
const SUGGEST_AT_EVENTS = 40;

const suite = useAgentStack({
  server: { dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': SUGGEST_AT_EVENTS } },
});

/** Every run of a workflow's continue-as-new chain, first to last: each run's history length and how it closed. */
async function runsOf(handle: WorkflowHandle, firstRunId: string): Promise<{ events: number; continued: boolean }[]> {
  const runs: { events: number; continued: boolean }[] = [];
  let runId: string | undefined = firstRunId;
  while (runId !== undefined) {
    const history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>> = await suite.stack.client.client.workflow
      .getHandle(handle.workflowId, runId)
      .fetchHistory();
    const events = history.events ?? [];
    const next: string | undefined =
      events.find((event) => event.workflowExecutionContinuedAsNewEventAttributes)
        ?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    runs.push({ events: events.length, continued: next !== undefined });
    runId = next;
  }
  return runs;
}

it('continues as new when Temporal suggests it, keeping its place: no model or tool call sent twice', async () => {
  const workflowId = uniqueName('suggested');
  // Nine steps with a tool call each but the last: about 110 events in one run, far under the 100 steps per run.
  const handle = await startAgent(suite.stack, workflowId, {
    id: 'suggested',
    prompt: 'Go [[repeat 8 tool:search {"q":"step"}]]',
    tools: ['search'],
  });
  const outcome = (await handle.result()) as { status: string; steps: number; toolCalls: number; output: string };
  expect([outcome.status, outcome.steps, outcome.toolCalls]).toEqual(['ok', 9, 8]);
  expect(outcome.output).toContain('from 8 tool results');

  // Only the suggestion can have ended a run here (the step count per run is 100): it did, more than once.
  const runs = await runsOf(handle, handle.firstExecutionRunId);
  expect(runs.length).toBeGreaterThanOrEqual(3);
  expect(runs.slice(0, -1).every((run) => run.continued)).toBe(true);
  expect(runs.every((run) => run.events < 2 * SUGGEST_AT_EVENTS)).toBe(true);

  // Each model step and tool call reached the simulator once, on its first attempt.
  const steps = modelCalls(suite.servers.simulator, 'suggested').filter((call) => call.workflowId === workflowId);
  expect(steps).toHaveLength(9);
  expect(steps.every((call) => call.attempt === 1 && call.outcome === 200)).toBe(true);
  const searches = toolCalls(suite.servers.simulator, 'search').filter((call) => call.workflowId === workflowId);
  expect(searches.map((call) => call.taskId)).toEqual(
    [1, 2, 3, 4, 5, 6, 7, 8].map((step) => `tool:search:call_${step}_1`),
  );
});
