import path from 'node:path';
import { FanoutClient } from '../src/client/fanout-client';
import { modelCalls, toolCalls } from './support/agents';
import { QUICK_LOST_WORKER_DETECTION, useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses({
  simulator: { latency: { minMs: 20, maxMs: 20 } },
  env: QUICK_LOST_WORKER_DETECTION,
});

it('resumes an agent on another worker after a SIGKILL mid-agent, repeating no finished model call or tool call', async () => {
  const taskQueue = uniqueName('agent-crash');
  const { server, simulator } = suite.servers;
  const env = {
    FANOUT_TOOLS: path.join(__dirname, 'support', 'agent-tools.js'),
    FANOUT_TEST_SIM_URL: simulator.baseUrl,
  };
  const first = await suite.spawnWorker(taskQueue, env);
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const prompt =
    'Dig [[tool:search {"q":"one"}, tool:fetch_page {"url":"u"}]] [[tool:search {"q":"slow","ms":8000}]] [[tool:search {"q":"three"}]]';
  const handle = await client.startParallel([{ id: 'digger', prompt, tools: ['search', 'fetch_page'] }]);
  const ofRun = (requests: ReturnType<typeof toolCalls>) =>
    requests.filter((request) => request.workflowId.startsWith(handle.workflowId));

  await waitFor('the slow tool call of step 2 to be in flight', () =>
    ofRun(toolCalls(simulator, 'search')).some((call) => call.taskId === 'tool:search:call_2_1'),
  );
  await first.kill();
  await suite.spawnWorker(taskQueue, env);
  const { results } = await handle.result();

  expect(results[0].status).toBe('ok');
  expect(results[0].output).toContain(
    'from 4 tool results: search found: one | fetch_page found: u | search found: slow | search found: three',
  );
  // Every model step ran once: steps 1 and 2 had answered before the kill and were not sent again.
  expect(modelCalls(simulator, 'digger').map((call) => call.attempt)).toEqual([1, 1, 1, 1]);
  const calls = ofRun(toolCalls(simulator)).map((call) => call.taskId);
  const count = (id: string) => calls.filter((call) => call === id).length;
  // Step 1's tool calls had answered: once each. Step 2's was in flight at the kill: sent again once, by its retry.
  expect([
    count('tool:search:call_1_1'),
    count('tool:fetch_page:call_1_2'),
    count('tool:search:call_2_1'),
    count('tool:search:call_3_1'),
  ]).toEqual([1, 1, 2, 1]);
  const slow = ofRun(toolCalls(simulator, 'search')).filter((call) => call.taskId === 'tool:search:call_2_1');
  expect(slow[0].respondedAt).toBeUndefined();
});
