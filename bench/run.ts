/**
 * `npm run bench`: fan-out wall time against its slowest agent on a real dev server, side by side with an
 * in-process Promise.all over the same simulator, and the effect of worker activity slots. Writes
 * docs/BENCHMARKS.md. Compare ratios within one run, not absolute times: the machines are shared.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { createFanoutWorker } from '../src/worker';
import { spawnSimulator, type RemoteSimulator } from './remote-simulator';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

interface Measurement {
  wallMs: number;
  slowestMs: number;
}

type Runner = (tasks: AgentTask[]) => Promise<Measurement>;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function tasksFor(prefix: string, count: number): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `benchmark prompt ${index}`,
  }));
}

/** Times one run and reads the slowest latency the simulator applied to its requests. */
async function timed(simulator: RemoteSimulator, body: () => Promise<void>): Promise<Measurement> {
  await simulator.reset();
  const startedAt = performance.now();
  await body();
  const wallMs = performance.now() - startedAt;
  const slowestMs = Math.max(...(await simulator.log()).map((request) => request.latencyMs));
  return { wallMs, slowestMs };
}

/** A worker with `slots` activity slots, kept running across rounds (a warm worker, as in production). */
async function temporalRunner(
  server: DevServer,
  simulator: RemoteSimulator,
  slots: number,
): Promise<{ run: Runner; stop(): Promise<void> }> {
  const taskQueue = `bench-${slots}-${Math.random().toString(36).slice(2, 8)}`;
  const worker: Worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    maxConcurrentActivities: slots,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }) },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  return {
    run: (tasks) =>
      timed(simulator, async () => {
        const { results } = await client.runParallel(tasks);
        if (results.some((result) => result.status !== 'ok')) throw new Error('a benchmark agent failed');
      }),
    stop: async () => {
      worker.shutdown();
      await running;
    },
  };
}

function promiseAllRunner(simulator: RemoteSimulator): Runner {
  const llm = createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' });
  return (tasks) =>
    timed(simulator, async () => {
      await Promise.all(
        tasks.map((task) =>
          llm.chat.completions.create(
            { model: 'gpt-4o-mini', messages: [{ role: 'user', content: task.prompt }] },
            { headers: { 'x-fanout-task-id': task.id } },
          ),
        ),
      );
    });
}

interface Row {
  scenario: string;
  runner: string;
  wallMs: number;
  slowestMs: number;
  ratio: number;
  rounds: number[];
}

/** Runs every runner once per round, in turn, so all of them see the same machine load; one warm-up round first. */
async function scenario(name: string, tasks: AgentTask[], runners: [string, Runner][]): Promise<Row[]> {
  for (const [, run] of runners) await run(tasks.map((task) => ({ ...task, id: `warmup-${task.id}` })));
  const results = runners.map(() => [] as Measurement[]);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [index, [, run]] of runners.entries()) results[index].push(await run(tasks));
  }
  return runners.map(([runner], index) => {
    const ratios = results[index].map((m) => m.wallMs / m.slowestMs);
    const ratio = median(ratios);
    const chosen = results[index][ratios.indexOf(ratio)];
    console.error(
      `${name} | ${runner}: ratio ${ratio.toFixed(3)} (rounds ${ratios.map((r) => r.toFixed(3)).join(', ')})`,
    );
    return { scenario: name, runner, wallMs: chosen.wallMs, slowestMs: chosen.slowestMs, ratio, rounds: ratios };
  });
}

async function main(): Promise<void> {
  const server = await startDevServer();
  const rows: Row[] = [];
  try {
    const spread = await spawnSimulator(['--seed', 'bench', '--latency', '500-3000']);
    const spreadWorker = await temporalRunner(server, spread, 500);
    rows.push(
      ...(await scenario('100 agents, latency 0.5-3 s, uncapped', tasksFor('spread', 100), [
        ['temporal fanOut', spreadWorker.run],
        ['in-process Promise.all', promiseAllRunner(spread)],
      ])),
    );
    await spreadWorker.stop();
    await spread.close();

    const fixed = await spawnSimulator(['--latency', '1000']);
    const defaultSlots = await temporalRunner(server, fixed, 100);
    const ourSlots = await temporalRunner(server, fixed, 500);
    rows.push(
      ...(await scenario('500 agents, latency 1 s', tasksFor('slots', 500), [
        ['temporal fanOut, 100 activity slots (SDK default)', defaultSlots.run],
        ['temporal fanOut, 500 activity slots (our default)', ourSlots.run],
        ['in-process Promise.all', promiseAllRunner(fixed)],
      ])),
    );
    await defaultSlots.stop();
    await ourSlots.stop();
    await fixed.close();
  } finally {
    await server.stop();
  }

  const table = [
    '| scenario | runner | wall (ms) | slowest agent (ms) | wall / slowest (median) | every round |',
    '| --- | --- | ---: | ---: | ---: | --- |',
    ...rows.map(
      (row) =>
        `| ${row.scenario} | ${row.runner} | ${row.wallMs.toFixed(0)} | ${row.slowestMs.toFixed(0)} | ${row.ratio.toFixed(3)} | ${row.rounds.map((r) => r.toFixed(2)).join(' ')} |`,
    ),
  ].join('\n');
  const document = `# Benchmarks

Command: \`npm run bench\` (\`bench/run.ts\`; \`BENCH_ROUNDS\` sets the rounds, default 5).

Last run: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} cores, Node ${process.version}. Set-up: a local Temporal
dev server (the Temporal CLI's \`server start-dev\`, in memory), a warm worker in the benchmark's process, and the simulator
in its own process (as a remote provider would be), over real HTTP. Each scenario starts with one warm-up round; then every
runner runs once per round, in turn, so all see the same machine load. Compare ratios within one run, not absolute times
across runs: these machines are shared and noisy.

"wall" runs from the client's start call to its result; "slowest agent" is the largest latency the simulator applied in that
round. A ratio of 1.00 means the run took exactly as long as its slowest agent. Sequential waiting (the gptme bug) would give
the sum of latencies over the slowest: about 58 for the first scenario.

${table}

Reading it:
- The 100-agent fan-out is bounded by its slowest agent plus Temporal's scheduling overhead (the issue's target is 1.10 x).
  That overhead is the workflow task that schedules the calls and the start of 100 activities in a burst (handed back
  to the worker by eager dispatch, not matched one by one; a few hundred ms on this 2-core machine, where the server, the
  worker and the simulator share the cores); \`Promise.all\` pays none of it, and gives up
  durability, retries and cancellation in exchange.
- With the SDK's default 100 activity slots, 500 one-second agents run in about five waves; the worker's 500 slots remove
  the waves. This is why \`FANOUT_MAX_CONCURRENT_ACTIVITIES\` defaults to 500.
`;
  writeFileSync(path.join(__dirname, '..', 'docs', 'BENCHMARKS.md'), document);
  console.error('wrote docs/BENCHMARKS.md');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
