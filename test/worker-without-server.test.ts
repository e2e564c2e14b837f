import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { FanoutClient } from '../src/client/fanout-client';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import path from 'node:path';
import { batchDirectory, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { requestsOfRun } from './support/request-ledger';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * A `fanout worker` (launcher and heap-capped child, as in production) whose Temporal server goes away while it runs a
 * long call. Each test has a server of its own, since each kills it.
 */
let simulator: Simulator;
const servers: DevServer[] = [];
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  simulator = await startSimulator({});
});

afterAll(async () => {
  for (const worker of workers) await worker.kill();
  for (const server of servers) await server.stop().catch(() => undefined);
  await simulator.close();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The worker child a `fanout worker` launcher re-launched with the heap cap. */
function childOf(launcherPid: number): number {
  const pids = execFileSync('ps', ['-o', 'pid=', '--ppid', String(launcherPid)], { encoding: 'utf8' })
    .trim()
    .split(/\s+/)
    .map(Number);
  expect(pids).toHaveLength(1);
  return pids[0];
}

/** CPU time (user + system) a process has used so far, ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), in clock ticks of 10 ms; the split dropped the first two.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** A server, a worker process on it with `env`, and one 60 s call of a fan-out in flight at the simulator. */
async function workerWithLongCall(
  env: Record<string, string>,
): Promise<{ server: DevServer; worker: WorkerProcess; taskId: string }> {
  const server = await startDevServer();
  servers.push(server);
  const taskQueue = uniqueName('no-server');
  const worker = await spawnWorker({
    address: server.address,
    taskQueue,
    env: { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'test-key', FANOUT_LOG_LEVEL: 'INFO', ...env },
  });
  workers.push(worker);
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const taskId = uniqueName('long');
  await client.startParallel([{ id: taskId, prompt: 'long [sim latency=60000]' }]);
  await waitFor('the call to reach the simulator', () => simulator.log().some((request) => request.taskId === taskId));
  return { server, worker, taskId };
}

const requestOf = (taskId: string) => simulator.log().find((request) => request.taskId === taskId);

it('aborts its own calls once it has been cut off from Temporal longer than the lost-worker threshold, and waits using almost no CPU', async () => {
  const lostAfterMs = 3000;
  const { server, worker, taskId } = await workerWithLongCall({ FANOUT_LOST_WORKER_MS: String(lostAfterMs) });
  const child = childOf(worker.child.pid as number);
  // In touch with its server, the call runs on past the threshold untouched.
  await new Promise((resolve) => setTimeout(resolve, lostAfterMs * 2));
  expect(requestOf(taskId)?.clientClosedAt).toBeUndefined();

  await server.stop();
  const goneAt = Date.now();
  await waitFor('the call to be aborted', () => requestOf(taskId)?.clientClosedAt !== undefined, {
    timeoutMs: lostAfterMs + 15_000,
  });
  const closedAt = requestOf(taskId)?.clientClosedAt as number;
  // Aborted by the worker for being cut off, not by its death or the call's end: the worker is still up.
  expect(closedAt - goneAt).toBeLessThan(lostAfterMs + 6000);
  expect(requestOf(taskId)?.respondedAt).toBeUndefined();
  expect(alive(child)).toBe(true);
  expect(worker.output()).toContain('cut off from Temporal');

  // With its server gone it backs off: over 10 s it uses a small fraction of a core, and its watchdog says once what
  // is failing (presence polls, describes, the sweep's list), not once per retry (the SDK's own pollers log theirs).
  const cpuBefore = cpuMs(child);
  const windowStart = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const used = cpuMs(child) - cpuBefore;
  expect(used / (Date.now() - windowStart)).toBeLessThan(0.2);
  const said = worker
    .output()
    .split('\n')
    .filter((line) => line.includes('watchdog:'))
    .map((line) => line.replace(/^.*watchdog: /, '').replace(/ \{.*$/, ''));
  expect(said.length).toBeGreaterThan(0);
  expect(said).toEqual([...new Set(said)]);
});

it("stops a batch lane's next items once it has been cut off from Temporal: nothing is sent after the calls it aborted", async () => {
  const lostAfterMs = 3000;
  const server = await startDevServer();
  servers.push(server);
  const taskQueue = uniqueName('cut-off-lane');
  const worker = await spawnWorker({
    address: server.address,
    taskQueue,
    env: { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'test-key', FANOUT_LOST_WORKER_MS: String(lostAfterMs) },
  });
  workers.push(worker);
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const directory = batchDirectory();
  // Two lanes of several 20 s calls each: the cut-off comes while each lane has a call open and items to go.
  const source = writeTasks(directory, 12, () => 'long [sim latency=20000]', uniqueName('lane'));
  const handle = await client.startBatch({
    source,
    sink: path.join(directory, 'out.jsonl'),
    options: { concurrency: 2 },
  });
  const requests = () => requestsOfRun(simulator.log(), handle.batchId);
  await waitFor('two calls open', () => requests().length === 2, { timeoutMs: 30_000, intervalMs: 20 });

  await server.stop();
  const goneAt = Date.now();
  await waitFor('both calls aborted', () => requests().every((request) => request.clientClosedAt !== undefined), {
    timeoutMs: lostAfterMs + 15_000,
  });
  const abortedAt = Math.max(...requests().map((request) => request.clientClosedAt as number));
  // Before: each lane took its next item as its call was aborted, and that one a second later, and so on.
  await waitFor('three seconds after the aborts', () => Date.now() - abortedAt > 3000, { timeoutMs: 10_000 });
  expect(requests().filter((request) => request.arrivedAt > goneAt)).toEqual([]);
  expect(requests()).toHaveLength(2);
});

it('ends launcher and worker within its shutdown grace and a few seconds of SIGTERM when its server is gone, closing the call', async () => {
  const graceMs = 3000;
  // The lost-worker threshold far off: here it is the shutdown that must end the call.
  const { server, worker, taskId } = await workerWithLongCall({
    FANOUT_SHUTDOWN_GRACE_MS: String(graceMs),
    FANOUT_LOST_WORKER_MS: '600000',
  });
  const launcher = worker.child.pid as number;
  const child = childOf(launcher);

  await server.stop();
  worker.child.kill('SIGTERM');
  const signalledAt = Date.now();
  await waitFor('launcher and worker to exit', () => !alive(launcher) && !alive(child), {
    timeoutMs: graceMs + 30_000,
  });
  const exitedAt = Date.now();

  expect(exitedAt - signalledAt).toBeLessThan(graceMs + 10_000);
  await waitFor('the simulator to see the call closed', () => requestOf(taskId)?.clientClosedAt !== undefined);
  expect(requestOf(taskId)?.respondedAt).toBeUndefined();
});
