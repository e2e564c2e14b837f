import { modelCalls, scheduledActivities, useAgentStack } from './support/agents';

const suite = useAgentStack();

it("aborts a model step that outlasts its attempt's timeout (agentTimeoutMs) at the simulator and retries it", async () => {
  // The agent's first request never answers; the step's attempt has 1 s (agentTimeoutMs), not the HTTP client's 600 s.
  const handle = await suite.stack.client.startParallel(
    [{ id: 'stalled', prompt: 'Look [sim fault=hang times=1] [[tool:search {"q":"x"}]]', tools: ['search'] }],
    { agentTimeoutMs: 1000, retry: { maximumAttempts: 3, initialIntervalMs: 100 } },
  );
  const { results } = await handle.result();
  expect([results[0].status, results[0].steps]).toEqual(['ok', 2]);

  const calls = modelCalls(suite.servers.simulator, 'stalled').filter((call) =>
    call.workflowId.startsWith(handle.workflowId),
  );
  // Step 1: its first attempt hung and was closed by the worker, its second answered; step 2 answered at once.
  expect(calls.map((call) => [call.attempt, call.outcome, call.clientClosedAt !== undefined])).toEqual([
    [1, 'hang', true],
    [2, 200, false],
    [1, 200, false],
  ]);
  const steps = await scheduledActivities(
    suite.stack.client.client.workflow.getHandle(`${handle.workflowId}/agent:stalled`),
  );
  expect(steps.filter((activity) => activity.type === 'agentStep').map((activity) => activity.id)).toEqual([
    'step:1',
    'step:2',
  ]);
  // The attempt failed as a Timeout of the step, which is what Temporal retried.
  const history = await suite.stack.client.client.workflow
    .getHandle(`${handle.workflowId}/agent:stalled`)
    .fetchHistory();
  const started = history.events?.find(
    (event) => event.activityTaskStartedEventAttributes?.attempt === 2,
  )?.activityTaskStartedEventAttributes;
  expect(started?.lastFailure?.message).toMatch(
    /^agent "stalled" step 1 attempt 1: no response within \d+ ms \(agentTimeoutMs\)$/,
  );
  expect(started?.lastFailure?.applicationFailureInfo?.type).toBe('Timeout');
});
