import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AgentTask } from '../src/contract/agent-task';
import { FanoutClient } from '../src/client/fanout-client';
import { QUICK_LOST_WORKER_DETECTION, useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses({ env: QUICK_LOST_WORKER_DETECTION });

function entries(location: string): string[] {
  try {
    return readdirSync(location, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.json'));
  } catch {
    return [];
  }
}

it('answers the retry from the cache when the worker was SIGKILLed after the answers came and before its activities completed: nothing is sent again', async () => {
  const taskQueue = uniqueName('cache-crash');
  const location = path.join(mkdtempSync(path.join(os.tmpdir(), 'fanout-cache-crash-')), 'cache');
  // The first worker stores each answer, then holds the call (the window a kill can fall in, widened).
  const first = await suite.spawnWorker(taskQueue, { FANOUT_CACHE_HOLD_AFTER_WRITE_MS: '300000' });
  const tasks: AgentTask[] = Array.from({ length: 8 }, (_, index) => ({
    id: `answered-${index}`,
    prompt: `answer ${index} [sim latency=200]`,
  }));
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const handle = await client.startParallel(tasks, { cache: { mode: 'read-write', location } });

  await waitFor('every answer to be stored in the cache', async () => entries(location).length === tasks.length, {
    timeoutMs: 60_000,
  });
  const before = await handle.progress();
  expect(before).toMatchObject({ running: tasks.length, succeeded: 0 });
  await first.kill();
  await suite.spawnWorker(taskQueue);
  const { results, metrics } = await handle.result();

  const log = suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  for (const task of tasks) {
    // Answered once before the kill; the retry, on the second worker, read the stored answer.
    expect(log.filter((request) => request.taskId === task.id)).toHaveLength(1);
  }
  for (const result of results) expect(result).toMatchObject({ status: 'ok', attempts: 2, cached: true, costUsd: 0 });
  expect(metrics.cost.cachedCalls).toBe(tasks.length);
});
