import type { BatchResultLine } from '../contract/batch';
import { laneName } from '../contract/lane-name';
import { childOf } from '../contract/location';
import { addCacheSavings, addTokens, roundUsd, tokenCountsOf } from '../contract/metrics';
import type { ObjectStorage } from '../store';
import type { AssembledSink, LaneLedger, SinkCounts } from '../contract/batch-activities';
import { sealedLines, withJournal } from './lane-journal';
import { linesOf } from './lines';
import { finishedMark, keptLines, segmentOf, todoFile } from './spool-layout';

/** Every lane of a window the spool holds anything of (its count was lost with the window). */
async function lanesFound(storage: ObjectStorage, spool: string, window: number): Promise<string[]> {
  const prefix = laneName(window, 0).split('-')[0];
  const names = new Set<string>();
  for (const name of [
    ...(await storage.list(childOf(spool, 'seg'))),
    ...(await storage.list(childOf(spool, 'lanes'))),
  ]) {
    // seg/<lane>.jsonl, lanes/<lane>.log, lanes/<lane>/<index>.json (and a spool from before: lanes/<lane>/journal.log).
    const lane = name.split('/')[0].replace(/\.(jsonl|log)$/, '');
    if (lane.startsWith(`${prefix}-`)) names.add(lane);
  }
  return [...names].sort();
}

/**
 * An unsealed lane's lines: its journal (in the lane's order, as a segment is), with the segment an attempt whose end the
 * window did not hear may have written.
 */
async function laneLines(storage: ObjectStorage, spool: string, lane: string): Promise<string[]> {
  return (await withJournal(storage, spool, lane, (await sealedLines(storage, spool, lane)) ?? [])).lines;
}

/** Segment reads in flight at once while the sink is written. */
const SEGMENTS_AHEAD = 16;

/** `read` of each item, up to `depth` of them in flight at once, yielded in the items' order. */
export async function* inOrderAhead<T, R>(
  items: readonly T[],
  read: (item: T) => Promise<R>,
  depth: number,
): AsyncGenerator<R> {
  const started: Promise<R>[] = [];
  let next = 0;
  const fill = (): void => {
    while (next < items.length && started.length < depth) {
      const reading = read(items[next]);
      next += 1;
      // Its failure is thrown when its turn comes; until then it must not count as unhandled.
      reading.catch(() => undefined);
      started.push(reading);
    }
  };
  fill();
  while (started.length > 0) {
    const value = await (started.shift() as Promise<R>);
    fill();
    yield value;
  }
}

/** A segment the batch wrote is missing: the sink would be short, so nothing is written. */
export class SegmentMissing extends Error {}

function emptyCounts(): SinkCounts {
  return {
    succeeded: 0,
    failed: 0,
    tokens: { prompt: 0, completion: 0, total: 0 },
    cost: { usd: 0, unpricedCalls: 0 },
  };
}

function count(counts: SinkCounts, text: string): void {
  let line: BatchResultLine;
  try {
    line = JSON.parse(text) as BatchResultLine;
  } catch {
    return;
  }
  if (line.status === 'ok') counts.succeeded += 1;
  else counts.failed += 1;
  addTokens(counts.tokens, tokenCountsOf(line.usage));
  counts.cost.usd += line.costUsd ?? 0;
  if (line.unpriced) counts.cost.unpricedCalls += 1;
  if (line.cached) {
    counts.cost.cachedCalls = (counts.cost.cachedCalls ?? 0) + 1;
    counts.cost.savedUsd = (counts.cost.savedUsd ?? 0) + (line.savedUsd ?? 0);
  }
  addCacheSavings(counts.cost, line.cacheSavingsUsd);
}

/**
 * Writes the sink from the spool, streamed and atomically: the kept lines of a resume, every lane's segment (a lane in
 * `unsealed` contributes its journal instead), and any `extra` segments (a provider batch's). A segment the ledger says
 * exists and that is missing is an error, never skipped. Then marks the spool finished and removes the rest of it. A
 * repeated finish (a retry, or a stale attempt) finds the mark and returns what the first one wrote: at its start, or
 * at the end of its stream, before its sink is committed. A stale attempt that read while another finished may have
 * found the spool removed under it; it looks for the mark once it has read everything, and as the mark is written
 * before anything is removed, a finish that does not see it then read a whole spool.
 */
/** Another attempt finished the sink while this one read the spool. */
class FinishedElsewhere extends Error {}

export async function assembleSink(
  storage: ObjectStorage,
  sink: string,
  spool: string,
  ledger: LaneLedger,
  extra: readonly string[] = [],
): Promise<AssembledSink> {
  const mark = finishedMark(spool);
  const finishedBefore = async (): Promise<AssembledSink | undefined> =>
    (await storage.size(mark)) === undefined
      ? undefined
      : (JSON.parse((await storage.read(mark)).toString('utf8')) as AssembledSink);
  const before = await finishedBefore();
  if (before) return before;
  const counts = emptyCounts();
  const unsealed = new Set(ledger.unsealed);
  async function* content(): AsyncGenerator<string | Buffer> {
    if ((await storage.size(keptLines(spool))) !== undefined) yield* storage.readStream(keptLines(spool));
    for (let window = 0; window < ledger.windows.length; window += 1) {
      const lanes =
        ledger.windows[window] >= 0
          ? Array.from({ length: ledger.windows[window] }, (_, sequence) => laneName(window, sequence))
          : await lanesFound(storage, spool, window);
      const read = async (lane: string): Promise<string[]> => {
        const lines =
          unsealed.has(lane) || ledger.windows[window] < 0
            ? await laneLines(storage, spool, lane)
            : await sealedLines(storage, spool, lane);
        if (lines === undefined)
          throw new SegmentMissing(
            `${segmentOf(spool, lane)} is missing: lane ${lane} ended, but its results are not in the spool`,
          );
        return lines;
      };
      // Segments are read SEGMENTS_AHEAD at a time (thousands of small objects: one after another, a batch on S3 spent
      // most of its finish waiting on round trips), and written in the ledger's order.
      for await (const lines of inOrderAhead(lanes, read, SEGMENTS_AHEAD)) {
        for (const line of lines) count(counts, line);
        if (lines.length > 0) yield `${lines.join('\n')}\n`;
      }
    }
    // A provider batch's segments, whatever ended it (a cancelled one returns no list of them).
    const provider = childOf(spool, 'provider');
    const providerSegments = (await storage.list(provider))
      .filter((name) => /^seg-part-\d+\.jsonl$/.test(name))
      .map((name) => childOf(provider, name));
    for (const uri of [...new Set([...extra, ...providerSegments])]) {
      if ((await storage.size(uri)) === undefined) throw new SegmentMissing(`${uri} is missing`);
      for await (const line of linesOf(storage, uri)) {
        if (line.text === undefined || line.text.trim() === '') continue;
        count(counts, line.text);
        yield `${line.text}\n`;
      }
    }
    // Thrown, the stream is abandoned and the sink the other finish wrote stays.
    if ((await storage.size(mark)) !== undefined) throw new FinishedElsewhere();
  }
  let sinkBytes: number;
  try {
    sinkBytes = await storage.writeStream(sink, content());
  } catch (error) {
    // The store wraps what the stream threw (StorageError's cause).
    const elsewhere =
      error instanceof FinishedElsewhere || (error as { cause?: unknown }).cause instanceof FinishedElsewhere;
    const other = elsewhere ? await finishedBefore() : undefined;
    if (other) return other;
    throw error;
  }
  counts.cost.usd = roundUsd(counts.cost.usd);
  if (counts.cost.savedUsd !== undefined) counts.cost.savedUsd = roundUsd(counts.cost.savedUsd);
  const assembled: AssembledSink = { sinkBytes, counts };
  await storage.write(mark, JSON.stringify(assembled));
  for (const part of ['lanes', 'seg', 'provider']) await storage.removeTree(childOf(spool, part));
  for (const file of [keptLines(spool), todoFile(spool)]) await storage.remove(file);
  return assembled;
}
