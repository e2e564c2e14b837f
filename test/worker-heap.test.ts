import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { freePort } from '../src/local/free-port';
import { batchDirectory, sinkCounts, writeTasks } from './support/batch-files';
import { CLI } from './support/paths';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const processes: ChildProcess[] = [];
/** Re-launched children seen, killed at the end should a failed test have orphaned one. */
const childPids: number[] = [];

const suite = useTestServers({
  beforeStop: async () => {
    for (const child of processes) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exitOf(child);
      }
    }
    for (const pid of childPids) if (!isGone(pid)) process.kill(pid, 'SIGKILL');
  },
});

/** The worker's environment: the simulator as the provider, plus `extra`. */
function workerEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    OPENAI_BASE_URL: suite.servers.simulator.baseUrl,
    OPENAI_API_KEY: 'test-key',
    FANOUT_HEARTBEAT_THROTTLE_MS: '500',
    ...extra,
  };
}

async function startWorker(taskQueue: string, extra: Record<string, string> = {}): Promise<WorkerProcess> {
  const worker = await spawnWorker({ address: suite.servers.server.address, taskQueue, env: workerEnv(extra) });
  processes.push(worker.child);
  return worker;
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Field `index` (1-based, as in proc(5)) of /proc/<pid>/stat; the command name in field 2 may hold spaces. */
function statField(pid: number, index: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[index - 3];
}

/** The live processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number(statField(Number(entry), 4)) === pid && !isGone(Number(entry))) children.push(Number(entry));
    } catch {
      // Exited while we looked.
    }
  }
  return children;
}

function commandLine(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    .split('\0')
    .filter((part) => part !== '');
}

/** Gone or a zombie: an orphan's zombie stays until this machine's init gets round to reaping it. */
function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return statField(pid, 3) === 'Z';
  } catch {
    return true;
  }
}

/** The one process `fanout worker` re-launched itself as. */
function onlyChildOf(worker: WorkerProcess): number {
  const children = childrenOf(worker.child.pid as number);
  expect(children).toHaveLength(1);
  childPids.push(...children);
  return children[0];
}

function slowTasks(prefix: string, count: number, latencyMs: number): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `slow [sim latency=${latencyMs}]`,
  }));
}

it('runs the worker in a child with a 256 MB heap cap, which serves metrics and completes a run', async () => {
  const taskQueue = uniqueName('heap');
  const metricsPort = await freePort();
  const worker = await startWorker(taskQueue, {
    FANOUT_METRICS_PORT: String(metricsPort),
    FANOUT_METRICS_HOST: '127.0.0.1',
  });
  const childPid = onlyChildOf(worker);
  const childArgs = commandLine(childPid);
  expect(childArgs[0]).toBe(process.execPath);
  expect(childArgs).toContain('--max-old-space-size=256');
  // A smaller young generation and fewer malloc arenas: the child's RSS, for the same CPU per call.
  expect(childArgs).toContain('--max-semi-space-size=8');
  const childEnvironment = readFileSync(`/proc/${childPid}/environ`, 'utf8').split('\0');
  expect(childEnvironment).toEqual(
    expect.arrayContaining(['MALLOC_ARENA_MAX=16', 'MALLOC_TRIM_THRESHOLD_=1048576', 'FANOUT_HEAP_SEMI_SPACE=1']),
  );
  expect(childArgs.slice(-5)).toEqual(['worker', '--address', suite.servers.server.address, '--task-queue', taskQueue]);
  expect(commandLine(worker.child.pid as number).some((argument) => argument.startsWith('--max-old-space-size'))).toBe(
    false,
  );
  // One worker, in the child: the parent neither polls nor holds the metrics port the child serves.
  expect(worker.output().match(/worker polling/g)).toHaveLength(1);
  expect(worker.output()).toContain(`metrics on http://127.0.0.1:${metricsPort}/metrics`);
  expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(200);

  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const tasks: AgentTask[] = Array.from({ length: 5 }, (_, index) => ({
    id: `agent-${index}`,
    prompt: `hello ${index}`,
  }));
  const { results } = await client.runParallel(tasks);
  expect(results.map((result) => [result.id, result.status])).toEqual(tasks.map((task) => [task.id, 'ok']));

  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  expect(await exit).toEqual({ code: 0, signal: null });
  expect(isGone(childPid)).toBe(true);
});

it.each([
  ['FANOUT_WORKER_HEAP_MB=off', { FANOUT_WORKER_HEAP_MB: 'off' }],
  ['NODE_OPTIONS with a heap limit', { NODE_OPTIONS: '--max-old-space-size=300' }],
])('runs the worker in the one process with %s', async (_name, env) => {
  const taskQueue = uniqueName('in-process');
  const worker = await startWorker(taskQueue, env);
  expect(childrenOf(worker.child.pid as number)).toEqual([]);
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const { results } = await client.runParallel([{ id: 'one', prompt: 'hello' }]);
  expect(results.map((result) => result.status)).toEqual(['ok']);
  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  expect(await exit).toEqual({ code: 0, signal: null });
});

it('passes SIGTERM on: the child lets in-flight calls finish, then the parent exits 0 after it', async () => {
  const taskQueue = uniqueName('heap-term');
  const worker = await startWorker(taskQueue, { FANOUT_SHUTDOWN_GRACE_MS: '20000' });
  const childPid = onlyChildOf(worker);
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const tasks = slowTasks('term', 3, 3000);
  const handle = await client.startParallel(tasks);
  const requests = () => suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  await waitFor('every call to reach the simulator', () => requests().length === tasks.length);

  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  expect(await exit).toEqual({ code: 0, signal: null });
  expect(isGone(childPid)).toBe(true);
  expect(worker.output()).toContain(
    `SIGTERM: worker stopping; ${tasks.length} agent calls in flight get up to 20000 ms to finish`,
  );
  expect(worker.output()).toContain('worker stopped');
  for (const request of requests()) {
    expect(request.respondedAt).toBeDefined();
    expect(request.clientClosedAt).toBeUndefined();
  }
});

it('drains once on Ctrl-C in a terminal, where SIGINT goes to the whole process group', async () => {
  const taskQueue = uniqueName('heap-int');
  // Its own process group, as a shell gives a foreground job; a terminal's Ctrl-C signals every process in it.
  const parent = spawn(
    process.execPath,
    [CLI, 'worker', '--address', suite.servers.server.address, '--task-queue', taskQueue],
    {
      env: { ...process.env, ...workerEnv({ FANOUT_SHUTDOWN_GRACE_MS: '20000' }) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  processes.push(parent);
  let output = '';
  parent.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  parent.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitFor('the worker to poll', () => output.includes('worker polling'));
  // Only the parent is in the terminal's group: the child gets the one SIGINT it forwards, not the group's too.
  const children = childrenOf(parent.pid as number);
  expect(children).toHaveLength(1);
  childPids.push(...children);
  expect(Number(statField(children[0], 5))).not.toBe(parent.pid);
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const tasks = slowTasks('int', 2, 3000);
  const handle = await client.startParallel(tasks);
  const requests = () => suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  await waitFor('every call to reach the simulator', () => requests().length === tasks.length);

  const exit = exitOf(parent);
  process.kill(-(parent.pid as number), 'SIGINT');
  // A second SIGINT in the child (the group's and the forwarded one) would end it mid-drain, by the signal.
  expect(await exit).toEqual({ code: 0, signal: null });
  expect(output).toContain('worker stopped');
  for (const request of requests()) expect(request.respondedAt).toBeDefined();
});

it('takes the child down at once when the parent is SIGKILLed: its in-flight calls stop', async () => {
  const taskQueue = uniqueName('heap-kill');
  const worker = await startWorker(taskQueue);
  const childPid = onlyChildOf(worker);
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const handle = await client.startParallel(slowTasks('kill', 2, 30_000));
  const requests = () => suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  await waitFor('the calls to reach the simulator', () => requests().length === 2);

  await worker.kill();
  await waitFor('the re-launched child to be gone', () => isGone(childPid), { timeoutMs: 10_000 });
  await waitFor(
    'the simulator to see the calls dropped',
    () => requests().every((request) => request.clientClosedAt !== undefined),
    { timeoutMs: 10_000 },
  );
  expect(requests().every((request) => request.respondedAt === undefined)).toBe(true);
  await handle.cancel();
});

it.each(['abc', '32', '256.5', '-1'])(
  'refuses FANOUT_WORKER_HEAP_MB=%s with exit code 2 and one line naming it',
  async (value) => {
    const { code, stdout, stderr } = await runCli(
      ['worker', '--address', suite.servers.server.address, '--task-queue', uniqueName('bad')],
      {
        FANOUT_WORKER_HEAP_MB: value,
      },
    );
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trimEnd().split('\n')).toEqual([expect.stringContaining('FANOUT_WORKER_HEAP_MB')]);
    expect(stderr).toContain(`"${value}"`);
  },
);

it('runs a long batch in a worker capped at 72 MB of heap: per-call memory does not pile up', async () => {
  // A regression guard, not a measurement (bench/compare.ts (d) measures): a few KB kept per call (the request
  // signals once kept alive for the worker's lifetime) pile up over 12,000 calls past what this heap leaves above the
  // worker's own, and the worker dies of it. The worker's heap after each full collection stays at 43-63 MB through
  // such a batch (--trace-gc, 10,000 and 20,000 calls at 200): 72 MB leaves about as much room per call as 80 MB did
  // over the 20,000 calls this test ran before. Seen: with 2 KB kept per call (an array pushed on a global in
  // sendChat), the worker died 50 s into this batch at 72 MB, while at 80 MB the same 12,000 calls passed. Not 64: the
  // worker's peak in the batch's first seconds (200 calls starting at once, beside another test file) reached 63 MB
  // after a full GC, and 64 MB failed there, 6.5 s in, before most calls had run.
  const taskQueue = uniqueName('heap-long');
  const worker = await startWorker(taskQueue, { FANOUT_WORKER_HEAP_MB: '72' });
  const childPid = onlyChildOf(worker);
  expect(commandLine(childPid)).toContain('--max-old-space-size=72');
  const directory = batchDirectory();
  const source = writeTasks(directory, 12_000, () => 'short [sim latency=0]', 'long');
  const sink = path.join(directory, 'long.jsonl');
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const handle = await client.startBatch({ source, sink, options: { concurrency: 200 } });
  // Should the worker die (the parent exits with its child), fail at once with its last words, not at the timeout.
  const died = exitOf(worker.child).then((exit) => {
    throw new Error(
      `the worker exited (${JSON.stringify(exit)}) before the batch finished:\n${worker.output().slice(-1500)}`,
    );
  });
  const summary = await Promise.race([handle.result(), died]).catch(async (error: unknown) => {
    await handle.workflow.terminate('the worker died').catch(() => undefined);
    throw error;
  });
  expect(summary).toMatchObject({ total: 12_000, succeeded: 12_000, failed: 0 });
  expect(sinkCounts(sink)).toEqual({ lines: 12_000, ids: 12_000, ok: 12_000 });
  expect(isGone(childPid)).toBe(false);
  expect(worker.output()).not.toMatch(/heap out of memory|worker polling[\s\S]*worker polling/);

  const exit = exitOf(worker.child);
  worker.child.kill('SIGTERM');
  expect(await exit).toEqual({ code: 0, signal: null });
  // What is tested is memory, not speed: 20,000 calls as fast as the machine goes took 90-110 s alone, and over 300 s
  // beside three other test files and other work (load 17-21), where this timeout once ended a passing batch.
}, 600_000);
