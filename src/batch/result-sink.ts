import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BatchResultLine } from '../contract/batch';
import { linesFrom } from './task-source';

/**
 * The result sink: a JSONL file with exactly one line per task id.
 *
 * A finished call writes its result to a spool file (`<sink>.parts/<hash of id>.json`, written to a temporary
 * name and renamed, so it is whole or absent). The batch workflow alone appends to the sink, one flush at a time,
 * and remembers the sink's length after each acknowledged flush: a retried flush first truncates the file back to
 * that length, so a crash mid-flush can leave neither a torn nor a duplicated line.
 */
export function spoolDirectory(sink: string): string {
  return `${sink}.parts`;
}

function spoolFile(sink: string, id: string): string {
  return path.join(spoolDirectory(sink), `${createHash('sha256').update(id).digest('hex')}.json`);
}

export async function writeSpooled(sink: string, result: BatchResultLine, attemptTag: string): Promise<void> {
  const target = spoolFile(sink, result.id);
  const temporary = `${target}.${attemptTag}.tmp`;
  await mkdir(spoolDirectory(sink), { recursive: true });
  await writeFile(temporary, JSON.stringify(result));
  await rename(temporary, target);
}

/** A result to append: one the call spooled (by id), or one given whole (a failure the workflow recorded). */
export type FlushItem = { id: string } | { line: BatchResultLine };

async function fileSize(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
}

export class SinkShorterThanExpected extends Error {}

/** Appends `items` after the first `expectedBytes` bytes of the sink (truncating anything a failed flush left) and syncs. */
export async function appendToSink(sink: string, expectedBytes: number, items: readonly FlushItem[]): Promise<number> {
  const lines: string[] = [];
  for (const item of items) {
    const text = 'line' in item ? JSON.stringify(item.line) : (await readFile(spoolFile(sink, item.id), 'utf8')).trim();
    lines.push(`${text}\n`);
  }
  const handle = await open(sink, 'a+');
  try {
    const { size } = await handle.stat();
    if (size < expectedBytes) {
      throw new SinkShorterThanExpected(`the sink ${sink} holds ${size} bytes, fewer than the ${expectedBytes} this batch wrote; it was changed outside the batch`);
    }
    if (size > expectedBytes) await handle.truncate(expectedBytes);
    const data = Buffer.from(lines.join(''), 'utf8');
    await handle.write(data, 0, data.length, expectedBytes);
    await handle.sync();
    return expectedBytes + data.length;
  } finally {
    await handle.close();
  }
}

export async function removeSpooled(sink: string, ids: readonly string[]): Promise<void> {
  await Promise.all(ids.map((id) => rm(spoolFile(sink, id), { force: true })));
}

export async function removeSpoolDirectory(sink: string): Promise<void> {
  await rm(spoolDirectory(sink), { recursive: true, force: true });
}

/** Ids with an ok line in the first `belowBytes` bytes of the sink. */
export async function okIds(sink: string, belowBytes: number): Promise<Set<string>> {
  const ids = new Set<string>();
  if (belowBytes === 0) return ids;
  for await (const line of linesFrom(sink)) {
    if (line.offset >= belowBytes) break;
    try {
      const parsed = JSON.parse(line.text) as BatchResultLine;
      if (parsed.status === 'ok') ids.add(parsed.id);
    } catch {
      // A torn line cannot be in the acknowledged prefix; ignore anything unreadable.
    }
  }
  return ids;
}

/**
 * Prepares a resume: rewrites the sink with its ok lines only (one per id), so the failed and never-run items can be
 * written again. Atomic: a temporary file renamed over the sink. Returns the new length.
 */
export async function keepOkLines(sink: string): Promise<number> {
  if ((await fileSize(sink)) === 0) return 0;
  const kept = new Map<string, string>();
  for await (const line of linesFrom(sink)) {
    try {
      const parsed = JSON.parse(line.text) as BatchResultLine;
      if (parsed.status === 'ok' && !kept.has(parsed.id)) kept.set(parsed.id, line.text);
    } catch {
      // skip
    }
  }
  const data = [...kept.values()].map((text) => `${text}\n`).join('');
  const temporary = `${sink}.resume.tmp`;
  const handle = await open(temporary, 'w');
  try {
    await handle.write(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, sink);
  return Buffer.byteLength(data);
}

export { fileSize };
