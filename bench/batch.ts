/**
 * Batch benchmarks (run by `npm run bench` after bench/run.ts): a 1,000-item sliding window against its ideal, and
 * with `BENCH_BATCH_ITEMS=N`, N items against a zero-latency simulator with the worker in its own process (`npm run bench`
 * leaves it to bench/compare.ts --big, which runs 100,000 beside the plain SDK). Writes its section of docs/BENCHMARKS.md
 * between `<!-- batch:start -->` and `<!-- batch:end -->`.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { createFanoutWorker } from '../src/worker';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const BIG = Number(process.env.BENCH_BATCH_ITEMS ?? 0);
const directory = scratchDirectory('fanout-bench-');

function writeTasks(count: number, prompt: string): string {
  const file = path.join(directory, `tasks-${count}.jsonl`);
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1) lines.push(JSON.stringify({ id: `b-${index}`, prompt }));
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function countLines(file: string): { lines: number; ids: number } {
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  return { lines: lines.length, ids: new Set(lines.map((line) => (JSON.parse(line) as { id: string }).id)).size };
}

async function windowScenario(server: DevServer): Promise<string> {
  const simulator = await spawnSimulator(['--latency', '200']);
  const taskQueue = 'bench-window';
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }) },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const rows: string[] = [];
  try {
    const source = writeTasks(1000, 'window');
    for (let round = 0; round < 3; round += 1) {
      const sink = path.join(directory, `window-${round}.jsonl`);
      const startedAt = performance.now();
      const summary = await (await client.startBatch({ source, sink, options: { concurrency: 50 } })).result();
      const wallMs = performance.now() - startedAt;
      const ideal = Math.ceil(1000 / 50) * 200;
      rows.push(
        `| ${round + 1} | ${wallMs.toFixed(0)} | ${ideal} | ${(wallMs / ideal).toFixed(2)} | ${summary.succeeded} | ${countLines(sink).lines} |`,
      );
      console.error(`window round ${round + 1}: ${(wallMs / ideal).toFixed(2)} x ideal`);
    }
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
  }
  return [
    '| round | wall (ms) | ideal ceil(N/C) x L (ms) | wall / ideal | ok | sink lines |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}

function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

async function bigScenario(server: DevServer): Promise<string> {
  const simulator = await spawnSimulator(['--latency', '0']);
  const taskQueue = 'bench-big';
  const cli = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
  const worker = spawn(process.execPath, [cli, 'worker', '--address', server.address, '--task-queue', taskQueue], {
    env: { ...process.env, OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'bench' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  try {
    const source = writeTasks(BIG, 'big');
    const sink = path.join(directory, 'big.jsonl');
    const batchId = `big-${Date.now()}`;
    const startedAt = performance.now();
    const handle = await client.startBatch({ source, sink, batchId, options: { concurrency: 200, pageSize: 500 } });
    let rssPeak = 0;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, peakRssMb(worker.pid as number))), 2000);
    const summary = await handle.result();
    clearInterval(sampler);
    const wallMs = performance.now() - startedAt;
    rssPeak = Math.max(rssPeak, peakRssMb(worker.pid as number));
    let largestHistory = 0;
    let runs = 0;
    for await (const execution of client.client.workflow.list({ query: `WorkflowId = "${batchId}"` })) {
      runs += 1;
      largestHistory = Math.max(largestHistory, execution.historyLength);
    }
    const sinkLines = countLines(sink);
    console.error(
      `big: ${summary.succeeded} ok in ${(wallMs / 1000).toFixed(1)} s, ${runs} runs, largest history ${largestHistory}`,
    );
    return [
      '| items | concurrency | ok | failed | sink lines / distinct ids | wall (s) | calls / s | worker peak RSS (MB) | runs | largest history of any run (events) |',
      '| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
      `| ${BIG} | 200 | ${summary.succeeded} | ${summary.failed} | ${sinkLines.lines} / ${sinkLines.ids} | ${(wallMs / 1000).toFixed(1)} | ${((summary.succeeded * 1000) / wallMs).toFixed(0)} | ${rssPeak.toFixed(0)} | ${runs} | ${largestHistory} |`,
    ].join('\n');
  } finally {
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
    await simulator.close();
  }
}

async function main(): Promise<void> {
  const server = await startDevServer();
  let window: string;
  let big: string | undefined;
  try {
    window = await windowScenario(server);
    if (BIG > 0) big = await bigScenario(server);
  } finally {
    await server.stop();
  }
  const section = `## Batches

Command: \`npm run bench\` (\`bench/batch.ts\`, after the fan-out scenarios). Last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, same machine and server set-up as above.

A 1,000-item batch, concurrency 50, every call 200 ms (worker in the benchmark's process, simulator in its own):

${window}

The gap to the ideal is Temporal's cost per activity (schedule, dispatch, complete: three history events and a workflow task, on a 2-core
machine shared by the dev server, the worker and the simulator). Short calls like these share activities (chunks; README, "Batches"), so
that cost is paid about once per 50-80 calls. In round 1 the worker has made no calls yet, so the first 50 items run an activity each while
the batch learns how long its calls are; from round 2 the worker's recent calls tell the batch at its scan, and it chunks from the first wave.
${
  big === undefined
    ? `
The 100,000-item batch (worker peak RSS, history per run) is measured side by side with the plain SDK below (\`bench/compare.ts --big\`, scenario d);
\`BENCH_BATCH_ITEMS=N tsx bench/batch.ts\` runs it here too.`
    : `
${BIG.toLocaleString('en-US')} items against a zero-latency simulator, concurrency 200, the worker as its own \`fanout worker\` process (its peak RSS is
VmHWM from /proc), every run of the batch listed through visibility:

${big}`
}`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const block = `<!-- batch:start -->\n${section}\n<!-- batch:end -->`;
  const existing = readFileSync(target, 'utf8');
  const pattern = /<!-- batch:start -->[\s\S]*?<!-- batch:end -->/;
  // Older files have the section without markers, up to the next section's marker.
  const unmarked = /## Batches\n[\s\S]*?(?=<!-- |$)/;
  const updated = pattern.test(existing)
    ? existing.replace(pattern, () => block)
    : unmarked.test(existing)
      ? existing.replace(unmarked, () => `${block}\n\n`)
      : `${existing.trimEnd()}\n\n${block}\n`;
  writeFileSync(target, updated);
  console.error('wrote the batch section of docs/BENCHMARKS.md');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
