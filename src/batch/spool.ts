import type { BatchResultLine } from '../contract/batch';
import { laneName } from '../contract/lane-name';
import { childOf } from '../contract/location';
import { roundUsd } from '../contract/metrics';
import { StorageError, type ObjectStorage } from '../store';
import type { Appender } from '../store/object-storage';
import { InvalidInputError } from '../contract/validation';
import { linesOf } from './lines';

/*
 * The spool: where a batch keeps its results until they are in the sink. One per chain of runs, beside the sink:
 * `<sink>.parts/<first run id>/`, so a resume never mixes its results with those of the run it resumes.
 *
 *   kept.jsonl                ok lines a resume carried over from the sink and from spools of stopped runs
 *   todo.jsonl                a resume's task lines still to run (the source, less what is ok)
 *   lanes/<lane>/journal.log  the lane's finished items, one `<index> <line>` record appended as each call answers:
 *                             the journal, where the store can append (local files)
 *   lanes/<lane>/<index>.json one finished item of a lane, where it cannot (S3), or when an append failed
 *   seg/<lane>.jsonl          every finished item of a lane, written when the lane ends: the segment
 *   FINISHED.json             written once the sink is whole, before anything else of the spool is removed
 *
 * Every name is fixed by the lane and the item's place in it, so a retried or stale attempt rewrites the same object
 * with the same line, or appends a record of an index the journal may hold already (the first one read counts):
 * nothing twice, on any number of machines; a record cut short by a crash is skipped (its call was in flight). Journal records stay until the batch
 * finishes, so a segment written later (by any attempt) holds at least what an earlier one did.
 */

export function spoolRoot(sink: string): string {
  return `${sink}.parts`;
}

export function spoolOf(sink: string, epoch: string): string {
  return childOf(spoolRoot(sink), epoch);
}

export function keptLines(spool: string): string {
  return childOf(spool, 'kept.jsonl');
}

export function todoFile(spool: string): string {
  return childOf(spool, 'todo.jsonl');
}

function finishedMark(spool: string): string {
  return childOf(spool, 'FINISHED.json');
}

function journalOf(spool: string, lane: string): string {
  return childOf(childOf(spool, 'lanes'), lane);
}

function segmentOf(spool: string, lane: string): string {
  return childOf(childOf(spool, 'seg'), `${lane}.jsonl`);
}

const JOURNAL_LOG = 'journal.log';

/**
 * Where a lane records its finished items, each before anything can end the lane. Not flushed to the disk (a local
 * store): a record survives the worker being killed, which is what it is for; a machine that loses power may lose its
 * last seconds of records, and those calls are paid again. Segments and the sink are flushed.
 *
 * Appended to one file where the store can (a few microseconds a record, against a fraction of a millisecond of CPU
 * for a file created and renamed per item: bench/worker-cpu.ts); an object per item where it cannot, and for every
 * record after an append failed.
 */
export class LaneJournal {
  private constructor(
    private readonly storage: ObjectStorage,
    private readonly directory: string,
    private appender: Appender | undefined,
  ) {}

  static async open(storage: ObjectStorage, spool: string, lane: string): Promise<LaneJournal> {
    const directory = journalOf(spool, lane);
    const appender = await storage.openAppender(childOf(directory, JOURNAL_LOG)).catch(() => undefined);
    return new LaneJournal(storage, directory, appender);
  }

  async record(index: number, line: string): Promise<void> {
    const appender = this.appender;
    if (appender) {
      try {
        // Begun on a line of its own too: a record another writer left cut short cannot swallow this one.
        return await appender.append(`\n${index} ${line}\n`);
      } catch {
        // The store refused the append: this record and the lane's next ones go as objects, each written whole.
        if (this.appender === appender) this.appender = undefined;
        void appender.close();
      }
    }
    await this.storage.write(childOf(this.directory, `${String(index).padStart(4, '0')}.json`), line, { sync: false });
  }

  async close(): Promise<void> {
    await this.appender?.close();
    this.appender = undefined;
  }
}

/** A journal log record's index and line, or undefined for a record cut short (or anything else unreadable). */
export function logRecord(record: string): { index: number; line: string } | undefined {
  // Split at the first space, not by a pattern: `.` would not match the U+2028 and U+2029 that JSON leaves unescaped.
  const space = record.indexOf(' ');
  if (space <= 0 || !/^\d+$/.test(record.slice(0, space))) return undefined;
  const line = record.slice(space + 1);
  try {
    JSON.parse(line);
  } catch {
    return undefined;
  }
  return { index: Number(record.slice(0, space)), line };
}

/** The records of a lane's journal log, by index, the first of an index winning; cut or unreadable ones skipped. */
function logRecords(text: string, into: Map<number, string>): void {
  // The part after the last newline is a record cut short (or nothing).
  for (const part of text.split('\n').slice(0, -1)) {
    const record = logRecord(part);
    if (record && !into.has(record.index)) into.set(record.index, record.line);
  }
}

/**
 * The items of a lane recorded so far (by any attempt), by their index in the lane. Records in `known` (what this attempt
 * wrote itself) are not read back.
 */
export async function journaled(
  storage: ObjectStorage,
  spool: string,
  lane: string,
  known?: ReadonlyMap<number, string>,
): Promise<Map<number, string>> {
  const found = new Map<number, string>();
  const directory = journalOf(spool, lane);
  const names = await storage.list(directory);
  if (names.includes(JOURNAL_LOG))
    logRecords((await storage.read(childOf(directory, JOURNAL_LOG))).toString('utf8'), found);
  for (const name of names) {
    const index = Number(/^(\d+)\.json$/.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isInteger(index) || found.has(index)) continue;
    found.set(index, known?.get(index) ?? (await storage.read(childOf(directory, name))).toString('utf8').trim());
  }
  // What this attempt recorded itself counts even where the store lost it (a record another writer cut into).
  for (const [index, line] of known ?? []) if (!found.has(index)) found.set(index, line);
  return found;
}

/** The lines of a lane's segment, when the lane was sealed. */
export async function sealedLines(storage: ObjectStorage, spool: string, lane: string): Promise<string[] | undefined> {
  const uri = segmentOf(spool, lane);
  if ((await storage.size(uri)) === undefined) return undefined;
  return (await storage.read(uri))
    .toString('utf8')
    .split('\n')
    .filter((line) => line.length > 0);
}

/**
 * Seals a lane: its segment gets every item recorded in its journal (by this attempt or any other) and `extra` lines
 * (failed items that were never journaled). Returns the lines written.
 */
export async function sealLane(
  storage: ObjectStorage,
  spool: string,
  lane: string,
  extra: readonly string[] = [],
  known?: ReadonlyMap<number, string>,
): Promise<string[]> {
  const recorded = await journaled(storage, spool, lane, known);
  const lines = [...[...recorded.entries()].sort(([a], [b]) => a - b).map(([, line]) => line), ...extra];
  await storage.write(segmentOf(spool, lane), lines.map((line) => `${line}\n`).join(''));
  return lines;
}

/** The lanes a batch ran, window by window: the sink is assembled from exactly these. */
export interface LaneLedger {
  /** Lanes per window: lanes 0..n-1 of window k were started; -1 when the window's own count was lost (it failed). */
  windows: number[];
  /** Lanes that did not end sealed (cancelled before they ran, or stopped by a fatal error): their journals are read. */
  unsealed: string[];
}

/** What the sink holds from this batch (a resume's carried lines not counted). */
export interface SinkCounts {
  succeeded: number;
  failed: number;
  tokens: { prompt: number; completion: number; total: number };
  cost: { usd: number; unpricedCalls: number };
}

export interface AssembledSink {
  sinkBytes: number;
  counts: SinkCounts;
}

/** Every lane of a window the spool holds anything of (its count was lost with the window). */
async function lanesFound(storage: ObjectStorage, spool: string, window: number): Promise<string[]> {
  const prefix = laneName(window, 0).split('-')[0];
  const names = new Set<string>();
  for (const name of [
    ...(await storage.list(childOf(spool, 'seg'))),
    ...(await storage.list(childOf(spool, 'lanes'))),
  ]) {
    const lane = name.split('/')[0].replace(/\.jsonl$/, '');
    if (lane.startsWith(`${prefix}-`)) names.add(lane);
  }
  return [...names].sort();
}

/** A lane's lines: its segment when sealed, else its journal. */
async function laneLines(storage: ObjectStorage, spool: string, lane: string): Promise<string[]> {
  return (await sealedLines(storage, spool, lane)) ?? [...(await journaled(storage, spool, lane)).values()];
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
  counts.tokens.prompt += line.usage?.promptTokens ?? 0;
  counts.tokens.completion += line.usage?.completionTokens ?? 0;
  counts.tokens.total += line.usage?.totalTokens ?? 0;
  counts.cost.usd += line.costUsd ?? 0;
  if (line.unpriced) counts.cost.unpricedCalls += 1;
}

/**
 * Writes the sink from the spool, streamed and atomically: the kept lines of a resume, every lane's segment (a lane in
 * `unsealed` contributes its journal instead), and any `extra` segments (a provider batch's). A segment the ledger says
 * exists and that is missing is an error, never skipped. Then marks the spool finished and removes the rest of it. A
 * repeated finish (a retry, or a stale attempt) finds the mark and returns what the first one wrote.
 */
export async function assembleSink(
  storage: ObjectStorage,
  sink: string,
  spool: string,
  ledger: LaneLedger,
  extra: readonly string[] = [],
): Promise<AssembledSink> {
  const mark = finishedMark(spool);
  if ((await storage.size(mark)) !== undefined)
    return JSON.parse((await storage.read(mark)).toString('utf8')) as AssembledSink;
  const counts = emptyCounts();
  const unsealed = new Set(ledger.unsealed);
  async function* content(): AsyncGenerator<string | Buffer> {
    if ((await storage.size(keptLines(spool))) !== undefined) yield* storage.readStream(keptLines(spool));
    for (let window = 0; window < ledger.windows.length; window += 1) {
      const lanes =
        ledger.windows[window] >= 0
          ? Array.from({ length: ledger.windows[window] }, (_, sequence) => laneName(window, sequence))
          : await lanesFound(storage, spool, window);
      for (const lane of lanes) {
        const lines =
          unsealed.has(lane) || ledger.windows[window] < 0
            ? await laneLines(storage, spool, lane)
            : await sealedLines(storage, spool, lane);
        if (lines === undefined)
          throw new SegmentMissing(
            `${segmentOf(spool, lane)} is missing: lane ${lane} ended, but its results are not in the spool`,
          );
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
  }
  const sinkBytes = await storage.writeStream(sink, content());
  counts.cost.usd = roundUsd(counts.cost.usd);
  const assembled: AssembledSink = { sinkBytes, counts };
  await storage.write(mark, JSON.stringify(assembled));
  for (const part of ['lanes', 'seg', 'provider']) await storage.removeTree(childOf(spool, part));
  for (const file of [keptLines(spool), todoFile(spool)]) await storage.remove(file);
  return assembled;
}

/** Every spool beside a sink that did not finish (a batch terminated before it could write its sink). */
export async function leftoverSpools(storage: ObjectStorage, sink: string, except?: string): Promise<string[]> {
  const names = await storage.list(spoolRoot(sink));
  const epochs = new Set(names.filter((name) => name.includes('/')).map((name) => name.split('/')[0]));
  const finished = new Set(names.filter((name) => name.endsWith('/FINISHED.json')).map((name) => name.split('/')[0]));
  if (except !== undefined) epochs.delete(except);
  return [...epochs]
    .filter((epoch) => !finished.has(epoch))
    .sort()
    .map((epoch) => spoolOf(sink, epoch));
}

/** Every result line a spool holds: kept lines, segments and journal records (a line may appear more than once). */
async function* spoolLines(storage: ObjectStorage, spool: string): AsyncGenerator<string> {
  for (const name of await storage.list(spool)) {
    const log = /^lanes\/[^/]+\/journal\.log$/.test(name);
    if (!(log || name === 'kept.jsonl' || /^seg\/.+\.jsonl$/.test(name) || /^lanes\/[^/]+\/\d+\.json$/.test(name)))
      continue;
    for await (const line of linesOf(storage, childOf(spool, name))) {
      // A journal log's records are `<index> <line>`, blank lines between them; a cut one is skipped.
      const text = log ? (line.text === undefined ? undefined : logRecord(line.text)?.line) : line.text;
      if (text !== undefined && text.trim() !== '') yield text;
    }
  }
}

/**
 * Writes into the sink what a batch stopped from outside (terminated, timed out) had recorded: every line of its spool,
 * one per id, then removes the spool. Returns the bytes written, or undefined when there was nothing to recover.
 */
export async function assembleLeftover(
  storage: ObjectStorage,
  sink: string,
  spool: string,
): Promise<number | undefined> {
  const names = await storage.list(spool);
  if (names.length === 0 || names.includes('FINISHED.json')) return undefined;
  const seen = new Set<string>();
  async function* unique(): AsyncGenerator<string> {
    for await (const text of spoolLines(storage, spool)) {
      const id = idOf(text);
      if (id === undefined || seen.has(id)) continue;
      seen.add(id);
      yield `${text}\n`;
    }
  }
  const bytes = await storage.writeStream(sink, unique());
  await storage.removeTree(spool);
  if ((await storage.list(spoolRoot(sink))).length === 0) await storage.removeTree(spoolRoot(sink));
  return bytes;
}

function idOf(text: string): string | undefined {
  try {
    return (JSON.parse(text) as BatchResultLine).id;
  } catch {
    return undefined; // a torn line from a crash: its item runs again
  }
}

function okLine(text: string): BatchResultLine | undefined {
  try {
    const line = JSON.parse(text) as BatchResultLine;
    return line.status === 'ok' ? line : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Prepares a resume: the ok lines (one per id) of the sink and of every spool a stopped run left are written, streamed,
 * as the new spool's kept lines. Nothing old is removed here (the new run removes the old spools once its sink is
 * whole), so a retried scan reads the same sources and writes the same kept lines. Returns the ids kept.
 */
export async function carryOkLines(storage: ObjectStorage, sink: string, spool: string): Promise<Set<string>> {
  const epoch = spool.slice(spoolRoot(sink).length + 1);
  const leftovers = await leftoverSpools(storage, sink, epoch);
  const seen = new Set<string>();
  async function* kept(): AsyncGenerator<string> {
    const fromSink = (async function* (): AsyncGenerator<string> {
      if ((await storage.size(sink)) === undefined) return;
      for await (const line of linesOf(storage, sink)) if (line.text !== undefined) yield line.text;
    })();
    for (const source of [fromSink, ...leftovers.map((old) => spoolLines(storage, old))]) {
      for await (const text of source) {
        const line = okLine(text);
        if (line && !seen.has(line.id)) {
          seen.add(line.id);
          yield `${text}\n`;
        }
      }
    }
  }
  await storage.writeStream(keptLines(spool), kept());
  return seen;
}

/** Removes the spools of stopped runs that a resume carried over (once the resume's sink is whole). */
export async function removeLeftovers(storage: ObjectStorage, sink: string, except: string): Promise<void> {
  for (const old of await leftoverSpools(storage, sink, except)) await storage.removeTree(old);
}

/** Checks that an object can be created beside `uri` by creating and removing one (permission bits can lie: /proc). */
export async function probeWritable(storage: ObjectStorage, uri: string): Promise<void> {
  await storage.checkWritable(uri);
  const probe = `${uri}.probe-${process.pid}-${Date.now()}`;
  try {
    await storage.write(probe, '');
  } catch (error) {
    if (error instanceof StorageError)
      throw new InvalidInputError([
        { path: uri, message: `cannot be written (${error.message.slice(probe.length + 2)})` },
      ]);
    throw error;
  }
  await storage.remove(probe);
}
