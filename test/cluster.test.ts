import path from 'node:path';
import type { BatchHandle } from '../src/client/batch-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { BatchOptions } from '../src/contract/batch';
import { startTemporalCluster, type TemporalCluster } from '../src/local/cluster';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { batchDirectory, readSink, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// The crash scenarios of batch-resilience.test.ts, on the server a production deployment runs: temporal-server with
// PostgreSQL persistence, started from scratch (initdb, schema tool, namespace, search attribute) by this file.

const directory = batchDirectory();
const workers: WorkerProcess[] = [];
let cluster: TemporalCluster | undefined;
let simulator: Simulator;

function running(): TemporalCluster {
  if (!cluster) throw new Error('the cluster did not start');
  return cluster;
}

beforeAll(async () => {
  const started = Date.now();
  cluster = await startTemporalCluster();
  process.stderr.write(`Temporal cluster on PostgreSQL ready at ${cluster.address} in ${Date.now() - started} ms\n`);
  simulator = await startSimulator();
}, 180_000);

afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
});

afterAll(async () => {
  await simulator?.close();
  await cluster?.stop();
});

function startWorker(taskQueue: string): Promise<WorkerProcess> {
  const env = { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'test-key', FANOUT_HEARTBEAT_THROTTLE_MS: '500' };
  return spawnWorker({ address: running().address, taskQueue, env });
}

/** A client of the cluster through the public API only, as an application would use it; closed after `work`. */
async function withFanout(taskQueue: string, work: (fanout: FanoutClient) => Promise<void>): Promise<void> {
  const fanout = await FanoutClient.connect({ temporal: { address: running().address }, taskQueue });
  try {
    await work(fanout);
  } finally {
    await fanout.close();
  }
}

/** Model calls the simulator has answered for tasks whose ids start with `prefix`. */
function answered(prefix: string): number {
  return simulator
    .log()
    .filter((request) => request.taskId.startsWith(`${prefix}-`) && request.respondedAt !== undefined).length;
}

/** The batch both tests run: 200 tasks of 200 ms, named and identified by `prefix`. */
const BATCH_SIZE = 200;
const sinkOf = (prefix: string) => path.join(directory, `${prefix}.jsonl`);

/** Starts the batch `prefix` and waits until a third of it has answered (70 of 200). */
async function startUntilAThirdAnswered(
  fanout: FanoutClient,
  prefix: string,
  options: BatchOptions,
): Promise<BatchHandle> {
  const source = writeTasks(directory, BATCH_SIZE, () => 'x [sim latency=200]', prefix);
  const handle = await fanout.startBatch({ source, sink: sinkOf(prefix), batchId: prefix, options });
  await waitFor('a third of the batch answered', () => answered(prefix) >= 70, { timeoutMs: 60_000 });
  return handle;
}

/** Asserts the sink of batch `prefix` holds every id of its source exactly once, each ok. */
function expectEveryIdOnceAndOk(prefix: string): void {
  const lines = readSink(sinkOf(prefix));
  const ids = lines.map((line) => line.id).sort();
  const expected = Array.from({ length: BATCH_SIZE }, (_, index) => `${prefix}-${index}`).sort();
  expect(ids).toEqual(expected);
  expect(lines.filter((line) => line.status !== 'ok')).toEqual([]);
}

it('completes a batch after its worker is SIGKILLed mid-batch: every id exactly once, all ok', async () => {
  const taskQueue = uniqueName('cluster-kill');
  workers.push(await startWorker(taskQueue));
  const prefix = uniqueName('kill');
  await withFanout(taskQueue, async (fanout) => {
    const handle = await startUntilAThirdAnswered(fanout, prefix, { concurrency: 20, heartbeatTimeoutMs: 2000 });
    await workers[0].kill();
    workers.push(await startWorker(taskQueue));
    await handle.result();
  });

  expectEveryIdOnceAndOk(prefix);
});

it('completes a batch across a temporal-server crash and restart on the same database: nothing lost, no duplicate line', async () => {
  const taskQueue = uniqueName('cluster-restart');
  workers.push(await startWorker(taskQueue));
  const prefix = uniqueName('restart');
  let answeredAtCrash = 0;
  await withFanout(taskQueue, async (fanout) => {
    const handle = await startUntilAThirdAnswered(fanout, prefix, { concurrency: 15, heartbeatTimeoutMs: 3000 });
    answeredAtCrash = answered(prefix);
    await running().killServer();
    const restarting = Date.now();
    await running().startServer();
    process.stderr.write(`temporal-server restarted in ${Date.now() - restarting} ms\n`);
    await handle.result();
  });

  // The crash really was mid-batch: most of the work was still to do.
  expect(answeredAtCrash).toBeLessThan(150);
  expectEveryIdOnceAndOk(prefix);
});
