import type { ChildProcess } from 'node:child_process';
import type { Worker } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { freePort } from '../src/local/free-port';
import { createFanoutWorker } from '../src/worker';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { startTestServers, uniqueName, type TestServers } from './support/test-stack';
import { waitFor } from './support/wait-for';

/** Long enough to SIGTERM a worker while its calls are surely in flight. */
const CALL_MS = 3000;

let servers: TestServers;
const processes: WorkerProcess[] = [];
const successors: { worker: Worker; running: Promise<void> }[] = [];

beforeAll(async () => {
  servers = await startTestServers();
});

afterAll(async () => {
  for (const workerProcess of processes) await workerProcess.kill();
  for (const { worker, running } of successors) {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  }
  await servers?.stop();
});

function slowTasks(prefix: string, count: number): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `slow [sim latency=${CALL_MS}]`,
  }));
}

/** Resolves with the exit code and time of a child process. */
function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
}

/** A worker process on the simulator with the given shutdown grace, its health endpoint on a free port. */
async function gracefulWorker(
  taskQueue: string,
  graceMs: number,
): Promise<{ worker: WorkerProcess; healthUrl: string }> {
  const healthPort = await freePort();
  const worker = await spawnWorker({
    address: servers.server.address,
    taskQueue,
    env: {
      OPENAI_BASE_URL: servers.simulator.baseUrl,
      OPENAI_API_KEY: 'test-key',
      FANOUT_SHUTDOWN_GRACE_MS: String(graceMs),
      FANOUT_HEALTH_PORT: String(healthPort),
      FANOUT_HEALTH_HOST: '127.0.0.1',
      FANOUT_HEARTBEAT_THROTTLE_MS: '500',
    },
  });
  processes.push(worker);
  return { worker, healthUrl: `http://127.0.0.1:${healthPort}/healthz` };
}

/** Another worker for the same queue, in this process: it records the results once the first one is gone. */
async function startSuccessor(taskQueue: string): Promise<void> {
  const worker = await createFanoutWorker({
    connection: servers.server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: servers.simulator.baseUrl, apiKey: 'test-key' }) },
    shutdownGraceMs: 0,
  });
  successors.push({ worker, running: worker.run() });
}

it('lets in-flight calls finish on SIGTERM within the grace period: attempt 1, no second request, exit code 0', async () => {
  const taskQueue = uniqueName('grace');
  const graceMs = 20_000;
  const { worker, healthUrl } = await gracefulWorker(taskQueue, graceMs);
  expect((await fetch(healthUrl)).status).toBe(200);
  const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
  const tasks = slowTasks('long', 5);
  const handle = await client.startParallel(tasks);
  const requests = () => servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  await waitFor('every call to reach the simulator', () => requests().length === tasks.length);

  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  const signalledAt = Date.now();
  // Draining: no longer healthy, not gone either.
  await waitFor('the health endpoint to report the drain', async () => (await fetch(healthUrl)).status === 503);
  const { code, signal, at: exitedAt } = await exit;

  expect({ code, signal }).toEqual({ code: 0, signal: null });
  expect(worker.output()).toContain(
    `SIGTERM: worker stopping; ${tasks.length} agent calls in flight get up to ${graceMs} ms to finish`,
  );
  expect(worker.output()).toContain('worker stopped');
  for (const request of requests()) {
    // Answered, not cut off, and the process waited for it.
    expect(request.respondedAt).toBeDefined();
    expect(request.clientClosedAt).toBeUndefined();
    expect(exitedAt).toBeGreaterThan(request.respondedAt ?? Infinity);
  }
  expect(exitedAt - signalledAt).toBeLessThan(graceMs);

  await startSuccessor(taskQueue);
  const { results } = await handle.result();
  expect(results.map((result) => [result.id, result.status, result.attempts])).toEqual(
    tasks.map((task) => [task.id, 'ok', 1]),
  );
  expect(requests().map((request) => request.attempt)).toEqual(tasks.map(() => 1));
});

it('cancels calls still running when the grace period ends, and another worker retries them', async () => {
  const taskQueue = uniqueName('short-grace');
  const { worker } = await gracefulWorker(taskQueue, 500);
  const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
  const tasks = slowTasks('cut', 2);
  const handle = await client.startParallel(tasks);
  const requests = (taskId: string) =>
    servers.simulator.log().filter((request) => request.workflowId === handle.workflowId && request.taskId === taskId);
  await waitFor('every call to reach the simulator', () => tasks.every((task) => requests(task.id).length === 1));

  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  const { code, signal, at: exitedAt } = await exit;
  expect({ code, signal }).toEqual({ code: 0, signal: null });

  await startSuccessor(taskQueue);
  const { results } = await handle.result();
  expect(results.map((result) => [result.id, result.status, result.attempts])).toEqual(
    tasks.map((task) => [task.id, 'ok', 2]),
  );
  for (const task of tasks) {
    const [first, second, ...more] = requests(task.id);
    // The first attempt was aborted when the grace ran out, before its 3 s were up; the retry came after the exit.
    expect(first.clientClosedAt).toBeDefined();
    expect(first.respondedAt).toBeUndefined();
    expect(first.clientClosedAt as number).toBeLessThan(first.arrivedAt + CALL_MS);
    expect(second.attempt).toBe(2);
    expect(second.arrivedAt).toBeGreaterThan(exitedAt);
    expect(more).toEqual([]);
  }
});
