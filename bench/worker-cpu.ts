/**
 * Worker CPU per agent call: ours (`fanout worker`, built CLI) against a plain Temporal SDK worker (bench/plain/), on one
 * dev server and one simulator, the same fan-outs for both, rounds alternated.
 *
 *   tsx bench/worker-cpu.ts [--calls 1500] [--width 300] [--latency-ms 1000-3000] [--rounds 2] [--batch] [--profile DIR]
 *                           [--variant NAME=NODE_ARGS ...]
 *
 * Each contender's worker is its own process (ours with FANOUT_WORKER_HEAP_MB=off, so one process); its CPU is user +
 * system time from /proc/<pid>/stat, read right before a round's first fan-out starts and right after its last one
 * ends, divided by the calls of the round. Calls are fan-outs of `width` tasks run one after another, so `width` are in
 * flight at once. `--batch`: one batch of `calls` items at concurrency `width` instead (ours `startBatch` from a JSONL file,
 * plain its sliding-window `plainBatch`). `--profile DIR` runs the workers with `node --cpu-prof --cpu-prof-dir DIR`.
 * `--variant NAME=NODE_ARGS` (repeatable) adds another of our workers, on its own task queue, started with those node
 * arguments (e.g. `cap=--max-old-space-size=256`), so settings are compared side by side in one run.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { startSimulator } from '../src/sim/simulator';
import { runPlainBatch, runPlainFanOut } from './plain/client';
import { bundlePlainWorkflows } from './plain/worker';
import { startReady, type ReadyProcess } from './ready-process';
import { cpuSeconds, processThreadCpu, statusMb } from './proc';
import { scratchDirectory } from './scratch';

const ROOT = path.join(__dirname, '..');
const CLI = path.join(ROOT, 'dist', 'cli', 'main.js');
const PLAIN_BUILD = path.join(ROOT, 'node_modules', '.cache', 'temporal-fanout-bench', 'plain');

const { values: flags } = parseArgs({
  options: {
    calls: { type: 'string', default: '1500' },
    width: { type: 'string', default: '300' },
    'latency-ms': { type: 'string', default: '1000-3000' },
    rounds: { type: 'string', default: '2' },
    batch: { type: 'boolean', default: false },
    profile: { type: 'string' },
    variant: { type: 'string', multiple: true, default: [] },
  },
});
const CALLS = Number(flags.calls);
const WIDTH = Number(flags.width);
const ROUNDS = Number(flags.rounds);
const [MIN_MS, MAX_MS] = flags['latency-ms'].split('-').map(Number);

function cpuMs(pid: number): number {
  return cpuSeconds(pid) * 1000;
}

/** Resets a process's peak RSS (VmHWM), so the next read is this round's peak. */
function resetPeakRss(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // not allowed here: the peak is then the process's own so far
  }
}

function peakRssMb(pid: number): number {
  return Math.round(statusMb(pid, 'VmHWM'));
}

/** CPU ms so far per thread name (/proc/<pid>/task/<tid>/stat): where a process's CPU goes, main thread or helpers. */
function cpuByThread(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const thread of processThreadCpu(pid)) {
    const name = thread.tid === pid ? 'main' : thread.comm.replace(/[-\d]+$/, '');
    byName.set(name, (byName.get(name) ?? 0) + thread.seconds * 1000);
  }
  return byName;
}

function worker(
  label: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  extraNodeArgs: string[] = [],
): Promise<ReadyProcess> {
  const nodeArgs = flags.profile
    ? ['--cpu-prof', '--cpu-prof-dir', flags.profile, '--cpu-prof-name', `${label}-${Date.now()}.cpuprofile`]
    : [];
  return startReady(label, [...nodeArgs, ...extraNodeArgs, ...args], { ...process.env, ...env }, { ready });
}

function tasks(round: number, batch: number) {
  return Array.from({ length: WIDTH }, (_, index) => ({
    id: `r${round}-b${batch}-${index}`,
    prompt: `cpu [sim latency=${MIN_MS + Math.floor(Math.random() * (MAX_MS - MIN_MS + 1))}]`,
  }));
}

async function main(): Promise<void> {
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
  const directory = scratchDirectory('fanout-cpu-');
  const bundle = path.join(directory, 'plain-bundle.js');
  await bundlePlainWorkflows(bundle);
  if (flags.profile) mkdirSync(flags.profile, { recursive: true });

  const server = await startDevServer();
  // Per-prompt latencies for fan-outs; batches (whose plain prompts name none) take the simulator's own.
  const simulator = await startSimulator({
    latency: flags.batch ? { minMs: MIN_MS, maxMs: MAX_MS } : { minMs: 0, maxMs: 0 },
  });
  const env = { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'bench' };
  const plainQueue = `plain-${Date.now()}`;
  const variants: [string, string[]][] = [
    ['ours', []],
    ...(flags.variant ?? []).map((spec): [string, string[]] => {
      const [name, ...rest] = spec.split('=');
      return [name, rest.join('=').split(/\s+/).filter(Boolean)];
    }),
  ];
  const ourWorkers = await Promise.all(
    variants.map(async ([name, nodeArgs]) => {
      const queue = `${name}-${Date.now()}`;
      const started = await worker(
        name,
        [CLI, 'worker', '--address', server.address, '--task-queue', queue],
        { ...env, FANOUT_WORKER_HEAP_MB: 'off' },
        /worker polling/,
        nodeArgs,
      );
      const fanout = await FanoutClient.connect({ client: server.client, taskQueue: queue });
      return { name, started, fanout };
    }),
  );
  const plain = await worker(
    'plain',
    [
      path.join(PLAIN_BUILD, 'worker.js'),
      '--address',
      server.address,
      '--task-queue',
      plainQueue,
      '--bundle',
      bundle,
      '--slots',
      '500',
    ],
    env,
    /plain worker polling/,
  );
  const batches = flags.batch ? 1 : Math.ceil(CALLS / WIDTH);
  const batchFile = (round: number) => {
    const file = path.join(directory, `tasks-${round}.jsonl`);
    writeFileSync(
      file,
      Array.from({ length: round < 0 ? WIDTH : CALLS }, (_, index) =>
        JSON.stringify({ id: `r${round}-${index}`, prompt: `batch item ${index}` }),
      ).join('\n') + '\n',
    );
    return file;
  };
  type Contender = { pid: number; run(round: number, batch: number): Promise<void> };
  const contenders: Record<string, Contender> = {};
  for (const { name, started, fanout } of ourWorkers) {
    contenders[name] = {
      pid: started.pid,
      run: flags.batch
        ? async (round: number) => {
            const handle = await fanout.startBatch({
              source: batchFile(round),
              sink: path.join(directory, `out-${name}-${round}-${Date.now()}.jsonl`),
              options: { concurrency: WIDTH },
            });
            await handle.result();
          }
        : async (round: number, batch: number) =>
            void (await fanout.runParallel(tasks(round, batch), { maxParallel: WIDTH })),
    };
  }
  contenders.plain = {
    pid: plain.pid,
    run: flags.batch
      ? async (round: number) => void (await runPlainBatch(server.client, plainQueue, round < 0 ? WIDTH : CALLS, WIDTH))
      : async (round: number, batch: number) =>
          void (await runPlainFanOut(server.client, plainQueue, tasks(round, batch))),
  };
  // One small warm-up each (JIT, connections), not counted.
  for (const contender of Object.values(contenders)) await contender.run(-1, 0);
  const results: Record<string, number[]> = Object.fromEntries(Object.keys(contenders).map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = Object.entries(contenders);
    for (const [name, contender] of [...order.slice(round % order.length), ...order.slice(0, round % order.length)]) {
      const before = cpuMs(contender.pid);
      resetPeakRss(contender.pid);
      const threadsBefore = cpuByThread(contender.pid);
      const startedAt = Date.now();
      for (let batch = 0; batch < batches; batch += 1) await contender.run(round, batch);
      const calls = flags.batch ? CALLS : batches * WIDTH;
      const perCall = (cpuMs(contender.pid) - before) / calls;
      results[name].push(perCall);
      const threads = [...cpuByThread(contender.pid)]
        .map(([thread, ms]) => [thread, (ms - (threadsBefore.get(thread) ?? 0)) / calls] as const)
        .filter(([, ms]) => ms >= 0.05)
        .map(([thread, ms]) => `${thread} ${ms.toFixed(2)}`)
        .join(', ');
      console.log(
        `round ${round + 1} ${name}: ${calls} calls in ${((Date.now() - startedAt) / 1000).toFixed(1)} s, worker CPU ${perCall.toFixed(2)} ms per call (${threads}), peak RSS ${peakRssMb(contender.pid)} MB`,
      );
    }
  }
  for (const [name, values] of Object.entries(results)) {
    const sorted = [...values].sort((a, b) => a - b);
    console.log(
      `${name}: CPU per call ${sorted.map((value) => value.toFixed(2)).join(', ')} ms (median ${sorted[Math.floor(sorted.length / 2)].toFixed(2)})`,
    );
  }
  for (const { started, fanout } of ourWorkers) {
    await fanout.close();
    await started.stop();
  }
  await plain.stop();
  await simulator.close();
  await server.stop();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
