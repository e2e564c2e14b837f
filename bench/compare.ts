/**
 * `npm run bench` (its last step): temporal-fanout side by side with a plain Temporal project of the same SDK
 * (bench/plain/) and the seed guide's asyncio semaphore pattern (bench/asyncio/), in one run, on one dev server and
 * one simulator, rounds alternated so every contender sees the same machine load. Writes its section of
 * docs/BENCHMARKS.md between `<!-- compare:start -->` and `<!-- compare:end -->`, and prints it.
 *
 *   tsx bench/compare.ts [--rounds N] [--only a,b,c,d,e,f,g] [--quick] [--big] [--big-items N] [--agents N]
 *     [--agents-contenders ours,plain,asyncio[,design]] [--cli-baseline <another build's dist/cli/main.js>]
 *   (`design` in (g): a design probe, each agent's whole loop in one journaled activity; bench/plain/activities.ts)
 *   (BENCH_WORKER_NODE_OPTIONS / BENCH_WORKER_NODE_ARGS: NODE_OPTIONS / node arguments for our worker, e.g. --cpu-prof)
 *
 * Every worker is its own child process, so its peak RSS is its own: VmHWM from /proc, reset at the start of each
 * round (clear_refs), with VmRSS sampled as a fallback; summed over its child processes (ours re-launches itself with
 * a heap cap and supervises the child). Ours runs through the public API and the built CLI only
 * (`npm run build` first), so the harness survives rewrites behind them.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { FanoutClient } from '../src/client/fanout-client';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { runPlainAgents, runPlainBatch, runPlainFanOut } from './plain/client';
import { bundlePlainWorkflows } from './plain/worker';
import { cpuSeconds, processTree, statusMb, threadCpuDelta, threadCpuSeconds } from './proc';
import { startReady, stopChild } from './ready-process';
import { scratchDirectory } from './scratch';

const ROOT = path.join(__dirname, '..');
const CLI = path.join(ROOT, 'dist', 'cli', 'main.js');
// In this checkout's own dist/ (rebuilt each run): node_modules may be a link shared with other checkouts.
const PLAIN_BUILD = path.join(ROOT, 'dist', 'bench-plain');

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string' },
    only: { type: 'string' },
    quick: { type: 'boolean', default: false },
    big: { type: 'boolean', default: false },
    'big-items': { type: 'string', default: '100000' },
    agents: { type: 'string', default: '200' },
    'agents-contenders': { type: 'string', default: 'ours,plain,asyncio' },
    'cli-baseline': { type: 'string' },
  },
});
const ROUNDS = Number(flags.rounds ?? (flags.quick ? 1 : 3));
const BIG_ITEMS = Number(flags['big-items']);
const AGENTS = Number(flags.agents);
// (b) runs this CLI too (e.g. an earlier build's dist/cli/main.js copied into .dist-before/), beside this checkout's.
const CLI_BASELINE = flags['cli-baseline'] === undefined ? undefined : path.resolve(flags['cli-baseline']);
const AGENT_CONTENDERS = new Set(flags['agents-contenders'].split(',').map((name) => name.trim()));
const SCENARIOS = new Set(
  (flags.only ?? (flags.big ? 'a,b,c,d,e,f,g' : 'a,b,c,e,g')).split(',').map((name) => name.trim()),
);
for (const [name, value] of [
  ['--rounds', ROUNDS],
  ['--big-items', BIG_ITEMS],
  ['--agents', AGENTS],
] as const) {
  if (!Number.isInteger(value) || value < 1)
    throw new TypeError(`${name} must be a whole number of at least 1, got ${value}`);
}

const loadAtStart = os.loadavg()[0];
const directory = scratchDirectory('fanout-compare-');
const children = new Set<ChildProcess>();
// Children do not die with their parent; whatever is still running when this process exits is killed.
process.once('exit', () => children.forEach((child) => child.kill('SIGKILL')));

async function waitFor<T>(what: string, deadlineMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} within ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Rejects after `ms`, running `onTimeout` first (to terminate what the run left behind). */
async function withDeadline<T>(work: Promise<T>, ms: number, onTimeout: () => Promise<unknown>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout().then(
        () => reject(new Error(`did not finish within ${ms / 1000} s`)),
        () => reject(new Error(`did not finish within ${ms / 1000} s`)),
      );
    }, ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

interface DevServer {
  address: string;
  /** The server's Prometheus text (its \`action\` counter is what Temporal Cloud bills; \`service_requests\` counts RPCs). */
  metrics(): Promise<string>;
  version: string;
  pid: number;
  stop(): Promise<void>;
}

/** One `temporal server start-dev`: in memory, free ports, no UI, errors only. */
async function startServer(): Promise<DevServer> {
  const executable = execFileSync('bash', [path.join(ROOT, 'scripts', 'ensure-temporal.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const version = execFileSync(executable, ['--version'], { encoding: 'utf8' }).trim();
  const [port, metricsPort] = [await freePort(), await freePort()];
  const address = `127.0.0.1:${port}`;
  const child = track(
    spawn(
      executable,
      [
        'server',
        'start-dev',
        '--ip',
        '127.0.0.1',
        '--port',
        String(port),
        '--headless',
        '--metrics-port',
        String(metricsPort),
        '--log-level',
        'error',
        '--search-attribute',
        'FanoutName=Keyword',
        // Otherwise the server asks Temporal's servers for newer versions at start: a network call a local run does not need.
        '--dynamic-config-value',
        'frontend.enableServerVersionCheck=false',
        // Eager activity dispatch (off in the server's defaults): a fan-out's calls go straight back to the worker that
        // scheduled them, without matching and a poll each (see FANOUT_EAGER_ACTIVITIES).
        '--dynamic-config-value',
        'system.enableActivityEagerExecution=true',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    ),
  );
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  await waitFor(`the dev server on ${address} did not serve`, 60_000, async () => {
    if (child.exitCode !== null) throw new Error(`the dev server exited: ${output}`);
    const connection = await Connection.connect({ address, connectTimeout: 1000 });
    try {
      await connection.workflowService.describeNamespace({ namespace: 'default' });
      return true;
    } finally {
      await connection.close();
    }
  });
  return {
    address,
    version,
    pid: child.pid as number,
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
    stop: () => stopChild(child),
  };
}

/** A worker in its own process, its stderr in a log file. */
interface WorkerProcess {
  readonly label: string;
  readonly taskQueue: string;
  readonly pid: number;
  stop(): Promise<void>;
}

async function spawnWorker(
  label: string,
  command: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
): Promise<WorkerProcess> {
  const logFile = path.join(directory, `${label.replace(/\W+/g, '-')}.log`);
  const log = createWriteStream(logFile);
  const taskQueue = command[command.indexOf('--task-queue') + 1];
  const started = await startReady(
    `worker ${label}`,
    command,
    { ...process.env, ...env },
    {
      ready,
      onStderr: (chunk) => log.write(chunk),
    },
  );
  return {
    label,
    taskQueue,
    pid: started.pid,
    stop: async () => {
      await started.stop();
      log.end();
    },
  };
}

function oursWorker(
  server: DevServer,
  simulator: Simulator,
  name: string,
  env: NodeJS.ProcessEnv = {},
): Promise<WorkerProcess> {
  const taskQueue = `ours-${name}-${Date.now()}`;
  const nodeArgs = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return spawnWorker(
    `ours-${name}`,
    [...nodeArgs, CLI, 'worker', '--address', server.address, '--task-queue', taskQueue],
    {
      OPENAI_BASE_URL: simulator.baseUrl,
      OPENAI_API_KEY: 'bench',
      ...(process.env.BENCH_WORKER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS } : {}),
      ...env,
    },
    /worker polling/,
  );
}

function plainWorker(server: DevServer, simulator: Simulator, bundle: string, slots: number): Promise<WorkerProcess> {
  const taskQueue = `plain-${slots}-${Date.now()}`;
  const script = path.join(PLAIN_BUILD, 'worker.js');
  const nodeArgs = (process.env.BENCH_PLAIN_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return spawnWorker(
    `plain-${slots}`,
    [
      ...nodeArgs,
      script,
      '--address',
      server.address,
      '--task-queue',
      taskQueue,
      '--bundle',
      bundle,
      '--slots',
      String(slots),
    ],
    {
      OPENAI_BASE_URL: simulator.baseUrl,
      OPENAI_API_KEY: 'bench',
      PLAIN_JOURNAL_DIR: path.join(directory, 'journals'),
    },
    /plain worker polling/,
  );
}

/**
 * Peak RSS of a worker over one round, its child processes included: the sum of each process's VmHWM after a reset
 * (an upper bound: their peaks need not coincide), or the largest sum of VmRSS sampled when it cannot be reset.
 */
function peakRss(pid: number): { stop(): number } {
  const pids = processTree(pid);
  let resettable = true;
  try {
    for (const each of pids) writeFileSync(`/proc/${each}/clear_refs`, '5');
  } catch {
    resettable = false;
  }
  const total = (field: 'VmHWM' | 'VmRSS') => pids.reduce((sum, each) => sum + statusMb(each, field), 0);
  let sampled = total('VmRSS');
  const timer = setInterval(() => {
    try {
      sampled = Math.max(sampled, total('VmRSS'));
    } catch {
      // the process is gone; the caller will see its run fail
    }
  }, 250);
  return {
    stop: () => {
      clearInterval(timer);
      try {
        sampled = Math.max(sampled, total('VmRSS'));
        return resettable ? Math.max(sampled, total('VmHWM')) : sampled;
      } catch {
        return sampled;
      }
    },
  };
}

function writeTasks(name: string, count: number, model?: string): string {
  const file = path.join(directory, `${name}.jsonl`);
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1)
    lines.push(
      JSON.stringify({ id: `item-${index}`, prompt: `batch item ${index}`, ...(model === undefined ? {} : { model }) }),
    );
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Lines in the sink and distinct ids among them: what "results durably stored" means here. */
function sinkCounts(sink: string): { lines: number; ids: number } {
  const lines = readFileSync(sink, 'utf8').split('\n').filter(Boolean);
  return { lines: lines.length, ids: new Set(lines.map((line) => (JSON.parse(line) as { id: string }).id)).size };
}

let sinkNumber = 0;
function newSink(): string {
  sinkNumber += 1;
  return path.join(directory, `sink-${sinkNumber}.jsonl`);
}

/** One measured run of one contender. */
interface Sample {
  wallMs: number;
  /** The scenario's metric: a ratio to the ideal (lower is better) or calls per second (higher is better). */
  value: number;
  rssMb?: number;
  note?: string;
  /** Figures the goals read besides the metric (scenario g: worker CPU seconds, actions per model step). */
  figures?: Record<string, number>;
}

interface Contender {
  name: string;
  run(size: 'warm-up' | 'measured'): Promise<Sample>;
}

interface Row {
  contender: string;
  samples: Sample[];
  error?: string;
}

interface ScenarioResult {
  id: string;
  title: string;
  metric: string;
  higherIsBetter: boolean;
  rows: Row[];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

function medianSample(row: Row): Sample | undefined {
  if (row.samples.length === 0) return undefined;
  const value = median(row.samples.map((sample) => sample.value));
  return row.samples.find((sample) => sample.value === value);
}

/** A warm-up run of every contender, then `ROUNDS` rounds, each contender once per round, the order rotated each round. */
/** The dev server's process, for its CPU time per run (printed, not tabled). */
let serverPid: number | undefined;

async function measure(
  id: string,
  title: string,
  metric: string,
  higherIsBetter: boolean,
  contenders: Contender[],
): Promise<ScenarioResult> {
  const rows: Row[] = contenders.map((contender) => ({ contender: contender.name, samples: [] }));
  const attempt = async (index: number, size: 'warm-up' | 'measured') => {
    const row = rows[index];
    if (row.error !== undefined) return;
    try {
      const serverCpuBefore = serverPid === undefined ? 0 : cpuSeconds(serverPid);
      const sample = await contenders[index].run(size);
      if (size === 'measured') {
        row.samples.push(sample);
        const serverCpu =
          serverPid === undefined ? '' : `, dev server CPU ${(cpuSeconds(serverPid) - serverCpuBefore).toFixed(1)} s`;
        console.error(
          `(${id}) ${row.contender}: ${metric} ${sample.value.toFixed(3)}, wall ${sample.wallMs.toFixed(0)} ms${sample.rssMb === undefined ? '' : `, peak RSS ${sample.rssMb.toFixed(0)} MB`}${serverCpu}${sample.note ? `, ${sample.note}` : ''}`,
        );
      }
    } catch (error) {
      row.error = (error instanceof Error ? error.message : String(error)).split('\n')[0].slice(0, 160);
      console.error(`(${id}) ${row.contender} failed: ${row.error}`);
    }
  };
  for (let index = 0; index < contenders.length; index += 1) await attempt(index, 'warm-up');
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let step = 0; step < contenders.length; step += 1)
      await attempt((round + step) % contenders.length, 'measured');
  }
  return { id, title, metric, higherIsBetter, rows };
}

interface Harness {
  server: DevServer;
  simulator: Simulator;
  plainClient: Client;
  plainBundle: string;
  python: string | undefined;
}

/** Runs a script of bench/asyncio against the simulator and returns the JSON line it prints last. */
async function runPython<T>(harness: Harness, script: string, args: string[]): Promise<T> {
  const python = harness.python as string;
  const child = track(
    spawn(python, [path.join(__dirname, 'asyncio', script), '--base-url', harness.simulator.baseUrl, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${script} exited with ${code}: ${stderr}`);
  return JSON.parse(stdout.trim().split('\n').pop() as string) as T;
}

async function runAsyncio(
  harness: Harness,
  count: number,
  concurrency: number,
): Promise<{ wallMs: number; ok: number; failed: number; peakRssMb: number }> {
  const result = await runPython<{ wallMs: number; ok: number; failed: number; peakRssMb: number }>(
    harness,
    'semaphore_batch.py',
    ['--count', String(count), '--concurrency', String(concurrency)],
  );
  if (result.ok !== count) throw new Error(`asyncio: ${result.failed} of ${count} calls failed`);
  return result;
}

function asyncioContender(
  harness: Harness,
  count: number,
  concurrency: number,
  value: (wallMs: number) => number,
): Contender[] {
  if (harness.python === undefined) return [];
  return [
    {
      name: `asyncio semaphore (Python, openai client), ${concurrency} at once`,
      run: async (size) => {
        harness.simulator.reset();
        const result = await runAsyncio(harness, size === 'warm-up' ? Math.min(count, 50) : count, concurrency);
        return { wallMs: result.wallMs, value: value(result.wallMs), rssMb: result.peakRssMb };
      },
    },
  ];
}

async function timedOnWorker<T>(
  harness: Harness,
  worker: WorkerProcess,
  work: () => Promise<T>,
): Promise<{ wallMs: number; rssMb: number; result: T }> {
  harness.simulator.reset();
  const rss = peakRss(worker.pid);
  const startedAt = performance.now();
  const monotonicStart = process.hrtime.bigint() / 1000n;
  try {
    const result = await work();
    // On the clock of a --cpu-prof worker's profile and of /proc samples (CLOCK_MONOTONIC, µs): the run's window there.
    console.error(`run window (µs, monotonic): ${monotonicStart} ${process.hrtime.bigint() / 1000n}`);
    return { wallMs: performance.now() - startedAt, rssMb: rss.stop(), result };
  } catch (error) {
    rss.stop();
    throw error;
  }
}

const tasks = (count: number) =>
  Array.from({ length: count }, (_, index) => ({ id: `agent-${index}`, prompt: `agent prompt ${index}` }));

/** (a) 500 agents of 1 s each, all at once: wall over the 1 s a single agent takes. */
async function agentsScenario(harness: Harness): Promise<ScenarioResult> {
  harness.simulator.configure({ latency: { minMs: 1000, maxMs: 1000 } });
  const ours = await oursWorker(harness.server, harness.simulator, 'agents');
  const plain100 = await plainWorker(harness.server, harness.simulator, harness.plainBundle, 100);
  const plain500 = await plainWorker(harness.server, harness.simulator, harness.plainBundle, 500);
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  const count = (size: string) => (size === 'warm-up' ? 20 : 500);
  const plain = (worker: WorkerProcess, slots: number): Contender => ({
    name: `plain SDK: plainFanOut (Promise.all), ${slots} activity slots`,
    run: async (size) => {
      const run = await timedOnWorker(harness, worker, () =>
        withDeadline(
          runPlainFanOut(harness.plainClient, worker.taskQueue, tasks(count(size))),
          120_000,
          async () => undefined,
        ),
      );
      return { wallMs: run.wallMs, value: run.wallMs / 1000, rssMb: run.rssMb };
    },
  });
  try {
    return await measure('a', '500 agents of 1 s each, all at once', 'wall / 1 s', false, [
      {
        name: 'ours: runParallel (fanOut), worker defaults (500 slots)',
        run: async (size) => {
          const run = await timedOnWorker(harness, ours, async () => {
            const handle = await fanout.startParallel(tasks(count(size)));
            return withDeadline(handle.result(), 120_000, () => handle.workflow.terminate('benchmark deadline'));
          });
          const failed = run.result.results.filter((result) => result.status !== 'ok').length;
          if (failed > 0) throw new Error(`${failed} agents did not succeed`);
          return { wallMs: run.wallMs, value: run.wallMs / 1000, rssMb: run.rssMb };
        },
      },
      plain(plain100, 100),
      plain(plain500, 500),
      ...asyncioContender(harness, 500, 500, (wallMs) => wallMs / 1000),
    ]);
  } finally {
    await fanout.close();
    await Promise.all([ours.stop(), plain100.stop(), plain500.stop()]);
  }
}

/** Runs a batch through the public API, checks the sink, and returns the summary with the end-to-end wall. */
async function oursBatch(
  harness: Harness,
  fanout: FanoutClient,
  worker: WorkerProcess,
  source: string,
  count: number,
  concurrency: number,
  deadlineMs: number,
) {
  const sink = newSink();
  const run = await timedOnWorker(harness, worker, async () => {
    const handle = await fanout.startBatch({ source, sink, options: { concurrency } });
    return {
      batchId: handle.batchId,
      summary: await withDeadline(handle.result(), deadlineMs, () => handle.workflow.terminate('benchmark deadline')),
    };
  });
  if (run.result.summary.succeeded !== count)
    throw new Error(`batch: ${run.result.summary.succeeded} of ${count} succeeded`);
  const stored = sinkCounts(sink);
  if (stored.lines !== count || stored.ids !== count)
    throw new Error(`sink holds ${stored.lines} lines / ${stored.ids} ids, expected ${count}`);
  return { ...run, sink };
}

/** (b) 1,000 items, 50 at once, 200 ms each: wall over the ideal ceil(N/C) x L = 4.0 s. */
async function windowScenario(harness: Harness): Promise<ScenarioResult> {
  harness.simulator.configure({ latency: { minMs: 200, maxMs: 200 } });
  const ideal = Math.ceil(1000 / 50) * 200;
  const sources = { 'warm-up': writeTasks('window-warm-up', 100), measured: writeTasks('window', 1000) };
  const count = (size: 'warm-up' | 'measured') => (size === 'warm-up' ? 100 : 1000);
  const ours = await oursWorker(harness.server, harness.simulator, 'window');
  const plain = await plainWorker(harness.server, harness.simulator, harness.plainBundle, 100);
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  let coldRounds = 0;
  // `fanout batch start --watch` as a user runs it: a new process from its start to its exit, the summary its last line.
  const cliContender = (name: string, cli: string): Contender => ({
    name,
    run: async (size) => {
      const sink = newSink();
      const run = await timedOnWorker(harness, ours, async () => {
        const child = track(
          spawn(
            process.execPath,
            [
              cli,
              'batch',
              'start',
              sources[size],
              '--out',
              sink,
              '--concurrency',
              '50',
              '--watch',
              '--json',
              '--address',
              harness.server.address,
              '--task-queue',
              ours.taskQueue,
            ],
            { stdio: ['ignore', 'pipe', 'pipe'] },
          ),
        );
        let stdout = '';
        let stderr = '';
        child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
        const code = await withDeadline(
          new Promise<number | null>((resolve) => child.once('exit', resolve)),
          180_000,
          () => stopChild(child),
        );
        if (code !== 0) throw new Error(`fanout batch start exited with ${code}: ${stderr || stdout.slice(-500)}`);
        return JSON.parse(stdout.trim().split('\n').pop() as string) as { succeeded: number; wallMs: number };
      });
      if (run.result.succeeded !== count(size))
        throw new Error(`CLI batch: ${run.result.succeeded} of ${count(size)} succeeded`);
      if (sinkCounts(sink).ids !== count(size)) throw new Error('CLI batch: the sink does not hold every id');
      return {
        wallMs: run.wallMs,
        value: run.wallMs / ideal,
        rssMb: run.rssMb,
        // What the process adds to the batch: start-up, connecting, the file's check, the start, the result's way back, the exit.
        note: `inside the workflow ${(run.result.wallMs / ideal).toFixed(2)} x, process beyond the workflow ${(run.wallMs - run.result.wallMs).toFixed(0)} ms`,
      };
    },
  });
  try {
    return await measure('b', '1,000-item batch, concurrency 50, 200 ms calls (ideal 4.0 s)', 'wall / ideal', false, [
      {
        name: 'ours: startBatch → result(), end to end (inside the workflow in notes)',
        run: async (size) => {
          const run = await oursBatch(harness, fanout, ours, sources[size], count(size), 50, 180_000);
          return {
            wallMs: run.wallMs,
            value: run.wallMs / ideal,
            rssMb: run.rssMb,
            note: `inside the workflow ${(run.result.summary.wallMs / ideal).toFixed(2)} x`,
          };
        },
      },
      {
        // Each round names a model the worker has never called, so its scan has no call-length hint for the batch and
        // the first wave is an activity per item, as on a freshly deployed worker.
        name: 'ours: startBatch, a model the worker has not called lately (first wave learns the call length)',
        run: async (size) => {
          const source = writeTasks(`window-cold-${(coldRounds += 1)}`, count(size), `sim-cold-${coldRounds}`);
          const run = await oursBatch(harness, fanout, ours, source, count(size), 50, 180_000);
          return {
            wallMs: run.wallMs,
            value: run.wallMs / ideal,
            rssMb: run.rssMb,
            note: `inside the workflow ${(run.result.summary.wallMs / ideal).toFixed(2)} x`,
          };
        },
      },
      cliContender('ours: `fanout batch start --watch` CLI process, end to end', CLI),
      ...(CLI_BASELINE === undefined
        ? []
        : [cliContender(`ours: the same, baseline CLI ${path.relative(ROOT, CLI_BASELINE)}`, CLI_BASELINE)]),
      {
        name: 'plain SDK: plainBatch (sliding window), 100 activity slots',
        run: async (size) => {
          const run = await timedOnWorker(harness, plain, () =>
            withDeadline(
              runPlainBatch(harness.plainClient, plain.taskQueue, count(size), 50),
              180_000,
              async () => undefined,
            ),
          );
          if (run.result.succeeded !== count(size))
            throw new Error(`plainBatch: ${run.result.succeeded} of ${count(size)} succeeded`);
          return { wallMs: run.wallMs, value: run.wallMs / ideal, rssMb: run.rssMb };
        },
      },
      ...asyncioContender(harness, 1000, 50, (wallMs) => wallMs / ideal),
    ]);
  } finally {
    await fanout.close();
    await Promise.all([ours.stop(), plain.stop()]);
  }
}

/** (c) 5,000 zero-latency calls, 200 at once: calls per second and the worker's peak RSS. */
async function throughputScenario(harness: Harness): Promise<ScenarioResult> {
  harness.simulator.configure({ latency: { minMs: 0, maxMs: 0 } });
  const total = 5000;
  const sources = { 'warm-up': writeTasks('throughput-warm-up', 200), measured: writeTasks('throughput', total) };
  const count = (size: 'warm-up' | 'measured') => (size === 'warm-up' ? 200 : total);
  const ours = await oursWorker(harness.server, harness.simulator, 'throughput');
  const plain = await plainWorker(harness.server, harness.simulator, harness.plainBundle, 500);
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  const perSecond = (calls: number, wallMs: number) => (calls * 1000) / wallMs;
  try {
    return await measure('c', '5,000 zero-latency calls, concurrency 200', 'calls / s', true, [
      {
        name: 'ours: startBatch, every result in the sink (checked)',
        run: async (size) => {
          const run = await oursBatch(harness, fanout, ours, sources[size], count(size), 200, 600_000);
          return { wallMs: run.wallMs, value: perSecond(count(size), run.wallMs), rssMb: run.rssMb };
        },
      },
      {
        name: 'plain SDK: plainBatch, 500 activity slots, results not stored',
        run: async (size) => {
          const run = await timedOnWorker(harness, plain, () =>
            withDeadline(
              runPlainBatch(harness.plainClient, plain.taskQueue, count(size), 200),
              600_000,
              async () => undefined,
            ),
          );
          if (run.result.succeeded !== count(size))
            throw new Error(`plainBatch: ${run.result.succeeded} of ${count(size)} succeeded`);
          return { wallMs: run.wallMs, value: perSecond(count(size), run.wallMs), rssMb: run.rssMb };
        },
      },
      ...asyncioContender(harness, total, 200, (wallMs) => perSecond(total, wallMs)),
    ]);
  } finally {
    await fanout.close();
    await Promise.all([ours.stop(), plain.stop()]);
  }
}

/** CPU seconds of a process and its descendants (ours: the launcher and the worker it starts). */
function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((sum, member) => sum + cpuSeconds(member), 0);
}

/** Calls open at the simulator every `stepMs` from the first arrival to the last answer, from its log. */
function inFlightTimeline(simulator: Simulator, stepMs: number): number[] {
  const log = simulator.log();
  if (log.length === 0) return [];
  const start = Math.min(...log.map((request) => request.arrivedAt));
  const end = Math.max(...log.map((request) => request.respondedAt ?? request.clientClosedAt ?? request.arrivedAt));
  const points: number[] = [];
  for (let at = start; at <= end; at += stepMs)
    points.push(
      log.filter(
        (request) => request.arrivedAt <= at && (request.respondedAt ?? request.clientClosedAt ?? Infinity) > at,
      ).length,
    );
  return points;
}

/** The ideal wall time of the calls the simulator served: their summed latency spread over `concurrency`, or the longest. */
function idealMs(simulator: Simulator, concurrency: number): number {
  const latencies = simulator.log().map((request) => request.latencyMs);
  return Math.max(Math.max(...latencies), latencies.reduce((sum, latency) => sum + latency, 0) / concurrency);
}

const timelines: string[] = [];

/**
 * (e) and (f): calls of the lengths LLM work has, at the concurrency of a real batch. Wall over the ideal (the calls'
 * summed latency over the concurrency), the worker's CPU per call, and the calls in flight over time.
 */
async function longCallsScenario(
  harness: Harness,
  id: string,
  count: number,
  concurrency: number,
  latency: { minMs: number; maxMs: number },
): Promise<ScenarioResult> {
  harness.simulator.configure({ latency, seed: `long-${id}` });
  const warmCount = Math.min(200, count);
  const sources = { 'warm-up': writeTasks(`long-${id}-warm-up`, warmCount), measured: writeTasks(`long-${id}`, count) };
  const size = (which: 'warm-up' | 'measured') => (which === 'warm-up' ? warmCount : count);
  const slots = String(Math.max(500, concurrency));
  const ours = await oursWorker(harness.server, harness.simulator, `long-${id}`, {
    FANOUT_MAX_CONCURRENT_ACTIVITIES: slots,
  });
  const plain = await plainWorker(harness.server, harness.simulator, harness.plainBundle, Math.max(500, concurrency));
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  const deadline = 20 * 60_000;
  const sample = (
    which: 'warm-up' | 'measured',
    name: string,
    wallMs: number,
    rssMb: number | undefined,
    cpu: number,
  ) => {
    const ideal = idealMs(harness.simulator, concurrency);
    const timeline = inFlightTimeline(harness.simulator, Math.max(1000, Math.round(ideal / 30)));
    if (which === 'measured')
      timelines.push(
        `(${id}) ${name}: calls in flight every ${Math.max(1, Math.round(ideal / 30000))} s: ${timeline.join(' ')}`,
      );
    const zeroes = timeline.slice(1, -1).filter((open) => open === 0).length;
    return {
      wallMs,
      value: wallMs / ideal,
      rssMb,
      note: `CPU ${((cpu * 1000) / size(which)).toFixed(2)} ms per call, ideal ${(ideal / 1000).toFixed(1)} s, min in flight ${Math.min(...timeline.slice(1, -1))}${zeroes > 0 ? `, ${zeroes} samples at zero` : ''}`,
    };
  };
  try {
    return await measure(
      id,
      `${count.toLocaleString('en-US')} items, concurrency ${concurrency}, calls of ${latency.minMs === latency.maxMs ? `${latency.minMs / 1000} s` : `${latency.minMs / 1000}-${latency.maxMs / 1000} s`}`,
      'wall / ideal',
      false,
      [
        {
          name: `ours: startBatch → result(), ${slots} slots`,
          run: async (which) => {
            const cpuBefore = treeCpuSeconds(ours.pid);
            const run = await oursBatch(harness, fanout, ours, sources[which], size(which), concurrency, deadline);
            return sample(which, 'ours', run.wallMs, run.rssMb, treeCpuSeconds(ours.pid) - cpuBefore);
          },
        },
        {
          name: `plain SDK: plainBatch (sliding window), ${Math.max(500, concurrency)} activity slots`,
          run: async (which) => {
            const cpuBefore = treeCpuSeconds(plain.pid);
            const run = await timedOnWorker(harness, plain, () =>
              withDeadline(
                runPlainBatch(harness.plainClient, plain.taskQueue, size(which), concurrency),
                deadline,
                async () => undefined,
              ),
            );
            if (run.result.succeeded !== size(which))
              throw new Error(`plainBatch: ${run.result.succeeded} of ${size(which)} succeeded`);
            return sample(which, 'plain', run.wallMs, run.rssMb, treeCpuSeconds(plain.pid) - cpuBefore);
          },
        },
        {
          name: `asyncio semaphore (Python, openai client), ${concurrency} at once`,
          run: async (which) => {
            if (!harness.python) throw new Error('no Python for the asyncio baseline');
            harness.simulator.reset();
            const run = await runAsyncio(harness, size(which), concurrency);
            return sample(which, 'asyncio', run.wallMs, run.peakRssMb, 0);
          },
        },
      ],
    );
  } finally {
    await fanout.close();
    await Promise.all([ours.stop(), plain.stop()]);
    harness.simulator.configure({ latency: { minMs: 0, maxMs: 0 } });
  }
}

/** (d) The big batch, ours only, one run: worker peak RSS with default settings and the largest history of any run. */
async function bigScenario(harness: Harness): Promise<ScenarioResult & { largestHistory?: number; runs?: number }> {
  harness.simulator.configure({ latency: { minMs: 0, maxMs: 0 } });
  const source = writeTasks('big', BIG_ITEMS);
  const ours = await oursWorker(harness.server, harness.simulator, 'big');
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  let largestHistory: number | undefined;
  let runs: number | undefined;
  try {
    const row: Row = { contender: 'ours: startBatch, worker defaults, concurrency 200', samples: [] };
    try {
      const run = await oursBatch(harness, fanout, ours, source, BIG_ITEMS, 200, 3_600_000);
      largestHistory = 0;
      runs = 0;
      for await (const execution of fanout.client.workflow.list({ query: `WorkflowId = "${run.result.batchId}"` })) {
        runs += 1;
        largestHistory = Math.max(largestHistory, execution.historyLength);
      }
      const sample = {
        wallMs: run.wallMs,
        value: (BIG_ITEMS * 1000) / run.wallMs,
        rssMb: run.rssMb,
        note: `${runs} runs, largest history ${largestHistory} events`,
      };
      row.samples.push(sample);
      console.error(`(d) ${sample.value.toFixed(0)} calls/s, peak RSS ${sample.rssMb.toFixed(0)} MB, ${sample.note}`);
    } catch (error) {
      row.error = (error instanceof Error ? error.message : String(error)).split('\n')[0].slice(0, 160);
      console.error(`(d) failed: ${row.error}`);
    }
    return {
      id: 'd',
      title: `${BIG_ITEMS.toLocaleString('en-US')}-item batch, zero latency (one run)`,
      metric: 'calls / s',
      higherIsBetter: true,
      rows: [row],
      largestHistory,
      runs,
    };
  } finally {
    await fanout.close();
    await ours.stop();
  }
}

/** Sums a counter's samples in the server's Prometheus text by one label, without Temporal's own namespace. */
function countersByLabel(text: string, metric: string, label: string): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const match = /^[^{]+\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1].includes('namespace="temporal_system"')) continue;
    const value = new RegExp(`${label}="([^"]*)"`).exec(match[1])?.[1] ?? '';
    totals[value] = (totals[value] ?? 0) + Number(match[2]);
  }
  return totals;
}

/** Billed actions and frontend RPCs by operation, counted by the server. */
async function serverCounts(harness: Harness): Promise<{ actions: number; rpcs: Record<string, number> }> {
  const text = await harness.server.metrics();
  const actions = Object.values(countersByLabel(text, 'action', 'action_type')).reduce((sum, count) => sum + count, 0);
  return { actions, rpcs: countersByLabel(text, 'service_requests', 'operation') };
}

/** The server's counters once they stop moving (the last actions land a moment after a run closes). */
async function settledCounts(harness: Harness): Promise<{ actions: number; rpcs: Record<string, number> }> {
  let previous = await serverCounts(harness);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const current = await serverCounts(harness);
    if (current.actions === previous.actions) return current;
    previous = current;
  }
}

/** A run's workflows (the parent and every child it started): encoded history bytes and activities by type. */
async function historiesOf(
  client: Client,
  workflowId: string,
): Promise<{ bytes: number; workflows: number; activities: Record<string, number> }> {
  const totals = { bytes: 0, workflows: 0, activities: {} as Record<string, number> };
  const pending = [workflowId];
  while (pending.length > 0) {
    const batch = pending.splice(0, 20);
    await Promise.all(
      batch.map(async (id) => {
        const history = await client.workflow.getHandle(id).fetchHistory();
        totals.workflows += 1;
        for (const event of history.events ?? []) {
          totals.bytes += temporal.api.history.v1.HistoryEvent.encode(
            temporal.api.history.v1.HistoryEvent.fromObject(event),
          ).finish().length;
          const scheduled = event.activityTaskScheduledEventAttributes?.activityType?.name;
          if (scheduled) totals.activities[scheduled] = (totals.activities[scheduled] ?? 0) + 1;
          const child = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
          if (child) pending.push(child);
        }
      }),
    );
  }
  return totals;
}

const AGENT_STEP_MS = 1000;
const AGENT_TOOL_MS = 300;
const AGENT_TOOL_STEPS = 4;
/** Five model steps of 1 s, the first four each asking for two tool calls of 300 ms side by side. */
const AGENT_IDEAL_MS = (AGENT_TOOL_STEPS + 1) * AGENT_STEP_MS + AGENT_TOOL_STEPS * AGENT_TOOL_MS;
const agentPrompt = (index: number) =>
  `Agent ${index}: wait twice, four times [[repeat ${AGENT_TOOL_STEPS} tool:wait {"ms":${AGENT_TOOL_MS}}, tool:wait {"ms":${AGENT_TOOL_MS}}]]`;

/** Mean and largest number of calls open at the simulator, sampled every 100 ms over the run. */
function inFlightFigures(simulator: Simulator): string {
  const timeline = inFlightTimeline(simulator, 100);
  const mean = timeline.reduce((sum, count) => sum + count, 0) / Math.max(1, timeline.length);
  return `in flight ${mean.toFixed(0)} / ${Math.max(0, ...timeline)}`;
}

/** What the agents left in our worker: its RSS and a batch's speed on it before and after them (scenario g). */
const afterAgents: string[] = [];

/**
 * A 1,000-item batch of 200 ms calls at concurrency 50 on `worker` (ideal 4.0 s), and the worker's RSS (launcher and
 * child) 5, 15 and 30 s after it: what scenario g measures on our worker before the agents and again after them.
 */
async function batchCheck(harness: Harness, fanout: FanoutClient, worker: WorkerProcess) {
  const latency = AGENT_STEP_MS;
  harness.simulator.configure({ latency: { minMs: 200, maxMs: 200 } });
  try {
    const run = await oursBatch(harness, fanout, worker, writeTasks('after-agents', 1000), 1000, 50, 180_000);
    // 5 s after it, then 15 and 30 s: what an idle worker hands back takes its collections some seconds.
    const rss: number[] = [];
    for (const waitMs of [5000, 10_000, 15_000]) {
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      rss.push(processTree(worker.pid).reduce((sum, pid) => sum + statusMb(pid, 'VmRSS'), 0));
    }
    return { ratio: run.wallMs / 4000, rssMb: rss[0], laterMb: rss.slice(1) };
  } finally {
    harness.simulator.configure({ latency: { minMs: latency, maxMs: latency } });
  }
}

/**
 * (g) AGENTS agents at once, each five model steps of 1 s whose first four ask for two parallel 300 ms tool calls (ideal
 * 6.2 s): ours (`fanout worker`, agents as a fan-out's children; fan-outs of at most 500, a run's most in flight), a plain-SDK agent loop
 * (bench/plain: the transcript in workflow state, each model call and tool call an activity, agents as child workflows)
 * and an asyncio loop. Model requests and tool runs are counted exactly in every run; worker CPU, billed actions per
 * model step, frontend RPCs per agent and history bytes per agent are in the notes.
 */
async function agentsAtScaleScenario(harness: Harness): Promise<ScenarioResult> {
  harness.simulator.configure({ latency: { minMs: AGENT_STEP_MS, maxMs: AGENT_STEP_MS } });
  const ours = await oursWorker(harness.server, harness.simulator, 'agents-at-scale', {
    FANOUT_TOOLS: path.join(__dirname, 'agents', 'wait-tool.ts'),
  });
  const plain = await plainWorker(harness.server, harness.simulator, harness.plainBundle, 500);
  const fanout = await FanoutClient.connect({
    temporal: { address: harness.server.address },
    taskQueue: ours.taskQueue,
  });
  const count = (size: 'warm-up' | 'measured') => (size === 'warm-up' ? 20 : AGENTS);
  const steps = (agents: number) => agents * (AGENT_TOOL_STEPS + 1);
  const toolRuns = (agents: number) => agents * AGENT_TOOL_STEPS * 2;
  const chunks = (agents: number) =>
    Array.from({ length: Math.ceil(agents / 500) }, (_, chunk) =>
      Array.from({ length: Math.min(500, agents - chunk * 500) }, (__, index) => chunk * 500 + index),
    );
  const RPCS = ['GetWorkflowExecutionHistory', 'DescribeWorkflowExecution', 'PollWorkflowTaskQueue'];
  /** Runs `work` on `worker` and checks and measures what it did, the histories of `workflowIds` after it. */
  const measured = async (
    worker: WorkerProcess,
    agents: number,
    work: () => Promise<{ workflowIds: string[]; steps: number; toolRuns?: number }>,
  ): Promise<Sample> => {
    const before = await settledCounts(harness);
    const cpuBefore = treeCpuSeconds(worker.pid);
    const threadsBefore = threadCpuSeconds(worker.pid);
    const run = await timedOnWorker(harness, worker, work);
    const cpu = treeCpuSeconds(worker.pid) - cpuBefore;
    console.error(`${worker.label} CPU by thread (s): ${threadCpuDelta(threadsBefore, threadCpuSeconds(worker.pid))}`);
    const inFlight = inFlightFigures(harness.simulator);
    const requests = harness.simulator.log().length;
    const after = await settledCounts(harness);
    const histories = { bytes: 0, activities: {} as Record<string, number> };
    for (const id of run.result.workflowIds) {
      const history = await historiesOf(harness.plainClient, id);
      histories.bytes += history.bytes;
      for (const [type, scheduled] of Object.entries(history.activities))
        histories.activities[type] = (histories.activities[type] ?? 0) + scheduled;
    }
    // Ours reports no tool count in its results: its histories' toolCall activities are the count.
    const tools = run.result.toolRuns ?? histories.activities.toolCall ?? 0;
    if (requests !== steps(agents)) throw new Error(`${requests} model requests, expected ${steps(agents)}`);
    if (run.result.steps !== steps(agents) || tools !== toolRuns(agents))
      throw new Error(
        `${run.result.steps} steps and ${tools} tool runs, expected ${steps(agents)} and ${toolRuns(agents)}`,
      );
    console.error(
      `${worker.label} frontend RPCs per agent: ${Object.entries(after.rpcs)
        .map(([operation, calls]) => [operation, (calls - (before.rpcs[operation] ?? 0)) / agents] as const)
        .filter(([, perAgent]) => perAgent >= 0.05)
        .map(([operation, perAgent]) => `${operation} ${perAgent.toFixed(1)}`)
        .join(', ')}`,
    );
    const rpcs = RPCS.map((operation) => {
      const calls = (after.rpcs[operation] ?? 0) - (before.rpcs[operation] ?? 0);
      return `${operation.replace(/WorkflowExecution|WorkflowTaskQueue/, '')} ${(calls / agents).toFixed(1)}`;
    }).join(', ');
    // The goal is per model step: the start of the workflow that holds the agents (one per 500 agents, for either
    // contender) is the run's, not a step's; both figures are printed.
    const actions = after.actions - before.actions;
    const runStarts = run.result.workflowIds.length;
    return {
      wallMs: run.wallMs,
      value: run.wallMs / AGENT_IDEAL_MS,
      rssMb: run.rssMb,
      figures: { cpuSeconds: cpu, actionsPerStep: (actions - runStarts) / steps(agents) },
      note: `worker CPU ${cpu.toFixed(1)} s; ${(actions / steps(agents)).toFixed(3)} actions per model step, ${((actions - runStarts) / steps(agents)).toFixed(3)} besides the run's ${runStarts} start${runStarts === 1 ? '' : 's'}; RPCs per agent: ${rpcs}; history ${(histories.bytes / agents / 1024).toFixed(1)} KB per agent; ${inFlight}; ${requests} model requests, ${tools} tool runs`,
    };
  };
  /** One of bench/plain's agents workflows, one per 500 agents, on the plain worker. */
  const plainRun = (size: 'warm-up' | 'measured', workflow: 'plainAgents' | 'journaledAgents') =>
    measured(plain, count(size), async () => {
      const runs = chunks(count(size)).map((indexes) => ({
        workflowId: `${workflow}-${Date.now()}-${indexes[0]}`,
        prompts: indexes.map(agentPrompt),
      }));
      const results = await withDeadline(
        Promise.all(
          runs.map((run) =>
            runPlainAgents(harness.plainClient, plain.taskQueue, run.prompts, 10, run.workflowId, workflow),
          ),
        ),
        600_000,
        async () => undefined,
      );
      const all = results.flat();
      return {
        workflowIds: runs.map((run) => run.workflowId),
        steps: all.reduce((sum, result) => sum + result.steps, 0),
        toolRuns: all.reduce((sum, result) => sum + result.toolCalls, 0),
      };
    });
  try {
    const before = await batchCheck(harness, fanout, ours);
    const result = await measure(
      'g',
      `${AGENTS.toLocaleString('en-US')} agents at once, 5 model steps of 1 s, the first 4 asking for 2 parallel tool calls of 300 ms (ideal ${(AGENT_IDEAL_MS / 1000).toFixed(1)} s)`,
      'wall / ideal',
      false,
      (
        [
          {
            name: 'ours: startParallel (agents as children of fan-outs of at most 500), `fanout worker` defaults',
            run: (size) =>
              measured(ours, count(size), async () => {
                const handles = await Promise.all(
                  chunks(count(size)).map((indexes) =>
                    fanout.startParallel(
                      indexes.map((index) => ({ id: `agent-${index}`, prompt: agentPrompt(index), tools: ['wait'] })),
                    ),
                  ),
                );
                const results = await Promise.all(
                  handles.map((handle) =>
                    withDeadline(handle.result(), 600_000, () => handle.workflow.terminate('benchmark deadline')),
                  ),
                );
                const all = results.flatMap((result) => result.results);
                const failed = all.filter((result) => result.status !== 'ok');
                if (failed.length > 0)
                  throw new Error(`${failed.length} agents did not succeed: ${failed[0].error?.message}`);
                return {
                  workflowIds: handles.map((handle) => handle.workflowId),
                  steps: all.reduce((sum, result) => sum + (result.steps ?? 0), 0),
                };
              }),
          },
          {
            name: 'plain SDK: plainAgents (a child workflow per agent, transcript in workflow state), 500 activity slots',
            run: (size) => plainRun(size, 'plainAgents'),
          },
          {
            name: 'design probe, plain SDK: journaledAgents (each agent its whole loop in one activity, answers journaled), 500 activity slots',
            run: (size) => plainRun(size, 'journaledAgents'),
          },
          ...(harness.python === undefined
            ? []
            : [
                {
                  name: 'asyncio loop (Python, openai client), every agent at once',
                  run: async (size: 'warm-up' | 'measured'): Promise<Sample> => {
                    harness.simulator.reset();
                    const agents = count(size);
                    const promptFile = path.join(directory, `agent-prompts-${agents}.json`);
                    writeFileSync(
                      promptFile,
                      JSON.stringify(Array.from({ length: agents }, (_, index) => agentPrompt(index))),
                    );
                    const result = await runPython<{
                      wallMs: number;
                      ok: number;
                      steps: number;
                      toolCalls: number;
                      peakRssMb: number;
                    }>(harness, 'agent_loop.py', ['--prompt-file', promptFile, '--max-steps', '10']);
                    const requests = harness.simulator.log().length;
                    if (result.ok !== agents || requests !== steps(agents) || result.toolCalls !== toolRuns(agents))
                      throw new Error(
                        `asyncio: ${result.ok} of ${agents} agents, ${requests} requests, ${result.toolCalls} tool runs`,
                      );
                    return {
                      wallMs: result.wallMs,
                      value: result.wallMs / AGENT_IDEAL_MS,
                      rssMb: result.peakRssMb,
                      note: `${inFlightFigures(harness.simulator)}; ${requests} model requests, ${result.toolCalls} tool runs`,
                    };
                  },
                },
              ]),
        ] as Contender[]
      ).filter((contender) => AGENT_CONTENDERS.has(contender.name.split(/[ :]/)[0].replace('SDK', ''))),
    );
    const after = await batchCheck(harness, fanout, ours);
    afterAgents.push(
      `Our worker before and after the agents (1,000 x 200 ms batch at 50, ideal 4.0 s; RSS of launcher and worker 5 s after it): wall / ideal ${before.ratio.toFixed(2)} before, ${after.ratio.toFixed(2)} after (${((after.ratio / before.ratio - 1) * 100).toFixed(0)}%); RSS ${before.rssMb.toFixed(0)} MB before, ${after.rssMb.toFixed(0)} MB after (${((after.rssMb / before.rssMb - 1) * 100).toFixed(0)}%); 15 s and 30 s after the batch ${before.laterMb.map((mb) => mb.toFixed(0)).join(' and ')} MB before, ${after.laterMb.map((mb) => mb.toFixed(0)).join(' and ')} MB after.`,
    );
    return result;
  } finally {
    await fanout.close();
    await Promise.all([ours.stop(), plain.stop()]);
  }
}

function verdict(ok: boolean | undefined): string {
  return ok === undefined ? 'not measured' : ok ? '**met**' : '**not met**';
}

function goals(results: Map<string, ScenarioResult & { largestHistory?: number }>): string[] {
  const value = (id: string, prefix: string) => {
    const row = results.get(id)?.rows.find((candidate) => candidate.contender.startsWith(prefix));
    return row ? medianSample(row) : undefined;
  };
  const lines: string[] = [];
  const oursB = value('b', 'ours: startBatch →');
  const coldB = value('b', 'ours: startBatch, a model');
  const plainB = value('b', 'plain SDK');
  lines.push(
    `- (b) batch ≤ 1.25 × ideal and below the plain SDK's ratio: ours ${oursB?.value.toFixed(2) ?? '–'} × (a model the worker had not called: ${coldB?.value.toFixed(2) ?? '–'} ×), plain ${plainB?.value.toFixed(2) ?? '–'} × → ${verdict(oursB && plainB ? oursB.value <= 1.25 && oursB.value < plainB.value : undefined)}`,
  );
  const oursC = value('c', 'ours');
  const plainC = value('c', 'plain SDK');
  lines.push(
    `- (c) zero-latency throughput ≥ 1.0 × the plain SDK's, results stored: ours ${oursC?.value.toFixed(0) ?? '–'} calls/s, plain ${plainC?.value.toFixed(0) ?? '–'} calls/s (${oursC && plainC ? (oursC.value / plainC.value).toFixed(2) : '–'} ×) → ${verdict(oursC && plainC ? oursC.value >= plainC.value : undefined)}`,
  );
  const oursA = value('a', 'ours');
  for (const id of ['e', 'f']) {
    const ours = value(id, 'ours');
    const plain = value(id, 'plain SDK');
    const asyncio = value(id, 'asyncio');
    if (!ours) continue;
    lines.push(
      `- (${id}) long calls: faster than the plain SDK and within 1.15 × the asyncio semaphore: ours ${ours.value.toFixed(2)} ×, plain ${plain?.value.toFixed(2) ?? '–'} ×, asyncio ${asyncio?.value.toFixed(2) ?? '–'} × → ${verdict(plain && asyncio ? ours.value < plain.value && ours.value <= asyncio.value * 1.15 : undefined)}`,
    );
  }
  const plainA = value('a', 'plain SDK: plainFanOut (Promise.all), 500');
  lines.push(
    `- (a) 500 agents: wall ≤ the plain SDK's with 500 slots: ours ${oursA?.wallMs.toFixed(0) ?? '–'} ms, plain ${plainA?.wallMs.toFixed(0) ?? '–'} ms → ${verdict(oursA && plainA ? oursA.wallMs <= plainA.wallMs : undefined)}`,
  );
  const oursG = value('g', 'ours');
  const plainG = value('g', 'plain SDK');
  const asyncioG = value('g', 'asyncio');
  if (oursG) {
    const cpu = (sample: Sample | undefined) => sample?.figures?.cpuSeconds;
    lines.push(
      `- (g) agents: wall ≤ the plain loop's and ≤ 1.30 × asyncio: ours ${oursG.value.toFixed(2)} ×, plain ${plainG?.value.toFixed(2) ?? '–'} ×, asyncio ${asyncioG?.value.toFixed(2) ?? '–'} × → ${verdict(plainG && asyncioG ? oursG.value <= plainG.value && oursG.value <= asyncioG.value * 1.3 : undefined)}`,
      `- (g) worker CPU ≤ the plain loop's: ours ${cpu(oursG)?.toFixed(1) ?? '–'} s, plain ${cpu(plainG)?.toFixed(1) ?? '–'} s → ${verdict(plainG ? (cpu(oursG) ?? Infinity) <= (cpu(plainG) ?? 0) : undefined)}; ≤ 3 actions per model step (besides the run's start): ${oursG.figures?.actionsPerStep.toFixed(3) ?? '–'} → ${verdict(oursG.figures ? oursG.figures.actionsPerStep <= 3 : undefined)}`,
    );
  }
  const big = results.get('d');
  const oursD = big ? medianSample(big.rows[0]) : undefined;
  lines.push(
    `- (d) ${BIG_ITEMS.toLocaleString('en-US')}-item batch, worker peak RSS ≤ 400 MB, history per run bounded (≤ 10,240 events): ${oursD ? `${oursD.rssMb?.toFixed(0)} MB, largest run ${big?.largestHistory} events` : big ? `failed: ${big.rows[0].error}` : 'not run (add --big)'} → ${verdict(oursD ? (oursD.rssMb ?? Infinity) <= 400 && (big?.largestHistory ?? Infinity) <= 10_240 : undefined)}`,
  );
  return lines;
}

function render(results: ScenarioResult[], server: DevServer, python: string | undefined, command: string): string {
  const pythonVersion = python
    ? execFileSync(python, ['--version'], { encoding: 'utf8' }).trim()
    : 'not installed (asyncio skipped)';
  const tables = results.map((scenario) => {
    const rows = scenario.rows.map((row) => {
      const chosen = medianSample(row);
      if (!chosen) return `| ${row.contender} | failed: ${row.error ?? 'no sample'} | | | | |`;
      const format = (sample: Sample) => (scenario.higherIsBetter ? sample.value.toFixed(0) : sample.value.toFixed(2));
      return `| ${row.contender} | ${format(chosen)} | ${row.samples.map(format).join(' ')}${row.error ? ` (then failed: ${row.error})` : ''} | ${chosen.wallMs.toFixed(0)} | ${chosen.rssMb?.toFixed(0) ?? ''} | ${chosen.note ?? ''} |`;
    });
    return [
      `### (${scenario.id}) ${scenario.title}`,
      '',
      `| contender | ${scenario.metric} (median) | every round | wall (ms) | peak RSS of the worker / script (MB) | notes |`,
      '| --- | ---: | --- | ---: | ---: | --- |',
      ...rows,
    ].join('\n');
  });
  return [
    '## Side by side: ours, a plain Temporal project, asyncio',
    '',
    `Command: \`${command}\`. Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${os.cpus().length} cores (nproc), Node ${process.version}, ${pythonVersion}, ${server.version}, Temporal TS SDK 1.24.0 for both Temporal contenders; ${ROUNDS} round(s) after one small warm-up run each; load average ${loadAtStart.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end (other work on the machine slows every contender).`,
    '',
    'One dev server (`temporal server start-dev`, in memory, eager activity dispatch enabled as in our dev server: the plain SDK keeps its default of',
    '3 eager calls per workflow task, ours takes up to its free slots for fan-outs) and one simulator (in the harness process) for everyone; each worker is its own process',
    '(ours: `fanout worker` with its defaults, its peak RSS summed over the launcher and the worker it starts; plain: bench/plain/worker.ts with the SDK defaults and the slots shown). Every round runs every contender',
    'once, in a rotated order. "plain SDK" is bench/plain/: `proxyActivities` + `Promise.all`, and a sliding window of one activity per item with',
    "continue-as-new when the server suggests it, no heartbeats, results not stored. asyncio is the seed guide's semaphore pattern (bench/asyncio/),",
    'timed from its first call with its client already built; it keeps results in memory only. Ours writes every batch result to its sink, checked',
    'line by line after each run. Compare within this run only: the machine is shared.',
    '',
    ...tables.flatMap((table) => [table, '']),
    ...afterAgents.flatMap((line) => [line, '']),
    ...(timelines.length > 0
      ? ['Calls in flight at the simulator over each measured run (long calls):', '', '```', ...timelines, '```', '']
      : []),
    'Goals:',
    ...goals(new Map(results.map((result) => [result.id, result]))),
  ].join('\n');
}

/**
 * Writes the section between its markers: `compare`, or `compare-agents` for a run of the agents at scale alone
 * (`--only g`), so that it does not replace the other scenarios' tables.
 */
function writeSection(section: string): void {
  const target = path.join(ROOT, 'docs', 'BENCHMARKS.md');
  const name = SCENARIOS.size === 1 && SCENARIOS.has('g') ? 'compare-agents' : 'compare';
  const block = `<!-- ${name}:start -->\n${section}\n<!-- ${name}:end -->`;
  const existing = existsSync(target) ? readFileSync(target, 'utf8') : '# Benchmarks\n';
  const pattern = new RegExp(`<!-- ${name}:start -->[\\s\\S]*?<!-- ${name}:end -->`);
  writeFileSync(
    target,
    pattern.test(existing) ? existing.replace(pattern, () => block) : `${existing.trimEnd()}\n\n${block}\n`,
  );
}

/** The plain worker runs as compiled JavaScript, like ours (dist/), so neither pays for a TypeScript loader. */
function buildPlainWorker(): void {
  mkdirSync(PLAIN_BUILD, { recursive: true });
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(
    process.execPath,
    [
      tsc,
      '--outDir',
      PLAIN_BUILD,
      '--rootDir',
      path.join(__dirname, 'plain'),
      '--module',
      'commonjs',
      '--target',
      'es2022',
      '--esModuleInterop',
      '--skipLibCheck',
      '--strict',
      '--types',
      'node',
      path.join(__dirname, 'plain', 'worker.ts'),
    ],
    { stdio: 'inherit' },
  );
}

function findPython(): string | undefined {
  try {
    return execFileSync('bash', [path.join(__dirname, 'asyncio', 'ensure-venv.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch {
    console.error('note: no Python venv for the asyncio baseline; it is skipped');
    return undefined;
  }
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  if (CLI_BASELINE !== undefined && !existsSync(CLI_BASELINE))
    throw new Error(`--cli-baseline: ${CLI_BASELINE} is missing`);
  buildPlainWorker();
  const plainBundle = path.join(directory, 'plain-workflow-bundle.js');
  await bundlePlainWorkflows(plainBundle);
  const python = findPython();
  const server = await startServer();
  serverPid = server.pid;
  const simulator = await startSimulator({ latency: { minMs: 0, maxMs: 0 } });
  const connection = await Connection.connect({ address: server.address });
  const harness: Harness = { server, simulator, plainClient: new Client({ connection }), plainBundle, python };
  const results: ScenarioResult[] = [];
  try {
    if (SCENARIOS.has('a')) results.push(await agentsScenario(harness));
    if (SCENARIOS.has('b')) results.push(await windowScenario(harness));
    if (SCENARIOS.has('c')) results.push(await throughputScenario(harness));
    if (SCENARIOS.has('d')) results.push(await bigScenario(harness));
    if (SCENARIOS.has('e'))
      results.push(await longCallsScenario(harness, 'e', 4000, 500, { minMs: 3000, maxMs: 3000 }));
    if (SCENARIOS.has('f'))
      results.push(await longCallsScenario(harness, 'f', 20_000, 1000, { minMs: 1000, maxMs: 10_000 }));
    if (SCENARIOS.has('g')) results.push(await agentsAtScaleScenario(harness));
  } finally {
    await connection.close();
    await simulator.close();
    await server.stop();
  }
  const command = `tsx bench/compare.ts ${process.argv.slice(2).join(' ')}`.trim();
  const section = render(results, server, python, command);
  writeSection(section);
  process.stdout.write(`${section}\n`);
  rmSync(directory, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
