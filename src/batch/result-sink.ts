import type { BatchResultLine } from '../contract/batch';
import { childOf } from '../contract/location';
import type { ObjectStorage } from '../store';
import { linesOf } from './lines';

/**
 * The result sink: one JSONL object (local file or S3 object) with exactly one line per task id.
 *
 * While a batch runs its results are written as numbered segments in a spool beside the sink,
 * `<sink>.parts/<epoch>/seg-00000001.jsonl`, one per flush. A segment's name is fixed by its number, and it is written
 * whole or not at all, so a retried or stale flush attempt rewrites the same segment with the same lines: it can neither
 * tear a line nor add one twice. When the batch ends (finished, cancelled or failed) the segments are concatenated, in
 * order, into the sink, streamed, and the spool is removed. `epoch` is the first run id of the batch's chain of runs, so
 * a resume never mixes its segments with those of the run it resumes. Nothing here needs a shared disk: every worker
 * reads and writes through the store.
 */
export function spoolRoot(sink: string): string {
  return `${sink}.parts`;
}

export function spoolOf(sink: string, epoch: string): string {
  return childOf(spoolRoot(sink), epoch);
}

function segmentUri(spool: string, sequence: number): string {
  return childOf(spool, `seg-${String(sequence).padStart(8, '0')}.jsonl`);
}

function isSegment(name: string): boolean {
  return /^seg-\d{8}\.jsonl$/.test(name);
}

/** A result to write: the line itself, or (for a large output) where the item activity stored it. */
export type FlushItem = { line: BatchResultLine } | { lineRef: string };

export class SinkShorterThanExpected extends Error {}

/** Writes segment `sequence` of a spool with `items`, resolving stored lines. Returns its size in bytes. */
export async function writeSegment(storage: ObjectStorage, spool: string, sequence: number, items: readonly FlushItem[]): Promise<number> {
  const lines: string[] = [];
  for (const item of items) {
    const text = 'line' in item ? JSON.stringify(item.line) : (await storage.read(item.lineRef)).toString('utf8').trim();
    lines.push(`${text}\n`);
  }
  const data = Buffer.from(lines.join(''), 'utf8');
  await storage.write(segmentUri(spool, sequence), data);
  return data.length;
}

/** Stores one large result line for a later flush; the name is fixed by the id, so a retry overwrites it. */
export async function writeItemLine(storage: ObjectStorage, spool: string, name: string, line: string): Promise<string> {
  const uri = childOf(childOf(spool, 'items'), `${name}.json`);
  await storage.write(uri, line);
  return uri;
}

async function* segmentsIn(storage: ObjectStorage, spool: string, count: number): AsyncGenerator<Buffer> {
  for (let sequence = 0; sequence < count; sequence += 1) {
    const uri = segmentUri(spool, sequence);
    if ((await storage.size(uri)) === undefined) continue; // a resume writes segment 0 only when it kept lines
    for await (const chunk of storage.readStream(uri)) yield chunk;
  }
}

/**
 * Concatenates a spool's segments 0..count-1 into the sink, streamed and atomically, then removes the spool. Safe to
 * repeat: once the spool is gone the sink is already whole.
 */
export async function assembleSink(storage: ObjectStorage, sink: string, spool: string, count: number): Promise<number> {
  const present = (await storage.list(spool)).filter(isSegment);
  if (present.length === 0 && count > 0) {
    // The spool is gone: a repeated finish after an earlier one assembled the sink and removed it.
    const assembled = await storage.size(sink);
    if (assembled !== undefined) return assembled;
  }
  const bytes = await storage.writeStream(sink, segmentsIn(storage, spool, count));
  await storage.removeTree(spool);
  // The `<sink>.parts` directory goes too once no other run's spool is in it (S3 prefixes vanish by themselves).
  if ((await storage.list(spoolRoot(sink))).length === 0) await storage.removeTree(spoolRoot(sink));
  return bytes;
}

/**
 * Writes into the sink what a batch stopped from outside (terminated, timed out) had flushed: its spool's segments, then
 * removes the spool. Returns the bytes written, or undefined when there was no spool.
 */
export async function assembleLeftover(storage: ObjectStorage, sink: string, spool: string): Promise<number | undefined> {
  const segments = (await storage.list(spool)).filter(isSegment);
  if (segments.length === 0) {
    await storage.removeTree(spool);
    return undefined;
  }
  const count = Number(/\d{8}/.exec(segments[segments.length - 1])?.[0] ?? 0) + 1;
  return assembleSink(storage, sink, spool, count);
}

/** Every spool epoch left beside a sink (a batch that was terminated before it could assemble its results). */
export async function leftoverSpools(storage: ObjectStorage, sink: string, except?: string): Promise<string[]> {
  const names = await storage.list(spoolRoot(sink));
  const epochs = new Set(names.filter((name) => name.includes('/')).map((name) => name.split('/')[0]));
  if (except !== undefined) epochs.delete(except);
  return [...epochs].sort().map((epoch) => spoolOf(sink, epoch));
}

/** Ok ids in a JSONL object of result lines. */
export async function okIds(storage: ObjectStorage, uri: string): Promise<Set<string>> {
  const ids = new Set<string>();
  if ((await storage.size(uri)) === undefined) return ids;
  for await (const line of linesOf(storage, uri)) {
    try {
      const parsed = JSON.parse(line.text ?? '') as BatchResultLine;
      if (parsed.status === 'ok') ids.add(parsed.id);
    } catch {
      // a line that cannot be read is not an ok result
    }
  }
  return ids;
}

/** Where a resume keeps the ok lines it carries over: segment 0 of its spool. */
export function keptSegment(spool: string): string {
  return segmentUri(spool, 0);
}

/**
 * Prepares a resume: the ok lines (one per id) of the sink and of any spool a terminated run left behind are written,
 * streamed, as segment 0 of the new spool; the failed and never-run items will follow in later segments. The old sink
 * is untouched until the new run assembles, so a crash here loses nothing. Returns how many ok lines were kept.
 */
export async function carryOkLines(storage: ObjectStorage, sink: string, spool: string): Promise<number> {
  const epoch = spool.slice(spoolRoot(sink).length + 1);
  const leftovers = await leftoverSpools(storage, sink, epoch);
  const sources = [sink, ...(await Promise.all(leftovers.map(async (old) => (await storage.list(old)).filter(isSegment).map((name) => childOf(old, name))))).flat()];
  const seen = new Set<string>();
  async function* kept(): AsyncGenerator<string> {
    for (const source of sources) {
      if ((await storage.size(source)) === undefined) continue;
      for await (const line of linesOf(storage, source)) {
        try {
          const parsed = JSON.parse(line.text ?? '') as BatchResultLine;
          if (parsed.status === 'ok' && !seen.has(parsed.id)) {
            seen.add(parsed.id);
            yield `${line.text}\n`;
          }
        } catch {
          // a torn line from a crash is dropped; its item runs again
        }
      }
    }
  }
  await storage.writeStream(keptSegment(spool), kept());
  for (const old of leftovers) await storage.removeTree(old);
  return seen.size;
}
