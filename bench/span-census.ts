/**
 * One batch traced into a collector in this process that reads every OTLP/HTTP JSON export: the spans of a batch by
 * name, and the exports (count, spans and bytes each). BENCH_TRACING_ITEMS (default 4000).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';
import { environmentWithoutOtel, writeTracedTasks } from './tracing-support';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const ITEMS = Number(process.env.BENCH_TRACING_ITEMS ?? 4000);
const directory = scratchDirectory('fanout-bench-census-');
const cli = path.join(__dirname, '..', 'dist', 'cli', 'main.js');

async function main(): Promise<void> {
  const server = await startDevServer();
  const simulator = await spawnSimulator(['--latency', '200']);
  const names = new Map<string, number>();
  const exports: { spans: number; bytes: number }[] = [];
  const port = await freePort();
  const collector = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      let spans = 0;
      const parsed = JSON.parse(body.toString()) as {
        resourceSpans: { scopeSpans: { scope?: { name?: string }; spans: { name: string }[] }[] }[];
      };
      for (const resource of parsed.resourceSpans)
        for (const scope of resource.scopeSpans)
          for (const span of scope.spans) {
            spans += 1;
            const key = `${span.name.replace(/ t-\d+$/, ' t-*')}`;
            names.set(key, (names.get(key) ?? 0) + 1);
          }
      exports.push({ spans, bytes: body.length });
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(port, '127.0.0.1', resolve));
  try {
    const file = writeTracedTasks(directory, ITEMS);
    const environment = environmentWithoutOtel();
    const worker = spawn(process.execPath, [cli, 'worker', '--address', server.address, '--task-queue', 'census'], {
      env: {
        ...environment,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OPENAI_BASE_URL: simulator.baseUrl,
        OPENAI_API_KEY: 'bench',
        FANOUT_WORKER_HEAP_MB: 'off',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await new Promise<void>((resolve) => {
      let output = '';
      worker.stderr?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('worker polling')) resolve();
      });
    });
    const client = await FanoutClient.connect({ client: server.client, taskQueue: 'census' });
    const summary = await (
      await client.startBatch({
        source: file,
        sink: path.join(directory, 'out.jsonl'),
        options: { concurrency: 200, pageSize: 500 },
      })
    ).result();
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
    console.error(`${summary.succeeded} ok`);
    console.error(
      [...names]
        .sort((a, b) => b[1] - a[1])
        .map(([name, count]) => `${count}\t${name}`)
        .join('\n'),
    );
    console.error(
      `exports: ${exports.length}: ${exports.map((entry) => `${entry.spans} spans ${Math.round(entry.bytes / 1024)} KB`).join(', ')}`,
    );
  } finally {
    collector.close();
    await simulator.close();
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
