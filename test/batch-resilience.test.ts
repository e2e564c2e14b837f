import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { batchDirectory, sinkCounts, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { QUICK_LOST_WORKER_DETECTION } from './support/suite-stack';
import { startTestServers, uniqueName, type TestServers } from './support/test-stack';
import { waitFor } from './support/wait-for';
import { faultCost, requestsOfRun } from './support/request-ledger';

const directory = batchDirectory();
const workers: WorkerProcess[] = [];

afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
});

function workerEnvironment(simulator: Simulator): Record<string, string> {
  return { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'test-key', FANOUT_HEARTBEAT_THROTTLE_MS: '500' };
}

function resent(simulator: Simulator, batchId: string, at: number) {
  return faultCost(requestsOfRun(simulator.log(), batchId), at);
}

describe('a batch on worker processes', () => {
  let servers: TestServers;

  beforeAll(async () => {
    servers = await startTestServers();
  });

  afterAll(async () => {
    await servers?.stop();
  });

  it.each([
    ['in one window', {}],
    ['in four stripes side by side (windowCalls 5)', { windowCalls: 5 }],
  ])(
    'completes after its worker is SIGKILLed half-way, %s: no answered call sent again, re-sent calls no more than were open at the kill',
    async (_, stripes) => {
      const taskQueue = uniqueName('batch-kill');
      const env = { ...workerEnvironment(servers.simulator), ...QUICK_LOST_WORKER_DETECTION };
      workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));
      const name = 'windowCalls' in stripes ? 'kill-stripes' : 'kill';
      const source = writeTasks(directory, 400, () => 'x [sim latency=300]', name);
      const sink = path.join(directory, `${name}.jsonl`);
      const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
      // Lanes of several items each (the default): a lost lane's answered items must not be paid for again.
      const handle = await client.startBatch({ source, sink, options: { concurrency: 20, ...stripes } });

      const answeredCount = () =>
        servers.simulator.log().filter((request) => request.workflowId === handle.batchId && request.outcome === 200)
          .length;
      await waitFor('half the batch answered', () => answeredCount() >= 200, { timeoutMs: 60_000 });
      await workers[0].kill();
      const killedAt = Date.now();
      workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));

      const summary = await handle.result();
      expect(summary).toMatchObject({ total: 400, succeeded: 400, failed: 0 });
      expect(sinkCounts(sink)).toEqual({ lines: 400, ids: 400, ok: 400 });
      const cost = resent(servers.simulator, handle.batchId, killedAt);
      expect(cost.openAt).toBeGreaterThan(0);
      expect(cost.answeredThenResent).toEqual([]);
      expect(cost.duplicated).toBeLessThanOrEqual(cost.openAt);
      expect(cost.openNow).toBe(0);
      if ('windowCalls' in stripes) expect(summary.runs).toBeGreaterThanOrEqual(4);
    },
  );

  it('keeps two workers together under the task queue rate limit', async () => {
    const taskQueue = uniqueName('batch-rate');
    const limit = 20;
    const env = { ...workerEnvironment(servers.simulator), FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND: String(limit) };
    workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));
    workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));
    const source = writeTasks(directory, 120, () => 'x [sim latency=20]', 'rate');
    const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
    // The server's limit counts activities: an activity per item makes it a limit on calls.
    const handle = await client.startBatch({
      source,
      sink: path.join(directory, 'rate.jsonl'),
      options: { concurrency: 50, itemsPerActivity: 1 },
    });
    await handle.result();

    const arrivals = servers.simulator
      .log()
      .filter((request) => request.workflowId === handle.batchId)
      .map((request) => request.arrivedAt)
      .sort((a, b) => a - b);
    expect(arrivals).toHaveLength(120);
    // The server's limiter is a token bucket that lets a burst of about `limit` through at once; the rate it holds after
    // that is the limit. Uncapped, 120 calls of 20 ms at concurrency 50 would take well under a second.
    const rate = (arrivals.length - 1 - limit) / ((arrivals[arrivals.length - 1] - arrivals[limit]) / 1000);
    expect(rate).toBeLessThanOrEqual(limit * 1.15);
    expect(rate).toBeGreaterThan(limit * 0.5);
  });
});

describe('a batch across a dev server restart', () => {
  let server: DevServer | undefined;
  let simulator: Simulator;

  afterAll(async () => {
    await server?.stop();
    await simulator?.close();
  });

  it('completes with nothing lost and no duplicated line when the file-backed server stops and starts mid-batch', async () => {
    simulator = await startSimulator();
    const port = await freePort();
    const uiPort = await freePort();
    const dbFilename = path.join(directory, 'temporal.db');
    server = await startDevServer({ port, uiPort, dbFilename });
    const taskQueue = uniqueName('batch-restart');
    workers.push(await spawnWorker({ address: server.address, taskQueue, env: workerEnvironment(simulator) }));
    const connection = await Connection.connect({ address: server.address });
    try {
      const client = await FanoutClient.connect({ client: new Client({ connection }), taskQueue });
      const source = writeTasks(directory, 300, () => 'x [sim latency=200]', 'restart');
      const sink = path.join(directory, 'restart.jsonl');
      const handle = await client.startBatch({ source, sink, options: { concurrency: 15, heartbeatTimeoutMs: 3000 } });
      await waitFor('a third of the batch', async () => (await handle.progress()).done >= 100, { timeoutMs: 60_000 });

      await server.stop();
      const stoppedAt = Date.now();
      server = await startDevServer({ port, uiPort, dbFilename });
      const summary = await handle.result();

      expect(summary).toMatchObject({ total: 300, succeeded: 300, failed: 0 });
      expect(sinkCounts(sink)).toEqual({ lines: 300, ids: 300, ok: 300 });
      // The worker lived on through the restart: calls answered before it were never sent again.
      const cost = resent(simulator, handle.batchId, stoppedAt);
      expect(cost.answeredThenResent).toEqual([]);
      expect(cost.duplicated).toBeLessThanOrEqual(cost.openAt);
      expect(cost.openNow).toBe(0);
    } finally {
      await connection.close();
    }
  });
});
