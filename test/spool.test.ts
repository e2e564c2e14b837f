import { execFileSync } from 'node:child_process';
import { appendFileSync, createWriteStream, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BatchResultLine } from '../src/contract/batch';
import { laneName } from '../src/contract/lane-name';
import { segmentName } from '../src/contract/location';
import {
  assembleLeftover,
  assembleSink,
  carryOkLines,
  inOrderAhead,
  journaled,
  LaneJournal,
  sealedLines,
  sealLane,
  spoolOf,
} from '../src/spool';
import { FileStorage, type ObjectStorage } from '../src/store';
import { readSink } from './support/batch-files';
import { ROOT } from './support/paths';
import { waitFor } from './support/wait-for';

const storage = new FileStorage();
const directory = mkdtempSync(path.join(tmpdir(), 'fanout-spool-'));

const ok = (id: string, output = `answer ${id}`): string =>
  JSON.stringify({
    id,
    status: 'ok',
    output,
    attempts: 1,
    durationMs: 1,
    usage: { promptTokens: 2, completionTokens: 3, totalTokens: 5 },
    costUsd: 0.25,
  });
const failed = (id: string): string =>
  JSON.stringify({ id, status: 'failed', error: { type: 'X', message: 'x' }, attempts: 5, durationMs: 1 });

/** One record, journaled as a lane does it (an appender opened for it alone). */
async function journalItem(
  store: ObjectStorage,
  spool: string,
  lane: string,
  index: number,
  line: string,
): Promise<void> {
  const journal = await LaneJournal.open(store, spool, lane);
  await journal.record(index, line);
  await journal.close();
}

function sinkIds(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as BatchResultLine).id);
}

describe('the spool', () => {
  it('seals a lane with every item any attempt journaled, so a stale seal never shortens it', async () => {
    const sink = path.join(directory, 'stale.jsonl');
    const spool = spoolOf(sink, 'run-1');
    const lane = laneName(0, 0);
    // Attempt 1 answers items 0 and 1, then its worker is cut off; attempt 2 answers 2 and seals. Attempt 1 wakes and seals too.
    await journalItem(storage, spool, lane, 0, ok('a'));
    await journalItem(storage, spool, lane, 1, ok('b'));
    await journalItem(storage, spool, lane, 2, ok('c'));
    await sealLane(storage, spool, lane);
    await sealLane(storage, spool, lane);
    const assembled = await assembleSink(storage, sink, spool, { windows: [1], unsealed: [] });
    expect(sinkIds(sink)).toEqual(['a', 'b', 'c']);
    expect(assembled.counts).toMatchObject({ succeeded: 3, failed: 0, tokens: { total: 15 }, cost: { usd: 0.75 } });
  });

  it('skips a record a killed writer cut short, even one cut while another attempt was appending, and counts the first record of an index', async () => {
    const spool = spoolOf(path.join(directory, 'cut.jsonl'), 'run-1');
    const lane = laneName(0, 0);
    await journalItem(storage, spool, lane, 0, ok('a'));
    const retried = await LaneJournal.open(storage, spool, lane);
    // A stale attempt, killed mid-append while the retried one had the log open, left half a record with no newline.
    appendFileSync(path.join(spool, 'lanes', `${lane}.log`), `1 ${ok('b').slice(0, 20)}`);
    await retried.record(1, ok('b', 'retried'));
    await retried.record(0, ok('a', 'a stale attempt again'));
    await retried.close();
    expect(Object.fromEntries(await journaled(storage, spool, lane))).toEqual({ 0: ok('a'), 1: ok('b', 'retried') });
  });

  it('reads back an answer holding the line and paragraph separators JSON leaves unescaped', async () => {
    const sink = path.join(directory, 'separators.jsonl');
    const spool = spoolOf(sink, 'run-1');
    const lane = laneName(0, 0);
    const answers = [ok('a'), ok('b', 'one\u2028two\u2029three'), ok('c')];
    const journal = await LaneJournal.open(storage, spool, lane);
    for (const [index, line] of answers.entries()) await journal.record(index, line);
    await journal.close();
    expect([...(await journaled(storage, spool, lane)).values()]).toEqual(answers);
    await sealLane(storage, spool, lane);
    await assembleSink(storage, sink, spool, { windows: [1], unsealed: [] });
    expect(readSink(sink).map((line) => line.output)).toEqual(['answer a', 'one\u2028two\u2029three', 'answer c']);
  });

  it('journals a record as an object of its own once the store refuses an append, and reads both kinds back', async () => {
    const spool = spoolOf(path.join(directory, 'fallback.jsonl'), 'run-1');
    const lane = laneName(0, 0);
    let appends = 0;
    const refusing: ObjectStorage = Object.assign(Object.create(storage) as ObjectStorage, {
      openAppender: async (uri: string) => {
        const inner = await storage.openAppender(uri);
        return {
          append: async (record: string) => {
            appends += 1;
            if (appends > 1) throw new Error('disk full');
            return inner.append(record);
          },
          close: () => inner.close(),
        };
      },
    });
    const journal = await LaneJournal.open(refusing, spool, lane);
    for (const [index, id] of ['a', 'b', 'c'].entries()) await journal.record(index, ok(id));
    await journal.close();
    expect(appends).toBe(2);
    expect((await storage.list(path.join(spool, 'lanes'))).sort()).toEqual([
      `${lane}.log`,
      `${lane}/0001.json`,
      `${lane}/0002.json`,
    ]);
    expect([...(await journaled(storage, spool, lane)).entries()].sort(([a], [b]) => a - b)).toEqual([
      [0, ok('a')],
      [1, ok('b')],
      [2, ok('c')],
    ]);
  });

  it('writes both records as objects when two appends are refused at once', async () => {
    const spool = spoolOf(path.join(directory, 'both-refused.jsonl'), 'run-1');
    const lane = laneName(0, 0);
    const refusing: ObjectStorage = Object.assign(Object.create(storage) as ObjectStorage, {
      openAppender: async () => ({
        append: async () => Promise.reject(new Error('disk full')),
        close: async () => undefined,
      }),
    });
    const journal = await LaneJournal.open(refusing, spool, lane);
    await Promise.all([journal.record(0, ok('a')), journal.record(1, ok('b'))]);
    await journal.close();
    expect(Object.fromEntries(await journaled(storage, spool, lane))).toEqual({ 0: ok('a'), 1: ok('b') });
  });

  it('seals a lane without reading its journal back when the attempt knows a line for every item, and reads it when one lacks a line', async () => {
    const sink = path.join(directory, 'known.jsonl');
    const spool = spoolOf(sink, 'run-1');
    const reads: string[] = [];
    const counting: ObjectStorage = Object.assign(Object.create(storage) as ObjectStorage, {
      list: (prefix: string) => (reads.push(`list ${path.basename(prefix)}`), storage.list(prefix)),
      read: (uri: string) => (reads.push(`read ${path.basename(uri)}`), storage.read(uri)),
      size: (uri: string) => (reads.push(`size ${path.basename(uri)}`), storage.size(uri)),
    });
    // Every item answered by this attempt (and journaled): the segment is written from what it knows.
    const whole = laneName(0, 0);
    const known = new Map([0, 1, 2].map((index) => [index, ok(`w${index}`)]));
    const journal = await LaneJournal.open(storage, spool, whole);
    for (const [index, line] of known) await journal.record(index, line);
    await journal.close();
    expect(await sealLane(counting, spool, whole, [], known, 3)).toEqual([ok('w0'), ok('w1'), ok('w2')]);
    expect(reads).toEqual([]);
    // Item 1 has no line this attempt knows of (another attempt journaled it): the journal is read, the line is in.
    const partial = laneName(0, 1);
    await journalItem(storage, spool, partial, 1, ok('p1', 'from another attempt'));
    const mine = new Map([
      [0, ok('p0')],
      [2, ok('p2')],
    ]);
    await journalItem(storage, spool, partial, 0, ok('p0'));
    await journalItem(storage, spool, partial, 2, ok('p2'));
    expect(await sealLane(counting, spool, partial, [], mine, 3)).toEqual([
      ok('p0'),
      ok('p1', 'from another attempt'),
      ok('p2'),
    ]);
    expect(reads).toEqual(['read w0000-l0000001.log', 'list w0000-l0000001']);
    // A segment is read straight away, without a look at its size first; a missing one is undefined.
    reads.length = 0;
    expect(await sealedLines(counting, spool, whole)).toEqual([ok('w0'), ok('w1'), ok('w2')]);
    expect(await sealedLines(counting, spool, laneName(0, 2))).toBeUndefined();
    expect(reads.filter((read) => read.startsWith('size'))).toEqual([]);
    await assembleSink(storage, sink, spool, { windows: [2], unsealed: [] });
    expect(sinkIds(sink)).toEqual(['w0', 'w1', 'w2', 'p0', 'p1', 'p2']);
  });

  it('opens a journal where the lanes directory is new and where it already holds records', async () => {
    const spool = spoolOf(path.join(directory, 'fresh.jsonl'), 'run-1');
    const lane = laneName(0, 0);
    const first = await LaneJournal.open(storage, spool, lane);
    await first.record(0, ok('a'));
    await first.close();
    const again = await LaneJournal.open(storage, spool, lane);
    await again.record(1, ok('b'));
    await again.close();
    expect(Object.fromEntries(await journaled(storage, spool, lane))).toEqual({ 0: ok('a'), 1: ok('b') });
  });

  it('reads the journal of a spool from before the logs moved out of the lanes directories, sealed or not', async () => {
    const sink = path.join(directory, 'old-layout.jsonl');
    const spool = spoolOf(sink, 'run-1');
    const [sealed, open] = [laneName(0, 0), laneName(0, 1)];
    for (const [lane, id] of [
      [sealed, 'a'],
      [open, 'b'],
    ]) {
      mkdirSync(path.join(spool, 'lanes', lane), { recursive: true });
      appendFileSync(path.join(spool, 'lanes', lane, 'journal.log'), `\n0 ${ok(id)}\n`);
    }
    // A retried attempt on this code journals the lane's next item in the new place: both count.
    const retried = await LaneJournal.open(storage, spool, open);
    await retried.record(1, ok('c'));
    await retried.close();
    expect(Object.fromEntries(await journaled(storage, spool, open))).toEqual({ 0: ok('b'), 1: ok('c') });
    await sealLane(storage, spool, sealed);
    await assembleSink(storage, sink, spool, { windows: [2], unsealed: [open] });
    expect(sinkIds(sink)).toEqual(['a', 'b', 'c']);
    // A window whose lane count was lost: its lanes are found from the spool, in both layouts.
    const lost = path.join(directory, 'old-layout-lost.jsonl');
    const lostSpool = spoolOf(lost, 'run-1');
    mkdirSync(path.join(lostSpool, 'lanes', sealed), { recursive: true });
    appendFileSync(path.join(lostSpool, 'lanes', sealed, 'journal.log'), `\n0 ${ok('d')}\n`);
    await journalItem(storage, lostSpool, open, 0, ok('e'));
    await assembleSink(storage, lost, lostSpool, { windows: [-1], unsealed: [] });
    expect(sinkIds(lost).sort()).toEqual(['d', 'e']);
  });

  it('refuses to write a sink when a sealed lane is missing its segment, and writes nothing', async () => {
    const sink = path.join(directory, 'missing.jsonl');
    const spool = spoolOf(sink, 'run-1');
    await journalItem(storage, spool, laneName(0, 0), 0, ok('a'));
    await sealLane(storage, spool, laneName(0, 0));
    // Lane 1 of window 0 ended sealed, the ledger says, but its segment is gone (a partial removal, a stale finish).
    await expect(assembleSink(storage, sink, spool, { windows: [2], unsealed: [] })).rejects.toThrow(
      /lane w0000-l0000001 ended, but its results are not in the spool/,
    );
    expect(await storage.size(sink)).toBeUndefined();
  });

  it('writes a sink of many lanes in the ledger order, reading several segments at once', async () => {
    const sink = path.join(directory, 'many.jsonl');
    const spool = spoolOf(sink, 'run-1');
    const lanes = 60;
    for (let lane = 0; lane < lanes; lane += 1) {
      await journalItem(storage, spool, laneName(0, lane), 0, ok(`id-${lane}`));
      await sealLane(storage, spool, laneName(0, lane));
    }
    // A store whose reads take a while, counting how many are open at once.
    let open = 0;
    let most = 0;
    const slow: ObjectStorage = Object.assign(Object.create(storage) as ObjectStorage, {
      read: async (uri: string) => {
        open += 1;
        most = Math.max(most, open);
        await new Promise((resolve) => setTimeout(resolve, 5));
        open -= 1;
        return storage.read(uri);
      },
    });
    await assembleSink(slow, sink, spool, { windows: [lanes], unsealed: [] });
    expect(sinkIds(sink)).toEqual(Array.from({ length: lanes }, (_, lane) => `id-${lane}`));
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(16);
  });

  it('yields reads in order and throws a failed one at its turn, after the ones before it', async () => {
    const seen: number[] = [];
    const read = async (item: number): Promise<number> => {
      // Later items finish first; item 3 fails before the others are taken.
      await new Promise((resolve) => setTimeout(resolve, 20 - item * 3));
      if (item === 3) throw new Error('item 3 failed');
      return item;
    };
    await expect(
      (async () => {
        for await (const value of inOrderAhead([0, 1, 2, 3, 4, 5], read, 4)) seen.push(value);
      })(),
    ).rejects.toThrow('item 3 failed');
    expect(seen).toEqual([0, 1, 2]);
  });

  it('reads the journal of a lane that never sealed, and every lane of a window whose count was lost', async () => {
    const sink = path.join(directory, 'unsealed.jsonl');
    const spool = spoolOf(sink, 'run-1');
    await journalItem(storage, spool, laneName(0, 0), 0, ok('a'));
    await journalItem(storage, spool, laneName(1, 0), 0, ok('b'));
    await journalItem(storage, spool, laneName(1, 3), 1, failed('c'));
    await sealLane(storage, spool, laneName(1, 3));
    const assembled = await assembleSink(storage, sink, spool, { windows: [1, -1], unsealed: [laneName(0, 0)] });
    expect(sinkIds(sink).sort()).toEqual(['a', 'b', 'c']);
    expect(assembled.counts).toMatchObject({ succeeded: 2, failed: 1 });
  });

  it('marks a finished sink before removing the spool, and a repeated finish returns what the first wrote', async () => {
    const sink = path.join(directory, 'again.jsonl');
    const spool = spoolOf(sink, 'run-1');
    await journalItem(storage, spool, laneName(0, 0), 0, ok('a'));
    await sealLane(storage, spool, laneName(0, 0));
    const first = await assembleSink(storage, sink, spool, { windows: [1], unsealed: [] });
    expect(await storage.list(spool)).toEqual(['FINISHED.json']);
    const again = await assembleSink(storage, sink, spool, { windows: [1], unsealed: [] });
    expect(again).toEqual(first);
    expect(sinkIds(sink)).toEqual(['a']);
  });

  it('keeps the sink of the finish that marked it when a stale finish reads the spool after it was removed', async () => {
    // A stale attempt (its worker judged lost) lists the lanes of a window whose count was lost, then stalls; the
    // retry finishes, marks the spool and removes it; the stale one then finds no segment and no journal to read.
    const sink = path.join(directory, 'stale-finish.jsonl');
    const spool = spoolOf(sink, 'run-1');
    for (const [sequence, id] of ['a', 'b'].entries()) {
      await journalItem(storage, spool, laneName(0, sequence), 0, ok(id));
      await sealLane(storage, spool, laneName(0, sequence));
    }
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let stalled = false;
    const stalling: ObjectStorage = Object.create(storage) as ObjectStorage;
    stalling.read = async (uri) => {
      if (!stalled && uri.includes(`${path.sep}seg${path.sep}`)) {
        stalled = true;
        await released;
      }
      return storage.read(uri);
    };
    const ledger = { windows: [-1], unsealed: [] };
    const stale = assembleSink(stalling, sink, spool, ledger);
    await waitFor('the stale finish to reach the segments', () => stalled);
    const first = await assembleSink(storage, sink, spool, ledger);
    expect(sinkIds(sink)).toEqual(['a', 'b']);
    release();
    expect(await stale).toEqual(first);
    expect(sinkIds(sink)).toEqual(['a', 'b']);
  });

  it('carries ok lines over for a resume, once per id, from the sink and from a stopped run, and the same on a retried scan', async () => {
    const sink = path.join(directory, 'resume.jsonl');
    const old = spoolOf(sink, 'run-old');
    await journalItem(storage, old, laneName(0, 0), 0, ok('a'));
    await journalItem(storage, old, laneName(0, 0), 1, failed('b'));
    await sealLane(storage, old, laneName(0, 0));
    await assembleSink(storage, sink, old, { windows: [1], unsealed: [] });
    // A run stopped from outside (terminated) left a journal and a segment.
    const terminated = spoolOf(sink, 'run-terminated');
    await journalItem(storage, terminated, laneName(0, 0), 0, ok('a'));
    await journalItem(storage, terminated, laneName(0, 1), 0, ok('c'));
    const next = spoolOf(sink, 'run-new');
    expect([...(await carryOkLines(storage, sink, next))].sort()).toEqual(['a', 'c']);
    // The scan is retried (its worker died after carrying): the old spools are still there, the kept lines the same.
    expect([...(await carryOkLines(storage, sink, next))].sort()).toEqual(['a', 'c']);
    await journalItem(storage, next, laneName(0, 0), 0, ok('b'));
    await sealLane(storage, next, laneName(0, 0));
    await assembleSink(storage, sink, next, { windows: [1], unsealed: [] });
    expect(sinkIds(sink).sort()).toEqual(['a', 'b', 'c']);
  });

  it('recovers a terminated batch from its journals and segments, one line per id', async () => {
    const sink = path.join(directory, 'terminated.jsonl');
    const spool = spoolOf(sink, 'run-1');
    await journalItem(storage, spool, laneName(0, 0), 0, ok('a'));
    await sealLane(storage, spool, laneName(0, 0));
    await journalItem(storage, spool, laneName(0, 1), 0, ok('b'));
    expect(await assembleLeftover(storage, sink, spool)).toBeGreaterThan(0);
    expect(sinkIds(sink).sort()).toEqual(['a', 'b']);
  });

  it("carries over and recovers what a provider-batch route's provider batches answered (its provider/seg-part files)", async () => {
    const sink = path.join(directory, 'provider-route.jsonl');
    const stopped = spoolOf(sink, 'run-provider');
    // A provider batch's segment (one part answered) beside a lane's journal (the sync hand-back under way).
    await storage.write(`${stopped}/provider/seg-part-00000.jsonl`, `${ok('p1')}\n${failed('p2')}\n${ok('p3')}\n`);
    await storage.write(`${stopped}/provider/retry-part-00000.jsonl`, '{"id":"p4","offset":0,"length":1}\n');
    await journalItem(storage, stopped, laneName(0, 0), 0, ok('s1'));
    const next = spoolOf(sink, 'run-resume');
    expect([...(await carryOkLines(storage, sink, next))].sort()).toEqual(['p1', 'p3', 's1']);

    const terminated = path.join(directory, 'provider-terminated.jsonl');
    const spool = spoolOf(terminated, 'run-1');
    await storage.write(`${spool}/provider/seg-part-00001.jsonl`, `${ok('p1')}\n${failed('p2')}\n`);
    expect(await assembleLeftover(storage, terminated, spool)).toBeGreaterThan(0);
    expect(sinkIds(terminated).sort()).toEqual(['p1', 'p2']);
  });

  it('names stored objects so that no two ids share one, on case-insensitive disks too', () => {
    const ids = ['a.b', 'a~2Eb', 'a%2Eb', 'A', 'a', '..', '/x', 'ü', 'x'.repeat(300)];
    const names = ids.map(segmentName);
    expect(new Set(names.map((name) => name.toLowerCase())).size).toBe(ids.length);
    for (const name of names) expect(name).toMatch(/^[a-z0-9_~-]{1,220}$/);
  });

  it('names two long ids apart whose names are cut to the same prefix (a 32-bit hash of them collides)', () => {
    // Each encodes to over 200 characters, so its name is cut and tagged with a hash of the whole id; these two share
    // their cut and FNV-1a's 32 bits, and had one place file between two agent items.
    const long = `Item-${'A'.repeat(70)}-`;
    const [first, second] = [`${long}229599`, `${long}432382`].map(segmentName);
    expect(first).not.toBe(second);
    for (const name of [first, second]) expect(name.length).toBeLessThanOrEqual(200);
  });

  it('resumes a sink far larger than the memory it is given, by streaming it', async () => {
    const sink = path.join(directory, 'huge.jsonl');
    const out = createWriteStream(sink);
    const output = 'x'.repeat(2000);
    // ~240 MB of results, read by a process whose heap may not exceed 64 MB.
    for (let index = 0; index < 120_000; index += 1) {
      if (!out.write(`${JSON.stringify({ id: `h${index}`, status: 'ok', output, attempts: 1, durationMs: 1 })}\n`))
        await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');
    const script = `
      const { carryOkLines, spoolOf } = require(${JSON.stringify(path.join(ROOT, 'dist', 'spool', 'index.js'))});
      const { FileStorage } = require(${JSON.stringify(path.join(ROOT, 'dist', 'store', 'index.js'))});
      carryOkLines(new FileStorage(), process.argv[1], spoolOf(process.argv[1], 'resume'))
        .then((kept) => console.log(JSON.stringify({ kept: kept.size })))
        .catch((error) => { console.error(error); process.exit(1); });`;
    const printed = execFileSync(process.execPath, ['--max-old-space-size=64', '-e', script, sink], {
      encoding: 'utf8',
    });
    expect(JSON.parse(printed)).toMatchObject({ kept: 120_000 });
  }, 180_000);
});
