import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { FanoutClient } from '../src/client/fanout-client';
import type { BatchHandle } from '../src/client/batch-client';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { batchDirectory, readSink, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { faultCost, requestsOfRun } from './support/request-ledger';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * A seeded fault schedule: batches with short and long calls run on two worker processes whose store fails a share of
 * its calls, while the schedule SIGKILLs workers, SIGKILLs and restarts the server, and cancels and resumes, at points
 * drawn from the seed. After each batch, the simulator's own log is the judge: every id once in the sink, no call
 * answered before a fault sent again, no more calls re-sent than were open at the faults, nothing open at the end.
 * FANOUT_FAULT_SEED replays a schedule; FANOUT_FAULT_RUNS runs more batches (npm run bench runs a long schedule).
 */
const seed = Number(process.env.FANOUT_FAULT_SEED ?? Math.floor(Math.random() * 1e9));
const runs = Number(process.env.FANOUT_FAULT_RUNS ?? 2);

/** mulberry32: the schedule's dice. */
function dice(start: number): () => number {
  let state = start >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fault = 'kill-worker' | 'kill-server' | 'cancel-resume';

const directory = batchDirectory();
let simulator: Simulator;
let server: DevServer;
let port: number;
let uiPort: number;
const dbFilename = path.join(directory, 'temporal.db');
const workers: WorkerProcess[] = [];
let connection: Connection;

beforeAll(async () => {
  console.log(`fault schedule: seed ${seed}, ${runs} batches (FANOUT_FAULT_SEED=${seed} replays it)`);
  simulator = await startSimulator();
  port = await freePort();
  uiPort = await freePort();
  server = await startDevServer({ port, uiPort, dbFilename });
  connection = await Connection.connect({ address: server.address });
});

afterAll(async () => {
  for (const worker of workers.splice(0)) await worker.stop().catch(() => undefined);
  await connection?.close();
  await server?.stop();
  await simulator?.close();
});

function workerEnvironment(run: number, index: number): Record<string, string> {
  return {
    OPENAI_BASE_URL: simulator.baseUrl,
    OPENAI_API_KEY: 'test-key',
    FANOUT_STORE_FAULT_RATE: '0.02',
    FANOUT_STORE_FAULT_SEED: String(seed + run * 10 + index),
  };
}

async function runSchedule(run: number): Promise<void> {
  const roll = dice(seed + run);
  const long = run % 2 === 1;
  const items = long ? 60 : 240;
  const concurrency = long ? 12 : 16;
  const taskQueue = uniqueName(`faults-${run}`);
  for (let index = 0; index < 2; index += 1) workers.push(await spawnWorker({ address: server.address, taskQueue, env: workerEnvironment(run, index) }));
  const prompt = (index: number) => `fault run ${run} item ${index} [sim latency=${long ? 800 + Math.floor(roll() * 1500) : 60 + Math.floor(roll() * 200)}]`;
  const source = writeTasks(directory, items, prompt, `faults-${seed}-${run}`);
  const sink = path.join(directory, `faults-${seed}-${run}.out.jsonl`);
  const client = await FanoutClient.connect({ client: new Client({ connection }), taskQueue });
  let handle: BatchHandle = await client.startBatch({ source, sink, options: { concurrency } });
  const batchId = handle.batchId;
  const requests = () => requestsOfRun(simulator.log(), batchId);
  const answered = () => requests().filter((request) => request.outcome === 200).length;

  const kinds: Fault[] = ['kill-worker', 'kill-server', 'cancel-resume'];
  const schedule = Array.from({ length: 2 }, () => ({ kind: kinds[Math.floor(roll() * kinds.length)], after: Math.floor((0.2 + roll() * 0.5) * items) }));
  schedule.sort((a, b) => a.after - b.after);
  const faults: { kind: Fault; at: number }[] = [];
  for (const fault of schedule) {
    await waitFor(`${fault.after} answers before ${fault.kind}`, () => answered() >= fault.after, { timeoutMs: 120_000, intervalMs: 50 });
    const at = Date.now();
    faults.push({ kind: fault.kind, at });
    if (fault.kind === 'kill-worker') {
      const victim = Math.floor(roll() * 2);
      const [killed] = workers.splice(workers.length - 2 + victim, 1);
      await killed.kill();
      workers.push(await spawnWorker({ address: server.address, taskQueue, env: workerEnvironment(run, 2 + faults.length) }));
    } else if (fault.kind === 'kill-server') {
      await server.kill();
      server = await startDevServer({ port, uiPort, dbFilename });
    } else {
      await handle.cancel();
      handle = await client.resumeBatch(batchId);
    }
  }
  const summary = await handle.result();
  const log = requests();
  const lines = readSink(sink);
  const ids = lines.map((line) => line.id);
  const label = `seed ${seed} batch ${run} (${faults.map((fault) => fault.kind).join(', ')})`;
  // Each id exactly once in the sink, every one answered.
  expect({ label, lines: ids.length, ids: new Set(ids).size, failed: lines.filter((line) => line.status !== 'ok').map((line) => line.id) }).toEqual({ label, lines: items, ids: items, failed: [] });
  expect(summary.succeeded + summary.alreadyOk).toBe(items);
  // No call answered before a fault was sent again; no more calls re-sent than were open at the faults; none open now.
  const costs = faults.map((fault) => ({ ...fault, ...faultCost(log, fault.at - 250) }));
  expect({ label, resent: costs.flatMap((cost) => cost.answeredThenResent) }).toEqual({ label, resent: [] });
  const duplicated = faultCost(log, Date.now()).duplicated;
  expect(duplicated).toBeLessThanOrEqual(costs.reduce((sum, cost) => sum + cost.openAt, 0) + faults.length);
  expect(faultCost(log, Date.now()).openNow).toBe(0);
  // Every answered call is in the sink and in the cost.
  const okIds = new Set(lines.filter((line) => line.status === 'ok').map((line) => line.id));
  expect(log.filter((request) => request.outcome === 200 && !okIds.has(request.taskId))).toEqual([]);
  console.log(`${label}: ${items} items, ${log.length} requests, ${duplicated} ids sent twice, open at the faults ${costs.map((cost) => cost.openAt).join(' + ')}`);
  for (const worker of workers.splice(0)) await worker.stop();
}

describe('a seeded fault schedule', () => {
  for (let run = 0; run < runs; run += 1) {
    it(`keeps every answer exactly once through kills, server crashes, cancels and store faults (batch ${run})`, async () => {
      await runSchedule(run);
    }, 300_000);
  }
});
