/**
 * Batch throughput by store (run by `npm run bench`): the same batch with its task file and results on the local disk and
 * in S3 (a real SeaweedFS server started here), rounds alternated, against a zero-latency simulator so the store's cost
 * shows. Writes its section of docs/BENCHMARKS.md between `<!-- store:start -->` and `<!-- store:end -->`.
 * `BENCH_STORE_ITEMS` (default 2000) and `BENCH_STORE_ROUNDS` (default 3) change its size.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { startS3Server } from '../src/local/s3-server';
import { PayloadStore, Storage } from '../src/store';
import { createFanoutWorker } from '../src/worker';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const ITEMS = Number(process.env.BENCH_STORE_ITEMS ?? 2000);
const ROUNDS = Number(process.env.BENCH_STORE_ROUNDS ?? 3);
const CONCURRENCY = 100;
const directory = scratchDirectory('fanout-bench-store-');

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main(): Promise<void> {
  const [server, s3, simulator] = await Promise.all([
    startDevServer(),
    startS3Server(),
    spawnSimulator(['--latency', '0']),
  ]);
  const storage = new Storage(s3.env());
  const taskQueue = 'bench-store';
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: {
      llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }),
      storage,
      store: new PayloadStore(storage, `s3://${s3.bucket}/store`),
    },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({
    client: server.client,
    taskQueue,
    store: new PayloadStore(storage, `s3://${s3.bucket}/store`),
  });
  const tasks = Array.from({ length: ITEMS }, (_, index) =>
    JSON.stringify({ id: `s-${index}`, prompt: `item ${index}` }),
  ).join('\n');
  const localSource = path.join(directory, 'tasks.jsonl');
  writeFileSync(localSource, tasks);
  const s3Source = `s3://${s3.bucket}/bench/tasks.jsonl`;
  await storage.write(s3Source, tasks);

  const rates: Record<'local' | 's3', number[]> = { local: [], s3: [] };
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const kind of round % 2 === 0 ? (['local', 's3'] as const) : (['s3', 'local'] as const)) {
        const source = kind === 'local' ? localSource : s3Source;
        const sink =
          kind === 'local' ? path.join(directory, `out-${round}.jsonl`) : `s3://${s3.bucket}/bench/out-${round}.jsonl`;
        const startedAt = performance.now();
        const summary = await (
          await client.startBatch({ source, sink, options: { concurrency: CONCURRENCY } })
        ).result();
        const seconds = (performance.now() - startedAt) / 1000;
        const lines = (await storage.read(sink)).toString('utf8').split('\n').filter(Boolean).length;
        if (summary.succeeded !== ITEMS || lines !== ITEMS)
          throw new Error(`${kind} round ${round + 1}: ${summary.succeeded} ok, ${lines} lines`);
        rates[kind].push(ITEMS / seconds);
        console.error(`${kind} round ${round + 1}: ${(ITEMS / seconds).toFixed(0)} calls/s`);
      }
    }
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
    await server.stop();
    await s3.stop();
  }

  const rows = rates.local.map(
    (local, index) =>
      `| ${index + 1} | ${local.toFixed(0)} | ${rates.s3[index].toFixed(0)} | ${(rates.s3[index] / local).toFixed(2)} |`,
  );
  const section = `## Batch throughput by store

Command: \`npm run bench\` (\`bench/store.ts\`). Last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${os.cpus().length} cores, Node ${process.version}.
${ITEMS.toLocaleString('en-US')} items, concurrency ${CONCURRENCY}, zero-latency simulator (so the store's cost shows), worker in the benchmark's
process; task file and results on the local disk, or in S3 (SeaweedFS on this machine, through the AWS SDK); rounds alternated.
Calls per second, end to end (start to the assembled result file):

| round | local (calls/s) | S3 (calls/s) | S3 / local |
| --- | ---: | ---: | ---: |
${rows.join('\n')}
| median | ${median(rates.local).toFixed(0)} | ${median(rates.s3).toFixed(0)} | ${(median(rates.s3) / median(rates.local)).toFixed(2)} |

With S3 each item is one ranged GET of its task line; results travel back in the activity result and are written one
segment per flush, so the store adds one request per item and one per ${100} results, not a file per item.`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const existing = readFileSync(target, 'utf8');
  const block = `<!-- store:start -->\n${section}\n<!-- store:end -->`;
  const pattern = /<!-- store:start -->[\s\S]*?<!-- store:end -->/;
  writeFileSync(
    target,
    pattern.test(existing) ? existing.replace(pattern, block) : `${existing.trimEnd()}\n\n${block}\n`,
  );
  console.log(section);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
