/** What the tracing benchmarks (tracing.ts, tracing-exports.ts, tracing-replay.ts, span-census.ts) share. */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { freePort } from '../src/local/free-port';

/**
 * An OTLP collector that takes every export and keeps nothing (200 to each request once read): the cost of tracing's
 * exports with a collector that answers, without a viewer's CPU on the same cores. `endpoint` has no path.
 */
export async function startDiscardingCollector(): Promise<{ endpoint: string; close: () => Promise<void> }> {
  const port = await freePort();
  const collector = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/x-protobuf' });
      response.end();
    });
  });
  await new Promise<void>((resolve) => collector.listen(port, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => collector.close(() => resolve())),
  };
}

/** The median, the mean of the two middle values for an even count. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Writes `items` plain tasks (`t-0`, `t-1`, ...) to `directory`/tasks.jsonl and returns its path. */
export function writeTracedTasks(directory: string, items: number): string {
  const file = path.join(directory, 'tasks.jsonl');
  const lines: string[] = [];
  for (let index = 0; index < items; index += 1) lines.push(JSON.stringify({ id: `t-${index}`, prompt: 'traced' }));
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** This process's environment without any OTEL_* variable, for a worker whose tracing the benchmark sets itself. */
export function environmentWithoutOtel(): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(environment)) if (name.startsWith('OTEL_')) delete environment[name];
  return environment;
}
