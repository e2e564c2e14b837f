import type { AgentTask } from '../src/contract/agent-task';
import { useTestStack } from './support/suite-stack';
import { waitFor } from './support/wait-for';

const suite = useTestStack({ simulator: { latency: { minMs: 10, maxMs: 10 } } });

it('cancels a 10-agent fan-out whose agents each run three sub-agents, leaving no request open', async () => {
  const spawn = JSON.stringify({ tasks: [1, 2, 3].map((index) => ({ prompt: `part ${index}` })) });
  const tasks: AgentTask[] = Array.from({ length: 10 }, (_, index) => ({
    id: `lead-${index}`,
    prompt: `Split [[tool:spawn_agents ${spawn}]]`,
    tools: ['spawn_agents'],
  }));
  // The sub-agents' model calls take two minutes (a marker in their prompts would slow their parents' calls too).
  const slow = Object.fromEntries(
    tasks.flatMap((task) => [1, 2, 3].map((index) => [`${task.id}.1-1-${index}`, 120_000])),
  );
  suite.servers.simulator.configure({ latency: { minMs: 10, maxMs: 10 }, latencyByTask: slow });
  const handle = await suite.stack.client.startParallel(tasks);
  await waitFor('30 sub-agents to be calling the model', () => suite.servers.simulator.stats().inFlight === 30, {
    timeoutMs: 60_000,
  });

  await handle.cancel();
  await expect(handle.result()).rejects.toThrow();
  // Cancellation waited for every child and activity; the last connections close within moments.
  await waitFor('no request open at the simulator', () => suite.servers.simulator.stats().inFlight === 0, {
    timeoutMs: 3000,
  });
  const subAgents = suite.servers.simulator.log().filter((request) => /^lead-\d\.1-1-\d$/.test(request.taskId));
  expect(subAgents).toHaveLength(30);
  expect(subAgents.every((request) => request.clientClosedAt !== undefined)).toBe(true);
  const client = suite.stack.client.client.workflow;
  const ids = tasks.flatMap((task) => [
    `${handle.workflowId}/agent:${task.id}`,
    ...[1, 2, 3].map((index) => `${handle.workflowId}/agent:${task.id}/sub-1-1-${index}`),
  ]);
  const statuses = () => Promise.all(ids.map(async (id) => (await client.getHandle(id).describe()).status.name));
  expect(ids).toHaveLength(40);
  // Every agent and sub-agent ends CANCELLED within seconds (a loaded machine may report the last one a moment late).
  await waitFor(
    'every agent and sub-agent cancelled',
    async () => new Set(await statuses()).size === 1 && (await statuses())[0] === 'CANCELLED',
    { timeoutMs: 10_000 },
  );
});
