/**
 * What tracing costs a batch (issue 34): the same batch with tracing off, on with the default sampling (every window
 * and lane, 1% of items: FANOUT_OTEL_BATCH_ITEM_RATIO) exporting to a real Jaeger, and on against a collector that is
 * down (a port nothing listens on). Wall time and the worker process's CPU side by side: every mode of a round runs at
 * the same time, each with its own worker, task queue and batch, against the same server and simulator, so the
 * machine's load of the moment falls on all of them alike and a round's ratios to `off` hold the modes' own difference
 * (BENCH_TRACING_CONCURRENCY, default 20, keeps the batches together below what the two cores can run, so their wall is
 * the calls' and not a share of the CPU). Writes its section of docs/BENCHMARKS.md between `<!-- tracing:start -->`
 * and `<!-- tracing:end -->`. BENCH_TRACING_ITEMS (default 4000) items, BENCH_ROUNDS rounds (default 4 here: one per
 * mode, each round starting one mode later, so every mode runs once in every place of a round).
 *
 * To look closer: BENCH_TRACING_MODES picks some modes (comma-separated: off, sampled, discarding, down; the docs are
 * then left alone, and Jaeger is started only for `sampled`), and BENCH_TRACING_PROFILE=DIR runs each worker under
 * `node --cpu-prof` into DIR/<mode>-<round>/ (one profile per thread: the main thread and each workflow thread).
 * BENCH_TRACING_BEFORE=<another build's dist/cli/main.js> runs each traced mode a second time in every round with that
 * build's worker, named `<mode> (before)`: a change and the code before it side by side in one run (the docs are then
 * left alone too).
 *
 * BENCH_TRACING_TOGETHER=0 runs the modes one after another instead (concurrency 200), each round starting one mode
 * later than the one before (the docs are then left alone): how this was measured before 2026-12-07, when the load
 * moving between runs made the ratios wander by tens of percent.
 *
 * Besides each mode's medians, the table gives its median per-round ratio to `off` (each round's figure over the same
 * round's `off`): the machine's load moves every mode of a round alike, so the ratio within a round is steadier than
 * the ratio of the medians.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { startJaeger, type Jaeger } from '../test/support/jaeger';
import { spawnSimulator, type RemoteSimulator } from './remote-simulator';
import { cpuSeconds, threadCpuDelta, threadCpuSeconds } from './proc';
import { fanoutWorkerArgs, startReady, type ReadyProcess } from './ready-process';
import { scratchDirectory } from './scratch';
import { median, startDiscardingCollector } from './tracing-support';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const ITEMS = Number(process.env.BENCH_TRACING_ITEMS ?? 4000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
/** Every mode of a round at once, each its own worker and batch (unless BENCH_TRACING_TOGETHER=0): see the file's comment. */
const TOGETHER = process.env.BENCH_TRACING_TOGETHER !== '0';
/** Low enough, when the modes run together, that their workers need less than the machine's two cores between them. */
const DEFAULT_CONCURRENCY = TOGETHER ? 20 : 200;
const CONCURRENCY = Number(process.env.BENCH_TRACING_CONCURRENCY ?? DEFAULT_CONCURRENCY);
const LATENCY_MS = 200;
const directory = scratchDirectory('fanout-bench-tracing-');
const cli = path.join(__dirname, '..', 'dist', 'cli', 'main.js');

type Mode = 'off' | 'sampled' | 'sampled, discarding collector' | 'collector down';
const ALL_MODES: readonly Mode[] = ['off', 'sampled', 'sampled, discarding collector', 'collector down'];
const MODE_NAMES: Record<string, Mode> = {
  off: 'off',
  sampled: 'sampled',
  discarding: 'sampled, discarding collector',
  down: 'collector down',
};
const MODES: readonly Mode[] = process.env.BENCH_TRACING_MODES
  ? process.env.BENCH_TRACING_MODES.split(',').map((name) => {
      const mode = MODE_NAMES[name.trim()];
      if (!mode) throw new Error(`BENCH_TRACING_MODES: '${name}' is none of ${Object.keys(MODE_NAMES).join(', ')}`);
      return mode;
    })
  : ALL_MODES;
const PROFILE = process.env.BENCH_TRACING_PROFILE;
const BEFORE = process.env.BENCH_TRACING_BEFORE;

/** A mode as one build's worker runs it: the worktree's, or (`before`) BENCH_TRACING_BEFORE's. */
interface Variant {
  mode: Mode;
  name: string;
  cli: string;
}
const VARIANTS: readonly Variant[] = MODES.flatMap((mode) => [
  { mode, name: mode, cli },
  ...(BEFORE && mode !== 'off' ? [{ mode, name: `${mode} (before)`, cli: BEFORE }] : []),
]);

function writeTasks(count: number): string {
  const file = path.join(directory, `tasks-${count}.jsonl`);
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1) lines.push(JSON.stringify({ id: `t-${index}`, prompt: 'traced' }));
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** A `fanout worker` in one process (no heap-cap child), so its CPU is one /proc entry. */
function startWorker(
  server: DevServer,
  simulator: RemoteSimulator,
  taskQueue: string,
  tracing: Record<string, string>,
  workerCli: string,
  profileName?: string,
): Promise<ReadyProcess> {
  const environment: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(environment)) if (name.startsWith('OTEL_')) delete environment[name];
  const profile = PROFILE && profileName ? ['--cpu-prof', '--cpu-prof-dir', path.join(PROFILE, profileName)] : [];
  return startReady('worker', [...profile, ...fanoutWorkerArgs(workerCli, server.address, taskQueue)], {
    ...environment,
    ...tracing,
    OPENAI_BASE_URL: simulator.baseUrl,
    OPENAI_API_KEY: 'bench',
    FANOUT_WORKER_HEAP_MB: 'off',
  });
}

interface Sample {
  variant: string;
  round: number;
  wallS: number;
  cpuS: number;
  ok: number;
}

/** A variant's worker, started and connected, ready to run a batch. */
interface Ready {
  variant: Variant;
  round: number;
  slug: string;
  taskQueue: string;
  worker: ReadyProcess;
  client: FanoutClient;
}

async function prepare(
  server: DevServer,
  simulator: RemoteSimulator,
  variant: Variant,
  tracing: Record<string, string>,
  round: number,
): Promise<Ready> {
  const slug = variant.name.replace(/[^a-z]+/g, '-');
  const taskQueue = `bench-tracing-${round}-${slug}`;
  const worker = await startWorker(server, simulator, taskQueue, tracing, variant.cli, `${slug}-${round}`);
  try {
    const client = await FanoutClient.connect({ client: server.client, taskQueue });
    return { variant, round, slug, taskQueue, worker, client };
  } catch (error) {
    await worker.stop();
    throw error;
  }
}

/** The batch on a prepared worker, timed, its worker's CPU read from /proc around it; the worker is stopped after. */
async function runBatch({ variant, round, slug, taskQueue, worker, client }: Ready, source: string): Promise<Sample> {
  try {
    const sink = path.join(directory, `${taskQueue}.jsonl`);
    const cpuBefore = cpuSeconds(worker.pid);
    const threadsBefore = threadCpuSeconds(worker.pid);
    const startedAt = performance.now();
    const batchStartUs = Number(process.hrtime.bigint() / 1000n);
    const summary = await (
      await client.startBatch({ source, sink, options: { concurrency: CONCURRENCY, pageSize: 500 } })
    ).result();
    const wallS = (performance.now() - startedAt) / 1000;
    const cpuS = cpuSeconds(worker.pid) - cpuBefore;
    const threads = threadCpuDelta(threadsBefore, threadCpuSeconds(worker.pid));
    // The batch's span of the monotonic clock the profiles' timestamps are on (µs), to tell it from the worker's start.
    if (PROFILE) {
      const profiles = path.join(PROFILE, `${slug}-${round}`);
      mkdirSync(profiles, { recursive: true });
      writeFileSync(
        path.join(profiles, 'batch.json'),
        JSON.stringify({ startUs: batchStartUs, endUs: Number(process.hrtime.bigint() / 1000n) }),
      );
    }
    console.error(
      `${variant.name} round ${round}: ${summary.succeeded} ok, wall ${wallS.toFixed(1)} s, worker CPU ${cpuS.toFixed(1)} s (by thread: ${threads})`,
    );
    return { variant: variant.name, round, wallS, cpuS, ok: summary.succeeded };
  } finally {
    await worker.stop();
  }
}

async function main(): Promise<void> {
  const server = await startDevServer();
  const simulator = await spawnSimulator(['--latency', String(LATENCY_MS)]);
  let jaeger: Jaeger | undefined;
  let discarding: Awaited<ReturnType<typeof startDiscardingCollector>> | undefined;
  const samples: Sample[] = [];
  let spansInJaeger = 0;
  try {
    if (MODES.includes('sampled')) jaeger = await startJaeger();
    discarding = await startDiscardingCollector();
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const tracing: Record<Mode, Record<string, string>> = {
      off: {},
      sampled: { OTEL_EXPORTER_OTLP_ENDPOINT: jaeger?.otlpEndpoint ?? nowhere, OTEL_SERVICE_NAME: 'bench-tracing' },
      'sampled, discarding collector': {
        OTEL_EXPORTER_OTLP_ENDPOINT: discarding.endpoint,
        OTEL_SERVICE_NAME: 'bench-tracing-discarded',
      },
      'collector down': { OTEL_EXPORTER_OTLP_ENDPOINT: nowhere, OTEL_SERVICE_NAME: 'bench-tracing-down' },
    };
    const source = writeTasks(ITEMS);
    // Each round starts one mode later than the one before (off, sampled, ...; then sampled, ..., off): a worker's CPU
    // for the same batch grows with its place in a round on this machine, and a fixed order charged that to tracing.
    for (let round = 1; round <= ROUNDS; round += 1) {
      if (TOGETHER) {
        const ready: Ready[] = [];
        try {
          for (const variant of VARIANTS)
            ready.push(await prepare(server, simulator, variant, tracing[variant.mode], round));
        } catch (error) {
          await Promise.all(ready.map(({ worker }) => worker.stop()));
          throw error;
        }
        samples.push(...(await Promise.all(ready.map((prepared) => runBatch(prepared, source)))));
        continue;
      }
      for (let place = 0; place < VARIANTS.length; place += 1) {
        const variant = VARIANTS[(round - 1 + place) % VARIANTS.length];
        samples.push(await runBatch(await prepare(server, simulator, variant, tracing[variant.mode], round), source));
      }
    }
    spansInJaeger = jaeger
      ? (await jaeger.traces('bench-tracing', 1000)).reduce((total, trace) => total + trace.spans.length, 0)
      : 0;
  } finally {
    await jaeger?.stop();
    await discarding?.close();
    await simulator.close();
    await server.stop();
  }

  const of = VARIANTS.map((variant) => samples.filter((sample) => sample.variant === variant.name));
  const off = of[0];
  const base = { wall: median(off.map((sample) => sample.wallS)), cpu: median(off.map((sample) => sample.cpuS)) };
  const signed = (ratio: number) => `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)}%`;
  /** The median over rounds of a round's figure over the same round's `off`. */
  const pairedRatio = (runs: Sample[], figure: (sample: Sample) => number) =>
    median(
      runs.map(
        (sample) => figure(sample) / figure(off.find((candidate) => candidate.round === sample.round) as Sample),
      ),
    );
  const rows = VARIANTS.map((variant, index) => {
    const runs = of[index];
    const wall = median(runs.map((sample) => sample.wallS));
    const cpu = median(runs.map((sample) => sample.cpuS));
    const vsOff = (value: number, reference: number, figure: (sample: Sample) => number) =>
      index === 0 ? '' : ` (${signed(value / reference)}; per round ${signed(pairedRatio(runs, figure))})`;
    return `| ${variant.name} | ${runs.map((sample) => sample.ok).join(', ')} | ${runs.map((sample) => sample.wallS.toFixed(1)).join(', ')} | ${wall.toFixed(1)}${vsOff(wall, base.wall, (sample) => sample.wallS)} | ${runs.map((sample) => sample.cpuS.toFixed(1)).join(', ')} | ${cpu.toFixed(1)}${vsOff(cpu, base.cpu, (sample) => sample.cpuS)} |`;
  });
  if (MODES !== ALL_MODES || PROFILE || BEFORE || !TOGETHER || CONCURRENCY !== DEFAULT_CONCURRENCY) {
    console.error(['| tracing | ok | wall (s) | wall, median | CPU (s) | CPU, median |', ...rows].join('\n'));
    if (PROFILE) console.error(`profiles in ${PROFILE}`);
    return;
  }
  const runsOf = (mode: Mode) => of[VARIANTS.findIndex((variant) => variant.name === mode)];
  const cpuOf = (mode: Mode) => signed(pairedRatio(runsOf(mode), (sample) => sample.cpuS));
  const wallOf = (mode: Mode) => signed(pairedRatio(runsOf(mode), (sample) => sample.wallS));
  const section = `## Tracing

Command: \`npm run bench\` (\`bench/tracing.ts\`). Last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, same machine.

A ${ITEMS.toLocaleString('en-US')}-item batch, concurrency ${CONCURRENCY}, every call ${LATENCY_MS} ms, the worker as its own \`fanout worker\`
process (one process: \`FANOUT_WORKER_HEAP_MB=off\`, its CPU from /proc over the batch), ${ROUNDS} rounds. In each round every
mode runs **at the same time**, each with its own worker, task queue and batch, against one server and one simulator: the
load of the moment on this shared machine falls on all of them alike (run one after another, the modes' ratios wandered by
tens of percent between runs), and together they need less than the two cores, so each batch's wall is its calls':
tracing **off** (no \`OTEL_*\`), **sampled** (the defaults: every window and lane traced, 1% of items' model calls, exported to a real
Jaeger, which held ${spansInJaeger.toLocaleString('en-US')} spans of these runs at the end), **sampled, discarding collector** (the same
spans, exported to an endpoint in the benchmark's process that reads each export and answers 200: the worker's own cost,
without Jaeger's CPU on the same two cores), and **collector down** (the same, exported to a port nothing listens on).

In brackets beside a median: the median against \`off\`'s, then the median of each round's figure against the same round's
\`off\` (the load of the machine moves a round's modes alike, so that ratio is the steadier one).

| tracing | ok per round | wall per round (s) | wall, median (s) | worker CPU per round (s) | worker CPU, median (s) |
| --- | --- | --- | ---: | --- | ---: |
${rows.join('\n')}

The issue's goals, by the rounds' ratios: at most 3% more worker CPU with sampling on (here ${cpuOf('sampled, discarding collector')} with a
collector that takes everything, ${cpuOf('sampled')} exporting to a Jaeger on the same machine), at most 1% more wall
with the collector down (here ${wallOf('collector down')}).`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const block = `<!-- tracing:start -->\n${section}\n<!-- tracing:end -->`;
  const existing = readFileSync(target, 'utf8');
  const pattern = /<!-- tracing:start -->[\s\S]*?<!-- tracing:end -->/;
  writeFileSync(
    target,
    pattern.test(existing) ? existing.replace(pattern, () => block) : `${existing.trimEnd()}\n\n${block}\n`,
  );
  console.error('wrote the tracing section of docs/BENCHMARKS.md');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
