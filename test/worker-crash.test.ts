import type { AgentTask } from '../src/contract/agent-task';
import { FanoutClient } from '../src/client/fanout-client';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { startTestServers, uniqueName, type TestServers } from './support/test-stack';
import { waitFor } from './support/wait-for';

let servers: TestServers;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  servers = await startTestServers();
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await servers?.stop();
});

it('completes a fan-out after its worker process is SIGKILLed and restarted, sending no finished call again', async () => {
  const taskQueue = uniqueName('crash');
  const env = {
    OPENAI_BASE_URL: servers.simulator.baseUrl,
    OPENAI_API_KEY: 'test-key',
    FANOUT_HEARTBEAT_THROTTLE_MS: '500',
  };
  workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));

  const fast: AgentTask[] = Array.from({ length: 10 }, (_, index) => ({
    id: `fast-${index}`,
    prompt: `fast [sim latency=100]`,
  }));
  const slow: AgentTask[] = Array.from({ length: 10 }, (_, index) => ({
    id: `slow-${index}`,
    prompt: `slow [sim latency=6000]`,
  }));
  const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
  const handle = await client.startParallel([...fast, ...slow], { heartbeatTimeoutMs: 2000 });

  await waitFor('the fast agents to finish and the slow ones to be in flight', async () => {
    const progress = await handle.progress();
    return progress.succeeded === 10 && progress.running === 10;
  });
  await workers[0].kill();
  const killedAt = Date.now();

  workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));
  const { results } = await handle.result();

  expect(results.map((result) => result.id)).toEqual([...fast, ...slow].map((task) => task.id));
  expect(results.every((result) => result.status === 'ok')).toBe(true);
  const log = servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  for (const task of fast) {
    // Finished before the kill: its result is in history, so it is never sent again.
    expect(log.filter((request) => request.taskId === task.id)).toHaveLength(1);
  }
  for (const task of slow) {
    const requests = log.filter((request) => request.taskId === task.id);
    // In flight at the kill: exactly one retry, after the heartbeat timeout noticed the lost worker.
    expect(requests).toHaveLength(2);
    expect(requests[0].respondedAt).toBeUndefined();
    expect(requests[1].arrivedAt).toBeGreaterThan(killedAt);
    expect(requests[1].attempt).toBe(2);
  }
  expect(results.find((result) => result.id === 'slow-0')?.attempts).toBe(2);
});
