import { childOf } from '../contract/location';
import { StorageError, type ObjectStorage } from '../store';
import type { Appender } from '../store/object-storage';
import { JOURNAL_LOG, journalLogOf, journalOf, segmentOf } from './spool-layout';

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

  /** Opens the lane's journal log, making the directory every lane's log goes in when it is missing (the first lane). */
  static async open(storage: ObjectStorage, spool: string, lane: string): Promise<LaneJournal> {
    const appender = await storage.openAppender(journalLogOf(spool, lane)).catch(() => undefined);
    return new LaneJournal(storage, journalOf(spool, lane), appender);
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
  const log = await readIfThere(storage, journalLogOf(spool, lane));
  if (log !== undefined) logRecords(log.toString('utf8'), found);
  const directory = journalOf(spool, lane);
  const names = await storage.list(directory);
  // A spool from before the logs moved out of the lanes' directories.
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

/** The object at `uri`, read at once rather than after a look at its size (it is there most times); undefined if not. */
async function readIfThere(storage: ObjectStorage, uri: string): Promise<Buffer | undefined> {
  try {
    return await storage.read(uri);
  } catch (error) {
    if (error instanceof StorageError && error.code === 'NotFound') return undefined;
    throw error;
  }
}

/** The lines of a lane's segment, when the lane was sealed. */
export async function sealedLines(storage: ObjectStorage, spool: string, lane: string): Promise<string[] | undefined> {
  // A finishing batch reads every lane's segment, most of them there.
  const bytes = await readIfThere(storage, segmentOf(spool, lane));
  if (bytes === undefined) return undefined;
  return bytes
    .toString('utf8')
    .split('\n')
    .filter((line) => line.length > 0);
}

/**
 * Seals a lane: its segment gets every item recorded in its journal (by this attempt or any other) and `extra` lines
 * (failed items that were never journaled). Returns the lines written. `known` is what this attempt journaled (and read
 * from the journal as it began); when it holds a line for every one of the lane's `items`, the journal has nothing more
 * to give and is not read back (most lanes: a list and a read of the store each).
 */
export async function sealLane(
  storage: ObjectStorage,
  spool: string,
  lane: string,
  extra: readonly string[] = [],
  known?: ReadonlyMap<number, string>,
  items?: number,
): Promise<string[]> {
  const recorded =
    known !== undefined && items !== undefined && everyItem(known, items)
      ? known
      : await journaled(storage, spool, lane, known);
  const lines = [...[...recorded.entries()].sort(([a], [b]) => a - b).map(([, line]) => line), ...extra];
  await writeSegment(storage, spool, lane, lines);
  return lines;
}

/** Writes a lane's segment: its lines, one a line. */
function writeSegment(storage: ObjectStorage, spool: string, lane: string, lines: readonly string[]): Promise<void> {
  return storage.write(segmentOf(spool, lane), lines.map((line) => `${line}\n`).join(''));
}

/**
 * A sealed lane's lines with what its journal holds beyond them. Another attempt that ran beside the one that sealed it
 * (one Temporal had given up on that had not heard so yet) may have journaled answers after the seal: they would reach
 * neither the sink nor a later lane, and a resume would pay for them again. An item with no line, or a failed one,
 * takes its journaled answer. `changed` when any did.
 */
export async function withJournal(
  storage: ObjectStorage,
  spool: string,
  lane: string,
  sealed: readonly string[],
): Promise<{ lines: string[]; changed: boolean }> {
  const outcome = (line: string) => JSON.parse(line) as { id: string; status: string };
  const byId = new Map(sealed.map((line) => [outcome(line).id, line]));
  let changed = false;
  for (const [, line] of [...(await journaled(storage, spool, lane))].sort(([a], [b]) => a - b)) {
    const { id, status } = outcome(line);
    const held = byId.get(id);
    if (held !== undefined && (outcome(held).status === 'ok' || status !== 'ok')) continue;
    byId.set(id, line);
    changed = true;
  }
  return { lines: changed ? [...byId.values()] : [...sealed], changed };
}

/** For an attempt that finds its lane sealed: the segment's lines `withJournal`, the segment written again if changed. */
export async function resealed(
  storage: ObjectStorage,
  spool: string,
  lane: string,
  sealed: readonly string[],
): Promise<string[]> {
  const { lines, changed } = await withJournal(storage, spool, lane, sealed);
  if (changed) await writeSegment(storage, spool, lane, lines);
  return lines;
}

/** True when `lines` holds a line for each of the items 0..items-1. */
function everyItem(lines: ReadonlyMap<number, string>, items: number): boolean {
  for (let index = 0; index < items; index += 1) if (!lines.has(index)) return false;
  return true;
}
