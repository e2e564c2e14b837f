import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { FanoutClient } from '../src/client/fanout-client';
import type { BatchHandle } from '../src/client/batch-client';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { startS3Server, type S3Server } from '../src/local/s3-server';
import { PayloadStore, Storage } from '../src/store';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { readFileSync } from 'node:fs';
import type { BatchResultLine } from '../src/contract/batch';
import { batchDirectory, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { faultCost, openAtAnyFault, requestsOfRun } from './support/request-ledger';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * A seeded fault schedule: batches with short calls (a local store) and long calls (S3, SeaweedFS) run on two worker
 * processes whose store fails a share of
 * its calls, while the schedule SIGKILLs workers, SIGKILLs and restarts the server, and cancels and resumes, at points
 * drawn from the seed. After each batch, the simulator's own log is the judge: every id once in the sink, no call
 * answered before a fault sent again, no more calls re-sent than were open at the faults, no more re-sent after a kill
 * than the killed worker had open (each request names its worker) and none of the survivors', nothing open at the end.
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
let s3: S3Server;
let s3Storage: Storage;

beforeAll(async () => {
  console.log(`fault schedule: seed ${seed}, ${runs} batches (FANOUT_FAULT_SEED=${seed} replays it)`);
  s3 = await startS3Server();
  s3Storage = new Storage(s3.env());
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
  await s3?.stop();
});

function workerEnvironment(run: number, index: number): Record<string, string> {
  return {
    ...s3.env(),
    OPENAI_BASE_URL: simulator.baseUrl,
    OPENAI_API_KEY: 'test-key',
    FANOUT_STORE_FAULT_RATE: '0.02',
    FANOUT_STORE_FAULT_SEED: String(seed + run * 10 + index),
    // Sent with every call (x-fanout-worker): a kill excuses only the killed worker's calls.
    FANOUT_WORKER_IDENTITY: workerIdentity(run, index),
  };
}

function workerIdentity(run: number, index: number): string {
  return `faults-${seed}-${run}-worker-${index}`;
}

async function s3OrLocal(uri: string): Promise<string> {
  return (uri.startsWith('s3://') ? await s3Storage.read(uri) : readFileSync(uri)).toString('utf8');
}

async function runSchedule(run: number): Promise<void> {
  const roll = dice(seed + run);
  const long = run % 2 === 1;
  const items = long ? 60 : 240;
  const concurrency = long ? 12 : 16;
  const taskQueue = uniqueName(`faults-${run}`);
  for (let index = 0; index < 2; index += 1)
    workers.push(await spawnWorker({ address: server.address, taskQueue, env: workerEnvironment(run, index) }));
  const prompt = (index: number) =>
    `fault run ${run} item ${index} [sim latency=${long ? 800 + Math.floor(roll() * 1500) : 60 + Math.floor(roll() * 200)}]`;
  const local = writeTasks(directory, items, prompt, `faults-${seed}-${run}`);
  // Long calls on S3, short ones on the local disk.
  const source = long ? `s3://${s3.bucket}/faults-${seed}-${run}/tasks.jsonl` : local;
  if (long) await s3Storage.write(source, readFileSync(local));
  const sink = long
    ? `s3://${s3.bucket}/faults-${seed}-${run}/results.jsonl`
    : path.join(directory, `faults-${seed}-${run}.out.jsonl`);
  const client = await FanoutClient.connect({
    client: new Client({ connection }),
    taskQueue,
    store: new PayloadStore(s3Storage, `s3://${s3.bucket}/store`),
  });
  let handle: BatchHandle = await client.startBatch({ source, sink, options: { concurrency } });
  const batchId = handle.batchId;
  const requests = () => requestsOfRun(simulator.log(), batchId);
  const answered = () => requests().filter((request) => request.outcome === 200).length;

  const kinds: Fault[] = ['kill-worker', 'kill-server', 'cancel-resume'];
  const schedule = Array.from({ length: 2 }, () => ({
    kind: kinds[Math.floor(roll() * kinds.length)],
    after: Math.floor((0.2 + roll() * 0.5) * items),
  }));
  schedule.sort((a, b) => a.after - b.after);
  const faults: { kind: Fault; at: number; until: number; killed?: string }[] = [];
  const identities = [workerIdentity(run, 0), workerIdentity(run, 1)];
  for (const fault of schedule) {
    await waitFor(`${fault.after} answers before ${fault.kind}`, () => answered() >= fault.after, {
      timeoutMs: 120_000,
      intervalMs: 50,
    });
    const at = Date.now();
    // A cancel lasts until the batch has closed (cancel waits for it): calls started or answered meanwhile were in flight.
    const happened: (typeof faults)[number] = { kind: fault.kind, at, until: at };
    faults.push(happened);
    if (fault.kind === 'kill-worker') {
      const victim = Math.floor(roll() * 2);
      const [killed] = workers.splice(workers.length - 2 + victim, 1);
      [happened.killed] = identities.splice(victim, 1);
      await killed.kill();
      workers.push(
        await spawnWorker({ address: server.address, taskQueue, env: workerEnvironment(run, 2 + faults.length) }),
      );
      identities.push(workerIdentity(run, 2 + faults.length));
    } else if (fault.kind === 'kill-server') {
      await server.kill();
      server = await startDevServer({ port, uiPort, dbFilename });
    } else {
      await handle.cancel();
      happened.until = Date.now();
      handle = await client.resumeBatch(batchId);
    }
  }
  const summary = await handle.result();
  const log = requests();
  const lines = (await s3OrLocal(sink))
    .split('\n')
    .filter(Boolean)
    .map((text) => JSON.parse(text) as BatchResultLine);
  const ids = lines.map((line) => line.id);
  const label = `seed ${seed} batch ${run}, ${long ? 'calls of 0.8-2.3 s on S3' : 'calls of 60-260 ms on a local disk'} (${faults.map((fault) => fault.kind).join(', ')})`;
  // Each id exactly once in the sink, every one answered.
  expect({
    label,
    lines: ids.length,
    ids: new Set(ids).size,
    failed: lines.filter((line) => line.status !== 'ok').map((line) => line.id),
  }).toEqual({ label, lines: items, ids: items, failed: [] });
  expect(summary.succeeded + summary.alreadyOk).toBe(items);
  // No call answered before a fault was sent again; no more calls re-sent than were open at the faults; none open now.
  // A call open at an earlier fault (answered to a worker as it was killed, or to a lane as its cancel reached it) may go
  // again after a later one.
  const costs = faults.map((fault, index) => ({
    ...fault,
    ...faultCost(
      log,
      { at: fault.at, until: fault.until },
      undefined,
      faults.slice(0, index).map((earlier) => ({ at: earlier.at, until: earlier.until })),
    ),
  }));
  const resent = costs.flatMap((cost) => cost.answeredThenResent);
  if (resent.length > 0) {
    // The timeline a failure needs (ms from the batch's first request): the faults, and each resent id's requests.
    const t0 = log[0]?.arrivedAt ?? 0;
    const since = (at: number | undefined) => (at === undefined ? undefined : at - t0);
    console.log(
      JSON.stringify({
        label,
        faults: faults.map((fault) => ({ kind: fault.kind, at: since(fault.at), until: since(fault.until) })),
        requests: log
          .filter((request) => resent.includes(request.taskId))
          .map((request) => ({
            id: request.taskId,
            outcome: request.outcome,
            arrived: since(request.arrivedAt),
            responded: since(request.respondedAt),
            clientClosed: since(request.clientClosedAt),
          })),
      }),
    );
  }
  expect({ label, resent }).toEqual({ label, resent: [] });
  // Charged per kill: until the next fault, the ids sent again after a kill are at most the calls the killed worker had
  // open (by the x-fanout-worker header each request carries), and none of the survivors' open calls is among them.
  for (const [index, fault] of faults.entries()) {
    if (fault.kind !== 'kill-worker') continue;
    const until = faults[index + 1]?.at ?? Number.POSITIVE_INFINITY;
    const openAtKill = log.filter(
      (request) =>
        request.arrivedAt <= fault.at && (request.respondedAt ?? request.clientClosedAt ?? Infinity) > fault.at,
    );
    // A call open at an earlier fault (a cancel whose resume sends it again only after this kill) is that fault's.
    const earlier = faults.slice(0, index).map((earlier) => ({ at: earlier.at, until: earlier.until }));
    const sentBefore = new Set(
      log
        .filter((request) => request.arrivedAt <= fault.at && !openAtAnyFault(request, earlier))
        .map((request) => request.taskId),
    );
    const sentAgain = new Set(
      log
        .filter(
          (request) => request.arrivedAt > fault.at && request.arrivedAt < until && sentBefore.has(request.taskId),
        )
        .map((request) => request.taskId),
    );
    const victims = new Set(
      openAtKill.filter((request) => request.worker === fault.killed).map((request) => request.taskId),
    );
    const survivors = openAtKill.filter((request) => request.worker !== fault.killed).map((request) => request.taskId);
    if (sentAgain.size > victims.size) {
      // The timeline a failure needs (ms from the kill): every request of each id sent again that was not a victim's.
      const unexcused = [...sentAgain].filter((id) => !victims.has(id));
      const since = (at: number | undefined) => (at === undefined ? undefined : at - fault.at);
      console.log(
        JSON.stringify({
          label,
          kill: index,
          killed: fault.killed,
          victims: victims.size,
          sentAgain: sentAgain.size,
          requests: log
            .filter((request) => unexcused.includes(request.taskId))
            .map((request) => ({
              id: request.taskId,
              worker: request.worker,
              attempt: request.attempt,
              outcome: request.outcome,
              arrived: since(request.arrivedAt),
              responded: since(request.respondedAt),
              clientClosed: since(request.clientClosedAt),
            })),
        }),
      );
    }
    expect({ label, kill: index, sentAgain: sentAgain.size <= victims.size }).toEqual({
      label,
      kill: index,
      sentAgain: true,
    });
    expect({ label, kill: index, survivorsSentAgain: survivors.filter((id) => sentAgain.has(id)) }).toEqual({
      label,
      kill: index,
      survivorsSentAgain: [],
    });
  }
  const duplicated = faultCost(log, Date.now()).duplicated;
  expect(duplicated).toBeLessThanOrEqual(costs.reduce((sum, cost) => sum + cost.openAt, 0) + faults.length);
  expect(faultCost(log, Date.now()).openNow).toBe(0);
  // Every answered call is in the sink and in the cost.
  const okIds = new Set(lines.filter((line) => line.status === 'ok').map((line) => line.id));
  expect(log.filter((request) => request.outcome === 200 && !okIds.has(request.taskId))).toEqual([]);
  console.log(
    `${label}: ${items} items, ${log.length} requests, ${duplicated} ids sent twice, open at the faults ${costs.map((cost) => cost.openAt).join(' + ')}`,
  );
  for (const worker of workers.splice(0)) await worker.stop();
}

describe('a seeded fault schedule', () => {
  for (let run = 0; run < runs; run += 1) {
    it(`keeps every answer exactly once through kills, server crashes, cancels and store faults (batch ${run})`, async () => {
      await runSchedule(run);
    }, 300_000);
  }
});
