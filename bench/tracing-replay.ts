/**
 * What tracing costs a batch's workflow code, without the noise of a live batch: a 4,000-item batch is run once,
 * untraced, and its workflows' histories (the batch's and its windows') are then replayed in this process, over and
 * over, on the untraced workflow bundle and on the traced one (and, with BENCH_TRACING_BEFORE_BUNDLE, on another
 * build's traced bundle), the bundles taking turns. A replay runs the same workflow code as the live batch (every
 * promise its code makes, every interceptor, every span made in the sandbox; only the sink that sends spans out is not
 * called), on one thread and with nothing else in flight, so the CPU seconds it takes differ between bundles by their
 * workflow code alone. BENCH_TRACING_ITEMS (default 4000), BENCH_ROUNDS (default 8), BENCH_TRACING_REPLAY_COPIES (the
 * histories replayed this many times per measurement, default 5).
 *
 *   npx tsx bench/tracing-replay.ts
 *   BENCH_TRACING_BEFORE_BUNDLE=<other build>/dist/workflow-bundle-traced.js npx tsx bench/tracing-replay.ts
 */
import path from 'node:path';
import type { temporal } from '@temporalio/proto';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { spawnSimulator } from './remote-simulator';
import { fanoutWorkerArgs, startReady, type ReadyProcess } from './ready-process';
import { scratchDirectory } from './scratch';
import { environmentWithoutOtel, median, writeTracedTasks } from './tracing-support';

// Quiet: a replay worker logs an error for every sink call of the histories' last workflow task (no sinks are registered).
Runtime.install({ logger: new DefaultLogger('ERROR', () => undefined) });

const ITEMS = Number(process.env.BENCH_TRACING_ITEMS ?? 4000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
/** Each measurement replays the histories this many times over (one replay worker), to outweigh the clock's grain. */
const COPIES = Number(process.env.BENCH_TRACING_REPLAY_COPIES ?? 5);
const directory = scratchDirectory('fanout-bench-tracing-replay-');
const dist = path.join(__dirname, '..', 'dist');
const bundles: { name: string; codePath: string }[] = [
  { name: 'untraced', codePath: path.join(dist, 'workflow-bundle.js') },
  { name: 'traced', codePath: path.join(dist, 'workflow-bundle-traced.js') },
  ...(process.env.BENCH_TRACING_BEFORE_BUNDLE
    ? [{ name: 'traced (before)', codePath: process.env.BENCH_TRACING_BEFORE_BUNDLE }]
    : []),
];

type History = temporal.api.history.v1.IHistory;

/** The batch's history and its windows', from a batch run once by an untraced worker. */
async function recordBatch(): Promise<{ workflowId: string; history: History }[]> {
  const server = await startDevServer();
  const simulator = await spawnSimulator(['--latency', '50']);
  const file = writeTracedTasks(directory, ITEMS);
  const environment = environmentWithoutOtel();
  let worker: ReadyProcess | undefined;
  try {
    worker = await startReady(
      'worker',
      fanoutWorkerArgs(path.join(dist, 'cli', 'main.js'), server.address, 'replayed'),
      {
        ...environment,
        OPENAI_BASE_URL: simulator.baseUrl,
        OPENAI_API_KEY: 'bench',
        FANOUT_WORKER_HEAP_MB: 'off',
      },
    );
    const client = await FanoutClient.connect({ client: server.client, taskQueue: 'replayed' });
    const handle = await client.startBatch({
      source: file,
      sink: path.join(directory, 'out.jsonl'),
      options: { concurrency: 200, pageSize: 500 },
    });
    const summary = await handle.result();
    if (summary.succeeded !== ITEMS) throw new Error(`the batch answered ${summary.succeeded} of ${ITEMS}`);
    const batchId = handle.batchId;
    const batchHistory = await server.client.workflow.getHandle(batchId).fetchHistory();
    const windowIds = (batchHistory.events ?? []).flatMap((event) => {
      const id = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      return id ? [id] : [];
    });
    const histories = [{ workflowId: batchId, history: batchHistory }];
    for (const id of windowIds)
      histories.push({ workflowId: id, history: await server.client.workflow.getHandle(id).fetchHistory() });
    return histories;
  } finally {
    await worker?.stop();
    await simulator.close();
    await server.stop();
  }
}

/** CPU seconds (this process, every thread) to replay `histories` once on `codePath`, past the replay worker's start. */
async function replayCpu(codePath: string, histories: { workflowId: string; history: History }[]): Promise<number> {
  // The first history again, replayed first and not counted: the replay worker's start (the bundle, its source map).
  const replays = Worker.runReplayHistories({ workflowBundle: { codePath } }, [
    histories[0],
    ...Array.from({ length: COPIES }, () => histories).flat(),
  ]);
  let started: NodeJS.CpuUsage | undefined;
  for await (const result of replays) {
    if (result.error) throw new Error(`${result.workflowId} does not replay on ${codePath}: ${result.error.message}`);
    if (!started) started = process.cpuUsage();
  }
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1e6;
}

async function main(): Promise<void> {
  const histories = await recordBatch();
  const events = histories.reduce((total, { history }) => total + (history.events?.length ?? 0), 0);
  console.error(`recorded ${histories.length} histories, ${events} events`);
  const cpu = new Map(bundles.map((bundle) => [bundle.name, [] as number[]]));
  for (let round = 1; round <= ROUNDS; round += 1)
    for (let place = 0; place < bundles.length; place += 1) {
      const bundle = bundles[(round - 1 + place) % bundles.length];
      const seconds = await replayCpu(bundle.codePath, histories);
      cpu.get(bundle.name)?.push(seconds);
      console.error(`${bundle.name} round ${round}: ${seconds.toFixed(2)} s`);
    }
  const base = cpu.get('untraced') as number[];
  const rows = bundles.map(({ name }) => {
    const runs = cpu.get(name) as number[];
    const ratio = median(runs.map((seconds, index) => seconds / base[index]));
    const vs = name === 'untraced' ? '' : ` (per round ${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)}%)`;
    return `| ${name} | ${runs.map((seconds) => seconds.toFixed(2)).join(', ')} | ${median(runs).toFixed(2)}${vs} |`;
  });
  console.error(
    [
      `Replays of a ${ITEMS}-item batch's ${histories.length} workflow histories (${events} events), ${COPIES} times over, CPU seconds:`,
      '| bundle | per round | median |',
      '| --- | --- | ---: |',
      ...rows,
    ].join('\n'),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
