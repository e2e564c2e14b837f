import type { WorkflowHandle } from '@temporalio/client';
import { modelCalls, sharedTestTools, toolCalls } from './support/agents';
import { pendingActivities } from './support/history';
import { startTestServers, startTestWorker, uniqueName, type TestServers, type TestWorker } from './support/test-stack';
import { waitFor } from './support/wait-for';

const { startHttpMcpServer } = require('./support/mcp-server.js') as {
  startHttpMcpServer(): Promise<{ url: string; calls: string[]; close(): Promise<void> }>;
};

let servers: TestServers;
let stack: TestWorker;
let mcp: Awaited<ReturnType<typeof startHttpMcpServer>>;

beforeAll(async () => {
  servers = await startTestServers({ simulator: { latency: { minMs: 20, maxMs: 20 } } });
  // The shared test tools report each call to the simulator (agent-tools.js reads it at each call).
  process.env.FANOUT_TEST_SIM_URL = servers.simulator.baseUrl;
  mcp = await startHttpMcpServer();
  stack = await startTestWorker(servers, {
    tools: sharedTestTools(),
    mcpServers: [{ name: 'lookups', url: mcp.url }],
  });
});

afterAll(async () => {
  await stack?.stop();
  await mcp?.close();
  await servers?.stop();
});

/** How each activity of a workflow ended (completed, failed, canceled, or still open), with its last attempt. */
async function activityEndings(workflow: WorkflowHandle): Promise<{ id: string; ending: string; attempt: number }[]> {
  const events = (await workflow.fetchHistory()).events ?? [];
  const activities = new Map<string, { id: string; ending: string; attempt: number }>();
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled)
      activities.set(String(event.eventId), { id: scheduled.activityId ?? '', ending: 'open', attempt: 0 });
    const started = event.activityTaskStartedEventAttributes;
    const activity = activities.get(String(started?.scheduledEventId));
    if (started && activity) activity.attempt = started.attempt ?? 0;
    const endings = {
      completed: event.activityTaskCompletedEventAttributes,
      failed: event.activityTaskFailedEventAttributes,
      canceled: event.activityTaskCanceledEventAttributes,
      timedOut: event.activityTaskTimedOutEventAttributes,
    };
    for (const [ending, attributes] of Object.entries(endings)) {
      const ended = attributes ? activities.get(String(attributes.scheduledEventId)) : undefined;
      if (ended) ended.ending = ending;
    }
  }
  return [...activities.values()];
}

it('fails an agent whose tool call cannot reach its MCP server any more, cancelling the call beside it, and runs the rest of the fan-out', async () => {
  // The worker has used the server: its connection and tool list are kept for the worker's life.
  const warmUp = await stack.client.startParallel([
    { id: 'early', prompt: 'Look up [[tool:lookup_http {"key":"alpha"}]]', tools: ['lookup_http'] },
  ]);
  expect((await warmUp.result()).results[0].output).toContain('http value of alpha');
  // Then the server goes away.
  await mcp.close();

  const runId = uniqueName('tool-failure');
  const handle = await stack.client.startParallel(
    [
      {
        id: 'reader',
        prompt:
          'Compare [[tool:lookup_http {"key":"beta"}, tool:search {"q":"slow","ms":60000}, tool:fetch_page {"url":"https://example.com"}]]',
        tools: ['lookup_http', 'search', 'fetch_page'],
      },
      { id: 'plain', prompt: 'just answer' },
      { id: 'searcher', prompt: 'Find [[tool:search {"q":"quick"}]]', tools: ['search'] },
    ],
    undefined,
    { workflowId: runId },
  );
  const started = Date.now();
  const { results, metrics } = await handle.result();
  const elapsedMs = Date.now() - started;

  expect(results.map((result) => [result.id, result.status])).toEqual([
    ['reader', 'failed'],
    ['plain', 'ok'],
    ['searcher', 'ok'],
  ]);
  expect(results[2].output).toContain('search found: quick');
  expect(metrics.failed).toBe(1);
  // The failure says which tool could not be reached, on which server, and why; the step it paid for is counted.
  const reader = results[0];
  expect(reader.error?.type).toBe('ToolUnavailable');
  expect(reader.error?.message).toContain('tool "lookup_http"');
  expect(reader.error?.message).toContain(`MCP server "lookups" (${mcp.url}): fetch failed (connect ECONNREFUSED`);
  expect(reader.attempts).toBe(3);
  expect(reader.usage?.totalTokens).toBeGreaterThan(0);
  // One model step, never sent again: the model is not asked to go on without the tool's answer.
  expect(modelCalls(servers.simulator, 'reader')).toHaveLength(1);

  // The 60 s search beside the failed call was aborted at once, not waited for; fetch_page had answered, once.
  const agentId = `${runId}/agent:reader`;
  const ofReader = (name: string) =>
    toolCalls(servers.simulator, name).filter((request) => request.workflowId === agentId);
  const [search] = ofReader('search');
  expect(ofReader('search')).toHaveLength(1);
  expect(search.clientClosedAt).toBeDefined();
  expect(search.respondedAt).toBeUndefined();
  expect(elapsedMs).toBeLessThan(20_000);
  expect(ofReader('fetch_page').map((request) => request.outcome)).toEqual([200]);

  // Temporal's record of the agent: the MCP call failed on each of its 3 attempts, the search was cancelled (and
  // reported so by the worker), and nothing is left open on the server or the worker.
  const agent = stack.client.client.workflow.getHandle(agentId);
  expect((await agent.describe()).status.name).toBe('FAILED');
  expect(await activityEndings(agent)).toEqual([
    { id: 'step:1', ending: 'completed', attempt: 1 },
    { id: 'tool:1:1', ending: 'failed', attempt: 3 },
    { id: 'tool:1:2', ending: 'canceled', attempt: 1 },
    { id: 'tool:1:3', ending: 'completed', attempt: 1 },
  ]);
  expect(await pendingActivities(agent)).toBe(0);
  await waitFor(
    'the worker to have no activity in flight',
    () => stack.worker.getStatus().numInFlightActivities === 0,
    {
      timeoutMs: 5000,
    },
  );
});

it('fails an agent whose MCP server cannot be reached to list its tools, without calling the model', async () => {
  const gone = await startHttpMcpServer();
  await gone.close();
  const blind = await startTestWorker(servers, { mcpServers: [{ name: 'gone', url: gone.url }] });
  try {
    const handle = await blind.client.startParallel(
      [{ id: 'blind', prompt: 'Look up [[tool:lookup_http {"key":"alpha"}]]', tools: ['lookup_http'] }],
      { retry: { maximumAttempts: 2 } },
    );
    const [result] = (await handle.result()).results;
    expect(result.status).toBe('failed');
    expect(result.error?.type).toBe('ToolUnavailable');
    expect(result.error?.message).toContain(
      `agent "blind" step 1: its tools cannot be listed: MCP server "gone" (${gone.url}): fetch failed (connect ECONNREFUSED`,
    );
    expect(result.attempts).toBe(2);
    expect(modelCalls(servers.simulator, 'blind')).toHaveLength(0);
  } finally {
    await blind.stop();
  }
});

it("runs the tools of the MCP servers that answer while another of the worker's servers is down", async () => {
  const gone = await startHttpMcpServer();
  await gone.close();
  const up = await startHttpMcpServer();
  const halfBlind = await startTestWorker(servers, {
    mcpServers: [
      { name: 'gone', url: gone.url },
      { name: 'lookups', url: up.url },
    ],
  });
  try {
    const handle = await halfBlind.client.startParallel(
      [
        { id: 'sighted', prompt: 'Look up [[tool:lookup_http {"key":"gamma"}]]', tools: ['lookup_http'] },
        // A tool on no server that answers may be the unreachable server's: that agent fails naming it.
        { id: 'unsure', prompt: 'Use [[tool:elsewhere {}]]', tools: ['elsewhere'] },
      ],
      { retry: { maximumAttempts: 2 } },
    );
    const [sighted, unsure] = (await handle.result()).results;
    expect(sighted.status).toBe('ok');
    expect(sighted.output).toContain('http value of gamma');
    expect(unsure.status).toBe('failed');
    expect(unsure.error?.type).toBe('ToolUnavailable');
    expect(unsure.error?.message).toContain(`MCP server "gone" (${gone.url})`);
    expect(up.calls).toEqual(['lookup_http']);
    expect(modelCalls(servers.simulator, 'unsure')).toHaveLength(0);
  } finally {
    await halfBlind.stop();
    await up.close();
  }
});
