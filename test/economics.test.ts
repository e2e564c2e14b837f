import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { createFanoutWorker } from '../src/worker';
import { pendingActivities } from './support/history';
import { difference, startMeteredServer, total, type MeteredServer } from './support/metered-server';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

let server: MeteredServer;
let simulator: Simulator;
let worker: Worker;
let running: Promise<void>;
let client: FanoutClient;
const processes: WorkerProcess[] = [];

beforeAll(async () => {
  server = await startMeteredServer();
  simulator = await startSimulator({ latency: { minMs: 20, maxMs: 20 } });
  const taskQueue = uniqueName('economics');
  worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'economics' }) },
  });
  running = worker.run();
  client = await FanoutClient.connect({ client: server.client, taskQueue });
});

afterAll(async () => {
  for (const process of processes) await process.stop();
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  await running;
  await simulator?.close();
  await server?.stop();
});

function task(id: string, marker: string): AgentTask {
  return { id, prompt: `economics ${id} [sim ${marker}]` };
}

function requestsOf(workflowId: string) {
  return simulator.log().filter((request) => request.workflowId === workflowId);
}

/** The action counter once it has stopped moving (the server counts a moment after it answers). */
async function settledActions(): Promise<Record<string, number>> {
  let previous = await server.actions();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const current = await server.actions();
    if (total(current, previous) === 0) return current;
    previous = current;
  }
}

describe('billable Temporal actions per agent call', () => {
  it('costs at most 1.5 actions per agent call and sends no heartbeat, for calls of 8 s', async () => {
    const before = await settledActions();
    const tasks = Array.from({ length: 10 }, (_, index) => task(`eight-${index}`, 'latency=8000'));
    const { results } = await client.runParallel(tasks);
    expect(results.every((result) => result.status === 'ok')).toBe(true);

    const spent = difference(await settledActions(), before);
    // Before: a heartbeat every 2 s reached the server, about 5 per call. Now: the workflow start and one start per call.
    expect(spent.grpc_RecordActivityTaskHeartbeat ?? 0).toBe(0);
    expect(total(spent)).toBeLessThanOrEqual(1.5 * tasks.length);
  });

  it('costs at most 1.5 actions per item for a batch of 20 calls of 10 s, its scan, window and finish included, with no heartbeat', async () => {
    const items = 20;
    const directory = mkdtempSync(path.join(os.tmpdir(), 'economics-batch-'));
    const source = path.join(directory, 'tasks.jsonl');
    writeFileSync(
      source,
      `${Array.from({ length: items }, (_, index) => JSON.stringify(task(`item-${index}`, 'latency=10000'))).join('\n')}\n`,
    );
    const before = await settledActions();
    const handle = await client.startBatch({
      source,
      sink: path.join(directory, 'out.jsonl'),
      options: { concurrency: items },
    });
    expect(await handle.result()).toMatchObject({ succeeded: items, failed: 0 });

    const spent = difference(await settledActions(), before);
    // The workflow start, the scan, the window's start (two actions), one lane of one call per item, the finish and the
    // batch's memo (its only window writes none): no heartbeat.
    expect(spent.grpc_RecordActivityTaskHeartbeat ?? 0).toBe(0);
    // On failure, what was spent by action type shows beside the verdict.
    expect({ withinBudget: total(spent) <= 1.5 * items, spent }).toEqual({ withinBudget: true, spent });
  });

  it('aborts every in-flight request of a cancelled run within 3 s, for one heartbeat per call', async () => {
    const tasks = Array.from({ length: 5 }, (_, index) => task(`cancel-${index}`, 'latency=60000'));
    const handle = await client.startParallel(tasks);
    await waitFor('five requests at the simulator', () => requestsOf(handle.workflowId).length === 5);
    const before = await settledActions();

    const cancelledAt = Date.now();
    await handle.cancel();
    const closedAt = await waitFor('every request to be closed', () => {
      const requests = requestsOf(handle.workflowId);
      return (
        requests.every((request) => request.clientClosedAt !== undefined) &&
        Math.max(...requests.map((request) => request.clientClosedAt ?? 0))
      );
    });
    const error = await handle.result().catch((caught: unknown) => caught);

    expect(closedAt - cancelledAt).toBeLessThanOrEqual(3000);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(await pendingActivities(handle.workflow)).toBe(0);
    const spent = difference(await settledActions(), before);
    expect(spent.grpc_RecordActivityTaskHeartbeat ?? 0).toBeLessThanOrEqual(tasks.length);
  });

  it("fails fast: a non-retryable failure closes the siblings' requests within 3 s", async () => {
    const tasks = [
      task('fails', 'fault=401 latency=500'),
      ...Array.from({ length: 3 }, (_, index) => task(`sibling-${index}`, 'latency=60000')),
    ];
    const handle = await client.startParallel(tasks, { errorPolicy: 'fail-fast' });
    const { results } = await handle.result();

    expect(results.map((result) => result.status)).toEqual(['failed', 'cancelled', 'cancelled', 'cancelled']);
    const requests = requestsOf(handle.workflowId);
    const failedAt = requests.find((request) => request.taskId === 'fails')?.respondedAt ?? Number.NaN;
    const siblings = requests.filter((request) => request.taskId.startsWith('sibling-'));
    expect(siblings).toHaveLength(3);
    for (const sibling of siblings)
      expect((sibling.clientClosedAt ?? Number.POSITIVE_INFINITY) - failedAt).toBeLessThanOrEqual(3000);
    expect(await pendingActivities(handle.workflow)).toBe(0);
  });

  it('lets `fanout watch` query a run only when it moved, not twice a second', async () => {
    const handle = await client.startParallel(
      Array.from({ length: 5 }, (_, index) => task(`watched-${index}`, 'latency=8000')),
    );
    const before = await settledActions();
    const watched = await runCli(['watch', handle.workflowId, '--address', server.address, '--json']);
    expect(watched.code).toBe(0);
    expect(watched.stdout).toContain('run-finished');

    const spent = difference(await settledActions(), before);
    // Two queries (events, progress) each time the history moved, at most every 2 s, and one for the last events:
    // an 8 s run moves at its start and as its calls finish. Twice a second would be 32 or more.
    expect(spent.grpc_QueryWorkflow ?? 0).toBeLessThanOrEqual(12);
  });

  it('retries the call of a SIGKILLed worker on another worker well before agentTimeoutMs, without heartbeats', async () => {
    const taskQueue = uniqueName('lost');
    const env = { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'economics' };
    const doomed = await spawnWorker({ address: server.address, taskQueue, env });
    processes.push(doomed);
    const lostClient = await FanoutClient.connect({ client: server.client, taskQueue });
    // The first request hangs (as on a worker that dies mid-call); the retry answers at once.
    const handle = await lostClient.startParallel([task('orphan', 'fault=hang times=1')]);
    await waitFor('the request to arrive', () => requestsOf(handle.workflowId).length === 1);
    // The survivor has no call in this workflow: only its sweep of the task queue can find the orphan.
    processes.push(await spawnWorker({ address: server.address, taskQueue, env }));
    const before = await settledActions();

    await doomed.kill();
    const killedAt = Date.now();
    const { results } = await handle.result();

    expect(results[0]).toMatchObject({ status: 'ok', attempts: 2 });
    const retry = requestsOf(handle.workflowId).find((request) => request.attempt === 2);
    const agentTimeoutMs = 120_000;
    // Lost after 15 s without presence polls, found by a sweep every 10 s, retried after 1 s: about 30 s at worst.
    expect((retry?.arrivedAt ?? Number.POSITIVE_INFINITY) - killedAt).toBeLessThan(agentTimeoutMs / 3);
    const spent = difference(await settledActions(), before);
    expect(spent.grpc_RecordActivityTaskHeartbeat ?? 0).toBe(0);
  });
});
