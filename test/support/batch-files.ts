import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BatchHandle } from '../../src/client/batch-client';
import type { FanoutClient } from '../../src/client/fanout-client';
import type { BatchOptions, BatchResultLine } from '../../src/contract/batch';

export function batchDirectory(): string {
  return mkdtempSync(path.join(tmpdir(), 'fanout-batch-'));
}

/** Writes a JSONL task file of `count` tasks (`<prefix>-0` …) and returns its path. */
export function writeTasks(
  directory: string,
  count: number,
  prompt: (index: number) => string = () => 'work',
  prefix = 'item',
): string {
  const file = path.join(directory, `${prefix}-${count}.jsonl`);
  const lines = Array.from({ length: count }, (_, index) =>
    JSON.stringify({ id: `${prefix}-${index}`, prompt: prompt(index) }),
  );
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Every line of a sink, parsed; throws on a torn line. */
export function readSink(file: string): BatchResultLine[] {
  const text = readFileSync(file, 'utf8');
  if (text !== '' && !text.endsWith('\n')) throw new Error('the sink ends in a partial line');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as BatchResultLine);
}

/** Asserts-friendly summary: how many lines, how many distinct ids, how many ok. */
export function sinkCounts(file: string): { lines: number; ids: number; ok: number } {
  const lines = readSink(file);
  return {
    lines: lines.length,
    ids: new Set(lines.map((line) => line.id)).size,
    ok: lines.filter((line) => line.status === 'ok').length,
  };
}

/**
 * Writes `count` tasks (`<name>-0` …, each with `prompt`, or `prompt` of its index) to a fresh directory and starts a batch of them
 * on `client`, its results in `<name>.jsonl` beside them: the handle, the task file and the sink.
 *
 * @example
 * const { handle, sink } = await startTaskBatch(suite.stack.client, 'short', 600, 'short', { concurrency: 20 });
 */
export async function startTaskBatch(
  client: Pick<FanoutClient, 'startBatch'>,
  name: string,
  count: number,
  prompt?: string | ((index: number) => string),
  options?: BatchOptions,
): Promise<{ handle: BatchHandle; source: string; sink: string }> {
  const directory = batchDirectory();
  const source = writeTasks(directory, count, typeof prompt === 'string' ? () => prompt : prompt, name);
  const sink = path.join(directory, `${name}.jsonl`);
  const handle = await client.startBatch({ source, sink, ...(options === undefined ? {} : { options }) });
  return { handle, source, sink };
}
