import type { AgentTask } from '../src/contract/agent-task';
import { FanoutClient } from '../src/client/fanout-client';
import { useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses();

it('completes a fan-out after its worker process is SIGKILLed and restarted, sending no finished call again', async () => {
  const taskQueue = uniqueName('crash');
  const env = { FANOUT_HEARTBEAT_THROTTLE_MS: '500' };
  const first = await suite.spawnWorker(taskQueue, env);

  const fast: AgentTask[] = Array.from({ length: 10 }, (_, index) => ({
    id: `fast-${index}`,
    prompt: `fast [sim latency=100]`,
  }));
  const slow: AgentTask[] = Array.from({ length: 10 }, (_, index) => ({
    id: `slow-${index}`,
    prompt: `slow [sim latency=6000]`,
  }));
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const handle = await client.startParallel([...fast, ...slow], { heartbeatTimeoutMs: 2000 });

  await waitFor('the fast agents to finish and the slow ones to be in flight', async () => {
    const progress = await handle.progress();
    return progress.succeeded === 10 && progress.running === 10;
  });
  await first.kill();
  const killedAt = Date.now();

  await suite.spawnWorker(taskQueue, env);
  const { results } = await handle.result();

  expect(results.map((result) => result.id)).toEqual([...fast, ...slow].map((task) => task.id));
  expect(results.every((result) => result.status === 'ok')).toBe(true);
  const log = suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
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
